//! Opening a PostgreSQL store: URL parameters, the pool, the schema and its migrations,
//! and the server clock.

use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use m3_types::{Clock, Error, Result};
use sqlx::migrate::{MigrateError, Migrator};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{AssertSqlSafe, Connection, PgConnection};
use time::OffsetDateTime;

use super::error::db;
use super::held_connections::{KeptConnections, StoreConnection};
use super::known_round::KnownRound;
use super::server_time::{ServerTime, Window};
use super::signal::PgSignal;
use m3_store::round_cache::RecentRounds;

/// The pool size when the URL has no `max_connections` parameter.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 10;

/// The schema holding every table when the URL has no `schema` parameter.
pub const DEFAULT_SCHEMA: &str = "public";

/// A pooled connection idle for longer than this is pinged before it is used.
const PING_WHEN_IDLE_FOR: Duration = Duration::from_secs(10);

/// The embedded migrations (`migrations/postgres/`).
static MIGRATOR: Migrator = sqlx::migrate!("migrations/postgres");

/// How a PostgreSQL store connects: the server URL and the m3 parameters read from it.
///
/// The URL is sqlx's (libpq's) form, `postgres://user:password@host:port/db?sslmode=...`;
/// three extra query parameters are m3's own and removed before connecting:
///
/// | Parameter | Meaning | Default |
/// |---|---|---|
/// | `schema` | the schema holding every table (created if missing) | `public` |
/// | `max_connections` | the pool size | 10 |
/// | `statement_timeout` | milliseconds a statement may run (server `statement_timeout`) | none |
///
/// ```
/// use m3_store_postgres::PgStoreOptions;
/// let options = PgStoreOptions::from_url(
///     "postgres://m3@db.example/m3?sslmode=disable&schema=tenant_a&max_connections=4&statement_timeout=5000",
/// )?;
/// assert_eq!(options.schema(), "tenant_a");
/// // Options set in code override the URL's.
/// let options = options.max_connections(8).schema_name("tenant_b")?;
/// assert_eq!(options.schema(), "tenant_b");
/// # Ok::<(), m3_types::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct PgStoreOptions {
    connect: PgConnectOptions,
    schema: String,
    max_connections: u32,
    statement_timeout: Option<Duration>,
    clock: Option<Arc<dyn Clock>>,
    change_signal: bool,
}

impl PgStoreOptions {
    /// Reads `url` (see the table above).
    ///
    /// # Errors
    /// `invalid_argument` for an unparsable URL, a schema that is not a lowercase SQL
    /// identifier, or a parameter that is not a positive number.
    pub fn from_url(url: &str) -> Result<Self> {
        let mut parsed = url::Url::parse(url).map_err(|e| invalid_url(url, &e.to_string()))?;
        let mut schema = DEFAULT_SCHEMA.to_owned();
        let mut max_connections = DEFAULT_MAX_CONNECTIONS;
        let mut statement_timeout = None;
        let mut kept = Vec::new();
        for (key, value) in parsed.query_pairs() {
            match key.as_ref() {
                "schema" => schema = value.into_owned(),
                "max_connections" => max_connections = positive(url, &key, &value)?,
                "statement_timeout" => {
                    statement_timeout = Some(Duration::from_millis(u64::from(positive(
                        url, &key, &value,
                    )?)));
                }
                _ => kept.push((key.into_owned(), value.into_owned())),
            }
        }
        check_schema_name(&schema)?;
        parsed.set_query(None);
        if !kept.is_empty() {
            parsed.query_pairs_mut().extend_pairs(kept);
        }
        let connect = PgConnectOptions::from_str(parsed.as_str())
            .map_err(|e| invalid_url(url, &e.to_string()))?;
        Ok(Self {
            connect,
            schema,
            max_connections,
            statement_timeout,
            clock: None,
            change_signal: m3_store::signal::signal_enabled_by_env(),
        })
    }

    /// The same options with every table in `schema` (a lowercase SQL identifier).
    ///
    /// # Errors
    /// `invalid_argument` for any other name.
    pub fn schema_name(mut self, schema: &str) -> Result<Self> {
        check_schema_name(schema)?;
        schema.clone_into(&mut self.schema);
        Ok(self)
    }

    /// The same options on `clock` instead of the database server's clock.
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The same options with a pool of `max` connections.
    #[must_use]
    pub fn max_connections(self, max: u32) -> Self {
        Self {
            max_connections: max.max(1),
            ..self
        }
    }

