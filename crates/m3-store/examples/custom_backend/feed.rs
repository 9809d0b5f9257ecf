//! The directory store's change feed: `<dir>/changes.json`, one JSON document holding the
//! records kept, the newest cursor ever assigned and the newest cursor retention removed.
//!
//! [`stage_changes`] runs at the end of every mutation, under the exclusive lock, just
//! before the commit: it compares each staged execution and round file with its committed
//! version, asks the shared rules ([`round_change`], [`execution_changes`]) which records
//! that change appends, numbers them after the newest cursor, and stages the feed too. The
//! feed file is then part of the same commit (the journal), so a change and its records are
//! written together or not at all, even across a crash (the next locker finishes the
//! journal, feed included). The exclusive lock orders the commits, and each numbers its
//! records after the newest cursor the previous one stored: cursors follow commit order.
//! The newest cursor is kept apart from the records, so pruning the newest records never
//! lets a cursor be assigned twice. Hooking the commit, not each operation, means no
//! mutation path (rounds' create, claim, submit, deliver, resolve, fail, recovery;
//! executions' create, transition, claim, lease, finish, cancel, terminalize) can forget
//! its records, and a refused step stages nothing, so it appends nothing.
//!
//! The costs, plainly: every change that appends a record rewrites the whole feed file, and
//! turns what would be a one-file rename (a claim, a transition) into a journal commit of
//! two files; every read parses the whole file. Both grow with the records kept, so prune.
//! A real backend would append to a log (or insert rows) and keep the two counters in a
//! small state file (or a table) beside it.

