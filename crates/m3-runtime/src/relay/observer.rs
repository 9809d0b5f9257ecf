//! The observer: a Unix socket that relays report to, one per harness session.

use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use m3_types::{Error, HttpServer, Result, StdioServer};
use tokio::io::BufReader;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::task::AbortOnDropHandle;

use super::handoff::Handoff;
use super::wire::{Hello, RelayMessage};
use super::{MAX_FRAME_BYTES, Observation, RelayEvent};
use m3_mcp::ndjson::{Line, frame_of, read_line};

/// The socket's file name inside the observer's directory.
const SOCKET_NAME: &str = "relay.sock";

/// How many events wait for [`RelayObserver::next`] before relays are slowed down
/// (a slowed relay drops observations, never traffic).
const EVENT_CAPACITY: usize = 4096;

/// A relay must authenticate this soon after connecting.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest hello line.
const MAX_HELLO_BYTES: usize = 64 * 1024;

/// The longest observation line (a frame plus its envelope).
const MAX_MESSAGE_BYTES: usize = MAX_FRAME_BYTES + 64 * 1024;

/// What the accept loop and the connections share.
#[derive(Debug)]
struct Shared {
    token: String,
    issued: Mutex<HashSet<String>>,
}

/// Where the worker listens for relays; one per harness (e.g. Codex) session.
///
/// Dropping it stops listening, ends every relay connection and removes the socket file.
#[derive(Debug)]
pub struct RelayObserver {
    dir: PathBuf,
    socket: PathBuf,
    shared: Arc<Shared>,
    handoffs: AtomicU64,
    events: mpsc::Receiver<RelayEvent>,
    /// For in-process (HTTP) relays.
    local: mpsc::Sender<RelayEvent>,
    accept: Option<AbortOnDropHandle<()>>,
}

impl RelayObserver {
    /// Binds the Unix socket `dir/relay.sock` (mode 0600) and makes a random 32-byte
    /// token (hex). Spawns the accept loop on the current tokio runtime.
    ///
    /// `dir` must exist; the caller makes it private (0700). Its path must be short
    /// enough for a Unix socket address (about 100 bytes).
    ///
    /// # Errors
    /// `transport_error` when the socket cannot be bound (path too long, already
    /// present) or the system has no randomness.
    pub async fn bind(dir: &Path) -> Result<RelayObserver> {
        let socket = dir.join(SOCKET_NAME);
        let listener = UnixListener::bind(&socket).map_err(|error| {
            Error::transport(format!("cannot bind the relay observer socket: {error}"))
                .with_detail("path", socket.display().to_string())
                .with_source(error)
        })?;
        if let Err(error) = std::fs::set_permissions(&socket, PermissionsExt::from_mode(0o600)) {
            let _ = std::fs::remove_file(&socket);
            return Err(Error::transport(format!(
                "cannot restrict the relay observer socket: {error}"
            ))
            .with_detail("path", socket.display().to_string()));
        }
        let token = match random_token() {
            Ok(token) => token,
            Err(error) => {
                let _ = std::fs::remove_file(&socket);
                return Err(error);
            }
        };
        let shared = Arc::new(Shared {
            token,
            issued: Mutex::new(HashSet::new()),
        });
        let (tx, events) = mpsc::channel(EVENT_CAPACITY);
        let local = tx.clone();
        let accept = tokio::spawn(accept_loop(listener, Arc::clone(&shared), tx));
        tracing::debug!(socket = %socket.display(), "relay observer listening");
        Ok(RelayObserver {
            dir: dir.to_path_buf(),
            socket,
            shared,
            handoffs: AtomicU64::new(0),
            events,
            local,
            accept: Some(AbortOnDropHandle::new(accept)),
        })
    }

    /// The observer's socket path.
    pub fn socket_path(&self) -> &Path {
        &self.socket
    }

