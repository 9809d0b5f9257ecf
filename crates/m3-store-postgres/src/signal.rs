//! The PostgreSQL backend's change signal: `NOTIFY` on a channel of the store's schema, one
//! `LISTEN`ing connection per store object feeding its [`ChangeHub`].
//!
//! - **Announcing.** After a mutation commits, [`PgSignal::announce`] wakes this store
//!   object's own subscriptions at once and sends the change with `pg_notify` in a statement
//!   of its own, with `synchronous_commit` off (a hint needs no flush), before the store call
//!   returns: a process that exits right after its commit (`m3 respond`) has announced it.
//!   The exceptions are the worker's own round writes, whose process goes on working:
//!   creating the round it then waits on, and the delivery steps (`start_delivery`, which the
//!   MCP retry waits for, `mark_delivered`, `resolve`). They queue their announcement to the
//!   store object's sender task and return ([`PgSignal::announce_queued`]). A worker that
//!   dies before the task sent one loses that wake-up only (as below); the execution's
//!   finish, which wakes every waiter on the execution, is announced before it returns.
//!   A round write sends it on the connection of its commit when no other announcement of
//!   the store object is under way; otherwise (and for the execution store's writes) it is
//!   sent by one task per store object, so the announcements of concurrent writes go out
//!   together.
//!   The `NOTIFY` is deliberately not inside the data transaction: PostgreSQL serializes
//!   every committing transaction that has notified under one cluster-wide lock held
//!   through its WAL flush, which turns concurrent commits into a queue (measured in
//!   `docs/decisions.md`). A process that dies between its commit and the send loses that
//!   wake-up only; waiters re-read on their fallback poll.
//! - **Listening.** The first subscription starts the *listener*: a task holding a
//!   [`PgListener`] on its own connection, `LISTEN`ing on the schema's channel, publishing
//!   every change it hears from another store object into the hub. Once it listens it marks
//!   the hub live (waiters re-read on their own only every
//!   [`SAFETY_POLL`](m3_store::signal::SAFETY_POLL)); until then they re-read every second, so
//!   a commit made before the `LISTEN` took effect is seen within that second. A lost
//!   connection marks the hub not live (which wakes every waiter: notifications may have
//!   been lost) and is re-established with backoff; meanwhile waiters poll every second.
//! - **Isolation.** The channel is named after the schema ([`channel_name`]), and
//!   notifications stay inside their database, so tenants never wake each other.
//!
//! Notifications need a session that stays connected: not through a transaction-mode pooler,
//! not on a read replica (see `docs/postgres.md`).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions};
use sqlx::{PgExecutor, Postgres};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::held_connections::StoreConnection;
use m3_store::signal::{Change, ChangeHub, ChangeSignal, ChangeSubscription, Topic};

/// The announcing statement: one notification per payload, in a transaction that does not
/// wait for its commit to be flushed.
const NOTIFY: &str = "SELECT set_config('synchronous_commit', 'off', true), \
     pg_notify($1, payload)::text FROM unnest($2::text[]) AS payload";

/// First wait before reconnecting a lost listener; doubled per failure up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// Longest wait between reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The `application_name` of the listening connection (so an operator can find it).
pub(crate) const LISTENER_APPLICATION_NAME: &str = "m3rs-change-listener";

/// The `NOTIFY` channel of the store in `schema`: `m3rs_<schema>`, or, for a schema too long
/// for PostgreSQL's 63-byte names, its first 41 bytes and a stable 64-bit hash of it.
///
/// ```
/// use m3_store_postgres::channel_name;
/// assert_eq!(channel_name("public"), "m3rs_public");
/// assert_ne!(channel_name(&"a".repeat(63)), channel_name(&format!("{}b", "a".repeat(62))));
/// assert!(channel_name(&"a".repeat(63)).len() <= 63);
/// ```
pub fn channel_name(schema: &str) -> String {
    let plain = format!("m3rs_{schema}");
    if plain.len() <= 63 {
        return plain;
    }
    let prefix: String = schema.chars().take(41).collect();
    format!("m3rs_{prefix}_{:016x}", fnv1a(schema.as_bytes()))
}

