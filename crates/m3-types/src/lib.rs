//! Values, errors, validation, redaction and clocks of M3 managed elicitation input.
//!
//! `m3-types` is the bottom of the m3-rs workspace: every other crate and every
//! custom `ManagedInputStore` backend builds on it. It does no I/O and knows
//! nothing about tokio, SQLite or MCP transports.
//!
//! # Quick start
//!
//! ```
//! use m3_types::{
//!     validate_responses, ElicitationResponse, FormElicitationRequest, OperationKind,
//!     PendingElicitationRound, ResponseMap,
//! };
//! use serde_json::json;
//!
//! # fn main() -> m3_types::Result<()> {
//! let schema = json!({
//!     "type": "object",
//!     "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
//!     "required": ["street", "city"]
//! });
//! let request = FormElicitationRequest::new(
//!     "shipping_address",
//!     "Where should we ship?",
//!     schema.as_object().cloned().unwrap_or_default(),
//! );
//! let requests = PendingElicitationRound::request_map([request.into()])?;
//! let round = PendingElicitationRound::new(
//!     m3_types::new_id(), "exec-1", "op-1", "shipping", OperationKind::Tool,
//!     "book_shipment", requests, m3_types::SystemClock.now(),
//! )?;
//!
//! let content = json!({"street": "1 Main Street", "city": "Pune"});
//! let mut responses = ResponseMap::new();
//! responses.insert(
//!     "shipping_address".into(),
//!     ElicitationResponse::accept(content.as_object().cloned().unwrap_or_default()),
//! );
//! validate_responses(&round, &responses)?;
//!
//! // A missing key is refused with a stable code.
//! let err = validate_responses(&round, &ResponseMap::new()).unwrap_err();
//! assert_eq!(err.code(), "managed_input_invalid");
//! assert!(err.message().contains("exactly"));
//! # Ok(())
//! # }
//! # use m3_types::Clock as _;
//! ```
//!
//! # Concepts
//!
//! - [`elicitation`]: what a server asks ([`FormElicitationRequest`], [`UrlElicitationRequest`],
//!   tagged as [`ElicitationRequest`]) and what a person answers ([`ElicitationResponse`]).
//! - [`round`]: [`PendingElicitationRound`], the public, lease-free view of one stored round.
//! - [`record`]: what a store keeps per round ([`ManagedInputRecord`], [`ManagedInputLease`],
//!   [`ManagedInputStatus`], [`DeliveryState`]).
//! - [`validation`]: [`validate_responses`], the only response rule set; backends call it and
//!   never re-implement it.
//! - [`execution`]: [`HumanInput`], the [`ExecutionStatus`] transition table, outcomes, state,
//!   results and [`ErrorInfo`].
//! - [`form`]: the fields of a requested schema ([`form::fields`]), classified by MCP's
//!   restricted subset, for every form renderer; [`form_input`]: text typed or posted for a
//!   field, turned into the JSON value its schema means.
//! - [`server`]: [`StdioServer`] bindings and [`ToolSelection`] (`"server:tool"`);
//!   [`remote_server`]: [`HttpServer`] (Streamable HTTP) bindings, their [`ServerTrust`], and
//!   [`ServerBinding`], either kind.
//! - [`error`]: one [`Error`] enum with stable [`Error::code`] strings; [`messages`] holds the
//!   reference's message texts so every crate and backend uses the same words.
//! - [`limits`]: the bounds every entry path applies ([`limits::MAX_NESTING_DEPTH`],
//!   [`limits::MAX_ANSWER_BYTES`], [`limits::RoundLimits`]), so stored data always reads back.
//! - [`canonical`], [`redact`](mod@redact), [`clock`], [`timestamp`]: canonical JSON for payload
//!   equality, the diagnostic projection, injectable clocks, fixed-width UTC timestamp text.
//! - [`context`]: [`RoundContext`], what a round decides on (the operation's arguments and
//!   the agent's prompt), redacted when it is built.
//! - [`schema`]: JSON Schemas of every public value type.
//!
//! Serde shapes are those of the Python original (sf-m3 0.3.1): snake_case names, every
//! optional field written as `null`, timestamps as `2026-11-29T17:40:10.123456+00:00`.
//!
//! # Feature flags
//!
//! None.
#![doc(test(attr(deny(warnings), allow(dead_code))))]
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![deny(unused_must_use)]
#![warn(clippy::exhaustive_structs, clippy::exhaustive_enums)]

#[macro_use]
mod wire_enum;

mod plain_errors;

pub mod actor;
pub mod canonical;
pub mod change;
pub mod clock;
pub mod context;
pub mod elicitation;
pub mod error;
pub mod execution;
pub mod form;
pub mod form_input;
pub mod limits;
pub mod messages;
pub mod oauth;
pub mod plan;
pub mod reason;
pub mod record;
pub mod redact;
pub mod remote_server;
pub mod round;
pub mod round_failure;
pub mod schema;
pub mod server;
pub mod server_era;
pub mod timestamp;
pub mod validation;

pub use actor::{ACTOR_NAME_MAX_CHARS, Actor, ActorSurface};
pub use canonical::{canonical_eq, canonical_json, ordered_json};
pub use change::{
    ChangeRecord, ChangeRecordKind, Cursor, DeadlineReminder, ExecutionChangeState,
    RoundChangeState, check_reminder_fraction,
};
pub use clock::{Clock, ManualClock, SystemClock};
pub use context::RoundContext;
pub use elicitation::{
    ElicitationAction, ElicitationMode, ElicitationRequest, ElicitationResponse,
    FormElicitationRequest, OperationKind, ResponseMap, UrlElicitationRequest,
};
pub use error::{BoxError, Error, ErrorBody, ErrorCode, ErrorInfo, Result};
pub use execution::{
    ActivityHealth, ExecutionOutcome, ExecutionResult, ExecutionState, ExecutionStatus, HumanInput,
};
pub use limits::{Limit, LimitExceeded, RoundLimits};
pub use oauth::{OAuthGrant, OAuthSettings};
pub use plan::{ElicitationPlan, PlanEntry};
pub use reason::{Reason, UnknownReason};
pub use record::{DeliveryState, ManagedInputLease, ManagedInputRecord, ManagedInputStatus};
pub use redact::{REDACTED, redact, redact_echoes, redact_responses, redact_with, secret_values};
pub use remote_server::{HttpServer, ResolvedHeaders, ServerBinding, ServerTrust};
pub use round::PendingElicitationRound;
pub use round_failure::{RECOVERY_UNAVAILABLE, RoundFailureCode};
pub use schema::{value_schema, value_schemas};
pub use server::{StdioServer, ToolName, ToolSelection};
pub use server_era::ServerEra;
pub use validation::validate_responses;

/// A new unique id (ULID text, 26 characters, sortable by creation time).
pub fn new_id() -> String {
    ulid::Ulid::generate().to_string()
}

/// This crate's README, compiled and run as a doctest so its example keeps working.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctest;
