//! Our own bounded, validating frame reader over the child's stdout.
//!
//! rmcp's `AsyncRwTransport` caps a line (16 MiB by default), but it *drops* an
//! oversized line and *ignores* a non-JSON line and keeps the connection open, so a
//! request whose answer was lost that way waits forever. The client instead reads the
//! child's stdout here, inside its own rmcp transport ([`super::transport`]): every line
//! must be at most `max_frame_bytes` long and parse as a JSON value, with the same
//! recursion limit rmcp's parser has (a valid but too deeply nested frame would otherwise
//! be dropped by rmcp and its request would wait). The first violation records a
//! `protocol_error` fault and kills the server's process group; end of stdout records a
//! `transport_error` fault naming the exit status. Either ends the stream.
//!
//! A waiting execution holds one reader per server for its whole life, so the reader
//! holds no buffer while nothing is in flight: it waits for the pipe to become readable,
//! reads what is there, and frees the buffer once every complete line was taken.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::unix::pipe;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::fault::{ConnectionFault, FaultSender};
use super::process::ExitInfo;
use super::raw::RawMessages;

/// How much room a read asks for (the buffer exists only while bytes are unread).
const READ_CHUNK: usize = 8 * 1024;

/// How long to wait for the exit status after stdout closed, to report it.
const EXIT_STATUS_WAIT: Duration = Duration::from_millis(300);

/// Where the reader reports: faults, the kill switch, the exit status, raw messages.
pub(crate) struct Ends {
    pub(crate) faults: FaultSender,
    pub(crate) kill: CancellationToken,
    pub(crate) exited: watch::Receiver<Option<ExitInfo>>,
    pub(crate) raw: Arc<RawMessages>,
}

/// What the next line of stdout turned out to be.
enum Read {
    /// A complete line; the frame is `buf[..end]` without its `\n` (`\r` still there).
    Line { end: usize, consumed: usize },
    /// The line is longer than the bound.
    Oversized,
    /// Stdout ended with nothing left.
    Eof,
    /// Reading failed.
    Failed(std::io::Error),
}

/// The validated frames of one server's stdout, read on demand (cancel safe).
pub(crate) struct FrameReader {
    pipe: pipe::Receiver,
    /// Bytes read and not taken yet; empty (no allocation) while nothing is unread.
    buf: Vec<u8>,
    /// How much of `buf` is known to hold no newline.
    scanned: usize,
    /// Bytes of the frame returned last, dropped at the next call.
    taken: usize,
    max: usize,
    ends: Ends,
    /// A fault was raised: the stream is over.
    ended: bool,
}

