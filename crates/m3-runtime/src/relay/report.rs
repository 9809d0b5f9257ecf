//! The relay's side of the observer socket: queue observations without ever blocking traffic.
//!
//! Frames are queued on an unbounded channel with a byte budget; a writer task drains
//! it into the socket. When the budget is exhausted the frame is dropped (its sequence
//! number is still used, so the observer sees a gap) and an `incomplete` line follows
//! as soon as there is room. When the socket is missing or breaks, reporting stops and
//! the relay carries on.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::Direction;
use super::handoff::Handoff;
use super::wire::{Hello, frame_line, json_line};

/// At most this many bytes wait for the socket; beyond that, frames are dropped.
const QUEUE_BUDGET: usize = 32 * 1024 * 1024;

/// How long the relay tries to reach the observer at start.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the relay waits at the end for queued observations to reach the observer.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug)]
struct Queue {
    sequence: u64,
    dropped: u64,
    tx: mpsc::UnboundedSender<Vec<u8>>,
}

/// Sends observations of one relay to its observer (or nowhere, when unreachable).
#[derive(Debug)]
pub(crate) struct Reporter {
    queue: Option<Mutex<Queue>>,
    queued: Arc<AtomicUsize>,
    writer: Option<JoinHandle<()>>,
}

impl Reporter {
    /// Connects to the observer named in `handoff` and authenticates; on failure the
    /// reporter is disabled (logged; traffic is unaffected).
    pub(crate) async fn connect(handoff: &Handoff) -> Self {
        match Self::try_connect(handoff).await {
            Ok(stream) => {
                let (tx, rx) = mpsc::unbounded_channel();
                let queued = Arc::new(AtomicUsize::new(0));
                let writer = tokio::spawn(drain(stream, rx, Arc::clone(&queued)));
                Self {
                    queue: Some(Mutex::new(Queue {
                        sequence: 0,
                        dropped: 0,
                        tx,
                    })),
                    queued,
                    writer: Some(writer),
                }
            }
            Err(error) => {
                tracing::warn!(
                    socket = %handoff.socket.display(),
                    %error,
                    "relay cannot reach its observer; relaying without observation"
                );
                Self {
                    queue: None,
                    queued: Arc::new(AtomicUsize::new(0)),
                    writer: None,
                }
            }
        }
    }

    async fn try_connect(handoff: &Handoff) -> std::io::Result<UnixStream> {
        let hello = json_line(&Hello {
            connection_id: handoff.connection_id.clone(),
            token: handoff.token.clone(),
        })
        .ok_or_else(|| std::io::Error::other("cannot encode the hello"))?;
        let connect = async {
            let mut stream = UnixStream::connect(&handoff.socket).await?;
            stream.write_all(&hello).await?;
            Ok(stream)
        };
        tokio::time::timeout(CONNECT_TIMEOUT, connect)
            .await
            .map_err(|_| std::io::Error::other("timed out"))?
    }

    /// Reports one frame (valid JSON, without its newline).
    pub(crate) fn frame(&self, direction: Direction, frame: &[u8]) {
        self.with_queue(|queue| {
            queue.sequence += 1;
            Some(frame_line(queue.sequence, direction, frame))
        });
    }

    /// Reports a `tools/call` refused by policy.
    pub(crate) fn policy_denied(&self, tool: &str, request_id: Option<&Value>) {
        let line = json!({"policy_denied": {"tool": tool, "request_id": request_id}});
        self.with_queue(|_| json_line(&line));
    }

    /// Reports that something crossed the relay without being observed.
    pub(crate) fn incomplete(&self, reason: &str) {
        let line = json!({"incomplete": {"reason": reason}});
        self.with_queue(|_| json_line(&line));
    }

    fn with_queue(&self, make: impl FnOnce(&mut Queue) -> Option<Vec<u8>>) {
        let Some(queue) = &self.queue else { return };
        let Ok(mut queue) = queue.lock() else { return };
        if queue.dropped > 0 {
            let reason = format!(
                "{} observation line(s) were dropped: the observer fell behind",
                queue.dropped
            );
            if let Some(line) = json_line(&json!({"incomplete": {"reason": reason}}))
                && self.push(&queue.tx, line)
            {
                queue.dropped = 0;
            }
        }
        if let Some(line) = make(&mut queue)
            && !self.push(&queue.tx, line)
        {
            queue.dropped += 1;
        }
    }

    fn push(&self, tx: &mpsc::UnboundedSender<Vec<u8>>, line: Vec<u8>) -> bool {
        let len = line.len();
        if self.queued.load(Ordering::Acquire) + len > QUEUE_BUDGET {
            return false;
        }
        self.queued.fetch_add(len, Ordering::AcqRel);
        if tx.send(line).is_err() {
            self.queued.fetch_sub(len, Ordering::AcqRel);
            return false;
        }
        true
    }

    /// Closes the socket after the queued observations were written (bounded wait).
    pub(crate) async fn finish(mut self) {
        self.queue = None;
        if let Some(writer) = self.writer.take()
            && tokio::time::timeout(FLUSH_TIMEOUT, writer).await.is_err()
        {
            tracing::warn!("relay observations were not all delivered in time");
        }
    }
}

async fn drain(
    mut stream: UnixStream,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
    queued: Arc<AtomicUsize>,
) {
    while let Some(line) = rx.recv().await {
        let written = stream.write_all(&line).await;
        queued.fetch_sub(line.len(), Ordering::AcqRel);
        if let Err(error) = written {
            tracing::warn!(%error, "relay observer socket failed; relaying without observation");
            return;
        }
    }
    let _ = stream.shutdown().await;
}
