//! [`Reason`]: why an operation was refused, below the level of the error code.
//!
//! A code says *what kind* of failure happened (`managed_input_conflict`); a reason says
//! *which rule* refused the call (the lease expired, the idempotency key was reused). Both
//! are stable; messages are not. The reason travels in `details.reason` (a snake_case
//! string) so the wire, the CLI and stored results carry it unchanged;
//! [`Error::reason`](crate::Error::reason) reads it back as this enum.

use std::fmt;
use std::str::FromStr;

macro_rules! reasons {
    ($($(#[$doc:meta])* $variant:ident => $text:literal,)*) => {
        /// Why an operation was refused (see the [module docs](self)).
        ///
        /// Branch on it with a wildcard arm: reasons are added as the contract grows.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Reason {
            $($(#[$doc])* $variant,)*
        }

        impl Reason {
            /// Every reason, in declaration order.
            pub const ALL: &'static [Reason] = &[$(Self::$variant),*];

            /// The stable snake_case string stored in `details.reason`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text,)*
                }
            }
        }
    };
}

reasons! {
    // ---- arguments and stored data
    /// A required string argument is empty.
    EmptyArgument => "empty_argument",
    /// A lease duration is zero or too large to add to the clock.
    InvalidLeaseDuration => "invalid_lease_duration",
    /// `round_index` is not below `round_limit`, or `round_limit` is zero.
    RoundIndexOutOfRange => "round_index_out_of_range",
    /// The pending round itself is malformed (ids, key/request mismatch, empty requests).
    InvalidRound => "invalid_round",
    /// The submitted responses do not fit the stored requests.
    InvalidResponse => "invalid_response",
    /// A stored row cannot be decoded into a valid record.
    StoredRecordInvalid => "stored_record_invalid",
    /// A value is over one of the bounds of [`limits`](crate::limits) (nesting depth,
    /// answer size, requests per round, message or schema size); `details.limit` names it.
    LimitExceeded => "limit_exceeded",
    /// An existing database file is not an m3 store (another application's file, or a
    /// table of m3's name with another layout); it was left untouched.
    InvalidStore => "invalid_store",
    /// An event kind is reserved for the store or empty.
    ReservedEventKind => "reserved_event_kind",
    /// A change-feed cursor is not a non-negative decimal integer.
    InvalidCursor => "invalid_cursor",
    /// A change-feed cursor is beyond the newest record the store ever wrote.
    CursorInFuture => "cursor_in_future",
    /// An id prefix (as `m3` accepts for execution and round ids) matches more than one
    /// id; `details.candidates` lists them.
    AmbiguousId => "ambiguous_id",
    // ---- leases
    /// The presented lease (owner and token) is not the stored one.
    LeaseNotHeld => "lease_not_held",
    /// The presented lease is the stored one but it has expired.
    LeaseExpired => "lease_expired",
    /// Another owner holds a live lease.
    LeaseHeld => "lease_held",
    /// The lease is still live, so recovery may not take it.
    LeaseLive => "lease_live",
    /// The expected lease token does not match the stored one.
    LeaseTokenMismatch => "lease_token_mismatch",
    /// The lease token is already used by another execution.
    LeaseTokenInUse => "lease_token_in_use",
    /// An unleased writer met a live worker lease.
    LeaseRequired => "lease_required",
    /// A worker lease expired: only recovery may touch the execution.
    RecoveryRequired => "recovery_required",
    // ---- identity and idempotency
    /// The id exists with different data.
    IdConflict => "id_conflict",
    /// Another round of the execution already has this `round_index`.
    RoundIndexTaken => "round_index_taken",
    /// The idempotency key (or another key) was already used with another payload.
    IdempotencyKeyReused => "idempotency_key_reused",
    /// Another failure is already recorded.
    FailureRecorded => "failure_recorded",
    /// Another writer changed the row between the check and the write.
    ConcurrentChange => "concurrent_change",
    // ---- status
    /// The status does not allow this step (a transition's precondition).
    WrongStatus => "wrong_status",
    /// The round or execution is terminal (`resolved`, `failed`, `finished`).
    Terminal => "terminal",
    /// The round failed: it accepts no responses and cannot be claimed.
    RoundFailed => "round_failed",
    /// The execution is finished.
    Finished => "finished",
    /// The execution is finished with other terminal data.
    FinishedDifferently => "finished_differently",
    /// The lifecycle table forbids the move.
    InvalidTransition => "invalid_transition",
    /// More than one round is pending where one was expected.
    MultiplePending => "multiple_pending",
    // ---- recovery
    /// The round failed `recovery_unavailable`: nothing may resume it.
    RecoveryUnavailable => "recovery_unavailable",
    /// A claim came without delivery-state evidence.
    MissingEvidence => "missing_evidence",
    /// The delivery-state evidence does not match the stored status.
    EvidenceMismatch => "evidence_mismatch",
    /// Resuming needs proof that delivery is idempotent.
    IdempotentDeliveryRequired => "idempotent_delivery_required",
    // ---- runtime
    /// A managed round's deadline passed.
    ElicitationDeadline => "elicitation_deadline",
    /// A script named a tool the server did not list, not even after the listing wait.
    ToolNotListed => "tool_not_listed",
    /// A server era is not `auto`, `2026-07-28`, `2025-11-25` or `2025-06-18`.
    InvalidServerEra => "invalid_server_era",
    /// A server reached in the 2026-07-28 era refused a call because it can only ask
    /// for input over a back-channel (a server-to-client `elicitation/create`); pin the
    /// binding to a handshake era (`2025-11-25`).
    NeedsHandshakeEra => "needs_handshake_era",
    /// An HTTP server asked for OAuth and the client could not obtain a token: discovery,
    /// registration, the grant or the person's authorization failed (or nobody was there
    /// to be shown the authorization URL).
    AuthorizationFailed => "authorization_failed",
    /// An HTTP server refused a token with `403 insufficient_scope` and authorizing
    /// again with the larger scope it named did not help (or it named no scope beyond
    /// those already granted); m3 steps up at most once per request.
    InsufficientScope => "insufficient_scope",
    // ---- notifications
    /// A webhook URL is not `http` or `https`, or is not a URL at all.
    WebhookUrlScheme => "webhook_url_scheme",
    /// A webhook URL carries a user name or password.
    WebhookUrlCredentials => "webhook_url_credentials",
    /// A webhook URL points at a loopback, link-local or unspecified address, which is
    /// refused unless the subscription allows it.
    WebhookUrlLoopback => "webhook_url_loopback",
    /// A webhook signing secret is not `whsec_` followed by base64 of 16 to 64 bytes.
    InvalidSecret => "invalid_secret",
    // ---- identity
    /// An actor's principal or display name is empty, longer than 200 characters, or has a
    /// control character.
    InvalidActor => "invalid_actor",
    /// An API token's name, scope or lifetime is not valid.
    InvalidToken => "invalid_token",
    /// Another API token has the name.
    TokenNameTaken => "token_name_taken",
    // ---- workers
    /// A worker's id or host is empty, too long, or has a control character.
    InvalidWorker => "invalid_worker",
    /// A policy's name, matcher, delay or answer is not valid.
    InvalidPolicy => "invalid_policy",
    /// Another policy has the name.
    PolicyNameTaken => "policy_name_taken",
    // ---- storage
    /// The database connection was lost or refused (a server restart or shutdown, a
    /// network reset, no connection free in time): nothing was decided, and the same call
    /// may succeed once the database is back. Carried by a `storage_error`, which is then
    /// [retryable](crate::Error::is_retryable).
    ConnectionLost => "connection_lost",
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Reason {
    type Err = UnknownReason;

    /// # Errors
    /// [`UnknownReason`] for a string no reason has (it converts into an
    /// `invalid_argument` [`Error`](crate::Error)).
    fn from_str(s: &str) -> Result<Self, UnknownReason> {
        Self::ALL
            .iter()
            .copied()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| UnknownReason(s.to_owned()))
    }
}

/// A string that names no [`Reason`] (a newer peer's reason, or a typo).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UnknownReason(pub String);

impl fmt::Display for UnknownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown reason '{}'", self.0)
    }
}

impl std::error::Error for UnknownReason {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn every_reason_round_trips_and_strings_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for reason in Reason::ALL {
            assert!(seen.insert(reason.as_str()), "{reason} twice");
            assert_eq!(reason.as_str().parse::<Reason>().ok(), Some(*reason));
        }
        assert!("no_such_reason".parse::<Reason>().is_err());
    }

    #[test]
    fn the_reason_travels_in_the_details() {
        let error = Error::managed_input_conflict("x").with_reason(Reason::LeaseExpired);
        assert_eq!(error.details()["reason"], "lease_expired");
        assert_eq!(error.reason(), Some(Reason::LeaseExpired));
        assert_eq!(Error::storage("y").reason(), None);
    }

    #[test]
    fn only_a_lost_connection_makes_a_storage_error_retryable() {
        let lost = Error::storage("connection lost").with_reason(Reason::ConnectionLost);
        assert!(lost.is_retryable());
        assert!(lost.to_error_info().retryable);
        assert!(!Error::storage("disk full").is_retryable());
        let not_storage = Error::managed_input_conflict("x").with_reason(Reason::ConnectionLost);
        assert!(!not_storage.is_retryable());
    }
}
