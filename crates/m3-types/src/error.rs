//! The one error type of m3-rs, with stable codes.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::reason::{Reason, UnknownReason};

/// `Result` with [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A boxed foreign error kept as the [`std::error::Error::source`] of an [`Error`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Message, structured details and optional cause shared by every [`Error`] variant.
#[derive(Debug)]
#[non_exhaustive]
pub struct ErrorBody {
    /// Short, lower-case, human-readable message.
    pub message: String,
    /// Structured context (ids, operation names, SQLite codes...). Never secrets.
    pub details: Map<String, Value>,
    /// The underlying foreign error, when there is one.
    pub source: Option<BoxError>,
}

impl ErrorBody {
    /// A body with `message`, no details and no source.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            details: Map::new(),
            source: None,
        }
    }
}

impl fmt::Display for ErrorBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ErrorBody {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.source {
            Some(source) => Some(source.as_ref()),
            None => None,
        }
    }
}

/// Every failure of m3-rs: M3's typed managed-input errors plus protocol, transport and storage errors.
///
/// Branch on [`Error::code`] (stable strings, see [`ErrorCode`]) or the `is_*` helpers, never on
/// the message text. The `Display` form is the message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Malformed ids, arguments, response maps, actions or schema content
    /// (Python `ManagedInputValidationError`, code `managed_input_invalid`).
    #[error(transparent)]
    ManagedInputValidation(ErrorBody),
    /// Stale lease ownership, expired lease, idempotency conflict, concurrent update
    /// (`managed_input_conflict`).
    #[error(transparent)]
    ManagedInputConflict(ErrorBody),
    /// A transition or response that is invalid for the round's current status
    /// (`managed_input_state`).
    #[error(transparent)]
    ManagedInputState(ErrorBody),
    /// The round cannot be safely recovered or reclaimed (`managed_input_recovery_unavailable`).
    #[error(transparent)]
    ManagedInputRecovery(ErrorBody),
    /// Invalid submission arguments such as a bad `human_input` (Python `ModelValidationError`,
    /// code `invalid_argument`).
    #[error(transparent)]
    ModelValidation(ErrorBody),
    /// A deadline or wait limit passed (Python `OperationTimeout`, code `timeout`).
    #[error(transparent)]
    OperationTimeout(ErrorBody),
    /// The operation was cancelled (`cancelled`).
    #[error(transparent)]
    Cancelled(ErrorBody),
    /// The execution's elicitation round budget is exhausted (`elicitation_round_limit`).
    #[error(transparent)]
    ElicitationRoundLimit(ErrorBody),
    /// A peer broke the MCP protocol (`protocol_error`).
    #[error(transparent)]
    Protocol(ErrorBody),
    /// The connection to a peer failed (`transport_error`).
    #[error(transparent)]
    Transport(ErrorBody),
    /// The database failed (`storage_error`); SQLite's extended code goes in the details.
    #[error(transparent)]
    Storage(ErrorBody),
    /// The execution or round named does not exist (`not_found`).
    #[error(transparent)]
    NotFound(ErrorBody),
    /// A change-feed cursor is older than the records the store still keeps: the reader
    /// missed records that retention removed (`cursor_expired`).
    #[error(transparent)]
    CursorExpired(ErrorBody),
}

macro_rules! constructors {
    ($($(#[$doc:meta])* $name:ident => $variant:ident;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(message: impl Into<String>) -> Self {
                Self::$variant(ErrorBody::new(message))
            }
        )*
    };
}

