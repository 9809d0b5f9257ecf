//! The arguments of [`SubscriptionStore`](super::SubscriptionStore)'s operations.

use std::time::Duration;

use m3_types::{ChangeRecordKind, Cursor};
use time::OffsetDateTime;

use super::record::WebhookFormat;
use super::secret::WebhookSecret;

/// A subscription to add: the receiver's URL and the secret deliveries are signed with,
/// and what to deliver (by default every record kind, every server, the standard format).
#[derive(Debug, Clone)]
pub struct NewSubscription {
    pub(crate) url: String,
    pub(crate) secret: WebhookSecret,
    pub(crate) events: Vec<ChangeRecordKind>,
    pub(crate) server: Option<String>,
    pub(crate) description: String,
    pub(crate) format: WebhookFormat,
    pub(crate) allow_loopback: bool,
}

impl NewSubscription {
    /// Deliveries of every record kind to `url`, signed with `secret`.
    pub fn new(url: impl Into<String>, secret: WebhookSecret) -> Self {
        Self {
            url: url.into(),
            secret,
            events: ChangeRecordKind::ALL.to_vec(),
            server: None,
            description: String::new(),
            format: WebhookFormat::Standard,
            allow_loopback: false,
        }
    }

    /// Only these record kinds (duplicates are dropped; an empty list is refused).
    #[must_use]
    pub fn with_events(mut self, events: impl IntoIterator<Item = ChangeRecordKind>) -> Self {
        self.events = events.into_iter().collect();
        self
    }

    /// Only rounds of this MCP server.
    #[must_use]
    pub fn with_server(mut self, server: impl Into<String>) -> Self {
        self.server = Some(server.into());
        self
    }

    /// What the subscription is for.
    #[must_use]
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Deliveries written in `format`.
    #[must_use]
    pub fn with_format(mut self, format: WebhookFormat) -> Self {
        self.format = format;
        self
    }

    /// Whether the URL may point at a loopback or link-local address (a receiver on the
    /// same machine; refused by default).
    #[must_use]
    pub fn allow_loopback(mut self, allow: bool) -> Self {
        self.allow_loopback = allow;
        self
    }
}

/// A change of a subscription by its owner.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum SubscriptionEdit {
    /// Deliver again: the next attempt is due at once.
    Enable,
    /// Stop delivering (`reason` is kept: `disabled` by request, `gone` for a 410).
    Disable {
        /// Why.
        reason: String,
    },
    /// Sign with `secret` from now on, and with the previous secret too until
    /// `keep_previous_until` (receivers switch meanwhile).
    RotateSecret {
        /// The new secret.
        secret: WebhookSecret,
        /// The end of the grace period of the previous one.
        keep_previous_until: OffsetDateTime,
    },
}

/// A notifier's request for the subscriptions it may deliver: every enabled one whose
/// lease is free or expired, up to `limit`, leased to `owner` for `lease_duration`.
#[derive(Debug, Clone)]
pub struct ClaimSubscriptions {
    pub(crate) owner: String,
    pub(crate) lease_duration: Duration,
    pub(crate) limit: usize,
}

impl ClaimSubscriptions {
    /// Up to `limit` subscriptions for `owner`, each for `lease_duration`.
    pub fn new(owner: impl Into<String>, lease_duration: Duration, limit: usize) -> Self {
        Self {
            owner: owner.into(),
            lease_duration,
            limit,
        }
    }
}

/// A held subscription lease, as every report names it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SubscriptionLeaseRef {
    /// The subscription.
    pub subscription_id: String,
    /// The lease's token.
    pub token: String,
}

impl SubscriptionLeaseRef {
    /// The lease `token` on subscription `subscription_id`.
    pub fn new(subscription_id: impl Into<String>, token: impl Into<String>) -> Self {
        Self {
            subscription_id: subscription_id.into(),
            token: token.into(),
        }
    }

    /// The lease `subscription` holds now, if any.
    pub fn of(subscription: &super::Subscription) -> Option<Self> {
        subscription.lease.as_ref().map(|lease| Self {
            subscription_id: subscription.id.clone(),
            token: lease.token.clone(),
        })
    }
}

/// What happened to the delivery of the record after a subscription's cursor.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum DeliveryOutcome {
    /// Every record up to `through` is done (delivered with a 2xx, or not wanted): the
    /// cursor moves there and the attempt count starts again.
    Delivered {
        /// The newest record done.
        through: Cursor,
        /// How many of them were delivered (the rest were passed over).
        delivered: u64,
    },
    /// The record at `cursor` failed; the next attempt is due at `next_attempt_at`.
    Failed {
        /// The record's cursor.
        cursor: Cursor,
        /// The receiver's status (`None`: no answer: refused, timed out).
        status: Option<u16>,
        /// Why (bounded by the store).
        error: String,
        /// When to try again.
        next_attempt_at: OffsetDateTime,
    },
    /// The record at `cursor` is given up on after the retry budget: listed as a dead
    /// letter, and the cursor moves past it.
    DeadLettered {
        /// The record's cursor.
        cursor: Cursor,
        /// The record's kind.
        kind: ChangeRecordKind,
        /// The last attempt's status.
        status: Option<u16>,
        /// Why the last attempt failed.
        error: String,
    },
    /// The receiver answered `410 Gone`: the subscription is disabled (reason `gone`).
    Gone,
}

/// A notifier's report on a subscription it holds.
#[derive(Debug, Clone)]
pub struct DeliveryReport {
    pub(crate) lease: SubscriptionLeaseRef,
    pub(crate) outcome: DeliveryOutcome,
}

impl DeliveryReport {
    /// `outcome`, reported under `lease`.
    pub fn new(lease: SubscriptionLeaseRef, outcome: DeliveryOutcome) -> Self {
        Self { lease, outcome }
    }
}
