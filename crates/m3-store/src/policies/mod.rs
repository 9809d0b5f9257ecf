//! Policies for unattended rounds: store-level rules, shared by every worker on the store,
//! that answer a pending round nobody answered in time ("decline after ten minutes").
//!
//! A [`Policy`] matches a round like a plan entry does (server, operation, request key,
//! message, schema digest) and says what to answer ([`ElicitationResponse`]: decline,
//! cancel, or accept with fixed content) once the round has waited [`Policy::after`]. The
//! worker holding the round's lease fires it through the normal validation and idempotency
//! path, as actor `policy:<name>` (`docs/policies.md`).
//!
//! Every decision is in [`rules`]; [`rows`] builds the whole store from a backend's rows,
//! which is how the shipped backends (and a custom one) do it.
//!
//! [`ElicitationResponse`]: m3_types::ElicitationResponse

mod contract;
mod record;
pub mod rows;
pub mod rules;

pub use contract::PolicyStore;
pub use record::{NewPolicy, Policy};
pub use rows::{PolicyRows, RowPolicyStore};
