//! [`SubscriptionStore`]: the contract every backend's subscriptions meet.

use std::time::Duration;

use async_trait::async_trait;
use m3_types::Result;

use super::record::{StoredSubscription, Subscription};
use super::request::{
    ClaimSubscriptions, DeliveryReport, NewSubscription, SubscriptionEdit, SubscriptionLeaseRef,
};
use super::secret::LinkKey;

/// The store's webhook subscriptions and answer-link key
/// ([`ExecutionStore::subscription_store`](crate::ExecutionStore::subscription_store)).
#[async_trait]
pub trait SubscriptionStore: std::fmt::Debug + Send + Sync + 'static {
    /// Adds a subscription that delivers what the feed appends from now on.
    ///
    /// # Errors
    /// `invalid_argument` for a refused URL (reasons `webhook_url_scheme`,
    /// `webhook_url_credentials`, `webhook_url_loopback`), no event kind or a bad filter;
    /// nothing is added then.
    async fn create_subscription(&self, new: NewSubscription) -> Result<Subscription>;

    /// The subscription `id` (without its secrets).
    async fn get_subscription(&self, id: &str) -> Result<Option<Subscription>>;

    /// Every subscription, oldest first.
    async fn list_subscriptions(&self) -> Result<Vec<Subscription>>;

    /// Enables, disables or rotates the secret of subscription `id`.
    ///
    /// # Errors
    /// `not_found` for an unknown id.
    async fn edit_subscription(&self, id: &str, edit: SubscriptionEdit) -> Result<Subscription>;

    /// Removes subscription `id` (its dead letters too); whether it existed.
    async fn remove_subscription(&self, id: &str) -> Result<bool>;

    /// Leases the enabled subscriptions whose lease is free or expired to the notifier
    /// `request` names, with their secrets. Two notifiers never hold one subscription.
    async fn claim_subscriptions(
        &self,
        request: ClaimSubscriptions,
    ) -> Result<Vec<StoredSubscription>>;

    /// Extends a held lease by `duration` from now.
    ///
    /// # Errors
    /// `managed_input_conflict` (reasons `lease_token_mismatch`, `lease_expired`) when the
    /// lease is no longer held; `not_found` when the subscription was removed.
    async fn renew_subscription(
        &self,
        lease: &SubscriptionLeaseRef,
        duration: Duration,
    ) -> Result<Subscription>;

    /// Records what happened to a delivery, under a held lease.
    ///
    /// # Errors
    /// As [`SubscriptionStore::renew_subscription`]; `invalid_argument` (reason
    /// `invalid_cursor`) for a cursor not after the subscription's.
    async fn report_delivery(&self, report: DeliveryReport) -> Result<Subscription>;

    /// Gives a held lease back (nothing happens if it is not held any more).
    async fn release_subscription(&self, lease: &SubscriptionLeaseRef) -> Result<()>;

    /// The key that signs answer links, made on first use.
    async fn link_key(&self) -> Result<LinkKey>;

    /// Replaces the answer-link key: every link signed with the old one stops working.
    async fn rotate_link_key(&self) -> Result<LinkKey>;
}
