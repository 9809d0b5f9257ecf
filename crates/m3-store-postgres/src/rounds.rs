//! [`PgManagedInputStore`]: one row per round in `m3rs_rounds`.
//!
//! Every change of a round is a compare-and-set, no explicit transaction: the shared
//! [`rules`](m3_store::managed_input::rules) decide on a record of the round, and one guarded
//! `UPDATE ... WHERE record_json = <that record> RETURNING` (autocommit) writes the record
//! they return. When this store object knows the round (it read or wrote it last, see
//! [`RecentRounds`](m3_store::recent::RecentRounds)), the rules decide on that record at the
//! estimated server time and the write pins both (see
//! [`ServerTime`](super::server_time::ServerTime)): one statement. Otherwise, and whenever
//! that write matches no row or the rules refuse or skip it there, the row is read first
//! (with the server's clock) and decided on again. When a concurrent writer changed the
//! round in between, nothing is written and the step is decided again on the new record,
//! so two racing writers behave as if serialized. Creates (`round_create.rs`) are one
//! `INSERT ... ON CONFLICT DO NOTHING` under the table's unique keys.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use m3_types::{Clock, Error, ManagedInputRecord, Reason, Result};
use serde_json::{Map, Value};
use sqlx::PgConnection;
use time::OffsetDateTime;

use super::connect::{PgStoreOptions, Shared, open};
use super::error::db;
use super::known_round::KnownRound;
use super::round_write::{
    CommitWait, Pinned, Previous, decode, encode, fail_unresolved, server_now, write_round,
};
use super::server_time::Window;
use m3_store::managed_input::rules::{self, RoundWrite, Transition, require_round, require_text};
use m3_store::signal::{Change, ChangeKind, ChangeSignal};
use m3_store::{
    CreateRound, LeaseRef, ManagedInputStore, PendingPage, PendingQuery, RenewRoundLeases,
    RoundChange, RoundOp, RoundRef, RoundScan, UnreadableRound,
};

/// How often a write re-reads and decides again when a concurrent writer changed the round
/// between its read and its write, before it gives up with `storage_error`.
const UPDATE_ATTEMPTS: usize = 16;

/// The PostgreSQL [`ManagedInputStore`]. Clones share the pool.
///
/// ```no_run
/// # async fn demo() -> m3_types::Result<()> {
/// use m3_store::ManagedInputStore;
/// use m3_store_postgres::PgManagedInputStore;
///
/// let store = PgManagedInputStore::open("postgres://m3@localhost/m3?sslmode=disable").await?;
/// assert!(store.list_rounds("exec-1").await?.is_empty());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct PgManagedInputStore {
    shared: Arc<Shared>,
}

impl PgManagedInputStore {
    /// Opens (creating and migrating) the store `url` names (see [`PgStoreOptions`]).
    ///
    /// # Errors
    /// `invalid_argument` for a bad URL; `storage_error` when the server is unreachable or
    /// its schema is newer than this build.
    pub async fn open(url: &str) -> Result<Self> {
        Self::open_with(PgStoreOptions::from_url(url)?).await
    }

