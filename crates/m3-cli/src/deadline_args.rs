//! The round-deadline flags of `m3 run` and `m3 submit`: a deadline per managed round and
//! the reminders before it (`docs/policies.md`).

use std::time::Duration;

use clap::Args;

/// `--input-deadline` and `--remind-at`.
#[derive(Debug, Args)]
pub(crate) struct DeadlineArgs {
    /// Give every managed round a deadline this long after its creation (30s, 10m, 1h):
    /// expiry fails the round (`timeout`).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub(crate) input_deadline: Option<Duration>,
    /// Append a `round.deadline_approaching` reminder at these fractions of a round's
    /// deadline window (default 0.5,0.9), each above 0 and below 1.
    #[arg(
        long,
        value_name = "F,F,...",
        value_delimiter = ',',
        requires = "input_deadline"
    )]
    pub(crate) remind_at: Option<Vec<f64>>,
}
