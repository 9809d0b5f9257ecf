//! Opening a store by URL: the one place above which no crate names a backend.
//!
//! `memory:` and SQLite paths are this crate's own backends. Every other scheme is served
//! by an [`Opener`] that a backend crate [`register`]s into the process-wide scheme
//! registry, the way sqlx's `Any` driver is given its drivers: `m3-store` never imports
//! the backends that live above it. `m3_store_postgres::register()` (crate
//! `m3-store-postgres`) registers `postgres://` and `postgresql://`; `m3-kit` calls it when
//! built with its `postgres` feature. See `docs/decisions.md`.
//!
//! ```
//! # async fn demo() -> m3_types::Result<()> {
//! use std::sync::Arc;
//! use m3_store::ExecutionStore;
//! use m3_store::memory::MemoryExecutionStore;
//! use m3_store::open::{Opener, register};
//!
//! /// A backend of `scratch://NAME` URLs (here: a fresh memory store each time).
//! #[derive(Debug)]
//! struct Scratch;
//!
//! #[async_trait::async_trait]
//! impl Opener for Scratch {
//!     fn schemes(&self) -> &[&'static str] {
//!         &["scratch"]
//!     }
//!     async fn open(
//!         &self,
//!         _url: &str,
//!         clock: Option<Arc<dyn m3_types::Clock>>,
//!     ) -> m3_types::Result<Arc<dyn ExecutionStore>> {
//!         Ok(Arc::new(match clock {
//!             Some(clock) => MemoryExecutionStore::with_clock(clock),
//!             None => MemoryExecutionStore::new(),
//!         }))
//!     }
//! }
//!
//! register(Arc::new(Scratch));
//! let store = m3_store::open("scratch://tests").await?;
//! assert!(!store.is_persistent());
//! # Ok(()) }
//! ```

mod registry;

use std::path::PathBuf;
use std::sync::Arc;

use m3_types::{Clock, Error, Result, SystemClock};

use crate::ExecutionStore;
use crate::memory::MemoryExecutionStore;

pub use registry::{Opener, register, registered_schemes};

/// A parsed store location.
///
/// | Text | Store |
/// |---|---|
/// | `memory:` | a fresh [`MemoryExecutionStore`] (not persistent) |
/// | `sqlite://PATH`, `sqlite:PATH` | the SQLite store at `PATH` (feature `sqlite`) |
/// | `postgres://...`, `postgresql://...` | the PostgreSQL store (served by the [`Opener`] of `m3-store-postgres` once [`register`]ed; see its `PgStoreOptions` for the parameters) |
/// | `SCHEME://...` of a [`register`]ed [`Opener`] | that backend's store |
/// | anything without a `scheme:` | a plain path: the SQLite store there |
///
/// ```
/// use m3_store::StoreUrl;
/// assert_eq!(StoreUrl::parse("memory:")?, StoreUrl::Memory);
/// assert_eq!(StoreUrl::parse("sqlite:///var/m3.db")?, StoreUrl::Sqlite("/var/m3.db".into()));
/// assert_eq!(StoreUrl::parse("runs/m3.sqlite")?, StoreUrl::Sqlite("runs/m3.sqlite".into()));
/// assert!(StoreUrl::parse("mysql://db").is_err());
/// # Ok::<(), m3_types::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreUrl {
    /// The in-memory backend.
    Memory,
    /// A SQLite database file.
    Sqlite(PathBuf),
    /// A PostgreSQL server URL (kept whole: sqlx and the store read its parameters).
    Postgres(String),
    /// A URL whose scheme a [`register`]ed [`Opener`] serves (kept whole).
    Registered(String),
}

impl StoreUrl {
    /// Parses `url` (see the table above).
    ///
    /// # Errors
    /// `invalid_argument` for an empty text, an empty path, or a scheme no compiled-in
    /// backend serves.
    pub fn parse(url: &str) -> Result<Self> {
        if url.is_empty() {
            return Err(Error::model_validation("store URL must not be empty"));
        }
        if url == "memory:" || url == "memory://" {
            return Ok(Self::Memory);
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(Self::Postgres(url.to_owned()));
        }
        let path = if let Some(rest) = url.strip_prefix("sqlite://") {
            rest
        } else if let Some(rest) = url.strip_prefix("sqlite:") {
            rest
        } else if has_scheme(url) {
            if registry::serves(scheme_of(url)) {
                return Ok(Self::Registered(url.to_owned()));
            }
            return Err(Error::model_validation(format!(
                "unsupported store URL '{url}' (expected memory:, sqlite://PATH, postgres://... or a path)"
            ))
            .with_detail("url", url));
        } else {
            url
        };
        if path.is_empty() {
            return Err(Error::model_validation("store URL names no database path"));
        }
        Ok(Self::Sqlite(PathBuf::from(path)))
    }

