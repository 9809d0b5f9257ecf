//! The values of the token store: a token's public record, its one-time secret, what a
//! request's credential turned out to be.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use m3_types::{Error, Reason, Result};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// What a token may do; each scope includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TokenScope {
    /// `read`: the inbox, rounds (redacted), executions, events, the history.
    Read,
    /// `answer`: also answers rounds and cancels executions.
    Answer,
    /// `admin`: also manages tokens and webhooks.
    Admin,
}

impl TokenScope {
    /// Every scope, narrowest first.
    pub const ALL: [Self; 3] = [Self::Read, Self::Answer, Self::Admin];

    /// The scope's name (`read`, `answer`, `admin`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Answer => "answer",
            Self::Admin => "admin",
        }
    }

    /// Whether this scope may do what `needed` allows.
    pub fn allows(self, needed: Self) -> bool {
        self >= needed
    }
}

impl fmt::Display for TokenScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TokenScope {
    type Err = Error;

    /// # Errors
    /// `invalid_argument` (reason `invalid_token`) for another name.
    fn from_str(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|scope| scope.as_str() == s)
            .ok_or_else(|| {
                Error::model_validation(format!(
                    "unknown token scope '{s}' (read, answer or admin)"
                ))
                .with_reason(Reason::InvalidToken)
            })
    }
}

/// A token as the store shows it: never its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ApiToken {
    /// `tok_` and a ULID.
    pub id: String,
    /// The principal an answer with this token is recorded as (unique in the store).
    pub name: String,
    /// What the token may do.
    pub scope: TokenScope,
    /// When it was made, on the store's clock.
    #[serde(with = "m3_types::timestamp::serde")]
    pub created_at: OffsetDateTime,
    /// When it stops working (`None`: never).
    #[serde(default, with = "m3_types::timestamp::serde::option")]
    pub expires_at: Option<OffsetDateTime>,
}

impl ApiToken {
    /// Whether the token has expired at `now`.
    pub fn is_expired(&self, now: OffsetDateTime) -> bool {
        self.expires_at.is_some_and(|at| now >= at)
    }
}

/// A token to make: its name, scope and lifetime.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[must_use]
pub struct NewToken {
    /// The principal's name: 1 to 64 characters of letters, digits, `.`, `_`, `-`, `@`.
    pub name: String,
    /// What it may do.
    pub scope: TokenScope,
    /// How long it works from now (`None`: until revoked).
    pub lifetime: Option<Duration>,
}

impl NewToken {
    /// A token named `name` with `scope`, working until revoked.
    pub fn new(name: impl Into<String>, scope: TokenScope) -> Self {
        Self {
            name: name.into(),
            scope,
            lifetime: None,
        }
    }

    /// This token, expiring `lifetime` after it is made.
    pub fn expires_after(mut self, lifetime: Duration) -> Self {
        self.lifetime = Some(lifetime);
        self
    }
}

/// A token's secret, shown once when it is made (`m3t_` and 43 base64url characters).
/// `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenSecret(String);

impl TokenSecret {
    /// Wraps secret text (a secret made by [`rules::new_secret`](super::rules::new_secret)).
    pub fn new(text: String) -> Self {
        Self(text)
    }

    /// The secret itself: give it to its holder once, never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for TokenSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenSecret(<redacted>)")
    }
}

/// What a presented credential is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenCheck {
    /// A live token.
    Valid(ApiToken),
    /// A token that has expired.
    Expired(ApiToken),
    /// No token of the store (never made, mistyped, or revoked).
    Unknown,
}
