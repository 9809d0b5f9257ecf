//! What a backend hands the suite and what a case runs against: the [`Backend`] a
//! [`StoreFactory`] builds (the store, its peer, a [`CorruptRecord`] capability), and the
//! [`Harness`] that wraps it with the manual clock.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use m3_types::{Clock, ManualClock, Result};

use crate::{ManagedInputStore, RoundRef};

/// What a backend's factory builds for one case.
#[non_exhaustive]
pub struct Backend {
    /// The store under test, reading the clock the factory was given.
    pub store: Arc<dyn ManagedInputStore>,
    /// A second, independent store object on the same data and clock (as if another process
    /// opened the same database).
    pub peer: Arc<dyn ManagedInputStore>,
    /// Damages stored rows on request.
    pub corruptor: Arc<dyn CorruptRecord>,
    guard: Guard,
}

impl fmt::Debug for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backend")
            .field("store", &self.store)
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

impl Backend {
    /// A backend made of `store`, its `peer` on the same data, and a `corruptor`.
    pub fn new(
        store: Arc<dyn ManagedInputStore>,
        peer: Arc<dyn ManagedInputStore>,
        corruptor: Arc<dyn CorruptRecord>,
    ) -> Self {
        Self {
            store,
            peer,
            corruptor,
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

/// Whatever a factory's backend must keep alive (a temporary directory, a server).
#[derive(Default)]
pub(crate) struct Guard(Option<Box<dyn Any + Send + Sync>>);

impl Guard {
    /// A guard holding `value`.
    pub(crate) fn keep(value: impl Any + Send + Sync) -> Self {
        Self(Some(Box::new(value)))
    }
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("held", &self.0.is_some())
            .finish()
    }
}

/// What one case runs against: a fresh [`Backend`] and the [`ManualClock`] its stores read.
#[non_exhaustive]
pub struct Harness {
    /// The store under test.
    pub store: Arc<dyn ManagedInputStore>,
    /// A second store object on the same data.
    pub peer: Arc<dyn ManagedInputStore>,
    /// Damages stored rows on request.
    pub corruptor: Arc<dyn CorruptRecord>,
    /// The manual clock both stores read; cases move it to expire leases.
    pub clock: ManualClock,
    backend: Backend,
}

impl fmt::Debug for Harness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Harness")
            .field("backend", &self.backend)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl Harness {
    /// The harness of `backend`, whose stores read `clock`.
    pub fn new(backend: Backend, clock: ManualClock) -> Self {
        Self {
            store: Arc::clone(&backend.store),
            peer: Arc::clone(&backend.peer),
            corruptor: Arc::clone(&backend.corruptor),
            clock,
            backend,
        }
    }

    /// The backend this harness wraps.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }
}

/// A damage [`CorruptRecord`] can do to a stored round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Corruption {
    /// The stored pending round is valid JSON but not an object (`[]`).
    PendingNotObject,
    /// The stored responses are valid JSON but not an object (`[]`).
    ResponsesNotObject,
    /// The stored operation parameters are valid JSON but not an object (`[]`).
    OperationParametersNotObject,
    /// The stored status is not one of the six statuses (`"corrupt"`).
    UnknownStatus,
    /// A stored timestamp (`created_at`) is not a timestamp.
    UnparsableTimestamp,
    /// The stored redacted projection is valid JSON but not an object (`[]`).
    RedactedResponsesNotObject,
}

/// The capability to damage stored data behind the store's back.
#[async_trait]
pub trait CorruptRecord: Send + Sync {
    /// Applies `corruption` to the stored round `round`.
    ///
    /// # Errors
    /// Any error means the harness could not corrupt the row (the case then fails).
    async fn corrupt(&self, round: &RoundRef, corruption: Corruption) -> Result<()>;
}

/// Builds a fresh, empty backend (and its peer) for one case.
///
/// Implemented for every `Fn(Arc<dyn Clock>) -> impl Future<Output = Result<Backend>>`.
#[async_trait]
pub trait StoreFactory: Send + Sync {
    /// A fresh, empty backend whose stores read `clock`.
    ///
    /// Any timezone-aware clock must be accepted (its time normalized to UTC, see
    /// [`store_now`](crate::store_now)).
    ///
    /// # Errors
    /// Any error fails the case.
    async fn create(&self, clock: Arc<dyn Clock>) -> Result<Backend>;
}

#[async_trait]
impl<F, Fut> StoreFactory for F
where
    F: Fn(Arc<dyn Clock>) -> Fut + Send + Sync,
    Fut: Future<Output = Result<Backend>> + Send,
{
    async fn create(&self, clock: Arc<dyn Clock>) -> Result<Backend> {
        self(clock).await
    }
}
