//! The rounds table's columns, listed once.
//!
//! [`round_columns!`] is the one table: each column's name, its definition in the Python
//! original's `CREATE TABLE`, and the definition the original uses when it adds the column
//! to a pre-existing partial table; the guarded (non-key) columns also carry the storage
//! class their row image keeps. Everything else is derived from it at compile time: the
//! `CREATE TABLE` statement ([`CREATE_ROUNDS`]), the added-column definitions
//! ([`COLUMN_MIGRATIONS`]), the column list every read selects ([`record_columns!`]), the
//! row image's `WHERE` tail ([`image_guard!`]) and its column kinds ([`GUARDED`]). They are
//! macros because sqlx only takes `&'static str` statements, built here with `concat!`.
//! Adding a column means one line here and its field in `codec::decode_record`.

/// The stored class of a guarded column, as its row image reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `INTEGER`.
    Integer,
    /// `TEXT` (possibly NULL).
    Text,
}

/// Calls `$then!` with the rounds table: `keys { (name, create, added), ... }` (the primary
/// key, in order) and `guarded { (name, Kind, create, added), ... }` (every other column),
/// in the original's column order.
macro_rules! round_columns {
    ($then:ident) => {
        $crate::sqlite::columns::$then! {
            keys {
                (execution_id, "TEXT NOT NULL", "TEXT NOT NULL DEFAULT ''"),
                (round_id, "TEXT NOT NULL", "TEXT NOT NULL DEFAULT ''")
            }
            guarded {
                (round_index, Integer, "INTEGER NOT NULL CHECK(round_index >= 0)", "INTEGER NOT NULL DEFAULT 0"),
                (round_limit, Integer, "INTEGER NOT NULL CHECK(round_limit > 0)", "INTEGER NOT NULL DEFAULT 1"),
                (pending_json, Text, "TEXT NOT NULL", "TEXT NOT NULL DEFAULT '{}'"),
                (status, Text, "TEXT NOT NULL CHECK(status IN ('pending','response_validated','delivery_started','delivered','resolved','failed'))", "TEXT NOT NULL DEFAULT 'pending'"),
                (responses_json, Text, "TEXT", "TEXT"),
                (response_idempotency_key, Text, "TEXT", "TEXT"),
                (owner_id, Text, "TEXT NOT NULL", "TEXT NOT NULL DEFAULT ''"),
                (lease_token, Text, "TEXT NOT NULL", "TEXT NOT NULL DEFAULT ''"),
                (lease_expires_at, Text, "TEXT NOT NULL", "TEXT NOT NULL DEFAULT '1970-01-01T00:00:00+00:00'"),
                (harness_session_id, Text, "TEXT", "TEXT"),
                (native_resume_token, Text, "TEXT", "TEXT"),
                (delivery_idempotency_key, Text, "TEXT", "TEXT"),
                (session_id, Text, "TEXT", "TEXT"),
                (turn_id, Text, "TEXT", "TEXT"),
                (operation_parameters_json, Text, "TEXT NOT NULL", "TEXT NOT NULL DEFAULT '{}'"),
                (delivery_attempts, Integer, "INTEGER NOT NULL DEFAULT 0 CHECK(delivery_attempts >= 0)", "INTEGER NOT NULL DEFAULT 0"),
                (created_at, Text, "TEXT NOT NULL", "TEXT NOT NULL DEFAULT '1970-01-01T00:00:00+00:00'"),
                (updated_at, Text, "TEXT NOT NULL", "TEXT NOT NULL DEFAULT '1970-01-01T00:00:00+00:00'"),
                (response_validated_at, Text, "TEXT", "TEXT"),
                (delivery_started_at, Text, "TEXT", "TEXT"),
                (delivered_at, Text, "TEXT", "TEXT"),
                (resolved_at, Text, "TEXT", "TEXT"),
                (failed_at, Text, "TEXT", "TEXT"),
                (failure_code, Text, "TEXT", "TEXT"),
                (failure_message, Text, "TEXT", "TEXT")
            }
        }
    };
}

/// `CREATE TABLE` text from the table (the original's layout, byte for byte).
macro_rules! create_statement {
    (keys { $(($key:ident, $key_create:literal, $key_added:literal)),* }
     guarded { $(($column:ident, $kind:ident, $create:literal, $added:literal)),* }) => {
        concat!(
            "CREATE TABLE IF NOT EXISTS m3_managed_input_rounds (",
            $("\n  ", stringify!($key), " ", $key_create, ",",)*
            $("\n  ", stringify!($column), " ", $create, ",",)*
            "\n  PRIMARY KEY(execution_id, round_id),\n  UNIQUE(execution_id, round_index)\n)"
        )
    };
}

/// `(name, added definition)` pairs from the table.
macro_rules! added_definitions {
    (keys { $(($key:ident, $key_create:literal, $key_added:literal)),* }
     guarded { $(($column:ident, $kind:ident, $create:literal, $added:literal)),* }) => {
        &[
            $((stringify!($key), $key_added),)*
            $((stringify!($column), $added),)*
        ]
    };
}

