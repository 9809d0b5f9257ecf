//! The in-memory backend of both stores: [`MemoryExecutionStore`] and
//! [`MemoryManagedInputStore`].
//!
//! Complete and concurrency-safe, passing both conformance suites, and not persistent. It
//! is the reference a backend author reads first: every decision is a call of the shared
//! rules ([`crate::managed_input::rules`], [`crate::execution::rules`]), and what is left is
//! storage code (`docs/custom-backend.md` walks through it).

#[cfg(any(test, feature = "conformance"))]
mod corrupt;
mod executions;
mod feed;
mod oauth;
mod policies;
mod rounds;
mod subscriptions;
mod tokens;
mod workers;

pub use executions::MemoryExecutionStore;
pub use rounds::MemoryManagedInputStore;