    /// Writes the handoff file `dir/relay-<n>.json` (mode 0600, created new, never
    /// following symlinks) for one server binding, and returns its path.
    ///
    /// The relay started with it runs the server with exactly `server.env` as its
    /// environment and `server.cwd` as its working directory (the server's command and
    /// arguments go on the relay's command line, after `--`). Its observations carry
    /// `connection_id` (the binding name); `allowed_tools` (bare tool names of this
    /// server; `None`: all) is enforced by the relay. The file may be used by several
    /// relay processes (a harness restarting the server); the caller removes it with
    /// the directory.
    ///
    /// # Errors
    /// `transport_error` when the file cannot be created.
    pub fn handoff(
        &self,
        connection_id: &str,
        server: &StdioServer,
        allowed_tools: Option<Vec<String>>,
    ) -> Result<PathBuf> {
        let n = self.handoffs.fetch_add(1, Ordering::Relaxed) + 1;
        let path = self.dir.join(format!("relay-{n}.json"));
        let handoff = Handoff {
            socket: self.socket.clone(),
            token: self.shared.token.clone(),
            connection_id: connection_id.to_owned(),
            env: server.env.clone(),
            cwd: server.cwd.clone(),
            allowed_tools,
        };
        handoff.write_new(&path)?;
        if let Ok(mut issued) = self.shared.issued.lock() {
            issued.insert(connection_id.to_owned());
        }
        Ok(path)
    }

    /// Starts an in-process HTTP relay for the Streamable HTTP binding `server`: a
    /// loopback endpoint (its URL in [`HttpRelay::url`](super::HttpRelay::url)) that forwards to the real one
    /// and reports to this observer under `connection_id`, enforcing `allowed_tools`
    /// as the stdio relay does. The binding is resolved and checked against its trust
    /// level, and its `${NAME}` headers resolved, as M3's own client does; the relay
    /// adds them to every forwarded request.
    ///
    /// # Errors
    /// Those of resolving the binding (`invalid_argument` for a refused address or an
    /// unset header variable, `transport_error` when the host does not resolve), or
    /// `transport_error` when the loopback listener cannot be bound.
    pub async fn http_relay(
        &self,
        connection_id: &str,
        server: &HttpServer,
        allowed_tools: Option<Vec<String>>,
    ) -> Result<super::HttpRelay> {
        let token = random_token()?;
        super::http::start(
            connection_id,
            server,
            allowed_tools,
            &token,
            self.local.clone(),
        )
        .await
    }

    /// The next event from any relay, in order per connection (`None` once the
    /// observer is closed and every buffered event was taken).
    pub async fn next(&mut self) -> Option<RelayEvent> {
        self.events.recv().await
    }

    /// Stops listening and ends every relay connection; events already buffered are
    /// still returned by [`next`](Self::next), then `None`. Relays keep relaying.
    pub fn close(&mut self) {
        self.accept = None;
        self.events.close();
        let _ = std::fs::remove_file(&self.socket);
    }
}

impl Drop for RelayObserver {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.socket);
    }
}