    /// Opens the store `options` describe.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub async fn open_with(options: PgStoreOptions) -> Result<Self> {
        Ok(Self::from_shared(Arc::new(open(options).await?)))
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }

    pub(crate) fn from_shared(shared: Arc<Shared>) -> Self {
        Self { shared }
    }

    /// The store's clock (the injected one, or the database server's).
    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.shared.clock)
    }

    /// Whether this store object's change listener is connected and `LISTEN`ing now (see
    /// [`PgExecutionStore::is_listening_for_changes`](super::PgExecutionStore::is_listening_for_changes)).
    pub fn is_listening_for_changes(&self) -> bool {
        self.shared.signal.is_listening()
    }

    /// This store object's change signal (the one its execution store hands out too, when
    /// opened through [`PgExecutionStore`](super::PgExecutionStore)).
    pub fn change_signal(&self) -> Arc<dyn ChangeSignal> {
        Arc::clone(&self.shared.signal) as Arc<dyn ChangeSignal>
    }

    /// Applies `step` to a record of `round` (see the module docs) and stores what `step`
    /// returns with a compare-and-set on that record (deciding again when another writer
    /// came first), committed as `wait` says. `None` leaves the round as it is. An `Ok` is
    /// announced to waiters as `announce` says.
    async fn update(
        &self,
        round: &RoundRef,
        announce: Announce,
        wait: CommitWait,
        step: impl Fn(&ManagedInputRecord, OffsetDateTime) -> Result<Option<RoundWrite>> + Send,
    ) -> Result<ManagedInputRecord> {
        // One connection for the read, the write and the announcement, kept for the next
        // operation: each pool checkout costs a round trip of sqlx's when it goes back.
        let mut conn = self.shared.connection().await?;
        let done = self.update_on(conn.in_use(), round, wait, step).await;
        conn.settle(&done);
        match announce {
            Announce::BeforeReturning if done.is_ok() => {
                let change = round_change(round);
                self.shared.signal.announce_on(conn, &change).await;
            }
            Announce::Queued if done.is_ok() => self
                .shared
                .signal
                .announce_queued(conn, &round_change(round)),
            _ => conn.release(),
        }
        done
    }

    async fn update_on(
        &self,
        conn: &mut PgConnection,
        round: &RoundRef,
        wait: CommitWait,
        step: impl Fn(&ManagedInputRecord, OffsetDateTime) -> Result<Option<RoundWrite>> + Send,
    ) -> Result<ManagedInputRecord> {
        if let Some(written) = self.update_known(conn, round, wait, &step).await? {
            return Ok(written);
        }
        for _ in 0..UPDATE_ATTEMPTS {
            let row: Option<(String, OffsetDateTime)> = sqlx::query_as(
                "SELECT record_json, clock_timestamp() FROM m3rs_rounds \
                 WHERE execution_id = $1 AND round_id = $2",
            )
            .bind(&round.execution_id)
            .bind(&round.round_id)
            .fetch_optional(&mut *conn)
            .await
            .map_err(db("cannot read the managed-input round"))?;
            let (stored, server_now) = row.ok_or_else(|| rules::missing_round(round))?;
            self.shared.reset_server_time(server_now, Instant::now());
            let current = decode(&stored)?;
            let Some(write) = step(&current, self.shared.now(server_now))? else {
                self.shared
                    .rounds
                    .keep(&current, KnownRound::new(stored, &current));
                return Ok(current);
            };
            let previous = Previous {
                stored: &stored,
                record: &current,
            };
            if let Some(written) = self.write_known(conn, previous, write, wait, None).await? {
                return Ok(written);
            }
            // Another writer changed the round since the read: decide again on its record.
        }
        Err(Error::storage(
            "the managed-input round kept changing under concurrent writers; try again",
        )
        .with_detail("execution_id", round.execution_id.clone())
        .with_detail("round_id", round.round_id.clone()))
    }

    /// The write `step` decides on the round as this store object last read or wrote it, at
    /// the estimated server time, in one statement (no read). `None`, with nothing written,
    /// when the object knows no record of the round, when `step` wants no write or refuses
    /// it there (both are decided again on a fresh read: the known record may be behind),
    /// or when the row or the server's clock has moved on since.
    async fn update_known(
        &self,
        conn: &mut PgConnection,
        round: &RoundRef,
        wait: CommitWait,
        step: &(impl Fn(&ManagedInputRecord, OffsetDateTime) -> Result<Option<RoundWrite>> + Send),
    ) -> Result<Option<ManagedInputRecord>> {
        let Some(known) = self.shared.rounds.get(round) else {
            return Ok(None);
        };
        let (now, window) = self.shared.decision_time();
        let Ok(Some(write)) = step(&known.record, now) else {
            return Ok(None);
        };
        let written = self
            .write_known(conn, Previous::of(&known), write, wait, window)
            .await?;
        if written.is_none() {
            self.shared.rounds.forget(round);
        }
        Ok(written)
    }

    /// [`write_round`] of `write` over `previous`, pinned to `window` if given; on success
    /// the server's time it returned is learned and the written record kept as known and
    /// returned; `None` when the row no longer held `previous` (or the window was missed).
    async fn write_known(
        &self,
        conn: &mut PgConnection,
        previous: Previous<'_>,
        write: RoundWrite,
        wait: CommitWait,
        window: Option<Window>,
    ) -> Result<Option<ManagedInputRecord>> {
        let encoded = encode(&write.record)?;
        let redacted = write.redacted_json.as_deref();
        let actor = write
            .actor
            .as_ref()
            .map(m3_types::Actor::to_json_text)
            .transpose()?;
        let pinned = Pinned { wait, window };
        let written = write_round(
            conn,
            previous,
            &write.record,
            &encoded,
            redacted,
            actor.as_deref(),
            pinned,
        )
        .await?;
        let Some(server_now) = written else {
            return Ok(None);
        };
        self.shared.observe_server_time(server_now, Instant::now());
        let known = KnownRound::new(encoded, &write.record);
        self.shared.rounds.keep(&write.record, known);
        Ok(Some(write.record))
    }
}

