//! The store's policies for unattended rounds, through the kit (`docs/policies.md`): added,
//! listed and removed here, fired by whichever worker holds a waiting round's lease.

use m3_store::policies::{NewPolicy, Policy};
use m3_types::Result;

use crate::kit::AsyncMcpTestKit;

impl AsyncMcpTestKit {
    /// Adds a policy to the store: from the next wait on, every worker on the store fires it
    /// for the rounds it matches.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> m3_kit::Result<()> {
    /// use std::time::Duration;
    /// use m3_kit::policies::NewPolicy;
    /// use m3_kit::{AsyncMcpTestKit, ElicitationResponse};
    ///
    /// let kit = AsyncMcpTestKit::builder().build().await?;
    /// let after = Duration::from_secs(600);
    /// kit.add_policy(NewPolicy::new("decline-late", after, ElicitationResponse::decline())
    ///     .server("shipping"))
    ///     .await?;
    /// assert_eq!(kit.policies().await?[0].name, "decline-late");
    /// kit.remove_policy("decline-late").await?;
    /// # kit.close().await
    /// # }
    /// ```
    ///
    /// # Errors
    /// `invalid_argument` (reason `invalid_policy` or `policy_name_taken`); nothing is added
    /// then. `storage_error`.
    pub async fn add_policy(&self, new: NewPolicy) -> Result<Policy> {
        self.store().policy_store().await?.add_policy(new).await
    }

    /// Every policy of the store, oldest first.
    ///
    /// # Errors
    /// `storage_error`.
    pub async fn policies(&self) -> Result<Vec<Policy>> {
        self.store().policy_store().await?.list_policies().await
    }

    /// Removes the policy named `name`.
    ///
    /// # Errors
    /// `not_found` when there is none; `storage_error`.
    pub async fn remove_policy(&self, name: &str) -> Result<Policy> {
        self.store().policy_store().await?.remove_policy(name).await
    }
}
