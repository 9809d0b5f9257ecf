//! The body of a delivery in the `standard` format: one JSON event per request, shaped as
//! the Standard Webhooks specification suggests (`type`, `timestamp`, `data`).
//!
//! `data` is the change record (identity, kind, store time, actor, the round's or the
//! execution's state) plus, for a round, the question as a person needs it: the message of
//! each request with its schema, the server, the operation and the deadline. Never a
//! response value: the record carries none, and the question is taken from the round's
//! pending part, which has none either.

use std::collections::BTreeMap;

use m3_types::{ChangeRecord, ElicitationRequest, OperationKind, PendingElicitationRound};
use serde::Serialize;
use time::OffsetDateTime;

/// The question of a round, as a delivery shows it.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Question {
    /// The MCP server that asked.
    pub server: String,
    /// Whether a tool call, prompt or resource read asked.
    pub operation_kind: OperationKind,
    /// The tool, prompt or resource that asked.
    pub operation_name: String,
    /// What the server asks, by request key (message and schema, or message and URL).
    pub requests: BTreeMap<String, ElicitationRequest>,
    /// When the round stops waiting (`null`: no deadline).
    #[serde(with = "m3_types::timestamp::serde::option")]
    pub deadline: Option<OffsetDateTime>,
}

impl<'a> EventData<'a> {
    /// The data of `record`, with its round's question and answer link if any.
    pub fn new(
        record: &'a ChangeRecord,
        question: Option<&'a Question>,
        answer_url: Option<&'a str>,
    ) -> Self {
        Self {
            record,
            question,
            answer_url,
        }
    }
}

impl Question {
    /// The question `pending` asks.
    pub fn of(pending: &PendingElicitationRound) -> Self {
        Self {
            server: pending.server.clone(),
            operation_kind: pending.operation_kind,
            operation_name: pending.operation_name.clone(),
            requests: pending.requests.clone(),
            deadline: pending.deadline,
        }
    }
}

/// What one delivery says.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct EventData<'a> {
    /// The change record.
    #[serde(flatten)]
    pub record: &'a ChangeRecord,
    /// The round's question (rounds only; `null` if the round can no longer be read).
    pub question: Option<&'a Question>,
    /// The link that answers the round (`round.pending` and `round.deadline_approaching`
    /// records, when `m3 serve`'s public URL is configured; `null` otherwise).
    pub answer_url: Option<&'a str>,
}

#[derive(Serialize)]
struct Event<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(with = "m3_types::timestamp::serde")]
    timestamp: OffsetDateTime,
    data: EventData<'a>,
}

/// The `standard` body of `data`.
///
/// # Errors
/// `storage_error` if it cannot be encoded (plain data: not expected).
pub fn standard_body(data: EventData<'_>) -> m3_types::Result<Vec<u8>> {
    let event = Event {
        kind: data.record.kind.as_str(),
        timestamp: data.record.at,
        data,
    };
    serde_json::to_vec(&event)
        .map_err(|e| m3_types::Error::storage(format!("cannot encode the webhook event: {e}")))
}