impl PgManagedInputStore {
    /// Keeps `record`, just written by a statement of its own (a batch), as known.
    pub(super) fn keep_written(&self, record: &ManagedInputRecord) {
        match encode(record) {
            Ok(stored) => self
                .shared
                .rounds
                .keep(record, KnownRound::new(stored, record)),
            Err(_) => self.shared.rounds.forget(&RoundRef::of(record)),
        }
    }
}

impl PgManagedInputStore {
    /// One renewal by compare-and-set, deciding again on the record a concurrent writer
    /// left (announcing nothing: nobody waits for renewals).
    pub(super) async fn renew_alone(
        &self,
        round: &RoundRef,
        lease: &LeaseRef,
        lease_duration: Duration,
    ) -> Result<ManagedInputRecord> {
        self.update(
            round,
            Announce::Nothing,
            CommitWait::Flush,
            |current, now| RoundWrite::renew(current, lease, lease_duration, now),
        )
        .await
    }
}

/// The change a committed write of `round` announces.
fn round_change(round: &RoundRef) -> Change {
    Change::new(round.execution_id.clone(), ChangeKind::Round)
}

/// When a committed round write is announced to other store objects (see
/// [`PgSignal`](super::signal::PgSignal)).
#[derive(Debug, Clone, Copy)]
pub(super) enum Announce {
    /// Not at all (a lease renewal: nobody waits for it).
    Nothing,
    /// Sent before the write returns: a process may exit right after it (a response from
    /// `m3 respond`, a failure, a recovery decision, a claim).
    BeforeReturning,
    /// Queued to the store object's sender task: the writer is the worker, which goes on
    /// working (creating the round it then waits on, delivering it, resolving it), so the
    /// task sends it, together with those of concurrent writes.
    Queued,
}

#[async_trait]
impl ManagedInputStore for PgManagedInputStore {
    async fn create_round(&self, request: CreateRound) -> Result<ManagedInputRecord> {
        self.do_create_round(request).await
    }

    async fn get_round(&self, round: &RoundRef) -> Result<Option<ManagedInputRecord>> {
        require_round(round)?;
        let mut conn = self.shared.connection().await?;
        let stored: Result<Option<String>, _> = sqlx::query_scalar(
            "SELECT record_json FROM m3rs_rounds WHERE execution_id = $1 AND round_id = $2",
        )
        .bind(&round.execution_id)
        .bind(&round.round_id)
        .fetch_optional(conn.in_use())
        .await;
        conn.settle_sqlx(&stored);
        conn.release();
        let Some(stored) = stored.map_err(db("cannot read the managed-input round"))? else {
            return Ok(None);
        };
        let record = decode(&stored)?;
        // A read usually precedes a write of the same round (a woken worker delivering).
        self.shared
            .rounds
            .keep(&record, KnownRound::new(stored, &record));
        Ok(Some(record))
    }

