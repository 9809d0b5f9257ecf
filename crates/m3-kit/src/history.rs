//! The answer history: the rounds that were answered or failed, newest first, with who
//! answered, read from the store's change feed (the audit trail every process appends to)
//! and the rounds' redacted diagnostics. Filterable by status, server and principal; paged
//! by the feed cursor of the last entry shown.

use std::collections::HashMap;

use m3_store::RoundRef;
use m3_types::{ChangeRecordKind, Cursor, Error, ManagedInputStatus, Result};
use time::OffsetDateTime;

use crate::handle::{RoundDetails, diagnostics};
use crate::kit::AsyncMcpTestKit;

/// How many feed records one read of the scan takes.
const SCAN_PAGE: usize = 1_000;

/// The most entries one history page holds.
pub const HISTORY_PAGE_MAX: usize = 500;

/// Which rounds a history lists, by their status now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum HistoryStatus {
    /// Answered (`response_validated` through `resolved`) or failed: every round a decision
    /// was made on.
    #[default]
    Any,
    /// A response was accepted (`response_validated`, `delivery_started`, `delivered`,
    /// `resolved`).
    Answered,
    /// Resolved: the answer reached the server and the operation went on.
    Resolved,
    /// Failed (cancelled, timed out, recovery unavailable, ...).
    Failed,
}

impl HistoryStatus {
    /// The status named `text` (`answered`, `resolved`, `failed`; empty: any).
    ///
    /// # Errors
    /// `invalid_argument` for another name.
    pub fn parse(text: &str) -> Result<Self> {
        match text {
            "" => Ok(Self::Any),
            "answered" => Ok(Self::Answered),
            "resolved" => Ok(Self::Resolved),
            "failed" => Ok(Self::Failed),
            other => Err(Error::model_validation(format!(
                "unknown history status '{other}' (answered, resolved or failed)"
            ))),
        }
    }

    fn admits(self, status: ManagedInputStatus) -> bool {
        use ManagedInputStatus as S;
        match self {
            Self::Any => status != S::Pending,
            Self::Answered => matches!(
                status,
                S::ResponseValidated | S::DeliveryStarted | S::Delivered | S::Resolved
            ),
            Self::Resolved => status == S::Resolved,
            Self::Failed => status == S::Failed,
        }
    }
}

/// What a history page lists.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[must_use]
pub struct HistoryQuery {
    /// Which rounds, by status now (default: answered or failed).
    pub status: HistoryStatus,
    /// Only rounds of this MCP server.
    pub server: Option<String>,
    /// Only rounds this principal answered.
    pub principal: Option<String>,
    /// Only entries older than this cursor (the previous page's `next`).
    pub before: Option<Cursor>,
    /// At most this many entries (1 to [`HISTORY_PAGE_MAX`]; default 50).
    pub limit: usize,
}

impl Default for HistoryQuery {
    fn default() -> Self {
        Self {
            status: HistoryStatus::Any,
            server: None,
            principal: None,
            before: None,
            limit: 50,
        }
    }
}

impl HistoryQuery {
    /// The newest 50 answered or failed rounds.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only rounds in `status` now.
    pub fn status(mut self, status: HistoryStatus) -> Self {
        self.status = status;
        self
    }

    /// Only rounds of `server`.
    pub fn server(mut self, server: impl Into<String>) -> Self {
        self.server = Some(server.into());
        self
    }

    /// Only rounds `principal` answered.
    pub fn principal(mut self, principal: impl Into<String>) -> Self {
        self.principal = Some(principal.into());
        self
    }

    /// Only entries older than `cursor`.
    pub fn before(mut self, cursor: Cursor) -> Self {
        self.before = Some(cursor);
        self
    }

    /// At most `limit` entries.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }
}

/// One round of the history.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct HistoryEntry {
    /// The feed cursor of the round's newest decision (its answer or its failure).
    pub cursor: Cursor,
    /// When that decision was made, on the store's clock.
    pub at: OffsetDateTime,
    /// `round.answered` or `round.failed`.
    pub kind: ChangeRecordKind,
    /// The round now: its requests, status, who answered and the redacted responses.
    pub details: RoundDetails,
}

