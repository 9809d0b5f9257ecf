//! The change feed's record: one committed state change of a round or an execution, at a
//! store-wide [`Cursor`].
//!
//! Every store appends a [`ChangeRecord`] in the same transaction as the change it
//! describes; readers resume from the last cursor they processed and see every later record
//! exactly once, in commit order (`docs/changes.md`). A record never carries a response
//! value: a round's record holds its identity and state ([`RoundChangeState`]), an
//! execution's its lifecycle ([`ExecutionChangeState`]).

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::actor::Actor;
use crate::elicitation::OperationKind;
use crate::error::{Error, Result};
use crate::execution::{ExecutionOutcome, ExecutionStatus};
use crate::reason::Reason;
use crate::record::ManagedInputStatus;

wire_enum! {
    /// What a [`ChangeRecord`] reports.
    frozen pub enum ChangeRecordKind {
        /// `"round.pending"`: a round was created and waits for an answer.
        RoundPending => "round.pending",
        /// `"round.answered"`: a response was validated and stored.
        RoundAnswered => "round.answered",
        /// `"round.delivery_started"`: the answer is being delivered to the server.
        RoundDeliveryStarted => "round.delivery_started",
        /// `"round.delivered"`: the server received the answer.
        RoundDelivered => "round.delivered",
        /// `"round.resolved"`: the round ended successfully.
        RoundResolved => "round.resolved",
        /// `"round.failed"`: the round ended in failure.
        RoundFailed => "round.failed",
        /// `"round.deadline_approaching"`: a pending round's deadline is near (a reminder at
        /// a fraction of its deadline window; the round's status is unchanged).
        RoundDeadlineApproaching => "round.deadline_approaching",
        /// `"execution.queued"`: the execution waits for a worker.
        ExecutionQueued => "execution.queued",
        /// `"execution.claimed"`: a worker took the execution's lease.
        ExecutionClaimed => "execution.claimed",
        /// `"execution.waiting_for_input"`: the execution waits for an answer.
        ExecutionWaitingForInput => "execution.waiting_for_input",
        /// `"execution.finished"`: the execution ended (its outcome says how).
        ExecutionFinished => "execution.finished",
        /// `"execution.cancel_requested"`: somebody asked the execution to stop.
        ExecutionCancelRequested => "execution.cancel_requested",
    }
    what = "change record kind"
}

impl ChangeRecordKind {
    /// The record kind of a round that reached `status` (`pending` for a new round).
    pub fn of_round_status(status: ManagedInputStatus) -> Self {
        match status {
            ManagedInputStatus::Pending => Self::RoundPending,
            ManagedInputStatus::ResponseValidated => Self::RoundAnswered,
            ManagedInputStatus::DeliveryStarted => Self::RoundDeliveryStarted,
            ManagedInputStatus::Delivered => Self::RoundDelivered,
            ManagedInputStatus::Resolved => Self::RoundResolved,
            ManagedInputStatus::Failed => Self::RoundFailed,
        }
    }

    /// Whether the record is about a round (it then has a `round_id` and a `round` state).
    pub fn is_round(self) -> bool {
        self.as_str().starts_with("round.")
    }
}

/// A position in the change feed: the cursor of the last record a reader processed.
///
/// Cursors grow with commit order and are never reused. [`Cursor::START`] (`0`) is before
/// every record. On the wire (JSON, SSE ids, the command line) a cursor is its decimal
/// number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Cursor(u64);

impl Cursor {
    /// Before every record: reading after it starts at the oldest record the store kept.
    pub const START: Self = Self(0);

    /// The cursor numbered `value`.
    pub const fn new(value: u64) -> Self {
        Self(value)
    }

    /// The cursor's number.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The cursor as a signed 64-bit database integer (cursors never exceed `i64::MAX`).
    pub fn to_i64(self) -> i64 {
        i64::try_from(self.0).unwrap_or(i64::MAX)
    }

    /// The cursor a database integer names.
    ///
    /// # Errors
    /// `invalid_argument` (reason `invalid_cursor`) for a negative value.
    pub fn from_i64(value: i64) -> Result<Self> {
        u64::try_from(value)
            .map(Self)
            .map_err(|_| invalid_cursor(&value.to_string()))
    }
}

fn invalid_cursor(text: &str) -> Error {
    let shown: String = text.chars().take(40).collect();
    Error::model_validation(format!(
        "'{shown}' is not a change cursor (a non-negative decimal integer)"
    ))
    .with_reason(Reason::InvalidCursor)
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl FromStr for Cursor {
    type Err = Error;

    /// # Errors
    /// `invalid_argument` (reason `invalid_cursor`) unless `s` is a decimal integer in
    /// `0..=i64::MAX` (no sign, no spaces).
    fn from_str(s: &str) -> Result<Self> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid_cursor(s));
        }
        s.parse::<i64>()
            .map_err(|_| invalid_cursor(s))
            .and_then(Self::from_i64)
    }
}

