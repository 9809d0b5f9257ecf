//! The managed-input contract: the [`ManagedInputStore`] trait, its request values and the
//! [`ManagedInputStoreExt`] conveniences.

mod ext;
mod request;
pub mod rules;
mod store;

pub use ext::ManagedInputStoreExt;
pub use request::{
    ClaimRound, CreateRound, DEFAULT_ROUND_LIMIT, LeaseRef, ResponseSubmission, RoundFailure,
    RoundRef,
};
pub use store::{ManagedInputStore, RoundScan, UnreadableRound};
