//! [`PendingQuery`]: one page of the pending rounds of every execution (the inbox), with
//! filters, a text search, a sort order and an offset, and the shared rules that decide
//! which rounds match and in which order, so every backend lists the same page.

use std::cmp::Ordering;

use m3_types::{Error, ManagedInputRecord, ManagedInputStatus, Result};
use time::OffsetDateTime;

/// The most rounds one [`PendingQuery`] page may hold.
pub const PENDING_PAGE_MAX: usize = 500;

/// The order of a [`PendingQuery`] page. Ties are broken by execution id, then round id
/// (bytewise), so paging is stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PendingSort {
    /// Newest first (by the round's `created_at`).
    #[default]
    Newest,
    /// Oldest first.
    Oldest,
    /// Earliest deadline first; rounds without a deadline last (oldest first among equals).
    Deadline,
    /// By server name (bytewise), oldest first within a server.
    Server,
}

impl PendingSort {
    /// The wire name: `newest`, `oldest`, `deadline`, `server`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Newest => "newest",
            Self::Oldest => "oldest",
            Self::Deadline => "deadline",
            Self::Server => "server",
        }
    }

    /// Parses a wire name; the empty string is the default ([`Newest`](Self::Newest)).
    ///
    /// # Errors
    /// `invalid_argument` for any other name.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "" | "newest" => Ok(Self::Newest),
            "oldest" => Ok(Self::Oldest),
            "deadline" => Ok(Self::Deadline),
            "server" => Ok(Self::Server),
            other => Err(Error::model_validation(format!(
                "unknown sort {other:?}: expected newest, oldest, deadline or server"
            ))),
        }
    }
}

/// Which pending rounds to list, in which order, and which page of them.
///
/// A round matches when its status is `pending` and every filter that is set admits it:
/// - `server`: the round's server equals it;
/// - `operation`: the round's operation name (tool, prompt or resource) equals it;
/// - `created_before`: the round's `created_at` (the public round's) is earlier;
/// - `text`: it occurs in the server, the operation name or any request's message, ASCII
///   letters compared case-insensitively (other characters exactly).
///
/// ```
/// use m3_store::{PendingQuery, PendingSort};
///
/// let query = PendingQuery::new().server("shipping").sort(PendingSort::Deadline).page(50, 50);
/// assert_eq!(query.limit, 50);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PendingQuery {
    /// Only rounds of this server.
    pub server: Option<String>,
    /// Only rounds of this operation name.
    pub operation: Option<String>,
    /// Only rounds created before this time (an age filter: "older than").
    pub created_before: Option<OffsetDateTime>,
    /// Only rounds whose server, operation name or a request message contain this.
    pub text: Option<String>,
    /// The order.
    pub sort: PendingSort,
    /// How many matching rounds to skip.
    pub offset: usize,
    /// How many rounds the page holds at most (1 to [`PENDING_PAGE_MAX`]).
    pub limit: usize,
}

impl Default for PendingQuery {
    fn default() -> Self {
        Self::new()
    }
}

impl PendingQuery {
    /// Every pending round, newest first, the first [`PENDING_PAGE_MAX`].
    pub fn new() -> Self {
        Self {
            server: None,
            operation: None,
            created_before: None,
            text: None,
            sort: PendingSort::Newest,
            offset: 0,
            limit: PENDING_PAGE_MAX,
        }
    }

    /// Only rounds of `server`.
    #[must_use]
    pub fn server(mut self, server: impl Into<String>) -> Self {
        self.server = Some(server.into());
        self
    }

    /// Only rounds of the operation `name`.
    #[must_use]
    pub fn operation(mut self, name: impl Into<String>) -> Self {
        self.operation = Some(name.into());
        self
    }

    /// Only rounds created before `at`.
    #[must_use]
    pub fn created_before(mut self, at: OffsetDateTime) -> Self {
        self.created_before = Some(at);
        self
    }

    /// Only rounds that mention `text` (see the type's rules).
    #[must_use]
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    /// The order.
    #[must_use]
    pub fn sort(mut self, sort: PendingSort) -> Self {
        self.sort = sort;
        self
    }

