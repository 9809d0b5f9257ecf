//! The `codex app-server` process and its JSON-lines protocol.
//!
//! Frames are JSON objects, one per line, without a `"jsonrpc"` field. Requests we
//! send get increasing integer ids; Codex's own server requests carry its ids
//! (a per-connection counter from 0) and are answered with `{id, result}`.
//! Reading happens on a task that parses each bounded line and hands it over a
//! channel, so Codex never blocks on a full pipe while M3 waits for a human.

use std::collections::VecDeque;
use std::time::Duration;

use m3_types::{Error, Result, StdioServer};
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::mpsc;

use m3_mcp::process::{self, ServerProcess, SpawnSettings};

use super::protocol::{
    IncomingFrame, OutgoingError, OutgoingNotification, OutgoingRequest, OutgoingResult, RpcError,
};

/// Longest frame accepted from the app-server.
const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;
/// How much of the app-server's stderr is kept for error messages.
const STDERR_LIMIT: usize = 16 * 1024;
/// How long a request of ours may wait for its answer.
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// One message from the app-server.
#[derive(Debug, Clone)]
pub(super) enum Incoming {
    /// The answer to one of our requests.
    Response {
        id: u64,
        outcome: std::result::Result<Value, Value>,
    },
    /// A notification (`method` + `params`).
    Notification { method: String, params: Value },
    /// A server request we must answer (`id` kept verbatim).
    Request {
        id: Value,
        method: String,
        params: Value,
    },
}

/// A running `codex app-server`.
#[derive(Debug)]
pub(super) struct AppServer {
    process: ServerProcess,
    stdin: ChildStdin,
    incoming: mpsc::Receiver<Result<Incoming>>,
    backlog: VecDeque<Incoming>,
    next_id: u64,
}

impl AppServer {
    /// Spawns `executable app-server` with exactly `env`, in `cwd`.
    pub(super) fn spawn(
        executable: &str,
        env: std::collections::BTreeMap<String, String>,
        cwd: &std::path::Path,
    ) -> Result<Self> {
        let mut binding = StdioServer::new("codex app-server", executable)
            .with_args(["app-server", "--strict-config"])
            .with_cwd(cwd);
        binding.env = env;
        let (process, pipes) = process::spawn(
            &binding,
            &SpawnSettings {
                inherit_env: Vec::new(),
                stderr_limit: STDERR_LIMIT,
            },
        )
        .map_err(|e| {
            Error::transport(format!("cannot start '{executable} app-server': {e}"))
                .with_detail("reason", "codex_not_started")
                .with_source(e)
        })?;
        let (sender, incoming) = mpsc::channel(256);
        tokio::spawn(read_frames(pipes.stdout, sender));
        Ok(Self {
            process,
            stdin: pipes.stdin,
            incoming,
            backlog: VecDeque::new(),
            next_id: 1,
        })
    }

    /// The tail of the app-server's stderr.
    pub(super) fn stderr_tail(&self) -> String {
        self.process.stderr().text()
    }

