//! What a backend hands the execution suite and what a case runs against: the
//! [`ExecutionBackend`] an [`ExecutionStoreFactory`] builds (the store and its peer), and
//! the [`ExecutionHarness`] that wraps it with the manual clock.

use std::any::Any;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use m3_types::{Clock, ManualClock, Result};

use super::super::harness::Guard;
use crate::ExecutionStore;

/// What a backend's factory builds for one case.
#[derive(Debug)]
#[non_exhaustive]
pub struct ExecutionBackend {
    /// The store under test, reading the factory's clock.
    pub store: Arc<dyn ExecutionStore>,
    /// A second, independent store object on the same data and clock.
    pub peer: Arc<dyn ExecutionStore>,
    guard: Guard,
}

impl ExecutionBackend {
    /// A backend made of `store` and its `peer` on the same data.
    pub fn new(store: Arc<dyn ExecutionStore>, peer: Arc<dyn ExecutionStore>) -> Self {
        Self {
            store,
            peer,
            guard: Guard::default(),
        }
    }

    /// Keeps `guard` (for example a temporary directory) alive as long as the backend.
    #[must_use]
    pub fn with_guard(mut self, guard: impl Any + Send + Sync) -> Self {
        self.guard = Guard::keep(guard);
        self
    }
}

/// What one case runs against.
#[derive(Debug)]
#[non_exhaustive]
pub struct ExecutionHarness {
    /// The store under test.
    pub store: Arc<dyn ExecutionStore>,
    /// A second store object on the same data.
    pub peer: Arc<dyn ExecutionStore>,
    /// The manual clock both read.
    pub clock: ManualClock,
    pub(super) _backend: ExecutionBackend,
}

/// Builds a fresh, empty [`ExecutionBackend`] for one case; implemented for every
/// `Fn(Arc<dyn Clock>) -> impl Future<Output = Result<ExecutionBackend>>`.
#[async_trait]
pub trait ExecutionStoreFactory: Send + Sync {
    /// A fresh backend whose stores read `clock`.
    ///
    /// # Errors
    /// Any error fails the case.
    async fn create(&self, clock: Arc<dyn Clock>) -> Result<ExecutionBackend>;
}

#[async_trait]
impl<F, Fut> ExecutionStoreFactory for F
where
    F: Fn(Arc<dyn Clock>) -> Fut + Send + Sync,
    Fut: Future<Output = Result<ExecutionBackend>> + Send,
{
    async fn create(&self, clock: Arc<dyn Clock>) -> Result<ExecutionBackend> {
        self(clock).await
    }
}
