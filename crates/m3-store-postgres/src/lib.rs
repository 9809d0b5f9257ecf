//! The PostgreSQL backend of M3's two stores, for workers on several hosts sharing one
//! database: [`PgExecutionStore`] and [`PgManagedInputStore`] on one sqlx pool, in one schema.
//!
//! It is built on `m3-store`'s public backend toolkit only, as any third-party backend
//! would be (`docs/custom-backend.md`): the store contracts, the shared rules, the bounded
//! round cache ([`m3_store::round_cache`]), the change-signal hub and the
//! [`Announce`](m3_store::signal::Announce) helper, and the conformance suites its tests
//! run. [`register`] makes `m3_store::open` (and so `--db postgres://...` in `m3`) serve
//! `postgres://` and `postgresql://` URLs.
//!
//! ```no_run
//! # async fn demo() -> m3_types::Result<()> {
//! m3_store_postgres::register();
//! let store = m3_store::open("postgres://m3@db.example/m3").await?;
//! assert!(store.is_persistent());
//! # Ok(()) }
//! ```
//!
//! # Feature flags
//!
//! - `tls`: TLS (rustls, webpki roots) for servers on other hosts (`sslmode` in the URL).
//! - `conformance`: [`testing`] (the test server, a schema per case) and the corruption
//!   hooks of `m3_store::conformance`. Not semver-stable.
//!
//! # How it works
//!
//! Every decision is a call of the shared rules
//! ([`managed_input::rules`](m3_store::managed_input::rules),
//! [`execution::rules`](m3_store::execution::rules)); this crate only reads and writes rows.
//! Each execution mutation is one transaction that locks the row (`SELECT ... FOR UPDATE`),
//! asks the rules, and writes the record they return; each round write is a
//! compare-and-set on the record read (`rounds.rs`), and a round's creation one
//! `INSERT ... ON CONFLICT DO NOTHING` (`round_create.rs`). So a lease compare-and-set, the
//! `pending -> response_validated` step and recovery are atomic under concurrent workers
//! on any number of hosts. Canonical payloads are kept as `text` (never `jsonb`).
//!
//! The default store clock is the database server's (`clock_timestamp()`, read by the
//! statement that locks the row, or estimated from the last reading and pinned by the write
//! that uses it: `server_time.rs`), so workers with skewed clocks agree on lease expiry; an
//! injected [`Clock`](m3_types::Clock) wins. See `docs/postgres.md`.

mod claim;
mod connect;
mod error;
mod execution_writes;
mod executions;
mod feed;
mod held_connections;
mod known_round;
mod oauth;
mod opener;
mod policies;
mod renew;
#[cfg(feature = "conformance")]
mod round_corrupt;
mod round_create;
mod round_pending;
mod round_write;
mod rounds;
mod server_time;
mod signal;
mod subscriptions;
#[cfg(feature = "conformance")]
pub mod testing;
mod tokens;
mod workers;

pub use connect::{DEFAULT_MAX_CONNECTIONS, DEFAULT_SCHEMA, PgStoreOptions};
pub use executions::PgExecutionStore;
pub use opener::{PgOpener, register};

/// `docs/postgres.md`, compiled and run as doctests against the test server
/// (`M3_TEST_POSTGRES_URL`, as scripts/test.sh sets it).
#[cfg(all(doctest, feature = "conformance"))]
#[doc = include_str!("../../../docs/postgres.md")]
pub struct PostgresGuide;
pub use rounds::PgManagedInputStore;
pub use signal::channel_name;
