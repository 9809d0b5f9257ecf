//! Webhook subscriptions and the answer-link key ([`SubscriptionStore`]): shared by every
//! store object on the data, refused without a trace when bad, leased to one notifier at a
//! time, moved only by reports under a live lease.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use m3_types::{ChangeRecordKind, Clock as _, Cursor, Reason};

use super::ExecutionHarness;
use super::support::{CONFLICT, INVALID_ARGUMENT, NOT_FOUND, Step, TTL, advance, create};
use crate::conformance::check::{ensure, expect_error};
use crate::conformance::{CaseFailure, CaseResult};
use crate::subscriptions::{
    ClaimSubscriptions, DeliveryOutcome, DeliveryReport, NewSubscription, StoredSubscription,
    Subscription, SubscriptionEdit, SubscriptionLeaseRef, SubscriptionStore, WebhookFormat,
    WebhookSecret,
};

const RECEIVER: &str = "https://hooks.example.com/m3";

async fn stores(
    h: &ExecutionHarness,
) -> Step<(Arc<dyn SubscriptionStore>, Arc<dyn SubscriptionStore>)> {
    Ok((
        h.store.subscription_store().await?,
        h.peer.subscription_store().await?,
    ))
}

async fn add(store: &dyn SubscriptionStore) -> Step<(Subscription, WebhookSecret)> {
    let secret = WebhookSecret::generate()?;
    let added = store
        .create_subscription(NewSubscription::new(RECEIVER, secret.clone()))
        .await?;
    Ok((added, secret))
}

fn claim(owner: &str) -> ClaimSubscriptions {
    ClaimSubscriptions::new(owner, TTL, 100)
}

fn lease_of(claimed: &StoredSubscription) -> Step<SubscriptionLeaseRef> {
    SubscriptionLeaseRef::of(&claimed.subscription)
        .ok_or_else(|| CaseFailure::new("a claimed subscription has no lease"))
}

/// An added subscription reads back the same from both store objects, starts after the
/// feed's newest record, never shows its secret when serialized, and is removed once.
pub async fn a_subscription_is_added_listed_and_removed_without_its_secret(
    h: &ExecutionHarness,
) -> CaseResult {
    let (store, peer) = stores(h).await?;
    create(h).await?;
    let newest = h.store.read_changes(Cursor::START, 1_000).await?.next;
    let secret = WebhookSecret::generate()?;
    let new = NewSubscription::new(RECEIVER, secret.clone())
        .with_events([
            ChangeRecordKind::RoundPending,
            ChangeRecordKind::RoundPending,
        ])
        .with_server("shipping")
        .with_description("the on-call channel")
        .with_format(WebhookFormat::Slack);
    let added = store.create_subscription(new).await?;
    ensure!(added.id.starts_with("sub_"), "id {} lacks sub_", added.id);
    ensure!(
        added.events == [ChangeRecordKind::RoundPending],
        "events {:?}",
        added.events
    );
    ensure!(
        added.delivery.cursor == newest,
        "starts at {} not {newest}",
        added.delivery.cursor
    );
    ensure!(
        added.enabled && added.lease.is_none(),
        "a new subscription is enabled, unleased"
    );
    let seen = peer.get_subscription(&added.id).await?;
    ensure!(seen.as_ref() == Some(&added), "the peer reads {seen:?}");
    ensure!(
        peer.list_subscriptions().await? == [added.clone()],
        "the peer lists otherwise"
    );
    let shown = serde_json::to_string(&added).map_err(|e| CaseFailure::new(e.to_string()))?;
    let key = secret.expose();
    ensure!(
        !shown.contains(&key[WebhookSecret::PREFIX.len()..]),
        "the secret was serialized"
    );
    ensure!(
        peer.remove_subscription(&added.id).await?,
        "the first removal found nothing"
    );
    ensure!(
        !store.remove_subscription(&added.id).await?,
        "the second removal found one"
    );
    ensure!(
        store.get_subscription(&added.id).await?.is_none(),
        "still there after removal"
    );
    Ok(())
}

