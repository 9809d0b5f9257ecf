//! The worker registry: which workers run on the store, where, since when, and whether they
//! are still alive, shared by every process on it.
//!
//! A worker announces itself when it starts ([`WorkerRegistry::announce`]), renews its
//! heartbeat while it runs ([`WorkerRegistry::heartbeat`], which also says whether it is
//! draining), and retires when it stops. A worker that disappears stops renewing: it is
//! listed as silent, and [`WorkerRegistry::prune_workers`] forgets it. Nothing here decides
//! anything about executions or rounds: a silent worker's executions are still failed closed
//! by recovery when their leases expire. The registry is what a stopping worker asks to find
//! a live successor, and what `m3 workers` shows.
//!
//! Every decision is in [`rules`]; [`rows`] builds the whole registry from a backend's rows,
//! which is how the shipped backends (and a custom one) do it.

mod contract;
mod record;
pub mod rows;
pub mod rules;

pub use contract::WorkerRegistry;
pub use record::{NewWorker, WorkerEntry, WorkerState};
pub use rows::{RowWorkerRegistry, WorkerRows};