/// FNV-1a, 64 bits: the same in every process and build (unlike `std`'s hasher).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The change signal of one PostgreSQL store object (see the module docs).
#[derive(Debug)]
pub(crate) struct PgSignal {
    hub: ChangeHub,
    channel: String,
    /// Tags this object's notifications, so its own listener ignores their echo.
    origin: String,
    /// `false`: in-process wake-ups only (no `NOTIFY`, no `LISTEN`).
    cross_process: bool,
    pool: PgPool,
    connect: PgConnectOptions,
    listener: OnceLock<Option<ListenerTask>>,
    /// The queue of the task that sends concurrent announcements together.
    sender: OnceLock<Option<mpsc::UnboundedSender<Queued>>>,
    /// Announcements of this object under way (see [`announce_on`](Self::announce_on)).
    in_flight: AtomicUsize,
}

/// One announcement under way, counted in its signal's `in_flight` until dropped.
struct InFlight<'a> {
    count: &'a AtomicUsize,
    /// No other announcement was under way when this one started.
    alone: bool,
}

impl<'a> InFlight<'a> {
    fn enter(count: &'a AtomicUsize) -> Self {
        let alone = count.fetch_add(1, Ordering::AcqRel) == 0;
        Self { count, alone }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::AcqRel);
    }
}

/// An announcement waiting for the sender task: its payload, and who to tell once sent.
type Queued = (String, oneshot::Sender<()>);

/// Most announcements one statement sends.
const BATCH: usize = 256;

/// How long the sender task keeps its pool connection without announcements to send.
const HOLD_WHILE_IDLE: Duration = Duration::from_millis(50);

impl PgSignal {
    /// The signal of a store in `schema` on `pool` (whose connections `connect` opens).
    pub(crate) fn new(
        pool: PgPool,
        connect: PgConnectOptions,
        schema: &str,
        cross_process: bool,
    ) -> Self {
        let mut random = [0u8; 4];
        let origin = match getrandom::fill(&mut random) {
            Ok(()) => format!("{:08x}", u32::from_le_bytes(random)),
            // Without an origin tag the own echo is only one spurious wake-up more.
            Err(_) => "00000000".to_owned(),
        };
        // Not live until the listener is `LISTEN`ing: until then (and whenever it is not)
        // only the fallback poll sees other store objects' commits.
        let hub = ChangeHub::new();
        hub.set_live(false);
        Self {
            hub,
            channel: channel_name(schema),
            origin,
            cross_process,
            pool,
            connect,
            listener: OnceLock::new(),
            sender: OnceLock::new(),
            in_flight: AtomicUsize::new(0),
        }
    }

    /// Whether this object's listener is connected and `LISTEN`ing now.
    pub(crate) fn is_listening(&self) -> bool {
        self.hub.is_live()
    }

    /// Wakes this object's subscriptions matching `change`, then sends it to every other
    /// store object on the schema (unless in-process only). Never fails: a lost
    /// announcement is covered by the fallback poll.
    pub(crate) async fn announce(&self, change: &Change) {
        self.hub.publish(change);
        if !self.cross_process {
            return;
        }
        let _announcing = InFlight::enter(&self.in_flight);
        self.queue_and_send(self.payload(change)).await;
    }

    /// [`announce`](Self::announce), by a writer that still holds the connection of its
    /// commit, and releases that connection: when no other announcement of this object is
    /// under way it is sent on that connection (no hand-off to the sender task, no other
    /// checkout); otherwise the connection is released first (the sender task may need a
    /// connection of the pool) and the announcement queued to go out with the others in
    /// one statement.
    pub(crate) async fn announce_on(&self, mut conn: StoreConnection<'_>, change: &Change) {
        self.hub.publish(change);
        if !self.cross_process {
            conn.release();
            return;
        }
        let payload = self.payload(change);
        let announcing = InFlight::enter(&self.in_flight);
        if announcing.alone {
            let sent = send(conn.in_use(), &self.channel, &[payload]).await;
            conn.settle_sqlx(&sent);
            conn.release();
        } else {
            conn.release();
            self.queue_and_send(payload).await;
        }
    }

    /// [`announce_on`](Self::announce_on) for a write of the worker's own round, whose
    /// process keeps running (see the module docs): releases the connection and queues the
    /// announcement to the sender task without waiting for it to go out.
    pub(crate) fn announce_queued(&self, conn: StoreConnection<'_>, change: &Change) {
        self.hub.publish(change);
        conn.release();
        if !self.cross_process {
            return;
        }
        if let Some(queue) = self.sender() {
            // Nobody waits for the confirmation; a queue closed by a runtime shutting down
            // loses the wake-up only (waiters poll).
            let (sent, _unawaited) = oneshot::channel();
            let _ = queue.send((self.payload(change), sent));
        }
    }