    /// Sends a request and returns its id (the answer arrives through [`next`](Self::next)).
    pub(super) async fn send_request<P: Serialize>(
        &mut self,
        method: &str,
        params: &P,
    ) -> Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        self.write(&OutgoingRequest { id, method, params }).await?;
        Ok(id)
    }

    /// Sends a request and waits for its answer; every other message is kept for
    /// [`next`](Self::next), in order.
    pub(super) async fn call<P: Serialize>(&mut self, method: &str, params: &P) -> Result<Value> {
        let id = self.send_request(method, params).await?;
        let deadline = tokio::time::Instant::now() + REQUEST_TIMEOUT;
        let mut held = Vec::new();
        let answer = loop {
            let message = tokio::time::timeout_at(deadline, self.receive())
                .await
                .map_err(|_| {
                    Error::timeout(format!("codex app-server did not answer '{method}'"))
                        .with_detail("reason", "codex_request_timeout")
                })??;
            match message {
                Incoming::Response { id: got, outcome } if got == id => break outcome,
                other => held.push(other),
            }
        };
        self.backlog.extend(held);
        answer.map_err(|error| {
            Error::protocol(format!(
                "codex app-server refused '{method}': {}",
                error_message(&error)
            ))
            .with_detail("method", method)
            .with_detail("error", error)
        })
    }

    /// Sends a notification.
    pub(super) async fn notify(&mut self, method: &str, params: Option<&Value>) -> Result<()> {
        self.write(&OutgoingNotification { method, params }).await
    }

    /// Answers server request `id` with `result`.
    pub(super) async fn respond<R: Serialize>(&mut self, id: &Value, result: &R) -> Result<()> {
        self.write(&OutgoingResult { id, result }).await
    }

    /// Answers server request `id` with a JSON-RPC error.
    pub(super) async fn respond_error(
        &mut self,
        id: &Value,
        code: i64,
        message: &str,
    ) -> Result<()> {
        self.write(&OutgoingError {
            id,
            error: RpcError { code, message },
        })
        .await
    }

    /// The next message, or a `transport_error` once the app-server is gone.
    pub(super) async fn next(&mut self) -> Result<Incoming> {
        if let Some(message) = self.backlog.pop_front() {
            return Ok(message);
        }
        self.receive().await
    }

    async fn receive(&mut self) -> Result<Incoming> {
        match self.incoming.recv().await {
            Some(message) => message,
            None => Err(self.exited_error()),
        }
    }

    fn exited_error(&self) -> Error {
        let tail = self.stderr_tail();
        let last = tail
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        Error::transport(format!("codex app-server exited: {last}"))
            .with_detail("reason", "codex_exited")
            .with_detail("stderr_tail", tail)
    }

    async fn write<F: Serialize>(&mut self, frame: &F) -> Result<()> {
        let mut line = serde_json::to_vec(frame)
            .map_err(|e| Error::protocol("frame is not serializable").with_source(e))?;
        line.push(b'\n');
        let written = async {
            self.stdin.write_all(&line).await?;
            self.stdin.flush().await
        }
        .await;
        written.map_err(|e| {
            Error::transport("cannot write to codex app-server")
                .with_detail("reason", "codex_exited")
                .with_source(e)
        })
    }

    /// Closes stdin (Codex exits on EOF) and waits briefly, then kills the group.
    pub(super) async fn shutdown(mut self) {
        let _ = self.stdin.shutdown().await;
        drop(self.stdin);
        let _ = self.process.shutdown(Duration::from_secs(3)).await;
    }
}

fn error_message(error: &Value) -> String {
    error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| error.to_string())
}

async fn read_frames(stdout: ChildStdout, sender: mpsc::Sender<Result<Incoming>>) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut reader)
            .take(MAX_FRAME_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .await;
        let message = match read {
            Ok(0) => return,
            Ok(_) if line.len() > MAX_FRAME_BYTES => Err(Error::protocol(format!(
                "codex app-server sent a frame over {MAX_FRAME_BYTES} bytes"
            ))),
            Ok(_) => match parse_frame(&line) {
                Some(message) => Ok(message),
                None => continue,
            },
            Err(e) => Err(Error::transport("cannot read from codex app-server").with_source(e)),
        };
        let fatal = message.is_err();
        if sender.send(message).await.is_err() || fatal {
            return;
        }
    }
}

/// One line as a message; blank or unrecognisable lines are skipped (logged).
fn parse_frame(line: &[u8]) -> Option<Incoming> {
    let text = std::str::from_utf8(line).ok()?.trim();
    if text.is_empty() {
        return None;
    }
    let frame = match serde_json::from_str::<Value>(text) {
        Ok(object @ Value::Object(_)) => serde_json::from_value::<IncomingFrame>(object).ok(),
        _ => None,
    };
    let Some(frame) = frame else {
        tracing::warn!(frame = %text.chars().take(200).collect::<String>(), "codex app-server sent a non-JSON line");
        return None;
    };
    let IncomingFrame {
        id,
        method,
        params,
        result,
        error,
    } = frame;
    match (id, method) {
        (Some(id), Some(method)) => Some(Incoming::Request { id, method, params }),
        (None, Some(method)) => Some(Incoming::Notification { method, params }),
        (Some(id), None) => {
            let id = id.as_u64()?;
            let outcome = match error {
                Some(error) => Err(error),
                None => Ok(result),
            };
            Some(Incoming::Response { id, outcome })
        }
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_classified() {
        assert!(matches!(
            parse_frame(br#"{"id":3,"result":{"ok":true}}"#),
            Some(Incoming::Response {
                id: 3,
                outcome: Ok(_)
            })
        ));
        assert!(matches!(
            parse_frame(br#"{"id":4,"error":{"code":-32600,"message":"no"}}"#),
            Some(Incoming::Response {
                id: 4,
                outcome: Err(_)
            })
        ));
        assert!(matches!(
            parse_frame(br#"{"id":0,"method":"mcpServer/elicitation/request","params":{}}"#),
            Some(Incoming::Request { .. })
        ));
        assert!(matches!(
            parse_frame(br#"{"method":"turn/started","params":{}}"#),
            Some(Incoming::Notification { .. })
        ));
        assert!(parse_frame(b"not json").is_none());
        assert!(parse_frame(b"   ").is_none());
    }
}
