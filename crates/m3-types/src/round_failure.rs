//! Why a managed-input round failed: the stable `failure_code` of a `failed` round.
//!
//! A round fails with the stable code of the error that ended it (`cancelled`, `timeout`,
//! `managed_input_state`, ...: an [`ErrorCode`]), or with [`RECOVERY_UNAVAILABLE`] when its
//! worker or lease was lost and nobody may deliver it any more. The store keeps the code
//! as text (a custom writer may store others); [`RoundFailureCode`] is the typed view.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, ErrorCode, Result};

/// The failure code of a round ended because its worker or its lease was lost: recovery
/// failed it, and it can never be delivered.
pub const RECOVERY_UNAVAILABLE: &str = "recovery_unavailable";

/// The `failure_code` of a failed round.
///
/// Not a `wire_enum!`: one variant carries the [`ErrorCode`] of the error that failed the
/// round, so its strings are [`RECOVERY_UNAVAILABLE`] plus every error code's.
///
/// ```
/// use m3_types::{Error, ErrorCode, RoundFailureCode};
///
/// let code = RoundFailureCode::of_error(&Error::cancelled("closed"));
/// assert_eq!(code, RoundFailureCode::Error(ErrorCode::Cancelled));
/// assert_eq!(code.as_str(), "cancelled");
/// let recovery: RoundFailureCode = "recovery_unavailable".parse()?;
/// assert_eq!(recovery, RoundFailureCode::RecoveryUnavailable);
/// assert!("no_such_code".parse::<RoundFailureCode>().is_err());
/// # Ok::<(), m3_types::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RoundFailureCode {
    /// [`RECOVERY_UNAVAILABLE`]: the worker or its lease was lost.
    RecoveryUnavailable,
    /// The round failed with an error of this code.
    Error(ErrorCode),
}

impl RoundFailureCode {
    /// The code a round failed by `error` gets: [`RecoveryUnavailable`](Self::RecoveryUnavailable)
    /// for a recovery error (`managed_input_recovery_unavailable`), else the error's code.
    pub fn of_error(error: &Error) -> Self {
        if error.is_recovery() {
            Self::RecoveryUnavailable
        } else {
            Self::Error(error.error_code())
        }
    }

    /// The stable string stored as the round's `failure_code`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RecoveryUnavailable => RECOVERY_UNAVAILABLE,
            Self::Error(code) => code.as_str(),
        }
    }
}

impl fmt::Display for RoundFailureCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RoundFailureCode {
    type Err = Error;

    /// # Errors
    /// `managed_input_invalid` for a string that is neither [`RECOVERY_UNAVAILABLE`] nor an
    /// error code.
    fn from_str(s: &str) -> Result<Self> {
        if s == RECOVERY_UNAVAILABLE {
            return Ok(Self::RecoveryUnavailable);
        }
        s.parse::<ErrorCode>().map(Self::Error).map_err(|_| {
            Error::managed_input_validation(format!("unknown round failure code '{s}'"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_its_string() {
        let codes = std::iter::once(RoundFailureCode::RecoveryUnavailable)
            .chain(ErrorCode::ALL.into_iter().map(RoundFailureCode::Error));
        for code in codes {
            assert_eq!(code.as_str().parse::<RoundFailureCode>().unwrap(), code);
            assert_eq!(code.to_string(), code.as_str());
        }
    }

    #[test]
    fn a_recovery_error_fails_the_round_recovery_unavailable() {
        let error = Error::managed_input_recovery("worker lost");
        assert_eq!(
            RoundFailureCode::of_error(&error),
            RoundFailureCode::RecoveryUnavailable
        );
        let error = Error::timeout("late");
        assert_eq!(RoundFailureCode::of_error(&error).as_str(), "timeout");
    }
}
