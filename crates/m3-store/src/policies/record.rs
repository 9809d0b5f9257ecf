//! The values of the policy store: a policy and a policy to add.

use std::time::Duration;

use m3_types::plan::PlanEntry;
use m3_types::{ElicitationResponse, OperationKind};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// A rule that answers a pending round once it has waited long enough.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Policy {
    /// The policy's name, unique in the store: the answer's actor is `policy:<name>`.
    pub name: String,
    /// Only rounds from this server (`None`: any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Only rounds from this kind of operation (`None`: any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_kind: Option<OperationKind>,
    /// Only rounds from this tool, prompt or resource (`None`: any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_name: Option<String>,
    /// Only rounds whose every request has this key (`None`: any key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_key: Option<String>,
    /// Only requests with exactly this message (`None`: any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Only form requests whose schema has this digest
    /// ([`schema_digest`](m3_types::plan::schema_digest); `None`: any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_digest: Option<String>,
    /// How long a round waits, from its creation, before the policy answers it, in
    /// milliseconds.
    pub after_ms: u64,
    /// The answer given to every request of the round.
    pub answer: ElicitationResponse,
    /// When the policy was added, on the store's clock.
    #[serde(with = "m3_types::timestamp::serde")]
    pub created_at: OffsetDateTime,
}

impl Policy {
    /// How long a round waits before the policy answers it.
    pub fn after(&self) -> Duration {
        Duration::from_millis(self.after_ms)
    }

    /// The actor principal the policy's answers are recorded as: `policy:<name>`.
    pub fn principal(&self) -> String {
        format!("policy:{}", self.name)
    }

    /// The plan entry matching what this policy matches, for request `key`.
    pub fn entry_for(&self, key: &str) -> PlanEntry {
        let mut entry = PlanEntry::new(
            self.request_key.clone().unwrap_or_else(|| key.to_owned()),
            self.answer.clone(),
        );
        entry.server.clone_from(&self.server);
        entry.operation_kind = self.operation_kind;
        entry.operation_name.clone_from(&self.operation_name);
        entry.message.clone_from(&self.message);
        entry.schema_digest.clone_from(&self.schema_digest);
        entry
    }
}

/// A policy to add: its name, what it matches, its delay and its answer.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
#[must_use]
pub struct NewPolicy {
    /// 1 to 64 letters, digits, `.`, `_`, `-`, `@`.
    pub name: String,
    /// See [`Policy::server`].
    pub server: Option<String>,
    /// See [`Policy::operation_kind`].
    pub operation_kind: Option<OperationKind>,
    /// See [`Policy::operation_name`].
    pub operation_name: Option<String>,
    /// See [`Policy::request_key`].
    pub request_key: Option<String>,
    /// See [`Policy::message`].
    pub message: Option<String>,
    /// See [`Policy::schema_digest`].
    pub schema_digest: Option<String>,
    /// How long a round waits before the policy answers it.
    pub after: Duration,
    /// The answer.
    pub answer: ElicitationResponse,
}

impl NewPolicy {
    /// A policy named `name` answering `answer` to any round that waited `after`.
    pub fn new(name: impl Into<String>, after: Duration, answer: ElicitationResponse) -> Self {
        Self {
            name: name.into(),
            server: None,
            operation_kind: None,
            operation_name: None,
            request_key: None,
            message: None,
            schema_digest: None,
            after,
            answer,
        }
    }

    /// Only rounds from `server`.
    pub fn server(mut self, server: impl Into<String>) -> Self {
        self.server = Some(server.into());
        self
    }

    /// Only rounds from operation `name` of `kind`.
    pub fn operation(mut self, kind: OperationKind, name: impl Into<String>) -> Self {
        self.operation_kind = Some(kind);
        self.operation_name = Some(name.into());
        self
    }

    /// Only rounds from this kind of operation.
    pub fn operation_kind(mut self, kind: OperationKind) -> Self {
        self.operation_kind = Some(kind);
        self
    }

    /// Only rounds from the operation named `name`.
    pub fn operation_name(mut self, name: impl Into<String>) -> Self {
        self.operation_name = Some(name.into());
        self
    }

    /// Only rounds whose every request has key `key`.
    pub fn request_key(mut self, key: impl Into<String>) -> Self {
        self.request_key = Some(key.into());
        self
    }

    /// Only requests with exactly this message.
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }

    /// Only form requests whose schema has this digest.
    pub fn schema_digest(mut self, digest: impl Into<String>) -> Self {
        self.schema_digest = Some(digest.into());
        self
    }
}