/// Bad URLs, no event kind and an empty server filter are refused with their reasons, and
/// nothing is added.
pub async fn bad_subscriptions_are_refused_and_add_nothing(h: &ExecutionHarness) -> CaseResult {
    let (store, _) = stores(h).await?;
    let secret = WebhookSecret::generate()?;
    let refused = [
        ("ftp://hooks.example.com/x", Some(Reason::WebhookUrlScheme)),
        (
            "https://me:pw@hooks.example.com/x",
            Some(Reason::WebhookUrlCredentials),
        ),
        ("http://127.0.0.1:8080/x", Some(Reason::WebhookUrlLoopback)),
        ("http://169.254.169.254/x", Some(Reason::WebhookUrlLoopback)),
    ];
    for (url, reason) in refused {
        let result = store
            .create_subscription(NewSubscription::new(url, secret.clone()))
            .await;
        expect_error(result, INVALID_ARGUMENT, reason)?;
    }
    let no_events = NewSubscription::new(RECEIVER, secret.clone()).with_events([]);
    expect_error(
        store.create_subscription(no_events).await,
        INVALID_ARGUMENT,
        None,
    )?;
    let empty_server = NewSubscription::new(RECEIVER, secret.clone()).with_server(" ");
    expect_error(
        store.create_subscription(empty_server).await,
        INVALID_ARGUMENT,
        None,
    )?;
    ensure!(
        store.list_subscriptions().await?.is_empty(),
        "a refused subscription was added"
    );
    let local = NewSubscription::new("http://127.0.0.1:8080/x", secret).allow_loopback(true);
    ensure!(
        store.create_subscription(local).await?.allow_loopback,
        "loopback not allowed"
    );
    Ok(())
}

/// One notifier at a time holds a subscription; another takes it only once the lease
/// expired, and the first one's reports are refused from then on. Disabled subscriptions
/// are never claimed.
pub async fn one_notifier_holds_a_subscription_until_its_lease_expires(
    h: &ExecutionHarness,
) -> CaseResult {
    let (store, peer) = stores(h).await?;
    let (added, secret) = add(store.as_ref()).await?;
    let first = store.claim_subscriptions(claim("notifier-a")).await?;
    ensure!(
        first.len() == 1,
        "claimed {} subscriptions, not 1",
        first.len()
    );
    let held = &first[0];
    ensure!(
        held.secrets.current == secret,
        "the claim carries another secret"
    );
    let lease = lease_of(held)?;
    ensure!(
        peer.claim_subscriptions(claim("notifier-b"))
            .await?
            .is_empty(),
        "taken while held"
    );
    peer.renew_subscription(&lease, TTL).await?;
    advance(h, TTL + Duration::from_secs(1));
    let late = store.renew_subscription(&lease, TTL).await;
    expect_error(late, CONFLICT, Some(Reason::LeaseExpired))?;
    let second = peer.claim_subscriptions(claim("notifier-b")).await?;
    ensure!(second.len() == 1, "the expired lease was not taken over");
    let delivered = DeliveryOutcome::Delivered {
        through: Cursor::new(added.delivery.cursor.get() + 1),
        delivered: 1,
    };
    let stale = store
        .report_delivery(DeliveryReport::new(lease, delivered))
        .await;
    expect_error(stale, CONFLICT, Some(Reason::LeaseTokenMismatch))?;
    peer.release_subscription(&lease_of(&second[0])?).await?;
    let disable = SubscriptionEdit::Disable {
        reason: "disabled".into(),
    };
    store.edit_subscription(&added.id, disable).await?;
    ensure!(
        store
            .claim_subscriptions(claim("notifier-c"))
            .await?
            .is_empty(),
        "claimed a disabled one"
    );
    Ok(())
}

/// Reports move the cursor only forward: a failure counts and keeps its status, a delivery
/// resets the count, a dead letter is listed with its webhook id, `410 Gone` disables.
pub async fn reports_move_the_cursor_and_keep_failures_and_dead_letters(
    h: &ExecutionHarness,
) -> CaseResult {
    let (store, peer) = stores(h).await?;
    let (added, _) = add(store.as_ref()).await?;
    let start = added.delivery.cursor.get();
    let lease = lease_of(&store.claim_subscriptions(claim("notifier")).await?[0])?;
    let report = |outcome| DeliveryReport::new(lease.clone(), outcome);
    let next_attempt_at = h.clock.now() + Duration::from_secs(5);
    let failed = DeliveryOutcome::Failed {
        cursor: Cursor::new(start + 1),
        status: Some(503),
        error: "HTTP 503".into(),
        next_attempt_at,
    };
    store.report_delivery(report(failed.clone())).await?;
    let twice = peer.report_delivery(report(failed)).await?;
    let progress = &twice.delivery;
    ensure!(
        progress.attempts == 2 && progress.last_status == Some(503),
        "{progress:?}"
    );
    ensure!(
        progress.next_attempt_at == Some(next_attempt_at),
        "{progress:?}"
    );
    let delivered = DeliveryOutcome::Delivered {
        through: Cursor::new(start + 2),
        delivered: 1,
    };
    let moved = store.report_delivery(report(delivered.clone())).await?;
    ensure!(
        moved.delivery.cursor.get() == start + 2 && moved.delivery.attempts == 0,
        "{:?}",
        moved.delivery
    );
    let again = store.report_delivery(report(delivered)).await;
    expect_error(again, INVALID_ARGUMENT, Some(Reason::InvalidCursor))?;
    let dead = DeliveryOutcome::DeadLettered {
        cursor: Cursor::new(start + 3),
        kind: ChangeRecordKind::RoundPending,
        status: Some(500),
        error: "HTTP 500".into(),
    };
    let lettered = store.report_delivery(report(dead)).await?;
    let letter = lettered
        .dead_letters
        .last()
        .ok_or_else(|| CaseFailure::new("no dead letter"))?;
    ensure!(
        letter.cursor.get() == start + 3 && letter.last_status == Some(500),
        "{letter:?}"
    );
    ensure!(
        letter.webhook_id == added.webhook_id(letter.cursor),
        "webhook id {}",
        letter.webhook_id
    );
    ensure!(
        lettered.delivery.cursor.get() == start + 3 && lettered.dead_lettered == 1,
        "{lettered:?}"
    );
    let gone = store.report_delivery(report(DeliveryOutcome::Gone)).await?;
    ensure!(
        !gone.enabled && gone.disabled_reason.as_deref() == Some("gone"),
        "{gone:?}"
    );
    ensure!(gone.lease.is_none(), "a gone subscription keeps its lease");
    Ok(())
}

