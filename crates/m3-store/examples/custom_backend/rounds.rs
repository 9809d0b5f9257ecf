//! [`ManagedInputStore`] for [`DirectoryStore`]: one JSON file per round.
//!
//! Each mutation is [`DirectoryStore::write`]: under the exclusive lock it reads the round's
//! file, asks the shared [`rules`] (through [`RoundChange::write`] for every lease-holding
//! operation) what to store, stages that, and commits. The lock is the compare-and-set: no
//! other writer, in any process, can change the file between the read and the rename. Each
//! committed change is announced ([`ChangeKind::Round`]) after the commit.

use std::path::{Path, PathBuf};
use std::time::Duration;

use m3_store::managed_input::rules::{
    self, RoundWrite, UNRESOLVED, apply_recovery_failure, prepare_create, replay_create,
    require_lease_duration, require_round, require_text, round_index_taken, stored_invalid,
};
use m3_store::signal::{Announce, Change, ChangeKind};
use m3_store::{
    CreateRound, LeaseRef, ManagedInputStore, PendingPage, PendingQuery, RenewRoundLeases,
    RoundChange, RoundRef, RoundScan, UnreadableRound,
};
use m3_types::{Actor, Error, ManagedInputRecord, Reason, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::files::{Locked, id_too_long};
use crate::store::DirectoryStore;

/// A round's file: the record as JSON (kept as a plain value, so that a damaged record
/// still reads as a file and is reported as that round's error) and the redacted
/// projection of its accepted responses (`null` before any).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RoundFile {
    /// The [`ManagedInputRecord`], as JSON.
    pub(crate) record: Value,
    /// The redacted projection: a JSON object, or `null`.
    #[serde(default)]
    pub(crate) redacted: Value,
    /// Who answered (`null` before an answer, or for one that named nobody).
    #[serde(default)]
    pub(crate) answered_by: Option<Actor>,
}

impl RoundFile {
    /// The file of `record` with the redacted projection `redacted`, answered by
    /// `answered_by`.
    fn new(
        record: &ManagedInputRecord,
        redacted: Value,
        answered_by: Option<Actor>,
    ) -> Result<Self> {
        let record = serde_json::to_value(record)
            .map_err(|e| Error::storage(format!("cannot encode the round: {e}")))?;
        Ok(Self {
            record,
            redacted,
            answered_by,
        })
    }

    /// The record (decoding validates it).
    ///
    /// # Errors
    /// `managed_input_invalid` / `stored_record_invalid` if it does not decode.
    fn decode(&self) -> Result<ManagedInputRecord> {
        serde_json::from_value(self.record.clone()).map_err(|e| stored_invalid(e.to_string()))
    }

    /// The redacted projection (`None` before any response was accepted).
    ///
    /// # Errors
    /// `managed_input_invalid` / `stored_record_invalid` if it is not a JSON object.
    fn redacted(&self) -> Result<Option<Map<String, Value>>> {
        match &self.redacted {
            Value::Null => Ok(None),
            Value::Object(map) => Ok(Some(map.clone())),
            _ => Err(Error::managed_input_validation(
                "stored redacted response projection is invalid",
            )
            .with_reason(Reason::StoredRecordInvalid)
            .with_detail("why", "not a JSON object")),
        }
    }
}

/// The file of `round` (`None`: ids too long to be stored, so the round does not exist).
pub(crate) fn round_path(locked: &Locked<'_>, round: &RoundRef) -> Option<PathBuf> {
    locked
        .dir()
        .round_path(&round.execution_id, &round.round_id)
}

/// The round file at `path`, if there is one.
///
/// # Errors
/// `storage_error` if it cannot be read; `managed_input_invalid` / `stored_record_invalid`
/// if it is not a round file at all.
pub(crate) fn read_round(locked: &Locked<'_>, path: &Path) -> Result<Option<RoundFile>> {
    locked.read_json(path, stored_invalid)
}

/// What a round's path holds.
#[derive(Debug)]
enum Stored {
    /// No file: no such round.
    Missing,
    /// A file that does not hold a valid round: why (`managed_input_invalid` /
    /// `stored_record_invalid`).
    Unreadable(Error),
    /// The file and its decoded record.
    Round(RoundFile, Box<ManagedInputRecord>),
}

/// The round stored at `path`.
///
/// # Errors
/// `storage_error` if the file cannot be read (a damaged file is [`Stored::Unreadable`]).
fn stored_round(locked: &Locked<'_>, path: &Path) -> Result<Stored> {
    Ok(match read_round(locked, path) {
        Ok(None) => Stored::Missing,
        Ok(Some(file)) => match file.decode() {
            Ok(record) => Stored::Round(file, Box::new(record)),
            Err(error) => Stored::Unreadable(error),
        },
        Err(error) if error.is_storage() => return Err(error),
        Err(error) => Stored::Unreadable(error),
    })
}

