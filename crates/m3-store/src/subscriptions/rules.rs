//! Every decision about a subscription, made the same way by every backend: what a new
//! subscription may point at, when a notifier may claim one, what a report does, and how a
//! stored subscription is written. A backend only reads and writes the text
//! [`encode`] makes, comparing [`Subscription::version`] (see [`super::rows`]).

use std::net::IpAddr;

use m3_types::{Error, Reason, Result, new_id};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use url::{Host, Url};

use super::record::{
    DeadLetter, DeliveryProgress, MAX_DEAD_LETTERS, SigningSecrets, StoredSubscription,
    Subscription, SubscriptionLease,
};
use super::request::{
    ClaimSubscriptions, DeliveryOutcome, DeliveryReport, NewSubscription, SubscriptionEdit,
    SubscriptionLeaseRef,
};
use super::secret::WebhookSecret;
use crate::managed_input::rules::new_lease_token;

/// The longest description kept, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 500;

/// The longest failure text kept per attempt, in characters.
pub const MAX_ERROR_CHARS: usize = 300;

/// The longest URL accepted, in bytes.
pub const MAX_URL_BYTES: usize = 2048;

/// Checks a receiver's URL: `http` or `https`, a host, no user name or password, and
/// (unless `allow_loopback`) no loopback, link-local or unspecified address (`localhost`
/// names included). Names are not resolved here; the notifier checks the addresses it
/// connects to the same way.
///
/// # Errors
/// `invalid_argument` with reason `webhook_url_scheme`, `webhook_url_credentials` or
/// `webhook_url_loopback`.
pub fn check_url(url: &str, allow_loopback: bool) -> Result<Url> {
    let refused = |reason: Reason, why: &str| {
        Error::model_validation(format!("the webhook URL is refused: {why}")).with_reason(reason)
    };
    if url.len() > MAX_URL_BYTES {
        return Err(refused(
            Reason::WebhookUrlScheme,
            "it is longer than 2048 bytes",
        ));
    }
    let parsed = Url::parse(url)
        .map_err(|_| refused(Reason::WebhookUrlScheme, "it is not an absolute URL"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(refused(
            Reason::WebhookUrlScheme,
            "only http and https are delivered to",
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(refused(
            Reason::WebhookUrlCredentials,
            "it carries a user name or password (put credentials in the receiver's checks of \
             the signature instead)",
        ));
    }
    let local = match parsed.host() {
        None => return Err(refused(Reason::WebhookUrlScheme, "it has no host")),
        Some(Host::Ipv4(ip)) => is_local_address(IpAddr::V4(ip)),
        Some(Host::Ipv6(ip)) => is_local_address(IpAddr::V6(ip)),
        Some(Host::Domain(name)) => is_local_name(name),
    };
    if local && !allow_loopback {
        return Err(refused(
            Reason::WebhookUrlLoopback,
            "it points at a loopback or link-local address (allow it with --allow-loopback)",
        ));
    }
    Ok(parsed)
}

/// Whether `ip` is loopback, link-local or unspecified (IPv4-mapped IPv6 included).
pub fn is_local_address(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_link_local() || v4.is_unspecified(),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_local_address(IpAddr::V4(v4));
            }
            // fe80::/10 is link-local unicast.
            v6.is_loopback() || v6.is_unspecified() || (v6.segments()[0] & 0xffc0) == 0xfe80
        }
    }
}

fn is_local_name(name: &str) -> bool {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost" || name.ends_with(".localhost")
}

