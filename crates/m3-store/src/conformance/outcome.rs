//! The outcome of one case ([`CaseResult`]) and of a whole run ([`ConformanceReport`]).

use std::fmt;

use super::check::CaseFailure;

/// The outcome of one case.
pub type CaseResult = std::result::Result<(), CaseFailure>;

/// The outcome of [`run_all`](super::run_all).
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct ConformanceReport {
    /// The cases that passed.
    pub passed: Vec<&'static str>,
    /// The cases that failed, with why.
    pub failed: Vec<(&'static str, CaseFailure)>,
}

impl ConformanceReport {
    /// Whether every case passed.
    pub fn is_success(&self) -> bool {
        self.failed.is_empty() && !self.passed.is_empty()
    }
}

impl fmt::Display for ConformanceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} of {} conformance cases passed",
            self.passed.len(),
            self.passed.len() + self.failed.len()
        )?;
        for (name, failure) in &self.failed {
            writeln!(f, "FAILED {name}: {failure}")?;
        }
        Ok(())
    }
}
