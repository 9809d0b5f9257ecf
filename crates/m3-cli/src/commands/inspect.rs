//! The store commands: `executions`, `status`, `pending` (and `--watch`), `result`, `cancel`, `recover`,
//! `rounds`. Each opens the kit on `--db` and calls one public kit method.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use m3_kit::{AsyncExecutionHandle, AsyncMcpTestKit, ListExecutions, StoreUrl};
use m3_types::{ExecutionOutcome, PendingElicitationRound, timestamp};
use serde_json::json;
use time::OffsetDateTime;

use crate::failure::Failure;
use crate::ids;
use crate::lease;
use crate::output::Output;
use crate::progress::Ticker;
use crate::render;
use crate::terminal::escape;

/// Opens the kit on the store `db` names (`m3_store::open`: a path or a store URL; opening
/// runs recovery when `recover` is true).
pub(crate) async fn open_kit(db: &Path, recover: bool) -> Result<AsyncMcpTestKit, Failure> {
    open_kit_with(db, recover, m3_types::RoundLimits::new(), None).await
}

/// The key sealing OAuth tokens in the store, and the previous one during a rotation.
pub(crate) type OAuthKeys = (m3_kit::CredentialKey, Option<m3_kit::CredentialKey>);

/// [`open_kit`], its embedded worker bounding each round a server sends by `limits` and
/// reaching OAuth-protected servers as `oauth` says (prompt, and the keys sealing tokens).
pub(crate) async fn open_kit_with(
    db: &Path,
    recover: bool,
    limits: m3_types::RoundLimits,
    oauth: Option<(m3_kit::oauth::OAuthContext, Option<OAuthKeys>)>,
) -> Result<AsyncMcpTestKit, Failure> {
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    let mut builder = AsyncMcpTestKit::builder();
    if let Some((oauth, keys)) = oauth {
        builder = builder.oauth(oauth);
        if let Some((key, previous)) = keys {
            builder = builder.oauth_key(key, previous);
        }
    }
    Ok(builder
        .database(db)
        .env(env)
        .round_limits(limits)
        .actor(m3_types::Actor::of_process_user(
            m3_types::ActorSurface::Cli,
        ))
        .recover_on_open(recover)
        .build()
        .await?)
}

/// Opens the kit on an existing store only: the commands that read or answer never create
/// one, so a mistyped `--db` (or a terminal without `M3_DB`) is said, not silently empty.
pub(crate) async fn open_existing_kit(
    db: &Path,
    recover: bool,
) -> Result<AsyncMcpTestKit, Failure> {
    require_store(db)?;
    open_kit(db, recover).await
}

/// `not_found` (exit 8) naming the path when `db` names a store kept in a local file and
/// no such file exists. A server store (a `postgres://` URL) is there when its server is:
/// opening it says so otherwise.
fn require_store(db: &Path) -> Result<(), Failure> {
    let url = StoreUrl::parse(&db.to_string_lossy())?;
    match url.local_file() {
        Some(file) if !file.is_file() => {}
        _ => return Ok(()),
    }
    let label = crate::output::store_label(db);
    Err(Failure::new(
        "not_found",
        format!(
            "no store at {label} (give the store with --db PATH or M3_DB; `m3 run`, `m3 demo` and `m3 serve --create` create one)"
        ),
    )
    .with_detail("store", json!(label)))
}

/// The time flag `flag` names with `text`: `DURATION` ago (`30d`, `12h`, `90m`, ...) or an
/// RFC 3339 time.
///
/// # Errors
/// `invalid_argument` for anything else.
pub(crate) fn parse_when(
    flag: &str,
    text: &str,
    now: OffsetDateTime,
) -> Result<OffsetDateTime, Failure> {
    if let Ok(ago) = humantime::parse_duration(text) {
        return now
            .checked_sub(time::Duration::try_from(ago).unwrap_or(time::Duration::MAX))
            .ok_or_else(|| Failure::invalid(format!("{flag} {text} is before the calendar")));
    }
    m3_types::timestamp::parse(text).map_err(|_| {
        Failure::invalid(format!(
            "{flag} takes a duration (30d, 12h, 90m) or an RFC 3339 time, not '{text}'"
        ))
    })
}

