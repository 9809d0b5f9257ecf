//! Policies and deadline reminders of the directory store. Policies: one file,
//! `policies.json`, with every policy's row (its name and text), read and written under the
//! store's lock; [`RowPolicyStore`](m3_store::policies::RowPolicyStore) makes every
//! decision. Reminders: `reminders.json` lists the (round, fraction) pairs reminded, and a
//! reminder stages that list and its feed record in the same commit, so it is appended
//! once.

use std::sync::Arc;

use async_trait::async_trait;
use m3_store::changes::rules::reminder_change;
use m3_store::policies::PolicyRows;
use m3_store::{ExecutionStore, RoundRef};
use m3_types::{Clock, DeadlineReminder, ManagedInputRecord, ManagedInputStatus, Result};
use serde::{Deserialize, Serialize};

use crate::store::DirectoryStore;
use crate::tables::{read_table, table_path};

/// The policies' file, relative to the directory.
const POLICIES_FILE: &str = "policies.json";

/// The reminders' file, relative to the directory.
const REMINDERS_FILE: &str = "reminders.json";

#[derive(Debug, Default, Serialize, Deserialize)]
struct PoliciesFile {
    /// `(name, text)`, oldest first.
    rows: Vec<(String, String)>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct RemindersFile {
    /// `(execution id, round id, fraction key)` of every reminder appended.
    sent: Vec<(String, String, String)>,
}

impl DirectoryStore {
    /// Appends the reminder of the pending round `round` once (see
    /// [`ExecutionStore::remind_deadline`]).
    pub(crate) async fn remind(&self, round: RoundRef, reminder: DeadlineReminder) -> Result<bool> {
        self.write(move |locked, now| {
            let Some(path) = crate::rounds::round_path(locked, &round) else {
                return Ok(false);
            };
            let Some(file) = crate::rounds::read_round(locked, &path)? else {
                return Ok(false);
            };
            let Ok(record) = serde_json::from_value::<ManagedInputRecord>(file.record) else {
                return Ok(false);
            };
            let key = (
                round.execution_id.clone(),
                round.round_id.clone(),
                reminder.fraction_key(),
            );
            let mut sent: RemindersFile = read_table(locked, REMINDERS_FILE)?;
            if record.status != ManagedInputStatus::Pending || sent.sent.contains(&key) {
                return Ok(false);
            }
            sent.sent.push(key);
            let path = table_path(locked, REMINDERS_FILE);
            locked.stage(&path, &sent)?;
            crate::feed::stage_record(locked, reminder_change(&record, reminder, now))?;
            Ok(true)
        })
        .await
    }
}

#[async_trait]
impl PolicyRows for DirectoryStore {
    fn clock(&self) -> Arc<dyn Clock> {
        ExecutionStore::clock(self)
    }

    async fn insert_policy(&self, name: &str, text: &str) -> Result<bool> {
        let row = (name.to_owned(), text.to_owned());
        self.change_table(POLICIES_FILE, move |file: &mut PoliciesFile| {
            if file.rows.iter().any(|(taken, _)| *taken == row.0) {
                return (false, false);
            }
            file.rows.push(row);
            (true, true)
        })
        .await
    }

    async fn all_policies(&self) -> Result<Vec<String>> {
        self.read(|locked, _| {
            let file: PoliciesFile = read_table(locked, POLICIES_FILE)?;
            Ok(file.rows.into_iter().map(|(_, text)| text).collect())
        })
        .await
    }

    async fn delete_policy(&self, name: &str) -> Result<bool> {
        let name = name.to_owned();
        self.change_table(POLICIES_FILE, move |file: &mut PoliciesFile| {
            let before = file.rows.len();
            file.rows.retain(|(taken, _)| *taken != name);
            let removed = file.rows.len() != before;
            (removed, removed)
        })
        .await
    }
}