fn random_token() -> Result<String> {
    let mut bytes = [0_u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|error| Error::transport(format!("cannot make the relay token: {error}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Compares in time independent of where the inputs differ.
fn same_token(given: &str, expected: &str) -> bool {
    let (given, expected) = (given.as_bytes(), expected.as_bytes());
    let mut difference = u8::from(given.len() != expected.len());
    for (i, byte) in expected.iter().enumerate() {
        difference |= byte ^ given.get(i).copied().unwrap_or(0);
    }
    difference == 0
}

async fn accept_loop(listener: UnixListener, shared: Arc<Shared>, tx: mpsc::Sender<RelayEvent>) {
    // Connection tasks live in the set: aborting the loop aborts them too.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(serve(stream, Arc::clone(&shared), tx.clone()));
                }
                Err(error) => {
                    tracing::warn!(%error, "relay observer accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Authenticates one relay, then turns its lines into events.
async fn serve(stream: UnixStream, shared: Arc<Shared>, tx: mpsc::Sender<RelayEvent>) {
    let mut reader = BufReader::with_capacity(64 * 1024, stream);
    let mut line = Vec::new();
    let Some(connection_id) = authenticate(&mut reader, &mut line, &shared).await else {
        return;
    };
    let id = connection_id.as_str();
    if tx
        .send(RelayEvent::Connected {
            connection_id: connection_id.clone(),
        })
        .await
        .is_err()
    {
        return;
    }
    let mut expected = 1_u64;
    loop {
        let events = match read_line(&mut reader, &mut line, MAX_MESSAGE_BYTES).await {
            Line::Complete => interpret(id, frame_of(&line), &mut expected),
            Line::Oversized => {
                // The rest of the line cannot be resynchronised cheaply: end the connection.
                let lost = incomplete(
                    id,
                    "an observation line exceeded the frame bound".to_owned(),
                );
                let _ = tx.send(lost).await;
                break;
            }
            Line::Eof | Line::Failed(_) => break,
        };
        for event in events {
            if tx.send(event).await.is_err() {
                return;
            }
        }
    }
    let _ = tx.send(RelayEvent::Disconnected { connection_id }).await;
}

async fn authenticate(
    reader: &mut BufReader<UnixStream>,
    line: &mut Vec<u8>,
    shared: &Shared,
) -> Option<String> {
    let read = tokio::time::timeout(HELLO_TIMEOUT, read_line(reader, line, MAX_HELLO_BYTES)).await;
    if !matches!(read, Ok(Line::Complete)) {
        tracing::warn!("relay connection without a hello; dropped");
        return None;
    }
    let Ok(hello) = serde_json::from_slice::<Hello>(frame_of(line)) else {
        tracing::warn!("relay connection with a malformed hello; dropped");
        return None;
    };
    let known = shared
        .issued
        .lock()
        .map(|issued| issued.contains(&hello.connection_id))
        .unwrap_or(false);
    // Compare the token whether or not the id is known.
    if !same_token(&hello.token, &shared.token) || !known {
        tracing::warn!(connection_id = %hello.connection_id, "relay connection refused: wrong token or unknown connection id");
        return None;
    }
    Some(hello.connection_id)
}

fn incomplete(connection_id: &str, reason: String) -> RelayEvent {
    RelayEvent::Incomplete {
        connection_id: connection_id.to_owned(),
        reason,
    }
}

/// The events of one observation line; `expected` is the next frame sequence.
fn interpret(connection_id: &str, line: &[u8], expected: &mut u64) -> Vec<RelayEvent> {
    let Ok(message) = serde_json::from_slice::<RelayMessage>(line) else {
        return vec![incomplete(
            connection_id,
            "a malformed observation line".to_owned(),
        )];
    };
    match message {
        RelayMessage::Frame {
            sequence,
            direction,
            payload,
        } => {
            let mut events = Vec::with_capacity(2);
            if sequence != *expected {
                events.push(incomplete(
                    connection_id,
                    format!("observation gap: expected frame {expected}, got {sequence}"),
                ));
            }
            *expected = sequence.saturating_add(1);
            events.push(RelayEvent::Frame(Observation {
                connection_id: connection_id.to_owned(),
                sequence,
                direction,
                payload,
            }));
            events
        }
        RelayMessage::PolicyDenied { policy_denied } => vec![RelayEvent::PolicyDenied {
            connection_id: connection_id.to_owned(),
            tool: policy_denied.tool,
            request_id: policy_denied.request_id,
        }],
        RelayMessage::Incomplete { incomplete: lost } => {
            vec![incomplete(connection_id, lost.reason)]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_exactly() {
        let token = random_token().unwrap();
        assert_eq!(token.len(), 64);
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(same_token(&token, &token.clone()));
        assert!(!same_token(&token[..63], &token));
        assert!(!same_token(&format!("{token}0"), &token));
        assert!(!same_token("", &token));
        assert_ne!(random_token().unwrap(), token);
    }

    #[test]
    fn gaps_in_the_sequence_are_reported() {
        let mut expected = 1;
        let first = interpret(
            "s",
            br#"{"sequence":1,"direction":"client_to_server","payload":{}}"#,
            &mut expected,
        );
        assert_eq!(first.len(), 1);
        let gap = interpret(
            "s",
            br#"{"sequence":3,"direction":"server_to_client","payload":{}}"#,
            &mut expected,
        );
        assert!(matches!(gap[0], RelayEvent::Incomplete { .. }));
        assert!(matches!(gap[1], RelayEvent::Frame(_)));
        assert_eq!(expected, 4);
        let bad = interpret("s", b"not json", &mut expected);
        assert!(matches!(bad[0], RelayEvent::Incomplete { .. }));
    }
}