/// Which executions `m3 executions` lists.
#[derive(Debug, Default)]
pub(crate) struct ExecutionFilter {
    /// At most this many (the oldest the other filters keep).
    pub(crate) limit: Option<u32>,
    /// Only executions in this lifecycle state.
    pub(crate) lifecycle: Option<m3_types::ExecutionStatus>,
    /// Only executions created at or after this time (`--since` text, parsed here).
    pub(crate) since: Option<String>,
}

/// `m3 executions [--limit N] [--lifecycle L] [--since TIME]`: the store's own query
/// (`ListExecutions`, as the JSON API's list uses) for lifecycle and limit; `--since` filters
/// the listing by creation time (the store query has no time bound), before the limit.
pub(crate) async fn executions(
    out: Output,
    db: &Path,
    filter: ExecutionFilter,
) -> Result<(), Failure> {
    let since = filter
        .since
        .as_deref()
        .map(|text| parse_when("--since", text, lease::now()))
        .transpose()?;
    let kit = open_existing_kit(db, true).await?;
    let mut query = ListExecutions::new();
    if let Some(lifecycle) = filter.lifecycle {
        query = query.with_lifecycle(lifecycle);
    }
    let mut summaries = match (filter.limit, since) {
        (Some(limit), None) => kit.executions_where(query.with_limit(limit)).await?,
        _ => kit.executions_where(query).await?,
    };
    if let Some(since) = since {
        summaries.retain(|summary| summary.state.created_at >= since);
        if let Some(limit) = filter.limit {
            summaries.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        }
    }
    if out.is_json() {
        let states: Vec<_> = summaries.iter().map(|s| &s.state).collect();
        out.document(&states)?;
    } else if summaries.is_empty() {
        out.say(format!(
            "no executions (store {})",
            crate::output::store_label(db)
        ));
    } else {
        let rows = summaries
            .iter()
            .map(|s| {
                vec![
                    escape(&s.state.execution_id).into_owned(),
                    s.state.lifecycle.to_string(),
                    s.state.outcome.map_or("-".to_owned(), |o| o.to_string()),
                    s.human_input.to_string(),
                    timestamp::format(s.state.created_at),
                    s.pending_rounds.to_string(),
                ]
            })
            .collect();
        out.say(render::executions(rows));
    }
    kit.close().await?;
    Ok(())
}

pub(crate) async fn status(out: Output, db: &Path, execution: &str) -> Result<(), Failure> {
    let kit = open_existing_kit(db, true).await?;
    let handle = ids::attach(&kit, execution).await?;
    let state = handle.snapshot().await?;
    if out.is_json() {
        out.document(&state)?;
    } else {
        out.say(render::snapshot(out, &state));
        if !state.lifecycle.is_terminal() {
            let note = match lease::current(&handle).await? {
                Some(held) => lease::describe(&held, lease::now()),
                None => "no worker holds it yet".to_owned(),
            };
            out.say(format!("worker       {note}"));
        }
    }
    kit.close().await?;
    Ok(())
}

pub(crate) async fn pending(
    out: Output,
    db: &Path,
    execution: Option<&str>,
) -> Result<(), Failure> {
    let kit = open_existing_kit(db, true).await?;
    let rounds = pending_rounds(&kit, execution).await?;
    if out.is_json() {
        out.document(&rounds)?;
    } else if rounds.is_empty() {
        out.say(format!(
            "no pending rounds (store {})",
            crate::output::store_label(db)
        ));
    } else {
        for listed in &rounds {
            out.say(render::round_in_context(
                &listed.round,
                Some(&listed.context),
            ));
            out.say(format!("  {}", render::respond_hint(&listed.round)));
        }
    }
    kit.close().await?;
    Ok(())
}

/// A pending round with its context, as `m3 pending` lists it (JSON: the round's fields
/// plus `context`).
#[derive(serde::Serialize)]
struct Listed {
    #[serde(flatten)]
    round: PendingElicitationRound,
    context: m3_kit::RoundContext,
    /// Whether the round survives its worker's restart (docs/workers.md).
    transferable: bool,
}

