//! The managed-input coordinator: one per managed execution.
//!
//! On an input request it checks the round budget, registers an in-process
//! waiter *before* persisting, `create_round`s with a lease, starts lease
//! renewal, moves the execution `running_turn -> waiting_for_input`, waits on
//! the waiter and the store's change signal (re-reading the round on each
//! wake-up and at the signal's slow fallback poll), enforces the round deadline,
//! then `start_delivery` and hands the responses to the MCP retry. After the
//! retry's answer the caller resolves the round (`mark_delivered` + `resolve`).
//! Lease loss or renewal failure ends the round `failed/recovery_unavailable`.
//! A round is never redelivered. While it waits, the lease holder appends the round's
//! deadline reminders and fires the store's policies (`unattended`).

mod adopt;
mod failure;
mod lifecycle;
mod notify;
mod records;
mod unattended;
mod wait;

pub(crate) use lifecycle::{Coordinator, CoordinatorSettings, Release};
pub use m3_types::RECOVERY_UNAVAILABLE;
pub use notify::{ResponseNotifier, RoundPendingHook};
pub use unattended::DEFAULT_REMIND_AT;
