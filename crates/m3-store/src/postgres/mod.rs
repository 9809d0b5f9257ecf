//! The PostgreSQL backend of both stores (feature `postgres`): [`PgExecutionStore`] and
//! [`PgManagedInputStore`] on one sqlx pool, in one schema.
//!
//! Every decision is a call of the shared rules
//! ([`managed_input::rules`](crate::managed_input::rules),
//! [`execution::rules`](crate::execution::rules)); this module only reads and writes rows.
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
mod kept;
mod renew;
mod round_create;
mod rounds;
mod server_time;
mod signal;
#[cfg(feature = "conformance")]
pub mod testing;

pub use connect::{DEFAULT_MAX_CONNECTIONS, DEFAULT_SCHEMA, PgStoreOptions};
pub use executions::PgExecutionStore;
pub use rounds::PgManagedInputStore;
pub use signal::channel_name;