/// The pending round of `handle`, if any, with its context.
async fn pending_of(handle: &AsyncExecutionHandle) -> Result<Option<Listed>, Failure> {
    let Some(round) = handle.pending_elicitation().await? else {
        return Ok(None);
    };
    let diagnostics = handle.round(&round.round_id).await?.diagnostics;
    Ok(Some(Listed {
        round,
        context: diagnostics.context,
        transferable: diagnostics.transferable,
    }))
}

/// The pending rounds of `execution`, or of every execution.
async fn pending_rounds(
    kit: &AsyncMcpTestKit,
    execution: Option<&str>,
) -> Result<Vec<Listed>, Failure> {
    let mut rounds = Vec::new();
    match execution {
        Some(execution) => rounds.extend(pending_of(&ids::attach(kit, execution).await?).await?),
        None => {
            for summary in kit.executions().await? {
                if summary.pending_rounds == 0 {
                    continue;
                }
                let handle = kit.attach(&summary.state.execution_id).await?;
                rounds.extend(pending_of(&handle).await?);
            }
        }
    }
    Ok(rounds)
}

/// `m3 pending --watch`: prints the rounds pending now, then each round as its
/// `round.pending` record arrives on the store's change feed (from any process), until
/// Ctrl-C. The feed's cursor is taken before the first listing, so a round created in
/// between is printed once, by whichever comes first.
pub(crate) async fn watch_pending(
    out: Output,
    db: &Path,
    execution: Option<&str>,
) -> Result<(), Failure> {
    use futures_util::StreamExt;
    let kit = open_existing_kit(db, true).await?;
    let execution = match execution {
        Some(given) => Some(ids::execution(&kit, given).await?),
        None => None,
    };
    let execution = execution.as_deref();
    let from = feed_end(&kit).await?;
    let mut listed = HashSet::new();
    out.say(format!(
        "watching for pending rounds (store {}); Ctrl-C stops",
        crate::output::store_label(db)
    ));
    for pending in pending_rounds(&kit, execution).await? {
        let round = &pending.round;
        listed.insert((round.execution_id.clone(), round.round_id.clone()));
        print_pending(&out, &pending)?;
    }
    let mut changes = std::pin::pin!(kit.changes(from));
    let mut ctrl_c = std::pin::pin!(tokio::signal::ctrl_c());
    loop {
        let record = tokio::select! {
            record = changes.next() => record,
            _ = &mut ctrl_c => break,
        };
        let Some(record) = record else { break };
        let record = record?;
        let Some(round_id) = record.round_id.as_deref() else {
            continue;
        };
        if record.kind != m3_types::ChangeRecordKind::RoundPending
            || execution.is_some_and(|id| id != record.execution_id)
            || listed.contains(&(record.execution_id.clone(), round_id.to_owned()))
        {
            continue;
        }
        let handle = kit.attach(&record.execution_id).await?;
        if let Some(pending) = pending_of(&handle).await?
            && pending.round.round_id == round_id
        {
            print_pending(&out, &pending)?;
        }
    }
    kit.close().await?;
    Ok(())
}

/// The cursor of the newest record of the store's change feed.
async fn feed_end(kit: &AsyncMcpTestKit) -> Result<m3_kit::Cursor, Failure> {
    let mut cursor = m3_kit::Cursor::START;
    loop {
        let page = kit.read_changes(cursor, 1_000).await?;
        if page.records.is_empty() {
            return Ok(cursor);
        }
        cursor = page.next;
    }
}

/// One pending round, as `m3 pending` prints it.
fn print_pending(out: &Output, pending: &Listed) -> Result<(), Failure> {
    if out.is_json() {
        out.json_line(pending)?;
    } else {
        out.say(render::round_in_context(
            &pending.round,
            Some(&pending.context),
        ));
        out.say(format!("  {}", render::respond_hint(&pending.round)));
    }
    Ok(())
}