use m3_store::ExecutionRecord;
use m3_store::changes::rules::{check_after, check_limit, execution_changes, round_change};
use m3_store::changes::{ChangePage, FeedBounds, PruneChanges, Pruned};
use m3_types::{Actor, ChangeRecord, ChangeRecordKind, Cursor, Error, ManagedInputRecord, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::files::{FileKind, Locked};

/// The feed file's contents.
#[derive(Debug, Default, Serialize, Deserialize)]
struct FeedFile {
    /// The newest cursor ever assigned (`0`: none).
    newest: u64,
    /// The newest cursor retention removed (`0`: none).
    pruned_through: u64,
    /// The records kept, in cursor order.
    records: Vec<ChangeRecord>,
}

impl FeedFile {
    /// The ends the shared cursor check ([`check_after`]) needs.
    fn bounds(&self) -> FeedBounds {
        FeedBounds::new(Cursor::new(self.pruned_through), Cursor::new(self.newest))
    }
}

/// The part of an execution file the feed reads.
#[derive(Deserialize)]
struct ExecutionPart {
    /// The execution's record (the spec and the events are not the feed's business).
    record: ExecutionRecord,
}

/// The part of a round file the feed reads (the record as a plain value: a damaged one
/// appends nothing).
#[derive(Deserialize)]
struct RoundPart {
    /// The round's record, decoded in a second step.
    record: Value,
    /// Who answered, carried by the `round.answered` record.
    #[serde(default)]
    answered_by: Option<Actor>,
}

/// The feed as committed (or as staged by this mutation); an empty one if there is no file
/// yet (a new directory).
///
/// # Errors
/// `storage_error` if the file cannot be read or does not decode.
fn read_feed(locked: &Locked<'_>) -> Result<FeedFile> {
    let path = locked.dir().changes_path();
    Ok(locked
        .read_json(&path, |why| {
            Error::storage(format!(
                "the change feed {} is damaged: {why}",
                path.display()
            ))
        })?
        .unwrap_or_default())
}

/// The execution record of an execution file's text (`None`: not one this store wrote).
fn execution_of(text: &str) -> Option<ExecutionRecord> {
    serde_json::from_str::<ExecutionPart>(text)
        .ok()
        .map(|part| part.record)
}

/// The round record of a round file's text and who answered it (`None`: missing or damaged,
/// as the conformance suite's `CorruptRecord` leaves it; a damaged round appends nothing).
fn round_of(text: &str) -> Option<(ManagedInputRecord, Option<Actor>)> {
    let part: RoundPart = serde_json::from_str(text).ok()?;
    let record = serde_json::from_value(part.record).ok()?;
    Some((record, part.answered_by))
}

/// The records the staged files append: the rounds' first, then the executions' (a finish
/// fails the rounds, then ends the execution, and the memory backend appends in that order
/// too). Each staged file is compared with its committed version, so a file staged twice in
/// one mutation appends the net change once.
///
/// # Errors
/// `storage_error` if a committed file cannot be read.
fn staged_changes(locked: &Locked<'_>) -> Result<Vec<ChangeRecord>> {
    let (mut rounds, mut executions) = (Vec::new(), Vec::new());
    for (path, text) in locked.staged() {
        let before = locked.committed_text(&path)?;
        match locked.dir().kind_of(&path) {
            FileKind::Round => {
                if let Some((after, answered_by)) = round_of(&text) {
                    let before = before.as_deref().and_then(round_of);
                    let change = round_change(before.as_ref().map(|(record, _)| record), &after);
                    // Only the answer's own record names who answered.
                    rounds.extend(change.map(|record| match record.kind {
                        ChangeRecordKind::RoundAnswered => record.with_actor(answered_by),
                        _ => record,
                    }));
                }
            }
            FileKind::Execution => {
                if let Some(after) = execution_of(&text) {
                    let before = before.as_deref().and_then(execution_of);
                    executions.extend(execution_changes(before.as_ref(), &after));
                }
            }
            FileKind::Other => {}
        }
    }
    rounds.extend(executions);
    Ok(rounds)
}

/// Stages the feed with the records of what this mutation staged (nothing if it appends
/// none). Call it last, before the commit.
///
/// # Errors
/// `storage_error` if a file cannot be read or the feed is damaged.
pub(crate) fn stage_changes(locked: &mut Locked<'_>) -> Result<()> {
    let records = staged_changes(locked)?;
    if records.is_empty() {
        return Ok(());
    }
    let mut feed = read_feed(locked)?;
    for mut record in records {
        feed.newest += 1;
        record.cursor = Cursor::new(feed.newest);
        feed.records.push(record);
    }
    let path = locked.dir().changes_path();
    locked.stage(&path, &feed)
}

/// Stages `record`, numbered after the newest cursor, with this mutation (a record no
/// file comparison derives: a deadline reminder).
///
/// # Errors
/// `storage_error` if the feed cannot be read or staged.
pub(crate) fn stage_record(locked: &mut Locked<'_>, mut record: ChangeRecord) -> Result<()> {
    let mut feed = read_feed(locked)?;
    feed.newest += 1;
    record.cursor = Cursor::new(feed.newest);
    feed.records.push(record);
    let path = locked.dir().changes_path();
    locked.stage(&path, &feed)
}

/// The newest cursor ever assigned (`0`: none).
///
/// # Errors
/// `storage_error` if the feed cannot be read.
pub(crate) fn newest(locked: &Locked<'_>) -> Result<Cursor> {
    Ok(Cursor::new(read_feed(locked)?.newest))
}

/// Up to `limit` records after `after` (under the shared lock).
///
/// # Errors
/// As [`ExecutionStore::read_changes`](m3_store::ExecutionStore::read_changes).
pub(crate) fn read(locked: &Locked<'_>, after: Cursor, limit: usize) -> Result<ChangePage> {
    check_limit(limit)?;
    let feed = read_feed(locked)?;
    check_after(after, feed.bounds())?;
    let start = feed
        .records
        .partition_point(|record| record.cursor <= after);
    let records = feed.records.into_iter().skip(start).take(limit).collect();
    Ok(ChangePage::new(after, records))
}

/// Removes (or counts) the oldest records up to the first not older than `request.before`
/// (under the exclusive lock).
///
/// # Errors
/// `storage_error` if the feed cannot be read or staged.
pub(crate) fn prune(locked: &mut Locked<'_>, request: PruneChanges) -> Result<Pruned> {
    let mut feed = read_feed(locked)?;
    let old = feed
        .records
        .iter()
        .take_while(|record| record.at < request.before)
        .count();
    let through = old
        .checked_sub(1)
        .and_then(|last| feed.records.get(last))
        .map(|record| record.cursor);
    if let (Some(through), false) = (through, request.dry_run) {
        feed.records.drain(..old);
        feed.pruned_through = through.get();
        let path = locked.dir().changes_path();
        locked.stage(&path, &feed)?;
    }
    Ok(Pruned::new(old as u64, through))
}
