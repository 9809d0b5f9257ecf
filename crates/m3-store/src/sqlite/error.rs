//! Mapping sqlx errors to `storage_error`.

use m3_types::Error;

/// A `storage_error` for a failed database call, keeping SQLite's extended result code in
/// the details (`sqlite_code`) and the sqlx error as the source.
pub(crate) fn storage(context: &str, error: sqlx::Error) -> Error {
    let mut mapped = Error::storage(context.to_owned());
    if let Some(database) = error.as_database_error() {
        if let Some(code) = database.code() {
            mapped = mapped.with_detail("sqlite_code", code.into_owned());
        }
        mapped = mapped.with_detail("sqlite_message", database.message().to_owned());
    }
    mapped.with_source(error)
}

/// Whether a sqlx error is a constraint violation (the original's `IntegrityError`).
pub(crate) fn is_integrity_violation(error: &sqlx::Error) -> bool {
    use sqlx::error::ErrorKind;
    error.as_database_error().is_some_and(|e| {
        matches!(
            e.kind(),
            ErrorKind::UniqueViolation
                | ErrorKind::ForeignKeyViolation
                | ErrorKind::NotNullViolation
                | ErrorKind::CheckViolation
        )
    })
}

/// One item's outcome inside a batch transaction: a `storage_error` fails the whole batch
/// (the transaction rolls back, nothing of it is written), any other error is that item's.
pub(crate) fn batch_item<T>(outcome: m3_types::Result<T>) -> m3_types::Result<m3_types::Result<T>> {
    match outcome {
        Err(error) if error.error_code() == m3_types::ErrorCode::StorageError => Err(error),
        other => Ok(other),
    }
}
