//! Test support for the PostgreSQL backend (feature `conformance`): the server a test run
//! provides, and a fresh schema per test case so cases run in parallel on one server.
//!
//! `scripts/test.sh` (and `scripts/with-postgres.sh`) start a throwaway server and export
//! `M3_TEST_POSTGRES_URL`; a test that needs PostgreSQL and finds no URL fails with a clear
//! message, it is never skipped.

use m3_types::{Error, Result};

use super::PgStoreOptions;

/// The environment variable naming the test server.
pub const TEST_URL_VARIABLE: &str = "M3_TEST_POSTGRES_URL";

/// The test server's URL.
///
/// # Errors
/// `storage_error` when `M3_TEST_POSTGRES_URL` is unset or empty, saying how to set it.
pub fn test_server_url() -> Result<String> {
    match std::env::var(TEST_URL_VARIABLE) {
        Ok(url) if !url.is_empty() => Ok(url),
        _ => Err(Error::storage(missing_url_message())),
    }
}

/// What a test needing PostgreSQL reports when no server is named.
pub fn missing_url_message() -> String {
    format!(
        "{TEST_URL_VARIABLE} is not set: this test needs a PostgreSQL server; run it through \
         scripts/test.sh or scripts/with-postgres.sh (they start a throwaway server), or set \
         {TEST_URL_VARIABLE}=postgres://USER@HOST:PORT/DB"
    )
}

/// A schema name no other test case uses (`m3t_` and a fresh id).
pub fn fresh_schema() -> String {
    format!("m3t_{}", m3_types::new_id().to_ascii_lowercase())
}

/// Options for the test server in a fresh schema, with a small pool.
///
/// # Errors
/// As [`test_server_url`] and [`PgStoreOptions::from_url`].
pub fn isolated_options() -> Result<PgStoreOptions> {
    PgStoreOptions::from_url(&test_server_url()?)?
        .schema_name(&fresh_schema())
        .map(|options| options.max_connections(4))
}

/// The test server's URL with a fresh schema (`schema=...` added), for code that opens a
/// store by URL (`m3_store::open`, `--db`, `M3_DB`).
///
/// # Errors
/// As [`test_server_url`].
pub fn isolated_url() -> Result<String> {
    let url = test_server_url()?;
    let separator = if url.contains('?') { '&' } else { '?' };
    Ok(format!("{url}{separator}schema={}", fresh_schema()))
}
