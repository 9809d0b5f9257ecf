//! The managed-input contract: the [`ManagedInputStore`] trait, its request values and the
//! [`ManagedInputStoreExt`] conveniences.

mod change;
mod ext;
mod pending;
mod request;
pub mod rules;
mod store;

pub use change::{RoundChange, RoundOp};
pub use ext::ManagedInputStoreExt;
pub use pending::{PENDING_PAGE_MAX, PendingPage, PendingQuery, PendingSort};
pub use request::{
    ClaimRound, CreateRound, DEFAULT_ROUND_LIMIT, LeaseRef, RenewRoundLeases, ResponseSubmission,
    RoundFailure, RoundRef,
};
pub use store::{ManagedInputStore, RoundScan, UnreadableRound};