    /// Skip `offset` matching rounds and hold at most `limit`.
    #[must_use]
    pub fn page(mut self, offset: usize, limit: usize) -> Self {
        self.offset = offset;
        self.limit = limit;
        self
    }

    /// Checks the page size (call it before reading).
    ///
    /// # Errors
    /// `invalid_argument` for a limit of 0 or over [`PENDING_PAGE_MAX`].
    pub fn validate(&self) -> Result<()> {
        if self.limit == 0 || self.limit > PENDING_PAGE_MAX {
            return Err(Error::model_validation(format!(
                "a page of pending rounds holds 1 to {PENDING_PAGE_MAX} rounds, not {}",
                self.limit
            )));
        }
        Ok(())
    }

    /// Whether `record` matches (status `pending` and every filter).
    pub fn admits(&self, record: &ManagedInputRecord) -> bool {
        let round = &record.pending;
        record.status == ManagedInputStatus::Pending
            && self.server.as_ref().is_none_or(|s| &round.server == s)
            && self
                .operation
                .as_ref()
                .is_none_or(|o| &round.operation_name == o)
            && self.created_before.is_none_or(|t| round.created_at < t)
            && self.text.as_ref().is_none_or(|text| mentions(record, text))
    }

    /// The page's order of two matching records.
    pub fn order(&self, a: &ManagedInputRecord, b: &ManagedInputRecord) -> Ordering {
        let (x, y) = (&a.pending, &b.pending);
        let primary = match self.sort {
            PendingSort::Newest => y.created_at.cmp(&x.created_at),
            PendingSort::Oldest => x.created_at.cmp(&y.created_at),
            PendingSort::Deadline => match (x.deadline, y.deadline) {
                (Some(p), Some(q)) => p.cmp(&q),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => Ordering::Equal,
            }
            .then(x.created_at.cmp(&y.created_at)),
            PendingSort::Server => x
                .server
                .as_bytes()
                .cmp(y.server.as_bytes())
                .then(x.created_at.cmp(&y.created_at)),
        };
        primary
            .then_with(|| x.execution_id.as_bytes().cmp(y.execution_id.as_bytes()))
            .then_with(|| x.round_id.as_bytes().cmp(y.round_id.as_bytes()))
    }

    /// The page of `records` (any rounds, in any order): the matching ones, sorted, the
    /// offset skipped and the limit kept, with the number that matched. A backend that
    /// reads the pending rounds itself answers [`ManagedInputStore::pending_page`] with it.
    ///
    /// [`ManagedInputStore::pending_page`]: crate::ManagedInputStore::pending_page
    pub fn select(&self, records: impl IntoIterator<Item = ManagedInputRecord>) -> PendingPage {
        let mut matching: Vec<ManagedInputRecord> =
            records.into_iter().filter(|r| self.admits(r)).collect();
        matching.sort_by(|a, b| self.order(a, b));
        let total = matching.len();
        let rounds = matching
            .into_iter()
            .skip(self.offset)
            .take(self.limit)
            .collect();
        PendingPage { rounds, total }
    }
}

/// Whether `text` occurs (ASCII case-insensitively) in the round's server, operation name
/// or a request's message.
fn mentions(record: &ManagedInputRecord, text: &str) -> bool {
    let needle = text.to_ascii_lowercase();
    let round = &record.pending;
    let found = |haystack: &str| haystack.to_ascii_lowercase().contains(&needle);
    found(&round.server)
        || found(&round.operation_name)
        || round
            .requests
            .values()
            .any(|request| found(request.message()))
}

/// One page of pending rounds ([`ManagedInputStore::pending_page`]).
///
/// [`ManagedInputStore::pending_page`]: crate::ManagedInputStore::pending_page
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct PendingPage {
    /// The page's rounds, in the query's order.
    pub rounds: Vec<ManagedInputRecord>,
    /// How many rounds match the query's filters (on every page).
    pub total: usize,
}

impl PendingPage {
    /// A page of `rounds` out of `total` matching.
    pub fn new(rounds: Vec<ManagedInputRecord>, total: usize) -> Self {
        Self { rounds, total }
    }
}
