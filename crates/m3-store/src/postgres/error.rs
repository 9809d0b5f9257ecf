//! Mapping sqlx errors to `storage_error`.

use m3_types::Error;

/// A `storage_error` for a failed database call, keeping PostgreSQL's SQLSTATE in the
/// details (`postgres_code`) and the sqlx error as the source.
pub(crate) fn storage(context: &str, error: sqlx::Error) -> Error {
    let mut mapped = Error::storage(context.to_owned());
    if let Some(database) = error.as_database_error() {
        if let Some(code) = database.code() {
            mapped = mapped.with_detail("postgres_code", code.into_owned());
        }
        mapped = mapped.with_detail("postgres_message", database.message().to_owned());
    }
    mapped.with_source(error)
}

/// A `storage_error` for a call that failed with `error` (as a closure for `map_err`).
pub(crate) fn db(context: &'static str) -> impl Fn(sqlx::Error) -> Error {
    move |error| storage(context, error)
}