/// One page of the history, newest first.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct HistoryPage {
    /// The entries, newest first.
    pub entries: Vec<HistoryEntry>,
    /// Pass as [`HistoryQuery::before`] for the next (older) page (which may come back empty
    /// when no older round matches); `None`: nothing older was found.
    pub next: Option<Cursor>,
}

/// A decision found in the feed: the newest `round.answered` or `round.failed` of a round.
struct Decision {
    cursor: Cursor,
    at: OffsetDateTime,
    kind: ChangeRecordKind,
    round: RoundRef,
}

impl AsyncMcpTestKit {
    /// The rounds that were answered or failed, newest first (see [`HistoryQuery`]).
    ///
    /// Read from the change feed: a round whose records were pruned
    /// ([`prune_changes`](Self::prune_changes)) is no longer listed. Each listed round is
    /// read as it is now, with who answered it and its redacted responses.
    ///
    /// # Errors
    /// `invalid_argument` for a limit of 0 or over [`HISTORY_PAGE_MAX`]; `storage_error`.
    pub async fn history(&self, query: &HistoryQuery) -> Result<HistoryPage> {
        if query.limit == 0 || query.limit > HISTORY_PAGE_MAX {
            return Err(Error::model_validation(format!(
                "a history page holds 1 to {HISTORY_PAGE_MAX} entries, not {}",
                query.limit
            )));
        }
        let mut decisions = self.decisions(query).await?;
        decisions.sort_by_key(|decision| std::cmp::Reverse(decision.cursor));
        let store = self.store().managed_input_store().await?;
        let mut page = HistoryPage::default();
        for decision in decisions {
            if page.entries.len() == query.limit {
                page.next = page.entries.last().map(|entry| entry.cursor);
                break;
            }
            let Some(record) = store.get_round(&decision.round).await? else {
                continue;
            };
            if !query.status.admits(record.status) {
                continue;
            }
            let spec =
                crate::context::execution_spec(self.store().as_ref(), &decision.round.execution_id)
                    .await?;
            let diagnostics = diagnostics(store.as_ref(), &record, spec.as_ref()).await?;
            let principal = diagnostics.answered_by.as_ref().map(|a| &a.principal);
            if query.principal.is_some() && principal != query.principal.as_ref() {
                continue;
            }
            page.entries.push(HistoryEntry {
                cursor: decision.cursor,
                at: decision.at,
                kind: decision.kind,
                details: RoundDetails {
                    round: record.pending,
                    diagnostics,
                    replayed: false,
                },
            });
        }
        Ok(page)
    }

    /// Every round's newest decision before `query.before`, of `query.server`.
    async fn decisions(&self, query: &HistoryQuery) -> Result<Vec<Decision>> {
        let mut newest: HashMap<(String, String), Decision> = HashMap::new();
        let mut after = Cursor::START;
        loop {
            let page = self.read_changes(after, SCAN_PAGE).await?;
            if page.records.is_empty() {
                break;
            }
            after = page.next;
            for record in page.records {
                let decided = matches!(
                    record.kind,
                    ChangeRecordKind::RoundAnswered | ChangeRecordKind::RoundFailed
                );
                let in_range = query.before.is_none_or(|before| record.cursor < before);
                let of_server = match (&query.server, &record.round) {
                    (Some(server), Some(state)) => &state.server == server,
                    (Some(_), None) => false,
                    (None, _) => true,
                };
                let Some(round_id) = record.round_id.clone() else {
                    continue;
                };
                if decided && in_range && of_server {
                    let key = (record.execution_id.clone(), round_id.clone());
                    newest.insert(
                        key,
                        Decision {
                            cursor: record.cursor,
                            at: record.at,
                            kind: record.kind,
                            round: RoundRef::new(record.execution_id, round_id),
                        },
                    );
                }
            }
        }
        Ok(newest.into_values().collect())
    }
}