    /// The local file this store lives in, for the backends that keep one (so a caller can
    /// tell "no store there yet" from "an empty store" without naming a backend); `None`
    /// for server and in-memory stores.
    ///
    /// ```
    /// use m3_store::StoreUrl;
    /// assert!(StoreUrl::parse("runs/m3.sqlite")?.local_file().is_some());
    /// assert!(StoreUrl::parse("postgres://db.example/m3")?.local_file().is_none());
    /// # Ok::<(), m3_types::Error>(())
    /// ```
    pub fn local_file(&self) -> Option<&std::path::Path> {
        match self {
            Self::Sqlite(path) => Some(path),
            Self::Memory | Self::Postgres(_) | Self::Registered(_) => None,
        }
    }

    /// Opens the store this URL names, on `clock`.
    ///
    /// # Errors
    /// The backend's open errors; `invalid_argument` for a backend that is not compiled in
    /// (or, for a scheme served by another crate, not [`register`]ed).
    pub async fn open_with_clock(&self, clock: Arc<dyn Clock>) -> Result<Arc<dyn ExecutionStore>> {
        match self {
            Self::Memory => Ok(Arc::new(MemoryExecutionStore::with_clock(clock))),
            Self::Sqlite(path) => open_sqlite(path, clock).await,
            Self::Postgres(url) | Self::Registered(url) => {
                registry::open(scheme_of(url), url, Some(clock)).await
            }
        }
    }
}

/// The location for people to read: a PostgreSQL password is shown as `***`, so the store
/// can be named in output and logs without leaking the credential.
///
/// ```
/// use m3_store::StoreUrl;
/// let url = StoreUrl::parse("postgres://m3:hunter2@db.example:5432/m3?sslmode=require")?;
/// assert_eq!(url.to_string(), "postgres://m3:***@db.example:5432/m3?sslmode=require");
/// assert_eq!(StoreUrl::parse("runs/m3.sqlite")?.to_string(), "runs/m3.sqlite");
/// # Ok::<(), m3_types::Error>(())
/// ```
impl std::fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Memory => f.write_str("memory:"),
            Self::Sqlite(path) => write!(f, "{}", path.display()),
            Self::Postgres(url) | Self::Registered(url) => f.write_str(&without_password(url)),
        }
    }
}

/// `url` with the password of its user-info part (`user:password@`) replaced by `***`.
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// The scheme of `url` (the text before its first `:`).
fn scheme_of(url: &str) -> &str {
    url.split_once(':').map_or(url, |(scheme, _)| scheme)
}

/// `scheme:` followed by `//`, or a scheme of two or more letters (so `C:\x` stays a path).
fn has_scheme(url: &str) -> bool {
    match url.split_once(':') {
        Some((scheme, rest)) => {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                && (rest.starts_with("//") || scheme.len() > 1)
                && !scheme.contains('/')
        }
        None => false,
    }
}

#[cfg(feature = "sqlite")]
async fn open_sqlite(
    path: &std::path::Path,
    clock: Arc<dyn Clock>,
) -> Result<Arc<dyn ExecutionStore>> {
    let options = crate::SqliteStoreOptions::new().clock(clock);
    Ok(Arc::new(
        crate::SqliteExecutionStore::open_with(path, options).await?,
    ))
}

#[cfg(not(feature = "sqlite"))]
async fn open_sqlite(
    path: &std::path::Path,
    _clock: Arc<dyn Clock>,
) -> Result<Arc<dyn ExecutionStore>> {
    Err(
        Error::model_validation("this build has no SQLite backend (feature `sqlite`)")
            .with_detail("path", path.display().to_string()),
    )
}

/// Opens the execution store `url` names (see [`StoreUrl`]) on the system clock (a
/// registered backend on its default clock: PostgreSQL's is the database server's); its
/// [`managed_input_store`](ExecutionStore::managed_input_store) is the same backend's.
///
/// ```
/// # async fn demo() -> m3_types::Result<()> {
/// let store = m3_store::open("memory:").await?;
/// assert!(!store.is_persistent());
/// # Ok(()) }
/// ```
///
/// # Errors
/// As [`StoreUrl::parse`] and [`StoreUrl::open_with_clock`].
pub async fn open(url: &str) -> Result<Arc<dyn ExecutionStore>> {
    match StoreUrl::parse(url)? {
        StoreUrl::Postgres(url) | StoreUrl::Registered(url) => {
            registry::open(scheme_of(&url), &url, None).await
        }
        other => other.open_with_clock(Arc::new(SystemClock)).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_urls_parse_to_their_backend() {
        let sqlite = |p: &str| StoreUrl::Sqlite(PathBuf::from(p));
        assert_eq!(StoreUrl::parse("m3.sqlite").unwrap(), sqlite("m3.sqlite"));
        assert_eq!(
            StoreUrl::parse("/tmp/a:b/m3.db").unwrap(),
            sqlite("/tmp/a:b/m3.db")
        );
        assert_eq!(StoreUrl::parse("sqlite:rel.db").unwrap(), sqlite("rel.db"));
        assert_eq!(StoreUrl::parse("memory:").unwrap(), StoreUrl::Memory);
        let pg = "postgresql://m3@h/db?sslmode=disable";
        assert_eq!(
            StoreUrl::parse(pg).unwrap(),
            StoreUrl::Postgres(pg.to_owned())
        );
        for bad in ["", "sqlite://", "redis:x"] {
            assert!(StoreUrl::parse(bad).is_err(), "{bad}");
        }
    }
}
