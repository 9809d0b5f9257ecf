//! The inbox as pages: the pending rounds of every execution, filtered, searched, sorted
//! and paged by the store ([`ManagedInputStore::pending_page`]), so a reader of many
//! rounds never loads them all.
//!
//! [`ManagedInputStore::pending_page`]: m3_store::ManagedInputStore::pending_page

use m3_store::PendingQuery;
use m3_types::{PendingElicitationRound, Result};

use crate::kit::AsyncMcpTestKit;

/// One page of the inbox ([`AsyncMcpTestKit::pending_page`]).
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct InboxPage {
    /// The page's rounds, in the query's order.
    pub rounds: Vec<PendingElicitationRound>,
    /// How many pending rounds match the query's filters (on every page).
    pub total: usize,
}

impl AsyncMcpTestKit {
    /// One page of the pending rounds of every execution: those `query` admits (server,
    /// operation, age, text), in its order, from its offset.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> m3_kit::Result<()> {
    /// use m3_kit::{AsyncMcpTestKit, PendingQuery, PendingSort};
    ///
    /// let kit = AsyncMcpTestKit::builder().build().await?;
    /// let page = kit.pending_page(&PendingQuery::new().sort(PendingSort::Deadline).page(0, 50)).await?;
    /// assert_eq!(page.total, 0);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `invalid_argument` for a limit of 0 or over [`m3_store::PENDING_PAGE_MAX`];
    /// `storage_error`.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads.
    pub async fn pending_page(&self, query: &PendingQuery) -> Result<InboxPage> {
        let store = self.store().managed_input_store().await?;
        let page = store.pending_page(query).await?;
        Ok(InboxPage {
            rounds: page.rounds.into_iter().map(|r| r.pending).collect(),
            total: page.total,
        })
    }
}