impl Error {
    constructors! {
        /// A [`Error::ManagedInputValidation`] with `message`.
        managed_input_validation => ManagedInputValidation;
        /// A [`Error::ManagedInputConflict`] with `message`.
        managed_input_conflict => ManagedInputConflict;
        /// A [`Error::ManagedInputState`] with `message`.
        managed_input_state => ManagedInputState;
        /// A [`Error::ManagedInputRecovery`] with `message`.
        managed_input_recovery => ManagedInputRecovery;
        /// A [`Error::ModelValidation`] with `message`.
        model_validation => ModelValidation;
        /// A [`Error::OperationTimeout`] with `message`.
        timeout => OperationTimeout;
        /// A [`Error::Cancelled`] with `message`.
        cancelled => Cancelled;
        /// A [`Error::ElicitationRoundLimit`] with `message`.
        round_limit => ElicitationRoundLimit;
        /// A [`Error::Protocol`] with `message`.
        protocol => Protocol;
        /// A [`Error::Transport`] with `message`.
        transport => Transport;
        /// A [`Error::Storage`] with `message`.
        storage => Storage;
        /// A [`Error::NotFound`] with `message`.
        not_found => NotFound;
        /// A [`Error::CursorExpired`] with `message`.
        cursor_expired => CursorExpired;
    }

    /// Builds an error of the kind `code` names, with `message`.
    ///
    /// Codes without an own variant (execution-level codes such as `invalid_transition`,
    /// `unsupported`) become [`Error::ModelValidation`] for `invalid_*` codes and
    /// [`Error::Protocol`] otherwise, with the original code kept in the details as `code`.
    pub fn from_code(code: ErrorCode, message: impl Into<String>) -> Self {
        let message = message.into();
        match code {
            ErrorCode::ManagedInputInvalid => Self::managed_input_validation(message),
            ErrorCode::ManagedInputConflict => Self::managed_input_conflict(message),
            ErrorCode::ManagedInputState => Self::managed_input_state(message),
            ErrorCode::ManagedInputRecoveryUnavailable => Self::managed_input_recovery(message),
            ErrorCode::InvalidArgument => Self::model_validation(message),
            ErrorCode::Timeout => Self::timeout(message),
            ErrorCode::Cancelled => Self::cancelled(message),
            ErrorCode::ElicitationRoundLimit => Self::round_limit(message),
            ErrorCode::ProtocolError => Self::protocol(message),
            ErrorCode::TransportError => Self::transport(message),
            ErrorCode::StorageError => Self::storage(message),
            ErrorCode::NotFound => Self::not_found(message),
            ErrorCode::CursorExpired => Self::cursor_expired(message),
            ErrorCode::InvalidTransition => {
                Self::model_validation(message).with_detail("code", code.as_str())
            }
            other => Self::protocol(message).with_detail("code", other.as_str()),
        }
    }

    fn body(&self) -> &ErrorBody {
        match self {
            Self::ManagedInputValidation(b)
            | Self::ManagedInputConflict(b)
            | Self::ManagedInputState(b)
            | Self::ManagedInputRecovery(b)
            | Self::ModelValidation(b)
            | Self::OperationTimeout(b)
            | Self::Cancelled(b)
            | Self::ElicitationRoundLimit(b)
            | Self::Protocol(b)
            | Self::Transport(b)
            | Self::Storage(b)
            | Self::NotFound(b)
            | Self::CursorExpired(b) => b,
        }
    }

    fn body_mut(&mut self) -> &mut ErrorBody {
        match self {
            Self::ManagedInputValidation(b)
            | Self::ManagedInputConflict(b)
            | Self::ManagedInputState(b)
            | Self::ManagedInputRecovery(b)
            | Self::ModelValidation(b)
            | Self::OperationTimeout(b)
            | Self::Cancelled(b)
            | Self::ElicitationRoundLimit(b)
            | Self::Protocol(b)
            | Self::Transport(b)
            | Self::Storage(b)
            | Self::NotFound(b)
            | Self::CursorExpired(b) => b,
        }
    }

    /// Adds (or replaces) one structured detail.
    #[must_use]
    pub fn with_detail(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.body_mut().details.insert(key.to_owned(), value.into());
        self
    }

    /// Records why the operation was refused, as `details.reason` (see [`Reason`]).
    #[must_use]
    pub fn with_reason(self, reason: Reason) -> Self {
        self.with_detail("reason", reason.as_str())
    }

    /// The typed reason in `details.reason`, when it is one [`Reason`] knows.
    pub fn reason(&self) -> Option<Reason> {
        match self.details().get("reason") {
            Some(Value::String(text)) => text.parse().ok(),
            _ => None,
        }
    }

