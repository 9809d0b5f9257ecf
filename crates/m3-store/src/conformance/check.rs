//! Assertions for conformance cases: they return [`CaseFailure`] instead of panicking.

use std::fmt;

use m3_types::{Error, ManagedInputRecord, ManagedInputStatus};

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

/// Expects an error with `code` whose message contains `needle` (case-insensitive), logs it,
/// and returns it.
pub(crate) fn expect_error<T: fmt::Debug>(
    result: m3_types::Result<T>,
    code: &str,
    needle: &str,
) -> Result<Error, CaseFailure> {
    match result {
        Ok(value) => Err(CaseFailure::new(format!(
            "expected error {code} ({needle:?}), got Ok({value:?})"
        ))),
        Err(error) => {
            tracing::debug!(code = error.code(), %error, "expected error observed");
            if error.code() != code {
                return Err(CaseFailure::new(format!(
                    "expected error {code} ({needle:?}), got {}: {error}",
                    error.code()
                )));
            }
            if !error
                .message()
                .to_lowercase()
                .contains(&needle.to_lowercase())
            {
                return Err(CaseFailure::new(format!(
                    "expected error {code} mentioning {needle:?}, got message {:?}",
                    error.message()
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
