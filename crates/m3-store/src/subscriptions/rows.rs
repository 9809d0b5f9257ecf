//! The backend toolkit for subscriptions: a backend that can keep text rows by id with a
//! compare-and-set ([`SubscriptionRows`]) gets the whole [`SubscriptionStore`] from
//! [`RowSubscriptionStore`], with every decision made by [`super::rules`]. The
//! shipped backends are built this way; a custom backend can be too.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use m3_types::{Clock, Cursor, Error, Result};

use super::contract::SubscriptionStore;
use super::record::{StoredSubscription, Subscription};
use super::request::{
    ClaimSubscriptions, DeliveryReport, NewSubscription, SubscriptionEdit, SubscriptionLeaseRef,
};
use super::rules;
use super::secret::LinkKey;

/// How often a write decides again when another writer changed the row in between.
const WRITE_ATTEMPTS: usize = 16;

/// What a backend does for subscriptions: keep one text row per subscription (the text
/// [`rules::encode`] writes) and the store's answer-link key. Nothing here decides.
#[async_trait]
pub trait SubscriptionRows: std::fmt::Debug + Send + Sync + 'static {
    /// The store's clock (leases, timestamps).
    fn clock(&self) -> Arc<dyn Clock>;

    /// The newest cursor of the store's change feed (a new subscription starts after it).
    async fn newest_cursor(&self) -> Result<Cursor>;

    /// The row of subscription `id`.
    async fn load(&self, id: &str) -> Result<Option<String>>;

    /// Every row, oldest subscription first.
    async fn load_all(&self) -> Result<Vec<String>>;

    /// Adds the row of a new subscription (`id` is new: a ULID).
    async fn insert(&self, id: &str, text: &str) -> Result<()>;

    /// Replaces the row of `id` by `next` if it still holds `previous`; whether it did.
    async fn replace(&self, id: &str, previous: &str, next: &str) -> Result<bool>;

    /// Removes the row of `id`; whether there was one.
    async fn delete(&self, id: &str) -> Result<bool>;

    /// The answer-link key, if one was made.
    async fn load_link_key(&self) -> Result<Option<LinkKey>>;

    /// Keeps `key` unless a key exists; the key kept (one of concurrent first calls wins).
    async fn insert_link_key(&self, key: &LinkKey) -> Result<LinkKey>;

    /// Replaces the key by `key` (whatever it was).
    async fn replace_link_key(&self, key: &LinkKey) -> Result<()>;
}

/// The [`SubscriptionStore`] over any [`SubscriptionRows`].
#[derive(Debug, Clone)]
pub struct RowSubscriptionStore<R> {
    rows: R,
}

impl<R: SubscriptionRows> RowSubscriptionStore<R> {
    /// The store over `rows`.
    pub fn new(rows: R) -> Self {
        Self { rows }
    }

    /// Applies `step` to the stored subscription `id` and writes what it returns by
    /// compare-and-set, deciding again when another writer came first. `Ok(None)` from
    /// `step` writes nothing.
    async fn update(
        &self,
        id: &str,
        step: impl Fn(&StoredSubscription) -> Result<Option<StoredSubscription>> + Send + Sync,
    ) -> Result<Option<StoredSubscription>> {
        for _ in 0..WRITE_ATTEMPTS {
            let text = self
                .rows
                .load(id)
                .await?
                .ok_or_else(|| rules::missing(id))?;
            let current = rules::decode(&text)?;
            let Some(next) = step(&current)? else {
                return Ok(None);
            };
            if self.rows.replace(id, &text, &rules::encode(&next)?).await? {
                return Ok(Some(next));
            }
        }
        Err(Error::storage(
            "the webhook subscription kept changing under concurrent writers; try again",
        )
        .with_detail("id", id.to_owned()))
    }

    fn now(&self) -> time::OffsetDateTime {
        self.rows.clock().now()
    }
}

#[async_trait]
impl<R: SubscriptionRows> SubscriptionStore for RowSubscriptionStore<R> {
    async fn create_subscription(&self, new: NewSubscription) -> Result<Subscription> {
        let newest = self.rows.newest_cursor().await?;
        let stored = rules::prepare(new, self.now(), newest)?;
        let id = stored.subscription.id.clone();
        self.rows.insert(&id, &rules::encode(&stored)?).await?;
        Ok(stored.subscription)
    }

    async fn get_subscription(&self, id: &str) -> Result<Option<Subscription>> {
        let Some(text) = self.rows.load(id).await? else {
            return Ok(None);
        };
        Ok(Some(rules::decode(&text)?.subscription))
    }

    async fn list_subscriptions(&self) -> Result<Vec<Subscription>> {
        let rows = self.rows.load_all().await?;
        rows.iter()
            .map(|text| rules::decode(text).map(|stored| stored.subscription))
            .collect()
    }

    async fn edit_subscription(&self, id: &str, edit: SubscriptionEdit) -> Result<Subscription> {
        let now = self.now();
        let written = self.update(id, |current| Ok(Some(rules::edit(current, &edit, now))));
        Ok(written
            .await?
            .ok_or_else(|| rules::missing(id))?
            .subscription)
    }

    async fn remove_subscription(&self, id: &str) -> Result<bool> {
        self.rows.delete(id).await
    }

    async fn claim_subscriptions(
        &self,
        request: ClaimSubscriptions,
    ) -> Result<Vec<StoredSubscription>> {
        let mut claimed = Vec::new();
        for text in self.rows.load_all().await? {
            if claimed.len() >= request.limit {
                break;
            }
            let current = rules::decode(&text)?;
            let id = current.subscription.id.clone();
            let now = self.now();
            let Some(next) = rules::claim(&current, &request, now)? else {
                continue;
            };
            // A lost race means another notifier took it (or its owner changed it): skip.
            if self
                .rows
                .replace(&id, &text, &rules::encode(&next)?)
                .await?
            {
                claimed.push(next);
            }
        }
        Ok(claimed)
    }

    async fn renew_subscription(
        &self,
        lease: &SubscriptionLeaseRef,
        duration: Duration,
    ) -> Result<Subscription> {
        let id = &lease.subscription_id;
        let written = self.update(id, |current| {
            rules::renew(current, lease, duration, self.now()).map(Some)
        });
        Ok(written
            .await?
            .ok_or_else(|| rules::missing(id))?
            .subscription)
    }

    async fn report_delivery(&self, report: DeliveryReport) -> Result<Subscription> {
        let id = report.lease.subscription_id.clone();
        let written = self.update(&id, |current| {
            rules::report(current, &report, self.now()).map(Some)
        });
        Ok(written
            .await?
            .ok_or_else(|| rules::missing(&id))?
            .subscription)
    }

    async fn release_subscription(&self, lease: &SubscriptionLeaseRef) -> Result<()> {
        let released = self
            .update(&lease.subscription_id, |current| {
                Ok(rules::release(current, lease))
            })
            .await;
        match released {
            Ok(_) => Ok(()),
            // Removed meanwhile: nothing left to release.
            Err(error) if error.is_not_found() => Ok(()),
            Err(error) => Err(error),
        }
    }

    async fn link_key(&self) -> Result<LinkKey> {
        if let Some(key) = self.rows.load_link_key().await? {
            return Ok(key);
        }
        self.rows
            .insert_link_key(&LinkKey::generate(self.now())?)
            .await
    }

    async fn rotate_link_key(&self) -> Result<LinkKey> {
        let key = LinkKey::generate(self.now())?;
        self.rows.replace_link_key(&key).await?;
        Ok(key)
    }
}