    /// Keeps `source` as the cause ([`std::error::Error::source`]).
    #[must_use]
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.body_mut().source = Some(Box::new(source));
        self
    }

    /// The stable code string, e.g. `"managed_input_conflict"`.
    pub fn code(&self) -> &'static str {
        self.error_code().as_str()
    }

    /// The stable code as an [`ErrorCode`].
    pub fn error_code(&self) -> ErrorCode {
        match self {
            Self::ManagedInputValidation(_) => ErrorCode::ManagedInputInvalid,
            Self::ManagedInputConflict(_) => ErrorCode::ManagedInputConflict,
            Self::ManagedInputState(_) => ErrorCode::ManagedInputState,
            Self::ManagedInputRecovery(_) => ErrorCode::ManagedInputRecoveryUnavailable,
            Self::ModelValidation(_) => ErrorCode::InvalidArgument,
            Self::OperationTimeout(_) => ErrorCode::Timeout,
            Self::Cancelled(_) => ErrorCode::Cancelled,
            Self::ElicitationRoundLimit(_) => ErrorCode::ElicitationRoundLimit,
            Self::Protocol(_) => ErrorCode::ProtocolError,
            Self::Transport(_) => ErrorCode::TransportError,
            Self::Storage(_) => ErrorCode::StorageError,
            Self::NotFound(_) => ErrorCode::NotFound,
            Self::CursorExpired(_) => ErrorCode::CursorExpired,
        }
    }

    /// The message (same as `Display`).
    pub fn message(&self) -> &str {
        &self.body().message
    }

    /// The structured details.
    pub fn details(&self) -> &Map<String, Value> {
        &self.body().details
    }

    /// A copy of this error: same variant (so same code), message and details, without
    /// the source.
    ///
    /// `Error` is not `Clone` because its source is any foreign error; this is for the
    /// places that hand one failure to several waiters (a batch of lease renewals, the
    /// session that closes with the error that ended the turn).
    #[must_use]
    pub fn clone_without_source(&self) -> Self {
        let mut copy = Self::from_code(self.error_code(), self.message());
        copy.body_mut().details = self.details().clone();
        copy
    }

    /// The wrapped foreign cause, if any.
    pub fn cause(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.body().source.as_deref()
    }

    /// Whether the same call may succeed if made again (the `retryable` flag of stored
    /// errors): timeouts (as in sf-m3), and a `storage_error` whose reason is
    /// [`Reason::ConnectionLost`] (the database dropped or refused the connection: a
    /// restart, a network reset). Other storage errors (a full disk, a corrupt row, a
    /// constraint) are not: repeating the call would fail the same way.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::OperationTimeout(_) => true,
            Self::Storage(_) => self.reason() == Some(Reason::ConnectionLost),
            _ => false,
        }
    }

    /// Projects the error into the [`ErrorInfo`] stored in execution results.
    ///
    /// The message is the error's own message (truncated to 4096 characters); details are
    /// kept as they are.
    pub fn to_error_info(&self) -> ErrorInfo {
        let mut message: String = self
            .message()
            .chars()
            .take(ErrorInfo::MAX_MESSAGE)
            .collect();
        if message.is_empty() {
            message = self.code().to_owned();
        }
        ErrorInfo {
            code: self.error_code(),
            message,
            retryable: self.is_retryable(),
            details: self.details().clone(),
        }
    }

    /// Code `managed_input_invalid`.
    pub fn is_managed_input_validation(&self) -> bool {
        matches!(self, Self::ManagedInputValidation(_))
    }
    /// Code `managed_input_conflict`.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::ManagedInputConflict(_))
    }
    /// Code `managed_input_state`.
    pub fn is_state(&self) -> bool {
        matches!(self, Self::ManagedInputState(_))
    }
    /// Code `managed_input_recovery_unavailable`.
    pub fn is_recovery(&self) -> bool {
        matches!(self, Self::ManagedInputRecovery(_))
    }
    /// Code `invalid_argument`.
    pub fn is_model_validation(&self) -> bool {
        matches!(self, Self::ModelValidation(_))
    }
    /// Code `timeout`.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::OperationTimeout(_))
    }
    /// Code `cancelled`.
    pub fn is_cancelled(&self) -> bool {
        matches!(self, Self::Cancelled(_))
    }
    /// Code `elicitation_round_limit`.
    pub fn is_round_limit(&self) -> bool {
        matches!(self, Self::ElicitationRoundLimit(_))
    }
    /// Code `protocol_error`.
    pub fn is_protocol(&self) -> bool {
        matches!(self, Self::Protocol(_))
    }
    /// Code `transport_error`.
    pub fn is_transport(&self) -> bool {
        matches!(self, Self::Transport(_))
    }
    /// Code `storage_error`.
    pub fn is_storage(&self) -> bool {
        matches!(self, Self::Storage(_))
    }
    /// Code `not_found`.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound(_))
    }
}

