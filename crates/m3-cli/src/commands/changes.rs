//! `m3 events` (the store's change feed as JSON lines) and `m3 prune` (its retention).

use std::path::Path;

use futures_util::StreamExt;
use m3_kit::{AsyncMcpTestKit, ChangeRecord, ChangeRecordKind, Cursor};
use serde_json::json;
use time::OffsetDateTime;

use crate::commands::inspect::open_existing_kit;
use crate::commands::serve::signal;
use crate::failure::Failure;
use crate::output::Output;

/// Records per read of the feed.
const PAGE: usize = 1_000;

/// Which records `m3 events` prints.
#[derive(Debug)]
pub(crate) struct EventFilter {
    /// Only this execution's records.
    pub(crate) execution: Option<String>,
    /// Only these kinds (empty: every kind).
    pub(crate) kinds: Vec<ChangeRecordKind>,
}

impl EventFilter {
    fn keeps(&self, record: &ChangeRecord) -> bool {
        self.execution
            .as_deref()
            .is_none_or(|id| id == record.execution_id)
            && (self.kinds.is_empty() || self.kinds.contains(&record.kind))
    }
}

/// Parses `--kind` values (`round.pending`, ...).
///
/// # Errors
/// `invalid_argument` naming an unknown kind.
pub(crate) fn parse_kinds(kinds: &[String]) -> Result<Vec<ChangeRecordKind>, Failure> {
    kinds
        .iter()
        .map(|kind| kind.parse::<ChangeRecordKind>().map_err(Failure::from))
        .collect()
}

/// `m3 events`: every record after `after` (default: from the oldest kept) that `filter`
/// keeps, one JSON line each; with `follow`, then each new record as it commits, until
/// SIGINT/SIGTERM (exit 0, output flushed line by line).
pub(crate) async fn events(
    out: Output,
    db: &Path,
    after: Option<&str>,
    follow: bool,
    mut filter: EventFilter,
) -> Result<(), Failure> {
    let after = after
        .map(str::parse::<Cursor>)
        .transpose()?
        .unwrap_or_default();
    let kit = open_existing_kit(db, false).await?;
    if let Some(given) = &filter.execution {
        filter.execution = Some(crate::ids::execution(&kit, given).await?);
    }
    let outcome = if follow {
        follow_events(out, &kit, after, &filter).await
    } else {
        read_events(out, &kit, after, &filter).await
    };
    kit.close().await?;
    outcome
}

async fn read_events(
    out: Output,
    kit: &AsyncMcpTestKit,
    mut after: Cursor,
    filter: &EventFilter,
) -> Result<(), Failure> {
    loop {
        let page = kit.read_changes(after, PAGE).await?;
        if page.records.is_empty() {
            return Ok(());
        }
        for record in page.records.iter().filter(|r| filter.keeps(r)) {
            out.json_line(record)?;
        }
        after = page.next;
    }
}

async fn follow_events(
    out: Output,
    kit: &AsyncMcpTestKit,
    after: Cursor,
    filter: &EventFilter,
) -> Result<(), Failure> {
    let mut changes = std::pin::pin!(kit.changes(after));
    let mut stop = std::pin::pin!(signal());
    loop {
        let record = tokio::select! {
            record = changes.next() => record,
            () = &mut stop => return Ok(()),
        };
        match record {
            Some(Ok(record)) if filter.keeps(&record) => out.json_line(&record)?,
            Some(Ok(_)) => {}
            Some(Err(error)) => return Err(error.into()),
            None => return Ok(()),
        }
    }
}

/// When `--before` points: `DURATION` ago (`30d`, `12h`, `90m`, ...) or an RFC 3339 time.
///
/// # Errors
/// `invalid_argument` for anything else.
pub(crate) fn parse_before(text: &str, now: OffsetDateTime) -> Result<OffsetDateTime, Failure> {
    crate::commands::inspect::parse_when("--before", text, now)
}

/// `m3 prune --before WHEN [--dry-run]`: removes (or counts) the change records older than
/// WHEN, and nothing else.
pub(crate) async fn prune(
    out: Output,
    db: &Path,
    before: &str,
    dry_run: bool,
) -> Result<(), Failure> {
    let kit = open_existing_kit(db, false).await?;
    let now = kit.now();
    let before = parse_before(before, now)?;
    let mut request = m3_kit::PruneChanges::before(before);
    if dry_run {
        request = request.dry_run();
    }
    let pruned = kit.prune_changes(request).await;
    kit.close().await?;
    let pruned = pruned?;
    if out.is_json() {
        return out.document(&json!({
            "records": pruned.records,
            "through": pruned.through,
            "before": m3_types::timestamp::format(before),
            "dry_run": dry_run,
        }));
    }
    let verb = if dry_run { "would remove" } else { "removed" };
    let through = pruned
        .through
        .map(|cursor| format!(" (cursors up to {cursor})"))
        .unwrap_or_default();
    out.say(format!(
        "{verb} {} change records older than {}{through}",
        pruned.records,
        m3_types::timestamp::format(before)
    ));
    Ok(())
}