    async fn scan_rounds(&self, execution_id: &str) -> Result<RoundScan> {
        require_text(execution_id, "execution_id")?;
        let mut conn = self.shared.connection().await?;
        let rows: Result<Vec<(String, String)>, _> = sqlx::query_as(
            "SELECT round_id, record_json FROM m3rs_rounds WHERE execution_id = $1 \
             ORDER BY round_index, round_id",
        )
        .bind(execution_id)
        .fetch_all(conn.in_use())
        .await;
        conn.settle_sqlx(&rows);
        conn.release();
        let rows = rows.map_err(db("cannot list the execution's rounds"))?;
        let mut scan = RoundScan::default();
        for (round_id, stored) in rows {
            match decode(&stored) {
                Ok(record) => scan.rounds.push(record),
                Err(error) => scan.unreadable.push(UnreadableRound::new(round_id, error)),
            }
        }
        Ok(scan)
    }

    async fn pending_page(&self, query: &PendingQuery) -> Result<PendingPage> {
        self.pending_page_impl(query).await
    }

    async fn renew_leases(
        &self,
        batch: RenewRoundLeases,
    ) -> Result<Vec<Result<ManagedInputRecord>>> {
        self.do_renew_leases(&batch.leases, batch.lease_duration)
            .await
    }

    async fn write_round(&self, change: RoundChange) -> Result<ManagedInputRecord> {
        let round = change.round();
        let (announce, wait) = match change.op() {
            RoundOp::Transition { transition, .. } => match transition {
                // `start_delivery` guards nothing durable: a row lost with the server reads
                // `response_validated`, which recovery fails exactly as `delivery_started`.
                // Neither its flush nor its announcement holds up the MCP retry that follows.
                Transition::StartDelivery => (Announce::Queued, CommitWait::Skip),
                _ => (Announce::Queued, CommitWait::Flush),
            },
            _ => (Announce::BeforeReturning, CommitWait::Flush),
        };
        self.update(round, announce, wait, |current, now| {
            change.write(current, now)
        })
        .await
    }

    async fn fail_unresolved_rounds(&self, execution_id: &str, message: &str) -> Result<u64> {
        require_text(execution_id, "execution_id")?;
        require_text(message, "message")?;
        let mut tx = self
            .shared
            .pool
            .begin()
            .await
            .map_err(db("cannot begin a transaction"))?;
        let now = self.shared.now(server_now(&mut tx).await?);
        let failed = fail_unresolved(&mut tx, execution_id, message, now).await?;
        tx.commit()
            .await
            .map_err(db("cannot commit the recovery"))?;
        let change = Change::new(execution_id, ChangeKind::Round);
        self.shared.signal.announce(&change).await;
        Ok(failed)
    }

    async fn answered_by(&self, round: &RoundRef) -> Result<Option<m3_types::Actor>> {
        require_round(round)?;
        let stored: Option<Option<String>> = sqlx::query_scalar(
            "SELECT answered_by_json FROM m3rs_rounds WHERE execution_id = $1 AND round_id = $2",
        )
        .bind(&round.execution_id)
        .bind(&round.round_id)
        .fetch_optional(&self.shared.pool)
        .await
        .map_err(db("cannot read who answered the round"))?;
        stored
            .flatten()
            .as_deref()
            .map(m3_types::Actor::from_json_text)
            .transpose()
    }

    async fn redacted_responses(&self, round: &RoundRef) -> Result<Option<Map<String, Value>>> {
        require_round(round)?;
        let stored: Option<Option<String>> = sqlx::query_scalar(
            "SELECT redacted_responses_json FROM m3rs_rounds WHERE execution_id = $1 AND round_id = $2",
        )
        .bind(&round.execution_id)
        .bind(&round.round_id)
        .fetch_optional(&self.shared.pool)
        .await
        .map_err(db("cannot read the redacted responses"))?;
        match stored.flatten() {
            None => Ok(None),
            Some(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
                Error::managed_input_validation("stored redacted response projection is invalid")
                    .with_reason(Reason::StoredRecordInvalid)
                    .with_detail("why", e.to_string())
            }),
        }
    }
}

#[cfg(all(test, feature = "conformance"))]
#[path = "known_tests.rs"]
mod known_tests;
