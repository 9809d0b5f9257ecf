//! The conformance suite's [`CorruptRecord`] capability for [`DirectoryStore`]: it damages
//! a round's stored file the way a broken disk or a foreign writer would, under the store's
//! own lock and atomic write, so the store under test meets the damage on its next read.

use m3_store::RoundRef;
use m3_store::conformance::{CorruptRecord, Corruption};
use m3_types::{Error, Result};
use serde_json::{Value, json};

use crate::rounds::{read_round, round_path};
use crate::store::DirectoryStore;

/// What `corruption` writes, and where: a field of the stored record, or the redacted
/// projection (`None` for the field).
fn damage(corruption: Corruption) -> Result<(Option<&'static str>, Value)> {
    Ok(match corruption {
        Corruption::PendingNotObject => (Some("pending"), json!([])),
        Corruption::ResponsesNotObject => (Some("responses"), json!([])),
        Corruption::OperationParametersNotObject => (Some("operation_parameters"), json!([])),
        Corruption::UnknownStatus => (Some("status"), json!("corrupt")),
        Corruption::UnparsableTimestamp => (Some("created_at"), json!("not a timestamp")),
        Corruption::RedactedResponsesNotObject => (None, json!([])),
        other => {
            return Err(Error::storage(format!("this store cannot apply {other:?}")));
        }
    })
}

#[async_trait::async_trait]
impl CorruptRecord for DirectoryStore {
    async fn corrupt(&self, round: &RoundRef, corruption: Corruption) -> Result<()> {
        let (field, value) = damage(corruption)?;
        let round = round.clone();
        self.write(move |locked, _| {
            let missing = || Error::storage("the round to corrupt does not exist");
            let path = round_path(locked, &round).ok_or_else(missing)?;
            let mut file = read_round(locked, &path)?.ok_or_else(missing)?;
            match field {
                Some(field) => {
                    let record = file
                        .record
                        .as_object_mut()
                        .ok_or_else(|| Error::storage("the stored record is not an object"))?;
                    record.insert(field.to_owned(), value);
                }
                None => file.redacted = value,
            }
            locked.stage(&path, &file)
        })
        .await
    }
}
