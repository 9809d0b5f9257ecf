//! The event stream: the store's change feed (`docs/changes.md`) as Server-Sent Events.
//!
//! Each record is one event: `id:` is its cursor, `event:` its kind (`round.pending`,
//! `round.answered`, ..., `execution.finished`), `data:` the record as JSON. A client that
//! reconnects with `Last-Event-ID` (or `?after=CURSOR`) resumes exactly after that record,
//! whichever server process it reaches on the store, before or after a restart: the feed is
//! in the store, not in the server. Each subscriber reads the feed itself, woken by the
//! store's change signal ([`follow`]).

mod follow;
mod stream;

pub(crate) use follow::latest_cursor;
pub(crate) use stream::stream;