/// The subscription `new` describes, with id `sub_<ULID>`, created at `now`, delivering
/// what is appended after `newest` (the feed's newest cursor: nothing from before).
///
/// # Errors
/// `invalid_argument` for a refused URL (see [`check_url`]), no event kind, an empty
/// server name or a description over [`MAX_DESCRIPTION_CHARS`].
pub fn prepare(
    new: NewSubscription,
    now: OffsetDateTime,
    newest: m3_types::Cursor,
) -> Result<StoredSubscription> {
    let url = check_url(&new.url, new.allow_loopback)?;
    let mut events = Vec::new();
    for kind in new.events {
        if !events.contains(&kind) {
            events.push(kind);
        }
    }
    if events.is_empty() {
        return Err(Error::model_validation(
            "a subscription needs at least one event kind",
        ));
    }
    if new
        .server
        .as_deref()
        .is_some_and(|server| server.trim().is_empty())
    {
        return Err(Error::model_validation("the server filter is empty"));
    }
    if new.description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(Error::model_validation(format!(
            "the description is longer than {MAX_DESCRIPTION_CHARS} characters"
        )));
    }
    let subscription = Subscription {
        id: format!("sub_{}", new_id()),
        url: url.to_string(),
        events,
        server: new.server,
        description: new.description,
        format: new.format,
        allow_loopback: new.allow_loopback,
        enabled: true,
        disabled_reason: None,
        created_at: now,
        updated_at: now,
        version: 1,
        delivery: DeliveryProgress::starting_after(newest),
        lease: None,
        dead_letters: Vec::new(),
        dead_lettered: 0,
    };
    Ok(StoredSubscription {
        subscription,
        secrets: SigningSecrets::new(new.secret),
    })
}

/// The subscription leased to `claim.owner` at `now`, or `None` if it is disabled or its
/// lease is held and not expired.
///
/// # Errors
/// `storage_error` if no lease token can be made.
pub fn claim(
    stored: &StoredSubscription,
    claim: &ClaimSubscriptions,
    now: OffsetDateTime,
) -> Result<Option<StoredSubscription>> {
    let current = &stored.subscription;
    let held = current
        .lease
        .as_ref()
        .is_some_and(|lease| lease.expires_at > now);
    if !current.enabled || held {
        return Ok(None);
    }
    let mut next = stored.clone();
    next.subscription.lease = Some(SubscriptionLease {
        owner: claim.owner.clone(),
        token: new_lease_token()?,
        expires_at: now + claim.lease_duration,
    });
    touch(&mut next.subscription, now);
    Ok(Some(next))
}

/// The subscription with `lease` extended to `now + duration`.
///
/// # Errors
/// `managed_input_conflict` (reasons `lease_token_mismatch`, `lease_expired`) unless
/// `lease` is held and live at `now`.
pub fn renew(
    stored: &StoredSubscription,
    lease: &SubscriptionLeaseRef,
    duration: std::time::Duration,
    now: OffsetDateTime,
) -> Result<StoredSubscription> {
    require_lease(&stored.subscription, lease, now)?;
    let mut next = stored.clone();
    if let Some(held) = next.subscription.lease.as_mut() {
        held.expires_at = now + duration;
    }
    touch(&mut next.subscription, now);
    Ok(next)
}

/// The subscription without `lease` (`None`: it is not held under it any more; nothing
/// to do).
pub fn release(
    stored: &StoredSubscription,
    lease: &SubscriptionLeaseRef,
) -> Option<StoredSubscription> {
    let holds = stored
        .subscription
        .lease
        .as_ref()
        .is_some_and(|held| held.token == lease.token);
    holds.then(|| {
        let mut next = stored.clone();
        next.subscription.lease = None;
        next.subscription.version += 1;
        next
    })
}

