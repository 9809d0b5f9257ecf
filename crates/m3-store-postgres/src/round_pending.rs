//! The inbox's page of pending rounds: the pending rows only (`status = 'pending'`), the
//! page kept with the shared rules ([`PendingQuery::select`]).

use m3_store::{PendingPage, PendingQuery};
use m3_types::Result;

use super::error::db;
use super::round_write::decode;
use super::rounds::PgManagedInputStore;

impl PgManagedInputStore {
    /// [`ManagedInputStore::pending_page`](m3_store::ManagedInputStore::pending_page).
    pub(super) async fn pending_page_impl(&self, query: &PendingQuery) -> Result<PendingPage> {
        query.validate()?;
        let mut conn = self.shared().connection().await?;
        let rows: std::result::Result<Vec<String>, _> =
            sqlx::query_scalar("SELECT record_json FROM m3rs_rounds WHERE status = 'pending'")
                .fetch_all(conn.in_use())
                .await;
        conn.settle_sqlx(&rows);
        conn.release();
        let rows = rows.map_err(db("cannot list the pending rounds"))?;
        Ok(query.select(rows.iter().filter_map(|stored| decode(stored).ok())))
    }
}
