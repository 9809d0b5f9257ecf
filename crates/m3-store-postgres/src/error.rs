//! Mapping sqlx errors to `storage_error`.

use m3_types::{Error, Reason};

/// A `storage_error` for a failed database call, keeping PostgreSQL's SQLSTATE in the
/// details (`postgres_code`) and the sqlx error as the source. A lost connection (see
/// [`is_connection_lost`]) carries [`Reason::ConnectionLost`], which makes it retryable.
pub(crate) fn storage(context: &str, error: sqlx::Error) -> Error {
    let mut mapped = Error::storage(context.to_owned());
    if let Some(database) = error.as_database_error() {
        if let Some(code) = database.code() {
            mapped = mapped.with_detail("postgres_code", code.into_owned());
        }
        mapped = mapped.with_detail("postgres_message", database.message().to_owned());
    }
    if is_connection_lost(&error) {
        mapped = mapped.with_reason(Reason::ConnectionLost);
    }
    mapped.with_source(error)
}

/// A `storage_error` for a call that failed with `error` (as a closure for `map_err`).
pub(crate) fn db(context: &'static str) -> impl Fn(sqlx::Error) -> Error {
    move |error| storage(context, error)
}

/// Whether `error` says the connection to the server was lost or could not be had, so that
/// nothing was decided and the same call may succeed later: an I/O error (connection
/// refused or reset, end of stream), the pool finding no connection in time, and the
/// SQLSTATEs of a connection exception (class `08`) and of a server that ends sessions
/// (`57P01` admin shutdown, `57P02` crash shutdown, `57P03` cannot connect now, `57P05`
/// idle session timeout). A statement the server refused (a constraint, a syntax error,
/// `57014` statement timeout) is not retryable: it would fail again.
pub(crate) fn is_connection_lost(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut => true,
        sqlx::Error::Database(database) => database.code().is_some_and(|code| {
            code.starts_with("08") || matches!(code.as_ref(), "57P01" | "57P02" | "57P03" | "57P05")
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_and_pool_timeouts_are_retryable_storage_errors() {
        let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        for error in [sqlx::Error::Io(reset), sqlx::Error::PoolTimedOut] {
            let mapped = storage("cannot read the round", error);
            assert!(mapped.is_storage());
            assert_eq!(mapped.reason(), Some(Reason::ConnectionLost));
            assert!(mapped.is_retryable());
        }
        let closed = storage("cannot read the round", sqlx::Error::PoolClosed);
        assert!(
            !closed.is_retryable(),
            "a pool this process closed stays closed"
        );
        let decode = storage("x", sqlx::Error::RowNotFound);
        assert!(!decode.is_retryable());
    }
}
