//! Batches of one: a single operation that a trait provides on top of its batch form.

use m3_types::{Error, Result};

/// The outcome of a batch of one (a single operation run as a batch).
pub(crate) fn single_outcome<T>(outcomes: Result<Vec<Result<T>>>) -> Result<T> {
    outcomes?
        .pop()
        .unwrap_or_else(|| Err(Error::storage("a batch of one had no outcome")))
}