pub(crate) async fn result(
    out: Output,
    db: &Path,
    execution: &str,
    timeout: Option<f64>,
) -> Result<(), Failure> {
    let kit = open_existing_kit(db, true).await?;
    let handle = ids::attach(&kit, execution).await?;
    let execution = handle.execution_id();
    let mut ticker = Ticker::start(out.shows_progress(), format!("waiting for {execution}"));
    let outcome = handle.result(timeout.map(Duration::from_secs_f64)).await;
    ticker.stop();
    let result = outcome?;
    if out.is_json() {
        out.document(&result)?;
    } else {
        out.say(render::result(out, &result));
    }
    kit.close().await?;
    if result.snapshot.outcome == Some(ExecutionOutcome::Completed) {
        Ok(())
    } else {
        Err(Failure::not_completed(&result))
    }
}

pub(crate) async fn cancel(out: Output, db: &Path, execution: &str) -> Result<(), Failure> {
    let kit = open_existing_kit(db, true).await?;
    let handle = ids::attach(&kit, execution).await?;
    let execution = handle.execution_id();
    let state = handle.snapshot().await?;
    if let Some(outcome) = state.outcome.filter(|_| state.lifecycle.is_terminal()) {
        // Cancelling a finished execution changes nothing: say so instead of "requested".
        if out.is_json() {
            out.document(&json!({
                "execution_id": execution,
                "cancel_requested": false,
                "already_finished": true,
                "outcome": outcome,
            }))?;
        } else {
            out.say(format!(
                "execution {execution} already finished ({outcome}): nothing to cancel"
            ));
        }
        kit.close().await?;
        return Ok(());
    }
    handle.cancel().await?;
    if out.is_json() {
        out.document(&json!({"execution_id": execution, "cancel_requested": true}))?;
    } else {
        out.say(format!("cancellation requested for execution {execution}"));
    }
    kit.close().await?;
    Ok(())
}

pub(crate) async fn recover(out: Output, db: &Path) -> Result<(), Failure> {
    let kit = open_existing_kit(db, false).await?;
    let report = kit.recover().await?;
    if out.is_json() {
        out.document(&report)?;
    } else if report.executions.is_empty() {
        out.say(format!(
            "nothing to recover (store {})",
            crate::output::store_label(db)
        ));
        for note in live_leases(&kit).await? {
            out.say(format!("  {note}"));
        }
    } else {
        for execution in &report.executions {
            out.say(format!(
                "terminalized execution {} ({}); failed rounds: {}",
                escape(&execution.execution_id),
                escape(&execution.reason),
                if execution.failed_rounds.is_empty() {
                    "-".to_owned()
                } else {
                    escape(&execution.failed_rounds.join(", ")).into_owned()
                }
            ));
        }
    }
    kit.close().await?;
    Ok(())
}

pub(crate) async fn rounds(out: Output, db: &Path, execution: &str) -> Result<(), Failure> {
    let kit = open_existing_kit(db, true).await?;
    let handle = ids::attach(&kit, execution).await?;
    let execution = handle.execution_id();
    let rounds = handle.rounds().await?;
    if out.is_json() {
        out.document(&rounds)?;
    } else if rounds.is_empty() {
        out.say(format!("execution {execution} has no rounds"));
    } else {
        out.say(render::rounds(&rounds));
    }
    kit.close().await?;
    Ok(())
}

/// One line per unfinished execution whose worker lease is still live: recovery leaves those
/// alone until the lease expires, which "nothing to recover" alone does not tell.
async fn live_leases(kit: &AsyncMcpTestKit) -> Result<Vec<String>, Failure> {
    let now = lease::now();
    let mut notes = Vec::new();
    for summary in kit.executions().await? {
        if summary.state.lifecycle.is_terminal() {
            continue;
        }
        let handle = kit.attach(&summary.state.execution_id).await?;
        if let Some(held) = lease::current(&handle).await?
            && !held.is_expired_at(now)
        {
            notes.push(format!(
                "execution {}: {}",
                summary.state.execution_id,
                lease::describe(&held, now)
            ));
        }
    }
    Ok(notes)
}
