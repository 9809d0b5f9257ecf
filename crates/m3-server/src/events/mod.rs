//! The event stream: facts read from the store (a round became pending, was
//! answered, resolved or failed; an execution finished), kept in one ordered
//! log per server and fanned out to every `/api/v1/events` subscriber.
//!
//! The hub looks again after every
//! [`ChangeSignal::changed`](hub::ChangeSignal::changed):
//! [`StoreSignal`](hub::StoreSignal) is the store's own change signal (a wake-up
//! after each commit of any process, and its slow fallback poll);
//! [`PollEvery`](hub::PollEvery) is the fallback for a store whose signal cannot
//! wake anybody (a custom backend without one).
//!
//! Event ids are `EPOCH.INDEX.MICROS`: the server's own log position (exact
//! resume while the same server runs) and the fact's store time (resume after
//! a restart replays every fact from a little before that time; a repeated
//! fact has the same `event` and `data`, so clients drop ids they have seen
//! by `data`).

mod facts;
mod hub;
mod stream;

pub(crate) use facts::Fact;
pub(crate) use hub::EventHub;
pub(crate) use stream::stream;
