//! [`follow`]: the change feed as a live stream, read in pages and woken by the store's
//! change signal.

use std::collections::VecDeque;
use std::sync::Arc;

use futures_util::stream::{self, Stream};
use m3_types::{ChangeRecord, Cursor, Result};

use crate::ExecutionStore;
use crate::signal::{ChangeSubscription, Topic};

/// Records per read while following.
const FOLLOW_PAGE: usize = 1_000;

/// Every record after `after`, in cursor order, then each new one as it commits; the stream
/// never ends by itself (drop it to stop). An error (a pruned cursor, a lost database) is
/// yielded once and ends the stream; the caller resumes from the last record it processed.
///
/// It subscribes to the store's [change signal](ExecutionStore::change_signal) before each
/// read, so a record committed while it reads wakes the next wait; a change the signal
/// cannot see (another program writing the database) is read at the signal's fallback poll.
pub fn follow(
    store: Arc<dyn ExecutionStore>,
    after: Cursor,
) -> impl Stream<Item = Result<ChangeRecord>> + Send {
    let state = Follow {
        store,
        after,
        buffered: VecDeque::new(),
        subscription: None,
        failed: false,
    };
    stream::unfold(state, |mut state| async move {
        let next = state.next().await?;
        Some((next, state))
    })
}

struct Follow {
    store: Arc<dyn ExecutionStore>,
    after: Cursor,
    buffered: VecDeque<ChangeRecord>,
    subscription: Option<ChangeSubscription>,
    failed: bool,
}

impl Follow {
    /// The next record, waiting for one if none is buffered; `None` after an error.
    async fn next(&mut self) -> Option<Result<ChangeRecord>> {
        if self.failed {
            return None;
        }
        loop {
            if let Some(record) = self.buffered.pop_front() {
                self.after = record.cursor;
                return Some(Ok(record));
            }
            let subscription = match self.subscription.take() {
                Some(subscription) => subscription,
                None => self.store.change_signal().subscribe(Topic::All),
            };
            match self.store.read_changes(self.after, FOLLOW_PAGE).await {
                Ok(page) if !page.records.is_empty() => {
                    self.buffered.extend(page.records);
                    self.subscription = Some(subscription);
                }
                Ok(_) => {
                    let mut subscription = subscription;
                    subscription.changed().await;
                    self.subscription = Some(subscription);
                }
                Err(error) => {
                    self.failed = true;
                    return Some(Err(error));
                }
            }
        }
    }
}
