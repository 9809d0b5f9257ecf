//! What the provider saw: every request, in arrival order, optionally appended to a file.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::AsyncWriteExt;

/// One HTTP request the provider received, and how it answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// The HTTP method (`POST`, `GET`, ...).
    pub method: String,
    /// The request path (without the query).
    pub path: String,
    /// The headers, names lower-cased; repeated headers joined with `", "`.
    pub headers: BTreeMap<String, String>,
    /// The body: its JSON, `null` when empty, or a JSON string of the (lossy UTF-8) text
    /// when it is not JSON.
    pub body: Value,
    /// The HTTP status the provider answered with.
    pub status: u16,
    /// True when the provider refused the request because it carried an `authorization`
    /// header (status 401).
    pub refused: bool,
}

/// The shared log of requests (memory, and the `--record` file when set).
#[derive(Debug)]
pub(crate) struct Recorder {
    requests: Mutex<Vec<RecordedRequest>>,
    file: Option<PathBuf>,
}

impl Recorder {
    pub(crate) fn new(file: Option<PathBuf>) -> Self {
        Recorder {
            requests: Mutex::new(Vec::new()),
            file,
        }
    }

    /// Keeps `request`, then appends it as one JSON line to the record file (if any).
    /// A failing file write is logged, never fatal: the reply still goes out.
    pub(crate) async fn record(&self, request: RecordedRequest) {
        let line = self.file.as_ref().map(|_| serde_json::to_string(&request));
        self.lock().push(request);
        let (Some(path), Some(line)) = (self.file.as_ref(), line) else {
            return;
        };
        let outcome = match line {
            Ok(mut line) => {
                line.push('\n');
                append(path, line.as_bytes()).await
            }
            Err(error) => Err(std::io::Error::other(error)),
        };
        if let Err(error) = outcome {
            tracing::warn!(path = %path.display(), %error, "cannot append to the provider record file");
        }
    }

    pub(crate) fn snapshot(&self) -> Vec<RecordedRequest> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<RecordedRequest>> {
        self.requests.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

async fn append(path: &PathBuf, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .await?;
    file.write_all(bytes).await?;
    file.flush().await
}
