//! Following the change feed for one subscriber: pages read after its cursor, woken by the
//! store's change signal, or every poll interval when the signal cannot wake anybody (a
//! custom backend without one).

use std::collections::VecDeque;
use std::time::Duration;

use futures_util::stream::{self, Stream};
use m3_kit::{AsyncMcpTestKit, ChangeRecord, Cursor, Topic};

/// Records per read.
pub(super) const PAGE: usize = 500;

/// The records after `after` (starting with `first`, already read), then each new one as it
/// commits. An error ends the stream (the client resumes from its last id).
pub(super) fn follow(
    kit: AsyncMcpTestKit,
    first: Vec<ChangeRecord>,
    after: Cursor,
    poll: Duration,
) -> impl Stream<Item = ChangeRecord> + Send {
    let subscription = kit.change_subscription(Topic::All);
    let state = (kit, VecDeque::from(first), after, subscription);
    stream::unfold(
        state,
        move |(kit, mut buffered, mut after, mut subscription)| async move {
            loop {
                if let Some(record) = buffered.pop_front() {
                    after = record.cursor;
                    return Some((record, (kit, buffered, after, subscription)));
                }
                let page = match kit.read_changes(after, PAGE).await {
                    Ok(page) => page,
                    Err(error) => {
                        tracing::warn!(code = error.code(), %error, "the event stream stops");
                        return None;
                    }
                };
                if page.records.is_empty() {
                    if subscription.is_signalled() {
                        subscription.changed().await;
                    } else {
                        tokio::time::sleep(poll).await;
                    }
                }
                buffered.extend(page.records);
            }
        },
    )
}

/// The cursor of the newest record (or `START`): where a page rendered now resumes.
///
/// A binary search with one-record reads: a cursor beyond the newest record is refused
/// (`cursor_in_future`), any other is not, so this costs about 2 log2(newest) small reads
/// instead of reading the whole feed.
///
/// # Errors
/// A read's error other than the ones the search relies on.
pub(crate) async fn latest_cursor(kit: &AsyncMcpTestKit) -> m3_types::Result<Cursor> {
    let exists = |cursor: u64| async move {
        match kit.read_changes(Cursor::new(cursor), 1).await {
            Ok(_) => Ok(true),
            Err(error) if error.reason() == Some(m3_types::Reason::CursorInFuture) => Ok(false),
            Err(error) if error.code() == "cursor_expired" => Ok(true),
            Err(error) => Err(error),
        }
    };
    // The largest cursor that reads: grow a bound past it, then halve.
    let mut high = 1u64;
    while exists(high).await? {
        high = high.saturating_mul(2);
        if high > i64::MAX as u64 / 2 {
            break;
        }
    }
    let mut low = high / 2;
    while low + 1 < high {
        let middle = low + (high - low) / 2;
        if exists(middle).await? {
            low = middle;
        } else {
            high = middle;
        }
    }
    Ok(Cursor::new(low))
}
