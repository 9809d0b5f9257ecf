//! The backend toolkit for policies: a backend that keeps one row per policy, unique by
//! name ([`PolicyRows`]), gets the whole [`PolicyStore`] from [`RowPolicyStore`], with
//! every decision made by [`super::rules`].

use std::sync::Arc;

use async_trait::async_trait;
use m3_types::{Clock, Error, Result};

use super::contract::PolicyStore;
use super::record::{NewPolicy, Policy};
use super::rules;

/// What a backend does for policies: keep rows of (name, text), names unique. Nothing
/// here decides.
#[async_trait]
pub trait PolicyRows: std::fmt::Debug + Send + Sync + 'static {
    /// The store's clock (a policy's creation time).
    fn clock(&self) -> Arc<dyn Clock>;

    /// Adds a policy's row; `false` (and nothing added) when a row has the same name.
    async fn insert_policy(&self, name: &str, text: &str) -> Result<bool>;

    /// Every policy's text, oldest first.
    async fn all_policies(&self) -> Result<Vec<String>>;

    /// Removes the row named `name`; whether there was one.
    async fn delete_policy(&self, name: &str) -> Result<bool>;
}

/// The [`PolicyStore`] over any [`PolicyRows`].
#[derive(Debug, Clone)]
pub struct RowPolicyStore<R> {
    rows: R,
}

impl<R: PolicyRows> RowPolicyStore<R> {
    /// The store over `rows`.
    pub fn new(rows: R) -> Self {
        Self { rows }
    }
}

#[async_trait]
impl<R: PolicyRows> PolicyStore for RowPolicyStore<R> {
    async fn add_policy(&self, new: NewPolicy) -> Result<Policy> {
        let policy = rules::make(new, crate::store_now(self.rows.clock().as_ref()))?;
        let text = rules::encode(&policy)?;
        if self.rows.insert_policy(&policy.name, &text).await? {
            Ok(policy)
        } else {
            Err(rules::name_taken(&policy.name))
        }
    }

    async fn list_policies(&self) -> Result<Vec<Policy>> {
        self.rows
            .all_policies()
            .await?
            .iter()
            .map(|text| rules::decode(text))
            .collect()
    }

    async fn remove_policy(&self, name: &str) -> Result<Policy> {
        let missing =
            || Error::not_found(format!("no policy is named '{name}'")).with_detail("policy", name);
        let policy = self
            .list_policies()
            .await?
            .into_iter()
            .find(|policy| policy.name == name)
            .ok_or_else(missing)?;
        if self.rows.delete_policy(name).await? {
            Ok(policy)
        } else {
            Err(missing())
        }
    }
}
