//! [`PolicyStore`]: the contract every backend's policies meet.

use async_trait::async_trait;
use m3_types::Result;

use super::record::{NewPolicy, Policy};

/// The store's policies
/// ([`ExecutionStore::policy_store`](crate::ExecutionStore::policy_store)).
#[async_trait]
pub trait PolicyStore: std::fmt::Debug + Send + Sync + 'static {
    /// Adds a policy, checked by [`rules::make`](super::rules::make).
    ///
    /// # Errors
    /// `invalid_argument` (reason `invalid_policy`) for a bad name, matcher, delay or
    /// answer, or a name another policy has (reason `policy_name_taken`); nothing is added
    /// then.
    async fn add_policy(&self, new: NewPolicy) -> Result<Policy>;

    /// Every policy, oldest first.
    async fn list_policies(&self) -> Result<Vec<Policy>>;

    /// Removes the policy named `name`: no worker fires it from its next wait on.
    ///
    /// # Errors
    /// `not_found` when no policy has that name.
    async fn remove_policy(&self, name: &str) -> Result<Policy>;
}