/// The round `round` as stored: its path, its file and its decoded record.
///
/// # Errors
/// `not_found` if it does not exist; `managed_input_invalid` / `stored_record_invalid` if
/// it does not decode; `storage_error`.
fn read_existing(
    locked: &Locked<'_>,
    round: &RoundRef,
) -> Result<(PathBuf, RoundFile, ManagedInputRecord)> {
    let path = round_path(locked, round).ok_or_else(|| rules::missing_round(round))?;
    match stored_round(locked, &path)? {
        Stored::Missing => Err(rules::missing_round(round)),
        Stored::Unreadable(error) => Err(error),
        Stored::Round(file, record) => Ok((path, file, *record)),
    }
}

/// Fails every unresolved round of `execution_id` with `recovery_unavailable` and
/// `message` (no round lease needed: the caller holds the execution's authority), staging
/// the files in the caller's commit. Unreadable rounds are left as they are. Returns how
/// many rounds it failed.
///
/// # Errors
/// `storage_error` if a round file cannot be read or encoded.
pub(crate) fn fail_unresolved(
    locked: &mut Locked<'_>,
    execution_id: &str,
    message: &str,
    now: OffsetDateTime,
) -> Result<u64> {
    let mut failed = 0;
    for (_, path) in locked.dir().round_files(execution_id)? {
        if let Stored::Round(file, record) = stored_round(locked, &path)?
            && UNRESOLVED.contains(&record.status)
        {
            let failed_record = apply_recovery_failure(&record, message, now);
            locked.stage(
                &path,
                &RoundFile::new(&failed_record, file.redacted, file.answered_by)?,
            )?;
            failed += 1;
        }
    }
    Ok(failed)
}