/// Enabling, disabling and rotating the secret: the rotated subscription is signed with
/// both secrets until the grace period ends; an unknown id is `not_found`.
pub async fn edits_enable_disable_and_rotate_the_secret(h: &ExecutionHarness) -> CaseResult {
    let (store, peer) = stores(h).await?;
    let (added, old) = add(store.as_ref()).await?;
    let new = WebhookSecret::generate()?;
    let until = h.clock.now() + Duration::from_secs(60);
    let rotate = SubscriptionEdit::RotateSecret {
        secret: new.clone(),
        keep_previous_until: until,
    };
    store.edit_subscription(&added.id, rotate).await?;
    let claimed = peer.claim_subscriptions(claim("notifier")).await?;
    let secrets = &claimed
        .first()
        .ok_or_else(|| CaseFailure::new("nothing claimed"))?
        .secrets;
    let now = h.clock.now();
    ensure!(
        secrets.at(now) == [&new, &old],
        "not signed with both during the grace period"
    );
    ensure!(
        secrets.at(until) == [&new],
        "the old secret outlived its grace period"
    );
    let disable = SubscriptionEdit::Disable {
        reason: "disabled".into(),
    };
    let disabled = peer.edit_subscription(&added.id, disable).await?;
    ensure!(
        !disabled.enabled && disabled.lease.is_none(),
        "{disabled:?}"
    );
    let enabled = store
        .edit_subscription(&added.id, SubscriptionEdit::Enable)
        .await?;
    ensure!(
        enabled.enabled && enabled.disabled_reason.is_none(),
        "{enabled:?}"
    );
    let missing = store
        .edit_subscription("sub_missing", SubscriptionEdit::Enable)
        .await;
    expect_error(missing, NOT_FOUND, None)?;
    Ok(())
}

/// Notifiers claiming at once through both store objects never share a subscription.
pub async fn racing_claimers_never_share_a_subscription(h: &ExecutionHarness) -> CaseResult {
    let (store, peer) = stores(h).await?;
    let mut ids = BTreeSet::new();
    for _ in 0..6 {
        ids.insert(add(store.as_ref()).await?.0.id);
    }
    let claims = (0..8).map(|n| {
        let on = if n % 2 == 0 {
            Arc::clone(&store)
        } else {
            Arc::clone(&peer)
        };
        async move {
            on.claim_subscriptions(claim(&format!("notifier-{n}")))
                .await
        }
    });
    let mut claimed = Vec::new();
    for result in futures_util::future::join_all(claims).await {
        claimed.extend(result?.into_iter().map(|c| c.subscription.id));
    }
    let distinct: BTreeSet<_> = claimed.iter().cloned().collect();
    ensure!(
        distinct.len() == claimed.len(),
        "a subscription was claimed twice: {claimed:?}"
    );
    ensure!(distinct == ids, "claimed {distinct:?} of {ids:?}");
    Ok(())
}

/// The answer-link key is made once (concurrent first calls agree, both objects read it),
/// and rotating it replaces it everywhere.
pub async fn the_link_key_is_made_once_and_rotation_replaces_it(
    h: &ExecutionHarness,
) -> CaseResult {
    let (store, peer) = stores(h).await?;
    let (a, b) = tokio::join!(store.link_key(), peer.link_key());
    let (a, b) = (a?, b?);
    ensure!(a == b, "concurrent first calls made two keys");
    ensure!(
        peer.link_key().await? == a,
        "the key changed without a rotation"
    );
    let rotated = store.rotate_link_key().await?;
    ensure!(rotated != a, "rotation kept the key");
    ensure!(
        peer.link_key().await? == rotated,
        "the peer reads the old key"
    );
    Ok(())
}
