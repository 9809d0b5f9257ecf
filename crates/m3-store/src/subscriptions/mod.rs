//! Webhook subscriptions: who is told about the change feed's records, kept in the store so
//! that every process on it shares them, and how far each was told.
//!
//! A notifier (`m3 notify`, `m3_kit::notify`) claims subscriptions with a lease
//! ([`SubscriptionStore::claim_subscriptions`]), reads the feed after each one's durable
//! cursor, POSTs the records it wants, and reports what happened
//! ([`SubscriptionStore::report_delivery`]): the cursor moves only after a 2xx, so each
//! record is delivered at least once. The store also keeps the key that signs answer links
//! ([`SubscriptionStore::link_key`]).
//!
//! Every decision is in [`rules`]; [`rows`] builds the whole store from text rows with a
//! compare-and-set, which is how the shipped backends (and `docs/custom-backend.md`) do it.

mod contract;
mod record;
mod request;
pub mod rows;
pub mod rules;
mod secret;

pub use contract::SubscriptionStore;
pub use record::{
    DeadLetter, DeliveryProgress, MAX_DEAD_LETTERS, SigningSecrets, StoredSubscription,
    Subscription, SubscriptionLease, WebhookFormat,
};
pub use request::{
    ClaimSubscriptions, DeliveryOutcome, DeliveryReport, NewSubscription, SubscriptionEdit,
    SubscriptionLeaseRef,
};
pub use rows::{RowSubscriptionStore, SubscriptionRows};
pub use secret::{LinkKey, WebhookSecret};