/// Whether another round of `execution_id` already has `round_index`.
///
/// # Errors
/// `storage_error` if a round file cannot be read.
fn index_taken(locked: &Locked<'_>, execution_id: &str, round_index: u32) -> Result<bool> {
    for (_, path) in locked.dir().round_files(execution_id)? {
        if let Stored::Round(_, record) = stored_round(locked, &path)?
            && record.round_index == round_index
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// One item of `renew_leases` on the files as this commit sees them: the shared rule
/// ([`rules::renew_item`]) on the record read, and the renewed record staged.
///
/// # Errors
/// `storage_error` (which fails the whole batch); the item's own refusal is the inner
/// result.
fn renew_one(
    locked: &mut Locked<'_>,
    (round, lease): (&RoundRef, &LeaseRef),
    duration: Duration,
    now: OffsetDateTime,
) -> Result<Result<ManagedInputRecord>> {
    // An empty id is refused by the rule itself, before anything is read.
    let path = require_round(round)
        .ok()
        .and_then(|()| round_path(locked, round));
    let stored = match &path {
        Some(path) => stored_round(locked, path)?,
        None => Stored::Missing,
    };
    let (file, read) = match stored {
        Stored::Missing => (None, None),
        Stored::Unreadable(error) => (None, Some(Err(error))),
        Stored::Round(file, record) => (Some(file), Some(Ok(*record))),
    };
    let outcome = rules::renew_item((round, lease), duration, read, now);
    if let (Ok(record), Some(path), Some(file)) = (&outcome, &path, file) {
        locked.stage(
            path,
            &RoundFile::new(record, file.redacted, file.answered_by)?,
        )?;
    }
    Ok(outcome)
}

#[async_trait::async_trait]
impl ManagedInputStore for DirectoryStore {
    async fn create_round(&self, request: CreateRound) -> Result<ManagedInputRecord> {
        let new = prepare_create(request)?;
        let round = new.round();
        let execution_id = round.execution_id.clone();
        self.write(move |locked, now| {
            let path = round_path(locked, &round).ok_or_else(id_too_long)?;
            match stored_round(locked, &path)? {
                Stored::Round(_, current) => return replay_create(*current, &new),
                Stored::Unreadable(error) => return Err(error),
                Stored::Missing => {}
            }
            if index_taken(locked, &round.execution_id, new.request.round_index)? {
                return Err(round_index_taken(&new));
            }
            let record = new.record_at(now)?;
            locked.stage(&path, &RoundFile::new(&record, Value::Null, None)?)?;
            Ok(record)
        })
        .await
        .announce(self.signal(), |_| {
            Change::new(execution_id, ChangeKind::Round)
        })
    }

    async fn get_round(&self, round: &RoundRef) -> Result<Option<ManagedInputRecord>> {
        require_round(round)?;
        let round = round.clone();
        self.read(move |locked, _| {
            let Some(path) = round_path(locked, &round) else {
                return Ok(None);
            };
            match stored_round(locked, &path)? {
                Stored::Missing => Ok(None),
                Stored::Unreadable(error) => Err(error),
                Stored::Round(_, record) => Ok(Some(*record)),
            }
        })
        .await
    }

    async fn scan_rounds(&self, execution_id: &str) -> Result<RoundScan> {
        require_text(execution_id, "execution_id")?;
        let execution_id = execution_id.to_owned();
        self.read(move |locked, _| {
            let mut scan = RoundScan::default();
            for (round_id, path) in locked.dir().round_files(&execution_id)? {
                match stored_round(locked, &path)? {
                    Stored::Missing => {}
                    Stored::Unreadable(error) => {
                        scan.unreadable.push(UnreadableRound::new(round_id, error));
                    }
                    Stored::Round(_, record) => scan.rounds.push(*record),
                }
            }
            scan.rounds.sort_by_key(|record| record.round_index);
            Ok(scan)
        })
        .await
    }

    /// Reads every execution's round files and keeps the page with the shared rules (a
    /// directory of files has no index to ask).
    async fn pending_page(&self, query: &PendingQuery) -> Result<PendingPage> {
        query.validate()?;
        let query = query.clone();
        self.read(move |locked, _| {
            let mut pending = Vec::new();
            for execution_id in locked.dir().round_executions()? {
                for (_, path) in locked.dir().round_files(&execution_id)? {
                    if let Stored::Round(_, record) = stored_round(locked, &path)? {
                        pending.push(*record);
                    }
                }
            }
            Ok(query.select(pending))
        })
        .await
    }

    /// The whole batch in one commit (one journal): all renewed or, on a storage error,
    /// none.
    async fn renew_leases(
        &self,
        batch: RenewRoundLeases,
    ) -> Result<Vec<Result<ManagedInputRecord>>> {
        require_lease_duration(batch.lease_duration)?;
        self.write(move |locked, now| {
            let mut outcomes = Vec::with_capacity(batch.leases.len());
            for (round, lease) in &batch.leases {
                outcomes.push(renew_one(
                    locked,
                    (round, lease),
                    batch.lease_duration,
                    now,
                )?);
            }
            Ok(outcomes)
        })
        .await
    }

    async fn write_round(&self, change: RoundChange) -> Result<ManagedInputRecord> {
        let execution_id = change.round().execution_id.clone();
        self.write(move |locked, now| {
            let (path, file, current) = read_existing(locked, change.round())?;
            let Some(write) = change.write(&current, now)? else {
                return Ok(current);
            };
            let redacted = redacted_value(&write, file.redacted)?;
            let answered_by = write.actor.clone().or(file.answered_by);
            let staged = RoundFile::new(&write.record, redacted, answered_by)?;
            locked.stage(&path, &staged)?;
            Ok(write.record)
        })
        .await
        .announce(self.signal(), |_| {
            Change::new(execution_id, ChangeKind::Round)
        })
    }

    async fn fail_unresolved_rounds(&self, execution_id: &str, message: &str) -> Result<u64> {
        require_text(execution_id, "execution_id")?;
        require_text(message, "message")?;
        let (id, message) = (execution_id.to_owned(), message.to_owned());
        self.write(move |locked, now| fail_unresolved(locked, &id, &message, now))
            .await
            .announce(self.signal(), |_| {
                Change::new(execution_id, ChangeKind::Round)
            })
    }

    async fn answered_by(&self, round: &RoundRef) -> Result<Option<Actor>> {
        require_round(round)?;
        let round = round.clone();
        self.read(move |locked, _| {
            let Some(path) = round_path(locked, &round) else {
                return Ok(None);
            };
            Ok(read_round(locked, &path)?.and_then(|file| file.answered_by))
        })
        .await
    }

    async fn redacted_responses(&self, round: &RoundRef) -> Result<Option<Map<String, Value>>> {
        require_round(round)?;
        let round = round.clone();
        self.read(move |locked, _| {
            let Some(path) = round_path(locked, &round) else {
                return Ok(None);
            };
            match read_round(locked, &path)? {
                None => Ok(None),
                Some(file) => file.redacted(),
            }
        })
        .await
    }
}

/// The redacted projection to store after `write`: its new one (canonical JSON text from
/// the rules), else the one stored.
///
/// # Errors
/// `storage_error` if the rules' text is not JSON.
fn redacted_value(write: &RoundWrite, stored: Value) -> Result<Value> {
    match &write.redacted_json {
        None => Ok(stored),
        Some(text) => serde_json::from_str(text)
            .map_err(|e| Error::storage(format!("the redacted projection is not JSON: {e}"))),
    }
}