/// The subscription after `report`, made at `now` under a live lease.
///
/// # Errors
/// `managed_input_conflict` (reasons `lease_token_mismatch`, `lease_expired`) unless the
/// lease is held and live; `invalid_argument` for a cursor that is not after the
/// subscription's.
pub fn report(
    stored: &StoredSubscription,
    report: &DeliveryReport,
    now: OffsetDateTime,
) -> Result<StoredSubscription> {
    let current = &stored.subscription;
    require_lease(current, &report.lease, now)?;
    let mut next = stored.clone();
    let subscription = &mut next.subscription;
    match &report.outcome {
        DeliveryOutcome::Delivered { through, delivered } => {
            require_after(current, *through)?;
            let total = subscription.delivery.delivered + delivered;
            subscription.delivery = DeliveryProgress::starting_after(*through);
            subscription.delivery.delivered = total;
        }
        DeliveryOutcome::Failed {
            cursor,
            status,
            error,
            next_attempt_at,
        } => {
            require_after(current, *cursor)?;
            let progress = &mut subscription.delivery;
            progress.attempts = progress.attempts.saturating_add(1);
            progress.first_failed_at.get_or_insert(now);
            progress.next_attempt_at = Some(*next_attempt_at);
            progress.last_status = *status;
            progress.last_error = Some(bounded(error));
        }
        DeliveryOutcome::DeadLettered {
            cursor,
            kind,
            status,
            error,
        } => {
            require_after(current, *cursor)?;
            let letter = DeadLetter {
                cursor: *cursor,
                kind: *kind,
                webhook_id: current.webhook_id(*cursor),
                attempts: current.delivery.attempts.saturating_add(1),
                last_status: *status,
                last_error: bounded(error),
                at: now,
            };
            subscription.dead_letters.push(letter);
            let excess = subscription
                .dead_letters
                .len()
                .saturating_sub(MAX_DEAD_LETTERS);
            subscription.dead_letters.drain(..excess);
            subscription.dead_lettered += 1;
            let delivered = subscription.delivery.delivered;
            subscription.delivery = DeliveryProgress::starting_after(*cursor);
            subscription.delivery.delivered = delivered;
        }
        DeliveryOutcome::Gone => {
            subscription.enabled = false;
            subscription.disabled_reason = Some("gone".into());
            subscription.lease = None;
        }
    }
    touch(subscription, now);
    Ok(next)
}

/// The subscription after its owner's `edit` at `now`.
pub fn edit(
    stored: &StoredSubscription,
    edit: &SubscriptionEdit,
    now: OffsetDateTime,
) -> StoredSubscription {
    let mut next = stored.clone();
    match edit {
        SubscriptionEdit::Enable => {
            let subscription = &mut next.subscription;
            subscription.enabled = true;
            subscription.disabled_reason = None;
            subscription.delivery.next_attempt_at = None;
        }
        SubscriptionEdit::Disable { reason } => {
            next.subscription.enabled = false;
            next.subscription.disabled_reason = Some(bounded(reason));
            next.subscription.lease = None;
        }
        SubscriptionEdit::RotateSecret {
            secret,
            keep_previous_until,
        } => {
            let previous = std::mem::replace(&mut next.secrets.current, secret.clone());
            next.secrets.previous = Some((previous, *keep_previous_until));
        }
    }
    touch(&mut next.subscription, now);
    next
}

/// `not_found` for the subscription `id`.
pub fn missing(id: &str) -> Error {
    Error::not_found(format!("no webhook subscription '{}'", shown(id)))
        .with_detail("id", shown(id))
}

fn require_lease(
    current: &Subscription,
    lease: &SubscriptionLeaseRef,
    now: OffsetDateTime,
) -> Result<()> {
    let Some(held) = current
        .lease
        .as_ref()
        .filter(|held| held.token == lease.token)
    else {
        return Err(Error::managed_input_conflict(
            "this notifier no longer holds the subscription's lease",
        )
        .with_reason(Reason::LeaseTokenMismatch)
        .with_detail("id", current.id.clone()));
    };
    if held.expires_at <= now {
        return Err(
            Error::managed_input_conflict("the subscription's lease expired")
                .with_reason(Reason::LeaseExpired)
                .with_detail("id", current.id.clone()),
        );
    }
    Ok(())
}

fn require_after(current: &Subscription, cursor: m3_types::Cursor) -> Result<()> {
    if cursor > current.delivery.cursor {
        Ok(())
    } else {
        Err(Error::model_validation(format!(
            "cursor {cursor} is not after the subscription's cursor {}",
            current.delivery.cursor
        ))
        .with_reason(Reason::InvalidCursor))
    }
}