impl std::fmt::Debug for FrameReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameReader")
            .field("buffered", &self.buf.len())
            .field("max", &self.max)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl FrameReader {
    /// A reader of `stdout`, frames at most `max` bytes (without the newline).
    ///
    /// # Errors
    /// When the pipe cannot be registered with the runtime.
    pub(crate) fn new(
        stdout: tokio::process::ChildStdout,
        max: usize,
        ends: Ends,
    ) -> std::io::Result<Self> {
        let pipe = pipe::Receiver::from_owned_fd(stdout.into_owned_fd()?)?;
        Ok(Self::over(pipe, max, ends))
    }

    /// A reader of `pipe` (what [`new`](Self::new) makes of the child's stdout).
    pub(crate) fn over(pipe: pipe::Receiver, max: usize, ends: Ends) -> Self {
        Self {
            pipe,
            buf: Vec::new(),
            scanned: 0,
            taken: 0,
            max,
            ends,
            ended: false,
        }
    }

    /// The next frame that is not blank: valid JSON (kept by [`RawMessages`] when it is
    /// a message the typed model would change), without its `\n` / `\r\n`. `None` once
    /// the stream is over (a fault is recorded then).
    ///
    /// # Cancel safety
    /// Cancel safe: bytes read before a cancellation stay for the next call.
    pub(crate) async fn next(&mut self) -> Option<&[u8]> {
        loop {
            if self.ended {
                return None;
            }
            self.drop_taken();
            let (end, consumed) = match self.read_line().await {
                Read::Line { end, consumed } => (end, consumed),
                Read::Oversized => {
                    let max = self.max;
                    self.fail(
                        ConnectionFault::protocol(format!(
                            "MCP server wrote a frame larger than {max} bytes"
                        ))
                        .with_detail("max_frame_bytes", max as u64),
                        true,
                    );
                    return None;
                }
                Read::Eof => {
                    let fault = self.eof_fault().await;
                    self.fail(fault, false);
                    return None;
                }
                Read::Failed(error) => {
                    self.fail(
                        ConnectionFault::transport(format!(
                            "reading MCP server stdout failed: {error}"
                        )),
                        false,
                    );
                    return None;
                }
            };
            self.taken = consumed;
            let frame = without_carriage_return(&self.buf[..end]);
            if frame.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            // A `Value` (not `IgnoredAny`, which skips without a depth limit) fails
            // exactly where rmcp's own parse would.
            match serde_json::from_slice::<serde_json::Value>(frame) {
                // Kept before rmcp sees the frame, so it is there when rmcp delivers.
                Ok(message) => self.ends.raw.observe(&message),
                Err(error) => {
                    let fault = unreadable(&error, frame);
                    self.fail(fault, true);
                    return None;
                }
            }
            return Some(without_carriage_return(&self.buf[..end]));
        }
    }

    /// Forgets the frame returned last; frees the buffer once nothing is unread.
    fn drop_taken(&mut self) {
        if self.taken == 0 {
            return;
        }
        if self.taken >= self.buf.len() {
            self.buf = Vec::new();
        } else {
            self.buf.drain(..self.taken);
        }
        self.taken = 0;
        self.scanned = 0;
    }

    /// Reads until `buf` holds a complete line (or the line is too long, or stdout ended).
    async fn read_line(&mut self) -> Read {
        loop {
            if let Some(at) = self.buf[self.scanned..].iter().position(|b| *b == b'\n') {
                let end = self.scanned + at;
                // The frame excludes its terminating newline.
                if end > self.max {
                    return Read::Oversized;
                }
                return Read::Line {
                    end,
                    consumed: end + 1,
                };
            }
            self.scanned = self.buf.len();
            if self.buf.len() > self.max {
                return Read::Oversized;
            }
            match self.fill().await {
                Ok(0) if self.buf.is_empty() => return Read::Eof,
                // A last line without its newline is still a line.
                Ok(0) => {
                    let end = self.buf.len();
                    return Read::Line { end, consumed: end };
                }
                Ok(_) => {}
                Err(error) => return Read::Failed(error),
            }
        }
    }

    /// Waits until the pipe is readable and appends what it holds; `Ok(0)` at its end.
    async fn fill(&mut self) -> std::io::Result<usize> {
        loop {
            self.pipe.readable().await?;
            if self.buf.capacity() - self.buf.len() < READ_CHUNK {
                self.buf.reserve(READ_CHUNK);
            }
            match self.pipe.try_read_buf(&mut self.buf) {
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                    if self.buf.is_empty() {
                        // Nothing unread: do not hold the room while waiting.
                        self.buf = Vec::new();
                    }
                }
                other => return other,
            }
        }
    }

    /// The fault of a closed stdout, with the exit status if the process ends in time.
    async fn eof_fault(&mut self) -> ConnectionFault {
        let status =
            tokio::time::timeout(EXIT_STATUS_WAIT, self.ends.exited.wait_for(Option::is_some))
                .await
                .ok()
                .and_then(|r| r.ok().and_then(|info| info.clone()));
        let mut fault = ConnectionFault::transport("MCP server closed its stdout (exited)");
        if let Some(info) = status {
            fault = fault.with_detail("exit_status", info.description);
            if let Some(code) = info.code {
                fault = fault.with_detail("exit_code", code);
            }
        }
        fault
    }

    /// Ends the stream with `fault`, killing the server first when it broke the protocol.
    fn fail(&mut self, fault: ConnectionFault, kill: bool) {
        if kill {
            self.ends.kill.cancel();
        }
        self.ends.faults.raise(fault);
        self.ended = true;
        self.buf = Vec::new();
    }
}

/// `frame` without one trailing `\r`.
fn without_carriage_return(frame: &[u8]) -> &[u8] {
    frame.strip_suffix(b"\r").unwrap_or(frame)
}

fn preview(bytes: &[u8]) -> String {
    let cut = bytes.len().min(200);
    String::from_utf8_lossy(&bytes[..cut]).into_owned()
}

/// The fault for a frame that does not parse, saying why.
fn unreadable(error: &serde_json::Error, frame: &[u8]) -> ConnectionFault {
    ConnectionFault::protocol(format!(
        "MCP server wrote a line that is not readable JSON ({error})"
    ))
    .with_detail("line_preview", preview(frame))
}
