//! The execution worker: runs one execution on the tokio runtime under an
//! execution-level lease with a heartbeat, honours cancel requests from any
//! process, enforces the execution timeout and writes the terminal result.

mod adoption;
mod background;
mod ending;
mod handover;
mod limits;
mod oauth_prompt;
mod park;
mod pool;
mod pool_options;
mod pool_runs;
mod registration;
mod released;
mod runner;
mod sweep;
mod wait;

pub use ending::DRAINED_REASON;
pub use handover::EVENT_EXECUTION_CHECKPOINT;
pub use limits::{FILES_PER_EXECUTION, raise_open_files_limit};
pub use pool::{DrainReport, PoolEvent, WorkerPool};
pub use pool_options::{
    DEFAULT_CONCURRENCY, DEFAULT_DRAIN_TIMEOUT, DEFAULT_IDLE_POLL, DEFAULT_WORKER_HEARTBEAT,
    PoolOptions,
};
pub use runner::Worker;
pub use sweep::{QUEUE_AGE_EXCEEDED, SweepOptions, spawn_sweep, sweep_once};
