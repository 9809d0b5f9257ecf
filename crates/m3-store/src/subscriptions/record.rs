//! What a store keeps per webhook subscription ([`Subscription`]): where to deliver, what,
//! in which format, how far delivery got, who delivers it now, and what was given up on.

use std::fmt;
use std::str::FromStr;

use m3_types::{ChangeRecord, ChangeRecordKind, Cursor, Error, Result};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::secret::WebhookSecret;

/// The most dead letters a subscription keeps; older ones are dropped (the count of all of
/// them stays in [`Subscription::dead_lettered`]).
pub const MAX_DEAD_LETTERS: usize = 100;

/// How a subscription's deliveries are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum WebhookFormat {
    /// `"standard"`: one JSON event per request (`docs/notifications.md`).
    #[default]
    Standard,
    /// `"slack"`: a Slack incoming-webhook body (text and blocks, a button to the answer link).
    Slack,
}

impl WebhookFormat {
    /// The format's name (`standard`, `slack`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Standard => "standard",
            Self::Slack => "slack",
        }
    }
}

impl fmt::Display for WebhookFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for WebhookFormat {
    type Err = Error;

    /// # Errors
    /// `invalid_argument` for a name other than `standard` or `slack`.
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "standard" => Ok(Self::Standard),
            "slack" => Ok(Self::Slack),
            _ => Err(Error::model_validation(format!(
                "unknown webhook format '{}': use standard or slack",
                s.chars().take(40).collect::<String>()
            ))),
        }
    }
}

/// A webhook subscription: a receiver that is told about the change feed's records.
///
/// It holds no secret: the signing secrets are kept beside it ([`SigningSecrets`]) and
/// handed only to the notifier that claims it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Subscription {
    /// `sub_` and a ULID.
    pub id: String,
    /// Where deliveries are POSTed (`http` or `https`).
    pub url: String,
    /// The record kinds delivered (others are passed over).
    pub events: Vec<ChangeRecordKind>,
    /// Only rounds of this MCP server (execution records, which name no server, are then
    /// passed over); `None`: every server.
    pub server: Option<String>,
    /// What the subscription is for, as its owner wrote it.
    pub description: String,
    /// How deliveries are written.
    pub format: WebhookFormat,
    /// Whether the URL may point at a loopback or link-local address.
    pub allow_loopback: bool,
    /// Whether deliveries are made.
    pub enabled: bool,
    /// Why it was disabled (`gone`: the receiver answered 410; `disabled`: by request).
    pub disabled_reason: Option<String>,
    /// When it was added.
    #[serde(with = "m3_types::timestamp::serde")]
    pub created_at: OffsetDateTime,
    /// When it last changed.
    #[serde(with = "m3_types::timestamp::serde")]
    pub updated_at: OffsetDateTime,
    /// Grows by one with every write: backends compare-and-set on it.
    pub version: u64,
    /// How far delivery got.
    pub delivery: DeliveryProgress,
    /// The notifier delivering it now, if any.
    pub lease: Option<SubscriptionLease>,
    /// The newest records given up on, oldest first (at most [`MAX_DEAD_LETTERS`]).
    pub dead_letters: Vec<DeadLetter>,
    /// How many records were ever given up on.
    pub dead_lettered: u64,
}

/// A subscription's signing secrets: the current one, and during a rotation the previous
/// one until a time (deliveries are signed with both, so receivers can switch).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SigningSecrets {
    /// The secret every delivery is signed with.
    pub current: WebhookSecret,
    /// The secret before the last rotation, and the end of its grace period.
    pub previous: Option<(WebhookSecret, OffsetDateTime)>,
}

impl SigningSecrets {
    /// Only `current`.
    pub fn new(current: WebhookSecret) -> Self {
        Self {
            current,
            previous: None,
        }
    }

    /// The secrets a delivery at `now` is signed with: the current one, and the previous
    /// one while its grace period lasts.
    pub fn at(&self, now: OffsetDateTime) -> Vec<&WebhookSecret> {
        let mut secrets = vec![&self.current];
        if let Some((previous, until)) = &self.previous
            && now < *until
        {
            secrets.push(previous);
        }
        secrets
    }
}

/// A subscription as a store keeps it: the subscription and its secrets.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct StoredSubscription {
    /// The subscription.
    pub subscription: Subscription,
    /// Its signing secrets.
    pub secrets: SigningSecrets,
}

impl Subscription {
    /// Whether `record` is delivered to this subscription (its kind is subscribed and, with
    /// a server filter, it is a round of that server).
    pub fn wants(&self, record: &ChangeRecord) -> bool {
        if !self.events.contains(&record.kind) {
            return false;
        }
        match (&self.server, &record.round) {
            (None, _) => true,
            (Some(server), Some(round)) => &round.server == server,
            (Some(_), None) => false,
        }
    }

    /// The `webhook-id` of the delivery of the record at `cursor`: the same on every retry
    /// and after a notifier's restart, so receivers can drop duplicates.
    pub fn webhook_id(&self, cursor: Cursor) -> String {
        format!("msg_{}_{}", self.id, cursor)
    }
}

/// How far delivery of a subscription got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DeliveryProgress {
    /// Every record up to this cursor was delivered, passed over or given up on.
    pub cursor: Cursor,
    /// Failed attempts to deliver the record after `cursor` (0: none failed yet).
    pub attempts: u32,
    /// When the first of those attempts failed.
    #[serde(with = "m3_types::timestamp::serde::option")]
    pub first_failed_at: Option<OffsetDateTime>,
    /// When the next attempt is due (`None`: at once).
    #[serde(with = "m3_types::timestamp::serde::option")]
    pub next_attempt_at: Option<OffsetDateTime>,
    /// The HTTP status of the last failed attempt (`None`: no answer, or none failed).
    pub last_status: Option<u16>,
    /// Why the last attempt failed (bounded; never a response body in full).
    pub last_error: Option<String>,
    /// How many records were delivered.
    pub delivered: u64,
}

impl DeliveryProgress {
    /// Nothing delivered yet, starting after `cursor`.
    pub fn starting_after(cursor: Cursor) -> Self {
        Self {
            cursor,
            attempts: 0,
            first_failed_at: None,
            next_attempt_at: None,
            last_status: None,
            last_error: None,
            delivered: 0,
        }
    }
}

/// The lease of the notifier delivering a subscription (as executions have): another
/// notifier takes the subscription only once it expires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SubscriptionLease {
    /// The notifier's id.
    pub owner: String,
    /// The lease's token: every report carries it.
    pub token: String,
    /// When the lease expires unless renewed.
    #[serde(with = "m3_types::timestamp::serde")]
    pub expires_at: OffsetDateTime,
}

/// A record given up on after the retry budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DeadLetter {
    /// The record's cursor.
    pub cursor: Cursor,
    /// The record's kind.
    pub kind: ChangeRecordKind,
    /// The `webhook-id` its attempts carried.
    pub webhook_id: String,
    /// How many attempts failed.
    pub attempts: u32,
    /// The HTTP status of the last attempt (`None`: no answer).
    pub last_status: Option<u16>,
    /// Why the last attempt failed.
    pub last_error: String,
    /// When it was given up on.
    #[serde(with = "m3_types::timestamp::serde")]
    pub at: OffsetDateTime,
}
