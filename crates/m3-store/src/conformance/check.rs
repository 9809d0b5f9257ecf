//! Assertions for conformance cases: they return [`CaseFailure`] instead of panicking.

use std::fmt;

use m3_types::{Error, ManagedInputRecord, ManagedInputStatus, Reason};

/// Why a conformance case failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseFailure {
    message: String,
}

impl CaseFailure {
    /// A failure with `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// The failure message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for CaseFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CaseFailure {}

impl From<Error> for CaseFailure {
    fn from(error: Error) -> Self {
        Self::new(format!(
            "unexpected error {}: {error} (details: {:?})",
            error.code(),
            error.details()
        ))
    }
}

/// Fails the case with a formatted message unless the condition holds.
macro_rules! ensure {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            return Err($crate::conformance::CaseFailure::new(format!($($arg)+)));
        }
    };
}
pub(crate) use ensure;

/// Expects an error with `code` and, when given, `reason` (in `details.reason`), logs it,
/// and returns it. Messages are never compared: they are free text.
pub(crate) fn expect_error<T: fmt::Debug>(
    result: m3_types::Result<T>,
    code: &str,
    reason: Option<Reason>,
) -> Result<Error, CaseFailure> {
    let wanted = || match reason {
        Some(reason) => format!("{code}/{reason}"),
        None => code.to_owned(),
    };
    match result {
        Ok(value) => Err(CaseFailure::new(format!(
            "expected error {}, got Ok({value:?})",
            wanted()
        ))),
        Err(error) => {
            tracing::debug!(code = error.code(), %error, "expected error observed");
            if error.code() != code || (reason.is_some() && error.reason() != reason) {
                return Err(CaseFailure::new(format!(
                    "expected error {}, got {}/{:?}: {error}",
                    wanted(),
                    error.code(),
                    error.details().get("reason")
                )));
            }
            Ok(error)
        }
    }
}

/// Expects `record` to have `status`.
pub(crate) fn expect_status(
    record: &ManagedInputRecord,
    status: ManagedInputStatus,
) -> Result<(), CaseFailure> {
    ensure!(
        record.status == status,
        "expected status {}, got {}",
        status.as_str(),
        record.status.as_str()
    );
    Ok(())
}

/// Expects two records to be equal.
pub(crate) fn expect_same(
    left: &ManagedInputRecord,
    right: &ManagedInputRecord,
    what: &str,
) -> Result<(), CaseFailure> {
    ensure!(
        left == right,
        "{what}: records differ:\n  left:  {left:?}\n  right: {right:?}"
    );
    Ok(())
}

/// Checks a batch's outcomes: one per item, the first `Ok` (returned), each of the others
/// the error `refusals` names (code, reason), in order.
pub(crate) fn expect_batch<T: fmt::Debug>(
    outcomes: Vec<m3_types::Result<T>>,
    refusals: &[(&str, Option<Reason>)],
) -> Result<T, CaseFailure> {
    ensure!(
        outcomes.len() == refusals.len() + 1,
        "one outcome per item expected, got {}",
        outcomes.len()
    );
    let mut outcomes = outcomes.into_iter();
    let first = outcomes
        .next()
        .ok_or_else(|| CaseFailure::new("the batch has no outcome"))??;
    for (outcome, (code, reason)) in outcomes.zip(refusals) {
        expect_error(outcome, code, *reason)?;
    }
    Ok(first)
}

/// The winner's value and the loser's error of two racing calls of which exactly one must
/// succeed (`what` names them in the failure).
pub(crate) fn one_winner<T>(
    a: m3_types::Result<T>,
    b: m3_types::Result<T>,
    what: &str,
) -> Result<(T, Error), CaseFailure> {
    match (a, b) {
        (Ok(winner), Err(error)) | (Err(error), Ok(winner)) => Ok((winner, error)),
        (Ok(_), Ok(_)) => Err(CaseFailure::new(format!("both {what} succeeded"))),
        (Err(a), Err(b)) => Err(CaseFailure::new(format!("both {what} failed: {a}; {b}"))),
    }
}