/// The comma-separated column list from the table.
macro_rules! select_list {
    (keys { ($first:ident, $($first_rest:literal),*) $(, ($key:ident, $($key_rest:literal),*))* }
     guarded { $(($column:ident, $($column_rest:tt)*)),* }) => {
        concat!(
            stringify!($first)
            $(, ",", stringify!($key))*
            $(, ",", stringify!($column))*
        )
    };
}

/// The image guard's `WHERE` tail from the table.
macro_rules! guard_tail {
    (keys { $(($key:ident, $($key_rest:literal),*)),* }
     guarded { $(($column:ident, $($column_rest:tt)*)),* }) => {
        concat!($(" AND ", stringify!($column), " IS ?"),*)
    };
}

/// `(name, kind)` of every guarded column from the table.
macro_rules! guarded_kinds {
    (keys { $(($key:ident, $($key_rest:literal),*)),* }
     guarded { $(($column:ident, $kind:ident, $create:literal, $added:literal)),* }) => {
        &[$((stringify!($column), $crate::sqlite::columns::Kind::$kind)),*]
    };
}

/// The columns every read selects, comma-separated, in table order.
macro_rules! record_columns {
    () => {
        $crate::sqlite::columns::round_columns!(select_list)
    };
}

/// The `WHERE` tail that pins every guarded column of the round to its row image (the key
/// columns are bound by the lease guard before it): ` AND column IS ?` per guarded column,
/// bound by `RowImage::bind` in [`GUARDED`] order.
macro_rules! image_guard {
    () => {
        $crate::sqlite::columns::round_columns!(guard_tail)
    };
}

pub(crate) use {
    added_definitions, create_statement, guard_tail, guarded_kinds, image_guard, record_columns,
    round_columns, select_list,
};

/// `CREATE TABLE` of the rounds table: the Python original's statement.
pub(crate) const CREATE_ROUNDS: &str = round_columns!(create_statement);

/// Every column with the definition used when a pre-existing table lacks it (the Python
/// original's defaults, in its order).
pub(crate) const COLUMN_MIGRATIONS: &[(&str, &str)] = round_columns!(added_definitions);

/// The guarded columns and their stored class, in [`image_guard!`] order.
pub(crate) const GUARDED: &[(&str, Kind)] = round_columns!(guarded_kinds);

#[cfg(test)]
mod tests {
    use super::*;

    /// sf-m3 0.3.1's `CREATE TABLE` of the rounds table, as `SQLiteManagedInputStore`
    /// issues it: a database either implementation creates has the same schema text.
    const ORIGINAL_CREATE_ROUNDS: &str = "CREATE TABLE IF NOT EXISTS m3_managed_input_rounds (
  execution_id TEXT NOT NULL,
  round_id TEXT NOT NULL,
  round_index INTEGER NOT NULL CHECK(round_index >= 0),
  round_limit INTEGER NOT NULL CHECK(round_limit > 0),
  pending_json TEXT NOT NULL,
  status TEXT NOT NULL CHECK(status IN ('pending','response_validated','delivery_started','delivered','resolved','failed')),
  responses_json TEXT,
  response_idempotency_key TEXT,
  owner_id TEXT NOT NULL,
  lease_token TEXT NOT NULL,
  lease_expires_at TEXT NOT NULL,
  harness_session_id TEXT,
  native_resume_token TEXT,
  delivery_idempotency_key TEXT,
  session_id TEXT,
  turn_id TEXT,
  operation_parameters_json TEXT NOT NULL,
  delivery_attempts INTEGER NOT NULL DEFAULT 0 CHECK(delivery_attempts >= 0),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  response_validated_at TEXT,
  delivery_started_at TEXT,
  delivered_at TEXT,
  resolved_at TEXT,
  failed_at TEXT,
  failure_code TEXT,
  failure_message TEXT,
  PRIMARY KEY(execution_id, round_id),
  UNIQUE(execution_id, round_index)
)";

    #[test]
    fn the_create_statement_is_the_originals() {
        assert_eq!(CREATE_ROUNDS, ORIGINAL_CREATE_ROUNDS);
    }

    #[test]
    fn every_list_names_the_same_columns_in_the_same_order() {
        let selected: Vec<&str> = record_columns!().split(',').collect();
        let added: Vec<&str> = COLUMN_MIGRATIONS.iter().map(|(name, _)| *name).collect();
        assert_eq!(selected, added);
        assert_eq!(selected.len(), 27);
        let guarded: Vec<&str> = GUARDED.iter().map(|(name, _)| *name).collect();
        assert_eq!(guarded, selected[2..]);
        let tail: Vec<&str> = image_guard!()
            .split(" AND ")
            .skip(1)
            .map(|clause| clause.trim_end_matches(" IS ?"))
            .collect();
        assert_eq!(tail, guarded);
        let integers: Vec<&str> = GUARDED
            .iter()
            .filter(|(_, kind)| *kind == Kind::Integer)
            .map(|(name, _)| *name)
            .collect();
        assert_eq!(
            integers,
            ["round_index", "round_limit", "delivery_attempts"]
        );
    }
}