impl Serialize for Cursor {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for Cursor {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        let value = u64::deserialize(deserializer)?;
        i64::try_from(value)
            .map(|_| Self(value))
            .map_err(|_| serde::de::Error::custom("change cursor above i64::MAX"))
    }
}

impl JsonSchema for Cursor {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Cursor".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "integer",
            "minimum": 0,
            "description": "Position in the change feed; grows with commit order, never reused."
        })
    }
}

/// A round's state in a [`ChangeRecord`]: its identity and status, never its request
/// content or a response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct RoundChangeState {
    /// The round's index in its execution.
    pub round_index: u32,
    /// The round's status after the change.
    pub status: ManagedInputStatus,
    /// The MCP server that asked.
    pub server: String,
    /// Whether a tool call, prompt or resource read asked (`null` if the stored round does
    /// not say: a row another program wrote or damaged).
    pub operation_kind: Option<OperationKind>,
    /// The tool, prompt or resource that asked.
    pub operation_name: String,
    /// The failure code of a failed round (`null` otherwise).
    pub failure_code: Option<String>,
}

impl RoundChangeState {
    /// The state of a round with these fields.
    pub fn new(
        round_index: u32,
        status: ManagedInputStatus,
        server: impl Into<String>,
        operation_kind: Option<OperationKind>,
        operation_name: impl Into<String>,
        failure_code: Option<String>,
    ) -> Self {
        Self {
            round_index,
            status,
            server: server.into(),
            operation_kind,
            operation_name: operation_name.into(),
            failure_code,
        }
    }

    /// The state of `record` as a change record reports it.
    pub fn of_record(record: &crate::ManagedInputRecord) -> Self {
        Self::new(
            record.round_index,
            record.status,
            record.pending.server.clone(),
            Some(record.pending.operation_kind),
            record.pending.operation_name.clone(),
            record.failure_code.clone(),
        )
    }
}

/// What a `round.deadline_approaching` record reminds of: how far into its deadline window
/// the round is, and the deadline. Never a response value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct DeadlineReminder {
    /// The fraction of the window from the round's creation to its deadline that has passed
    /// (above 0, below 1).
    pub fraction: f64,
    /// The round's deadline.
    #[serde(with = "crate::timestamp::serde")]
    #[schemars(with = "String")]
    pub deadline: OffsetDateTime,
}

impl DeadlineReminder {
    /// The reminder at `fraction` of the window ending at `deadline`.
    ///
    /// # Errors
    /// `invalid_argument` unless `fraction` is above 0 and below 1.
    pub fn new(fraction: f64, deadline: OffsetDateTime) -> Result<Self> {
        check_reminder_fraction(fraction)?;
        Ok(Self { fraction, deadline })
    }

    /// The fraction as the store keys it: its shortest decimal text (`0.5`, `0.9`), so a
    /// reminder at the same fraction of the same round is one key.
    pub fn fraction_key(&self) -> String {
        format!("{}", self.fraction)
    }

    /// When the reminder is due for a round created at `created_at`.
    pub fn due_at(&self, created_at: OffsetDateTime) -> OffsetDateTime {
        created_at + (self.deadline - created_at) * self.fraction
    }
}

/// Checks a reminder fraction: a number above 0 and below 1.
///
/// # Errors
/// `invalid_argument` otherwise.
pub fn check_reminder_fraction(fraction: f64) -> Result<()> {
    if fraction.is_finite() && fraction > 0.0 && fraction < 1.0 {
        Ok(())
    } else {
        Err(Error::model_validation(format!(
            "a reminder fraction is a number above 0 and below 1, not {fraction}"
        )))
    }
}

/// An execution's state in a [`ChangeRecord`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ExecutionChangeState {
    /// The lifecycle after the change.
    pub lifecycle: ExecutionStatus,
    /// How a finished execution ended (`null` before it finishes).
    pub outcome: Option<ExecutionOutcome>,
}

impl ExecutionChangeState {
    /// The state `lifecycle` with `outcome`.
    pub fn new(lifecycle: ExecutionStatus, outcome: Option<ExecutionOutcome>) -> Self {
        Self { lifecycle, outcome }
    }
}

