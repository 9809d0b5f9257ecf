//! Every lease a worker holds, kept in one place.
//!
//! - [`keeper`]: the one renewer per worker that renews execution and round leases in
//!   batches, and tells each holder when its lease ends.
//! - [`deadline`]: the rules that let a renewal ride out transient store errors until the
//!   lease would really have expired.
//! - [`round`]: a round lease held for the coordinator, and the recovery path taken when it
//!   cannot be kept (the round ends `failed/recovery_unavailable`).

mod deadline;
mod keeper;
pub(crate) mod round;

pub(crate) use keeper::{Held, Holding, LeaseKeeper};
