//! Small whole-file tables of the directory store (`tokens.json`, `workers.json`,
//! `policies.json`, ...): read under the store's lock, changed under its exclusive lock and
//! staged only when the change says it changed something.

use std::path::PathBuf;

use m3_types::{Error, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::files::Locked;
use crate::store::DirectoryStore;

/// The path of the table file `name` in the directory.
pub(crate) fn table_path(locked: &Locked<'_>, name: &str) -> PathBuf {
    locked.dir().root().join(name)
}

/// The table file `name` (empty when there is none yet).
pub(crate) fn read_table<T: Default + DeserializeOwned>(
    locked: &Locked<'_>,
    name: &str,
) -> Result<T> {
    let path = table_path(locked, name);
    Ok(locked
        .read_json(&path, |why| {
            Error::storage(format!("{} is damaged: {why}", path.display()))
        })?
        .unwrap_or_default())
}

impl DirectoryStore {
    /// Applies `change` to the table file `name` under the exclusive lock; stages it if
    /// `change` says it changed something.
    pub(crate) async fn change_table<F, T>(
        &self,
        name: &'static str,
        change: impl FnOnce(&mut F) -> (T, bool) + Send + 'static,
    ) -> Result<T>
    where
        F: Default + Serialize + DeserializeOwned,
        T: Send + 'static,
    {
        self.write(move |locked, _| {
            let mut file: F = read_table(locked, name)?;
            let (value, changed) = change(&mut file);
            if changed {
                let path = table_path(locked, name);
                locked.stage(&path, &file)?;
            }
            Ok(value)
        })
        .await
    }
}