fn touch(subscription: &mut Subscription, now: OffsetDateTime) {
    subscription.updated_at = now;
    subscription.version += 1;
}

fn bounded(text: &str) -> String {
    text.chars().take(MAX_ERROR_CHARS).collect()
}

fn shown(id: &str) -> String {
    id.chars().take(80).collect()
}

/// The stored form of a subscription's secrets.
#[derive(Serialize, Deserialize)]
struct StoredSecrets {
    current: String,
    previous: Option<String>,
    #[serde(with = "m3_types::timestamp::serde::option")]
    previous_until: Option<OffsetDateTime>,
}

/// The stored form: the subscription and its secrets, one JSON text.
#[derive(Serialize, Deserialize)]
struct Stored {
    subscription: Subscription,
    secrets: StoredSecrets,
}

/// `stored` as the text a backend keeps (secrets included: keep it where only the store
/// reads).
///
/// # Errors
/// `storage_error` if it cannot be encoded.
pub fn encode(stored: &StoredSubscription) -> Result<String> {
    let (previous, previous_until) = match &stored.secrets.previous {
        Some((secret, until)) => (Some(secret.expose()), Some(*until)),
        None => (None, None),
    };
    let text = Stored {
        subscription: stored.subscription.clone(),
        secrets: StoredSecrets {
            current: stored.secrets.current.expose(),
            previous,
            previous_until,
        },
    };
    serde_json::to_string(&text)
        .map_err(|e| Error::storage(format!("cannot encode the subscription: {e}")))
}

/// The subscription `text` ([`encode`]) holds.
///
/// # Errors
/// `storage_error` (reason `stored_record_invalid`) for text [`encode`] did not write.
pub fn decode(text: &str) -> Result<StoredSubscription> {
    let invalid = || {
        Error::storage("a stored webhook subscription is invalid")
            .with_reason(Reason::StoredRecordInvalid)
    };
    let stored: Stored = serde_json::from_str(text).map_err(|_| invalid())?;
    let current = WebhookSecret::parse(&stored.secrets.current).map_err(|_| invalid())?;
    let previous = match (stored.secrets.previous, stored.secrets.previous_until) {
        (Some(secret), Some(until)) => {
            Some((WebhookSecret::parse(&secret).map_err(|_| invalid())?, until))
        }
        _ => None,
    };
    Ok(StoredSubscription {
        subscription: stored.subscription,
        secrets: SigningSecrets { current, previous },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_refused_with_their_reason() {
        let cases = [
            ("ftp://example.com/x", Reason::WebhookUrlScheme),
            ("not a url", Reason::WebhookUrlScheme),
            (
                "https://user:pw@example.com/x",
                Reason::WebhookUrlCredentials,
            ),
            ("https://user@example.com/x", Reason::WebhookUrlCredentials),
            ("http://127.0.0.1:9/x", Reason::WebhookUrlLoopback),
            ("http://[::1]/x", Reason::WebhookUrlLoopback),
            ("http://[::ffff:127.0.0.1]/x", Reason::WebhookUrlLoopback),
            ("http://169.254.169.254/latest", Reason::WebhookUrlLoopback),
            ("http://[fe80::1]/x", Reason::WebhookUrlLoopback),
            ("http://0.0.0.0/x", Reason::WebhookUrlLoopback),
            ("http://LocalHost./x", Reason::WebhookUrlLoopback),
            ("http://a.localhost/x", Reason::WebhookUrlLoopback),
        ];
        for (url, reason) in cases {
            let error = check_url(url, false).unwrap_err();
            assert_eq!(error.code(), "invalid_argument", "{url}");
            assert_eq!(error.reason(), Some(reason), "{url}");
        }
        assert!(check_url("http://127.0.0.1:9/x", true).is_ok());
        assert!(check_url("https://hooks.example.com/m3", false).is_ok());
        assert!(check_url("https://10.0.0.5/m3", false).is_ok());
    }
}