    /// Hands `payload` to the sender task and waits until it went out (sends it directly
    /// without a runtime for the task).
    async fn queue_and_send(&self, payload: String) {
        let payload = match self.sender() {
            Some(queue) => {
                let (sent, done) = oneshot::channel();
                match queue.send((payload, sent)) {
                    // Dropped unsent (its runtime is shutting down): the poll covers it.
                    Ok(()) => return done.await.unwrap_or(()),
                    Err(mpsc::error::SendError((payload, _))) => payload,
                }
            }
            None => payload,
        };
        let _ = send(&self.pool, &self.channel, &[payload]).await;
    }

    /// The sender task's queue, started on first use in the current tokio runtime: the
    /// announcements of concurrent writes share one statement (and one turn of the server's
    /// notification lock).
    fn sender(&self) -> Option<&mpsc::UnboundedSender<Queued>> {
        self.sender
            .get_or_init(|| {
                let runtime = tokio::runtime::Handle::try_current().ok()?;
                let (queue, queued) = mpsc::unbounded_channel();
                runtime.spawn(send_loop(self.pool.clone(), self.channel.clone(), queued));
                Some(queue)
            })
            .as_ref()
    }

    /// The notification payload of `change`: this object's origin tag, then the change.
    fn payload(&self, change: &Change) -> String {
        format!(
            "{}{}",
            self.origin,
            String::from_utf8_lossy(&change.encode())
        )
    }

    /// Starts the listener on first use (nothing without a tokio runtime, or in-process only).
    fn start_listener(&self) {
        self.listener.get_or_init(|| {
            if !self.cross_process {
                return None;
            }
            let runtime = tokio::runtime::Handle::try_current().ok()?;
            let listen = Listen {
                connect: self
                    .connect
                    .clone()
                    .application_name(LISTENER_APPLICATION_NAME),
                channel: self.channel.clone(),
                origin: self.origin.clone(),
                hub: self.hub.clone(),
            };
            Some(ListenerTask(runtime.spawn(listen.run())))
        });
    }
}

impl ChangeSignal for PgSignal {
    fn subscribe(&self, topic: Topic) -> ChangeSubscription {
        self.start_listener();
        self.hub.subscribe(topic)
    }

    /// For callers outside the store's own writes (which await
    /// [`announce`](PgSignal::announce)): wakes this object's subscriptions, and sends the
    /// change from a task of the current tokio runtime (none: in-process only).
    fn notify(&self, change: &Change) {
        self.hub.publish(change);
        if !self.cross_process {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (pool, channel) = (self.pool.clone(), self.channel.clone());
            let payload = self.payload(change);
            runtime.spawn(async move {
                let _ = send(&pool, &channel, &[payload]).await;
            });
        }
    }

    fn mechanism(&self) -> &'static str {
        if self.cross_process {
            "postgres-notify"
        } else {
            "in-process"
        }
    }
}

/// The listener's task, aborted when its store object is dropped.
#[derive(Debug)]
struct ListenerTask(JoinHandle<()>);

impl Drop for ListenerTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Sends what is queued, up to [`BATCH`] announcements per statement, and tells each
/// writer its announcement went out; ends when its store object is dropped. While writes
/// keep coming, and the pool has connections to spare, it keeps one (released after
/// [`HOLD_WHILE_IDLE`] without announcements): sqlx pings every connection it takes back,
/// so this saves a round trip per announcement.
async fn send_loop(pool: PgPool, channel: String, mut queued: mpsc::UnboundedReceiver<Queued>) {
    let mut batch = Vec::with_capacity(BATCH);
    let mut held: Option<PoolConnection<Postgres>> = None;
    loop {
        let received = if held.is_some() {
            match tokio::time::timeout(HOLD_WHILE_IDLE, queued.recv_many(&mut batch, BATCH)).await {
                Ok(received) => received,
                Err(_idle) => {
                    held = None;
                    continue;
                }
            }
        } else {
            queued.recv_many(&mut batch, BATCH).await
        };
        if received == 0 {
            return;
        }
        let (payloads, writers): (Vec<String>, Vec<oneshot::Sender<()>>) = batch.drain(..).unzip();
        if held.is_none() {
            held = pool.acquire().await.ok();
        }
        let sent = match held.as_deref_mut() {
            Some(conn) => send(conn, &channel, &payloads).await,
            None => send(&pool, &channel, &payloads).await,
        };
        if sent.is_err() || pool.num_idle() == 0 {
            // A connection that failed may be broken (the pool tests it when taken back);
            // and none is kept that a writer may be waiting for.
            held = None;
        }
        for writer in writers {
            let _ = writer.send(());
        }
    }
}

