//! The worker registry of the directory store: one file, `workers.json`, with every
//! worker's row (its id and text), read and written under the store's lock like everything
//! else. [`RowWorkerRegistry`](m3_store::workers::RowWorkerRegistry) makes every decision;
//! this file only keeps rows.

use std::sync::Arc;

use async_trait::async_trait;
use m3_store::ExecutionStore;
use m3_store::workers::WorkerRows;
use m3_types::{Clock, Result};
use serde::{Deserialize, Serialize};

use crate::store::DirectoryStore;
use crate::tables::read_table;

/// The file, relative to the directory.
const WORKERS_FILE: &str = "workers.json";

#[derive(Debug, Default, Serialize, Deserialize)]
struct WorkersFile {
    /// `(worker id, text)`, in announce order.
    rows: Vec<(String, String)>,
}

impl DirectoryStore {
    /// Removes the rows `keep` refuses; whether any was removed.
    async fn remove_workers(
        &self,
        keep: impl Fn(&(String, String)) -> bool + Send + 'static,
    ) -> Result<bool> {
        self.change_table(WORKERS_FILE, move |file: &mut WorkersFile| {
            let before = file.rows.len();
            file.rows.retain(|row| keep(row));
            let removed = file.rows.len() != before;
            (removed, removed)
        })
        .await
    }
}

#[async_trait]
impl WorkerRows for DirectoryStore {
    fn clock(&self) -> Arc<dyn Clock> {
        ExecutionStore::clock(self)
    }

    async fn put_worker(&self, worker_id: &str, text: &str) -> Result<()> {
        let (id, text) = (worker_id.to_owned(), text.to_owned());
        self.change_table(WORKERS_FILE, move |file: &mut WorkersFile| {
            match file.rows.iter_mut().find(|(kept, _)| *kept == id) {
                Some((_, kept)) => *kept = text,
                None => file.rows.push((id, text)),
            }
            ((), true)
        })
        .await
    }

    async fn update_worker(&self, worker_id: &str, text: &str) -> Result<bool> {
        let (id, text) = (worker_id.to_owned(), text.to_owned());
        self.change_table(WORKERS_FILE, move |file: &mut WorkersFile| {
            match file.rows.iter_mut().find(|(kept, _)| *kept == id) {
                Some((_, kept)) => {
                    *kept = text;
                    (true, true)
                }
                None => (false, false),
            }
        })
        .await
    }

    async fn worker(&self, worker_id: &str) -> Result<Option<String>> {
        let id = worker_id.to_owned();
        self.read(move |locked, _| {
            Ok(read_table::<WorkersFile>(locked, WORKERS_FILE)?
                .rows
                .into_iter()
                .find(|(kept, _)| *kept == id)
                .map(|(_, text)| text))
        })
        .await
    }

    async fn all_workers(&self) -> Result<Vec<String>> {
        self.read(|locked, _| {
            Ok(read_table::<WorkersFile>(locked, WORKERS_FILE)?
                .rows
                .into_iter()
                .map(|(_, text)| text)
                .collect())
        })
        .await
    }

    async fn delete_worker(&self, worker_id: &str) -> Result<bool> {
        let id = worker_id.to_owned();
        self.remove_workers(move |(kept, _)| *kept != id).await
    }

    async fn delete_worker_if_unchanged(&self, worker_id: &str, text: &str) -> Result<bool> {
        let (id, text) = (worker_id.to_owned(), text.to_owned());
        self.remove_workers(move |(kept, kept_text)| *kept != id || *kept_text != text)
            .await
    }
}