/// One committed change, as the change feed holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ChangeRecord {
    /// The record's position in the feed.
    pub cursor: Cursor,
    /// What changed.
    pub kind: ChangeRecordKind,
    /// The execution the change belongs to.
    pub execution_id: String,
    /// The round, for `round.*` records (`null` for `execution.*`).
    pub round_id: Option<String>,
    /// When the change happened, on the store's clock.
    #[serde(with = "crate::timestamp::serde")]
    #[schemars(with = "String")]
    pub at: OffsetDateTime,
    /// Who caused the change: on a `round.answered` record, who answered (`null` when the
    /// store does not know: a record of another kind, or an answer written without one).
    pub actor: Option<Actor>,
    /// The round after the change (`round.*` records only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<RoundChangeState>,
    /// The execution after the change (`execution.*` records only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<ExecutionChangeState>,
    /// What a `round.deadline_approaching` record reminds of (that kind only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reminder: Option<DeadlineReminder>,
}

impl ChangeRecord {
    /// A `round.*` record at `cursor` for round `round_id` of `execution_id`.
    pub fn of_round(
        cursor: Cursor,
        execution_id: impl Into<String>,
        round_id: impl Into<String>,
        at: OffsetDateTime,
        state: RoundChangeState,
    ) -> Self {
        Self {
            cursor,
            kind: ChangeRecordKind::of_round_status(state.status),
            execution_id: execution_id.into(),
            round_id: Some(round_id.into()),
            at,
            actor: None,
            round: Some(state),
            execution: None,
            reminder: None,
        }
    }

    /// A `round.deadline_approaching` record at `cursor` for round `round_id` of
    /// `execution_id`, in `state`.
    pub fn of_reminder(
        cursor: Cursor,
        execution_id: impl Into<String>,
        round_id: impl Into<String>,
        at: OffsetDateTime,
        state: RoundChangeState,
        reminder: DeadlineReminder,
    ) -> Self {
        Self {
            kind: ChangeRecordKind::RoundDeadlineApproaching,
            reminder: Some(reminder),
            ..Self::of_round(cursor, execution_id, round_id, at, state)
        }
    }

    /// An `execution.*` record of `kind` at `cursor`.
    pub fn of_execution(
        cursor: Cursor,
        kind: ChangeRecordKind,
        execution_id: impl Into<String>,
        at: OffsetDateTime,
        state: ExecutionChangeState,
    ) -> Self {
        Self {
            cursor,
            kind,
            execution_id: execution_id.into(),
            round_id: None,
            at,
            actor: None,
            round: None,
            execution: Some(state),
            reminder: None,
        }
    }

    /// This record with `actor`.
    #[must_use]
    pub fn with_actor(mut self, actor: Option<Actor>) -> Self {
        self.actor = actor;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_parse_only_plain_decimal_integers() {
        assert_eq!("0".parse::<Cursor>().ok(), Some(Cursor::START));
        assert_eq!("42".parse::<Cursor>().ok(), Some(Cursor::new(42)));
        for bad in [
            "",
            "-1",
            "+1",
            " 1",
            "1.0",
            "abc",
            "99999999999999999999",
            "9223372036854775808",
        ] {
            let error = bad.parse::<Cursor>().err();
            assert_eq!(
                error.as_ref().map(Error::code),
                Some("invalid_argument"),
                "{bad}"
            );
            assert_eq!(
                error.and_then(|e| e.reason()),
                Some(Reason::InvalidCursor),
                "{bad}"
            );
        }
    }

    #[test]
    fn round_records_take_their_kind_from_the_status() {
        for status in ManagedInputStatus::ALL {
            let kind = ChangeRecordKind::of_round_status(status);
            assert!(kind.is_round());
        }
        assert!(!ChangeRecordKind::ExecutionFinished.is_round());
    }

    #[test]
    fn a_record_serializes_with_its_cursor_as_a_number() -> Result<()> {
        let record = ChangeRecord::of_execution(
            Cursor::new(7),
            ChangeRecordKind::ExecutionQueued,
            "exec-1",
            OffsetDateTime::UNIX_EPOCH,
            ExecutionChangeState::new(ExecutionStatus::Queued, None),
        );
        let json =
            serde_json::to_value(&record).map_err(|e| Error::model_validation(e.to_string()))?;
        assert_eq!(json["cursor"], 7);
        assert_eq!(json["kind"], "execution.queued");
        assert_eq!(json["actor"], serde_json::Value::Null);
        assert!(json.get("round").is_none());
        let back: ChangeRecord =
            serde_json::from_value(json).map_err(|e| Error::model_validation(e.to_string()))?;
        assert_eq!(back, record);
        Ok(())
    }
}