/// Sends `payloads` on `channel`; a failure is logged only (waiters fall back to polling),
/// and returned for the caller to judge its connection.
async fn send<'e>(
    conn: impl PgExecutor<'e>,
    channel: &str,
    payloads: &[String],
) -> Result<(), sqlx::Error> {
    let sent = sqlx::query(NOTIFY)
        .bind(channel)
        .bind(payloads)
        .execute(conn)
        .await;
    if let Err(error) = &sent {
        tracing::debug!(%error, channel, "change notification not sent; waiters poll");
    }
    sent.map(|_| ())
}

/// What the listener task needs.
struct Listen {
    connect: PgConnectOptions,
    channel: String,
    origin: String,
    hub: ChangeHub,
}

impl Listen {
    /// Connects, listens, publishes until the connection is lost, and starts over with
    /// backoff; forever (the task is aborted with its store object).
    async fn run(self) {
        let mut backoff = FIRST_BACKOFF;
        loop {
            match self.connect_and_listen().await {
                Ok(mut listener) => {
                    backoff = FIRST_BACKOFF;
                    // No wake-up here: a waiter that missed a commit while nobody listened
                    // is sleeping out the short poll it started while the hub was not live.
                    self.hub.set_live(true);
                    self.receive(&mut listener).await;
                    // Notifications may have been lost with the connection: this wakes
                    // every waiter, and they poll until the listener is back.
                    self.hub.set_live(false);
                }
                Err(error) => {
                    tracing::debug!(%error, channel = %self.channel,
                        "cannot listen for changes; waiters poll until it reconnects");
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// A listener on a fresh connection of its own (a pool of one, never reused by the store).
    async fn connect_and_listen(&self) -> Result<PgListener, sqlx::Error> {
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .max_lifetime(None)
            .idle_timeout(None)
            .connect_lazy_with(self.connect.clone());
        let mut listener = PgListener::connect_with(&pool).await?;
        listener.ignore_pool_close_event(true);
        listener.eager_reconnect(false);
        listener.listen(&self.channel).await?;
        tracing::debug!(channel = %self.channel, "listening for changes from other store objects");
        Ok(listener)
    }

    /// Publishes every notification from another store object until the connection fails.
    async fn receive(&self, listener: &mut PgListener) {
        loop {
            match listener.try_recv().await {
                Ok(Some(notification)) => {
                    let payload = notification.payload();
                    match payload.strip_prefix(self.origin.as_str()) {
                        Some(_) => {}
                        None => self.hub.publish(&decode(payload)),
                    }
                }
                Ok(None) => return,
                Err(error) => {
                    tracing::debug!(%error, channel = %self.channel, "the change listener's connection failed");
                    return;
                }
            }
        }
    }
}

/// A notification's change: the payload after its 8-character origin tag.
fn decode(payload: &str) -> Change {
    match payload.get(8..) {
        Some(change) => Change::decode(change.as_bytes()),
        None => Change::any(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use m3_store::signal::ChangeKind;

    #[test]
    fn channel_names_fit_and_differ_per_schema() {
        assert_eq!(channel_name("tenant_a"), "m3rs_tenant_a");
        let long_a = format!("{}a", "x".repeat(62));
        let long_b = format!("{}b", "x".repeat(62));
        assert!(channel_name(&long_a).len() <= 63);
        assert_ne!(channel_name(&long_a), channel_name(&long_b));
        assert_eq!(channel_name(&long_a), channel_name(&long_a));
    }

    #[test]
    fn payloads_carry_an_origin_then_the_change() {
        let change = Change::new("e1", ChangeKind::Round);
        let payload = format!("0123abcd{}", String::from_utf8_lossy(&change.encode()));
        assert_eq!(decode(&payload), change);
        assert_eq!(decode("short"), Change::any());
    }
}