wire_enum! {
    /// Stable error codes: those of [`Error`] plus the execution-level codes of sf-m3, the Python implementation.
    #[non_exhaustive]
    pub enum ErrorCode {
        /// `managed_input_invalid`
        ManagedInputInvalid => "managed_input_invalid",
        /// `managed_input_conflict`
        ManagedInputConflict => "managed_input_conflict",
        /// `managed_input_state`
        ManagedInputState => "managed_input_state",
        /// `managed_input_recovery_unavailable`
        ManagedInputRecoveryUnavailable => "managed_input_recovery_unavailable",
        /// `invalid_argument`
        InvalidArgument => "invalid_argument",
        /// `timeout`
        Timeout => "timeout",
        /// `cancelled`
        Cancelled => "cancelled",
        /// `elicitation_round_limit`
        ElicitationRoundLimit => "elicitation_round_limit",
        /// `protocol_error`
        ProtocolError => "protocol_error",
        /// `transport_error`
        TransportError => "transport_error",
        /// `storage_error`
        StorageError => "storage_error",
        /// `invalid_transition` (execution lifecycle transition refused)
        InvalidTransition => "invalid_transition",
        /// `session_still_open`
        SessionStillOpen => "session_still_open",
        /// `session_busy`
        SessionBusy => "session_busy",
        /// `unsupported`
        Unsupported => "unsupported",
        /// `cleanup_failed`
        CleanupFailed => "cleanup_failed",
        /// `managed_input_identity_mismatch` (runtime operation identity mismatch)
        ManagedInputIdentityMismatch => "managed_input_identity_mismatch",
        /// `not_found` (the execution or round named does not exist)
        NotFound => "not_found",
        /// `cursor_expired` (a change-feed cursor older than what retention kept)
        CursorExpired => "cursor_expired",
    }
    unknown = |s: &str| Error::model_validation(format!("unknown error code '{s}'"))
}
impl From<UnknownReason> for Error {
    fn from(unknown: UnknownReason) -> Self {
        Self::model_validation(unknown.to_string())
    }
}

/// The error recorded in an execution result ([`ExecutionResult`](crate::ExecutionResult)):
/// the wire projection of an [`Error`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(
    clippy::exhaustive_structs,
    reason = "frozen wire shape of the Python reference; other crates build it with struct literals (docs/decisions.md)"
)]
pub struct ErrorInfo {
    /// Stable code.
    pub code: ErrorCode,
    /// Message (1..=4096 characters).
    pub message: String,
    /// Whether retrying may succeed.
    #[serde(default)]
    pub retryable: bool,
    /// Structured details.
    #[serde(default)]
    pub details: Map<String, Value>,
}

impl ErrorInfo {
    /// Longest message kept.
    pub const MAX_MESSAGE: usize = 4096;

    /// An error info with no details, not retryable.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            retryable: false,
            details: Map::new(),
        }
    }

    /// Sets `retryable`.
    #[must_use]
    pub fn with_retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }

    /// Adds one detail.
    #[must_use]
    pub fn with_detail(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.details.insert(key.to_owned(), value.into());
        self
    }
}