    /// The same options with the cross-store change signal (`LISTEN`/`NOTIFY`) on or off.
    /// Off, waiters of this store object are woken by its own commits only and poll every
    /// [`DEFAULT_FALLBACK_POLL`](m3_store::signal::DEFAULT_FALLBACK_POLL) for everyone
    /// else's. The default is on unless [`SIGNAL_ENV`](m3_store::signal::SIGNAL_ENV) says
    /// `off`.
    #[must_use]
    pub fn change_signal(mut self, enabled: bool) -> Self {
        self.change_signal = enabled;
        self
    }

    /// Whether the cross-store change signal is on.
    pub fn get_change_signal(&self) -> bool {
        self.change_signal
    }

    /// The schema holding the tables.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The pool size.
    pub fn pool_size(&self) -> u32 {
        self.max_connections
    }
}

/// What an opened store shares: the pool, the injected clock (if any) and the clock the
/// store reports.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) pool: PgPool,
    pub(crate) injected: Option<Arc<dyn Clock>>,
    pub(crate) clock: Arc<dyn Clock>,
    /// Where committed changes are announced and heard (see [`PgSignal`]).
    pub(crate) signal: Arc<PgSignal>,
    /// Connections kept between operations (see [`KeptConnections`]).
    pub(crate) kept: KeptConnections,
    /// The server's clock as last read (see [`ServerTime`]).
    pub(crate) server_time: Arc<ServerTime>,
    /// The stored form of the rounds this store object read or wrote last.
    pub(crate) rounds: RecentRounds<KnownRound>,
}

impl Shared {
    /// `result`, after announcing `change(ok)` if it is `Ok` (an error committed nothing).
    pub(crate) async fn announced<T>(
        &self,
        result: m3_types::Result<T>,
        change: impl FnOnce(&T) -> m3_store::signal::Change,
    ) -> m3_types::Result<T> {
        if let Ok(value) = &result {
            self.signal.announce(&change(value)).await;
        }
        result
    }

    /// The time of an operation: the injected clock's, else `server_now` (read by the
    /// operation's own statement).
    pub(crate) fn now(&self, server_now: OffsetDateTime) -> OffsetDateTime {
        match &self.injected {
            Some(clock) => m3_store::store_now(clock.as_ref()),
            None => m3_store::truncate_to_stored_precision(server_now),
        }
    }

    /// A connection for an operation's autocommit statements in a row: one this store
    /// object kept from its previous operation, else one of the pool (see
    /// [`KeptConnections`]).
    pub(crate) async fn connection(&self) -> Result<StoreConnection<'_>> {
        self.kept.connection().await
    }

    /// The time to decide a write at without reading the server's clock first: the injected
    /// clock's (the write pins nothing), else the estimate of the server's, with the window
    /// of server time the write must pin (see [`ServerTime`]).
    pub(crate) fn decision_time(&self) -> (OffsetDateTime, Option<Window>) {
        match self.injected_now() {
            Some(now) => (now, None),
            None => {
                let estimate = self.server_time.estimate();
                (estimate.now, Some(estimate.window()))
            }
        }
    }

    /// Learns the server's time from a reading a write returned at `received`.
    pub(crate) fn observe_server_time(&self, server: OffsetDateTime, received: Instant) {
        self.server_time.observe(server, received);
    }

    /// Starts the estimate of the server's time again from a fresh reading (a read that
    /// comes before a write decided on it: see [`ServerTime::reset`]).
    pub(crate) fn reset_server_time(&self, server: OffsetDateTime, received: Instant) {
        self.server_time.reset(server, received);
    }

    /// The injected clock's time, for statements that otherwise read the server clock
    /// themselves (`COALESCE($n, clock_timestamp())`).
    pub(crate) fn injected_now(&self) -> Option<OffsetDateTime> {
        self.injected
            .as_ref()
            .map(|clock| m3_store::store_now(clock.as_ref()))
    }
}

