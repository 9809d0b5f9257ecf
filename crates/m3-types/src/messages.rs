//! The reference's error messages, shared so every crate and backend says the same thing.
//!
//! Tests and people recognise errors by the key words in these texts ("exactly",
//! "unexpected", "expired", "idempotency", "multiple", "cannot accept responses",
//! "does not exist", ...); programs branch on [`Error::code`](crate::Error::code) instead.

/// Responses with keys the round does not have (`managed_input_invalid`).
pub const UNEXPECTED_KEYS: &str = "responses contain unexpected request keys";
/// Responses missing some of the round's keys (`managed_input_invalid`).
pub const EXACT_KEYS: &str = "responses must contain exactly the pending request keys";
/// Form accept without content (`managed_input_invalid`).
pub const FORM_REQUIRES_CONTENT: &str = "form acceptance requires content";
/// Content that fails the requested schema, or an unusable schema (`managed_input_invalid`).
pub const SCHEMA_MISMATCH: &str = "response content does not match the request schema";
/// Content on a URL response (`managed_input_invalid`).
pub const URL_CONTENT: &str = "URL responses cannot contain form content";
/// Content on decline or cancel (`managed_input_invalid`).
pub const DECLINE_CONTENT: &str = "decline and cancel responses cannot contain content";
/// A payload that cannot be encoded as canonical JSON (`managed_input_invalid`).
pub const INVALID_JSON: &str = "managed input contains invalid JSON";
/// A stored row that does not decode (`managed_input_invalid`).
pub const STORED_RECORD_INVALID: &str = "stored managed-input record is invalid";
/// A stored redacted projection that does not decode (`managed_input_invalid`).
pub const STORED_PROJECTION_INVALID: &str = "stored redacted response projection is invalid";
/// `round_index >= round_limit` at creation (`managed_input_invalid`).
pub const ROUND_INDEX_EXCEEDS_LIMIT: &str = "round_index exceeds round limit";
/// Unknown round at the store level (`managed_input_conflict`) and at the public API level
/// (`managed_input_invalid`).
pub const ROUND_DOES_NOT_EXIST: &str = "managed-input round does not exist";
/// Owner or token mismatch (`managed_input_conflict`).
pub const OWNED_BY_ANOTHER_LEASE: &str = "managed-input round is owned by another lease";
/// Lease expired while pending (`managed_input_conflict`).
pub const LEASE_EXPIRED: &str = "managed-input lease has expired";
/// Same key with another payload, or another key (`managed_input_conflict`).
pub const IDEMPOTENCY_CONFLICT: &str =
    "response idempotency key conflicts with an accepted response";
/// Creating an existing round with different data (`managed_input_conflict`).
pub const ROUND_EXISTS_DIFFERENT: &str = "managed-input round already exists with different data";
/// A second round clashing with an existing one, e.g. same index (`managed_input_conflict`).
pub const ROUND_CONFLICTS: &str = "managed-input round conflicts with an existing round";
/// A claim while the lease is live (`managed_input_conflict`).
pub const LEASE_STILL_HELD: &str = "managed-input round lease is still held";
/// Expected token differs (`managed_input_conflict`).
pub const EXPECTED_TOKEN_MISMATCH: &str = "expected lease token does not match";
/// A second, different failure (`managed_input_conflict`).
pub const FAILURE_ALREADY_RECORDED: &str = "managed-input failure is already recorded";
/// Responses to a failed round (`managed_input_state`).
pub const FAILED_ROUND_CANNOT_ACCEPT: &str = "failed managed-input round cannot accept responses";
/// More than one pending round for an execution (`managed_input_state`).
pub const MULTIPLE_PENDING: &str =
    "managed-input execution has multiple pending elicitation rounds";
/// Renewal of a terminal (or delivered) round (`managed_input_state`).
pub const TERMINAL_CANNOT_RENEW: &str = "terminal managed-input round cannot renew";
/// Failing a resolved round (`managed_input_state`).
pub const RESOLVED_CANNOT_FAIL: &str = "resolved managed-input round cannot fail";
/// Default recovery failure text (`managed_input_recovery_unavailable`).
pub const CANNOT_BE_RECOVERED: &str = "managed input cannot be recovered";
/// Result message of a recovery failure (`managed_input_recovery_unavailable`).
pub const RECOVERY_UNAVAILABLE: &str = "managed input recovery is unavailable";
/// Round deadline expiry (`timeout`).
pub const ELICITATION_TIMED_OUT: &str = "managed elicitation timed out";
/// Waiter cancelled (`cancelled`).
pub const ELICITATION_CANCELLED: &str = "managed elicitation cancelled";
/// Round budget exhausted (`elicitation_round_limit`).
pub const ROUND_LIMIT_EXCEEDED: &str = "managed elicitation round limit exceeded";
/// Bad `human_input` (`invalid_argument`).
pub const HUMAN_INPUT: &str = "human_input must be 'fail' or 'managed'";
/// Managed input combined with a predefined plan (`invalid_argument`).
pub const MANAGED_WITH_PLAN: &str =
    "managed human input cannot be combined with a predefined elicitation plan";
/// Managed input without a persistent store (`invalid_argument`).
pub const MANAGED_NEEDS_PERSISTENT_STORE: &str =
    "managed human input requires a persistent managed-input-capable store";
/// Responding on a handle that is not managed (`invalid_argument`).
pub const RESPONSES_REQUIRE_MANAGED: &str = "elicitation responses require managed human input";
/// `result(timeout)` with a non-positive timeout (`invalid_argument`).
pub const WAIT_TIMEOUT_POSITIVE: &str = "wait timeout must be positive";
/// `result(timeout)` expiry (`timeout`, wait only).
pub const RESULT_WAIT_TIMED_OUT: &str = "execution result wait timed out";