/// Connects the pool, creates the schema and applies the migrations (serialized across
/// processes by an advisory lock), and measures the server clock.
pub(crate) async fn open(options: PgStoreOptions) -> Result<Shared> {
    let schema = options.schema.clone();
    let mut connect = options.connect.options([("search_path", schema.as_str())]);
    if let Some(timeout) = options.statement_timeout {
        connect = connect.options([("statement_timeout", timeout.as_millis().to_string())]);
    }
    let pool = PgPoolOptions::new()
        .max_connections(options.max_connections)
        // sqlx pings every connection it takes back (`Sync`, one round trip), and by default
        // again before handing it out: only a connection idle long enough to have been
        // dropped by the server or the network is pinged again (docs/decisions.md).
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for > PING_WHEN_IDLE_FOR {
                    conn.ping().await?;
                }
                Ok(true)
            })
        })
        .connect_with(connect.clone())
        .await
        .map_err(db("cannot connect to PostgreSQL"))?;
    let mut conn = pool
        .acquire()
        .await
        .map_err(db("cannot connect to PostgreSQL"))?;
    migrate(&mut conn, &schema).await?;
    let server_time = Arc::new(measure_server_time(&mut conn).await?);
    let clock: Arc<dyn Clock> = match &options.clock {
        Some(clock) => Arc::clone(clock),
        None => Arc::clone(&server_time) as Arc<dyn Clock>,
    };
    drop(conn);
    let signal = Arc::new(PgSignal::new(
        pool.clone(),
        connect,
        &schema,
        options.change_signal,
    ));
    Ok(Shared {
        kept: KeptConnections::new(pool.clone(), options.max_connections),
        pool,
        injected: options.clock,
        clock,
        server_time,
        rounds: RecentRounds::default(),
        signal,
    })
}

/// Creates `schema` and migrates it under an advisory lock, refusing a schema version this
/// build does not know.
async fn migrate(conn: &mut PgConnection, schema: &str) -> Result<()> {
    let key = format!("m3rs schema {schema}");
    sqlx::query("SELECT pg_advisory_lock(hashtext($1))")
        .bind(&key)
        .execute(&mut *conn)
        .await
        .map_err(db("cannot lock the schema for migration"))?;
    let outcome = migrate_locked(conn, schema).await;
    let unlocked = sqlx::query("SELECT pg_advisory_unlock(hashtext($1))")
        .bind(&key)
        .execute(&mut *conn)
        .await
        .map_err(db("cannot unlock the schema after migration"));
    outcome.and(unlocked.map(|_| ()))
}

async fn migrate_locked(conn: &mut PgConnection, schema: &str) -> Result<()> {
    let create = format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\"");
    sqlx::query(AssertSqlSafe(create))
        .execute(&mut *conn)
        .await
        .map_err(db("cannot create the store schema"))?;
    let known = MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
    let recorded: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
        .fetch_one(&mut *conn)
        .await
        .map_err(db("cannot read the store schema version"))?;
    let applied: Option<i64> = if recorded {
        sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations")
            .fetch_one(&mut *conn)
            .await
            .map_err(db("cannot read the store schema version"))?
    } else {
        None
    };
    if let Some(applied) = applied
        && applied > known
    {
        return Err(unknown_version(schema, applied, known));
    }
    MIGRATOR
        .run_direct(None, conn, false)
        .await
        .map_err(|e| match e {
            MigrateError::VersionMissing(version) => unknown_version(schema, version, known),
            other => Error::storage(format!(
                "cannot migrate the store schema '{schema}': {other}"
            ))
            .with_source(other),
        })
}

fn unknown_version(schema: &str, applied: i64, known: i64) -> Error {
    Error::storage(format!(
        "the store schema '{schema}' is at version {applied}, newer than this build knows ({known}); upgrade m3"
    ))
    .with_detail("schema_version", applied)
    .with_detail("known_version", known)
}

/// Reads the server's clock once, for the store's first estimate of it.
async fn measure_server_time(conn: &mut PgConnection) -> Result<ServerTime> {
    let server: OffsetDateTime = sqlx::query_scalar("SELECT clock_timestamp()")
        .fetch_one(&mut *conn)
        .await
        .map_err(db("cannot read the server clock"))?;
    Ok(ServerTime::new(server, Instant::now()))
}

fn check_schema_name(schema: &str) -> Result<()> {
    let mut chars = schema.chars();
    let valid = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && schema.len() <= 63;
    if valid {
        Ok(())
    } else {
        Err(Error::model_validation(format!(
            "schema '{schema}' is not a lowercase SQL identifier ([a-z_][a-z0-9_]*, at most 63)"
        )))
    }
}

fn positive(url: &str, key: &str, value: &str) -> Result<u32> {
    value.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| {
        invalid_url(
            url,
            &format!("{key} must be a positive whole number, not '{value}'"),
        )
    })
}

fn invalid_url(url: &str, why: &str) -> Error {
    let shown = url::Url::parse(url).map_or_else(
        |_| "<unparsable>".to_owned(),
        |mut u| {
            let _ = u.set_password(None);
            u.to_string()
        },
    );
    Error::model_validation(format!("invalid PostgreSQL URL: {why}")).with_detail("url", shown)
}
