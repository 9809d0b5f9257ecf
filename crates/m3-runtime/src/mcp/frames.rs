//! Our own bounded, validating line reader in front of rmcp's stdio transport.
//!
//! rmcp's `AsyncRwTransport` already caps a line (16 MiB by default), but it
//! *drops* an oversized line and *ignores* a non-JSON line and keeps the
//! connection open, so a request whose answer was lost that way waits forever.
//! The client instead reads the child's stdout here: every line must be at most
//! `max_frame_bytes` long and parse as a JSON value, with the same recursion
//! limit rmcp's parser has (a valid but too deeply nested frame would otherwise
//! be dropped by rmcp and its request would wait). Valid lines are copied unchanged
//! into an in-memory pipe that rmcp reads (the transport is built from
//! `(AsyncRead, AsyncWrite)`). The first violation records a `protocol_error`
//! fault, closes the pipe (rmcp sees EOF) and kills the server's process group.
//! End of stdout records a `transport_error` fault naming the exit status.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncWriteExt, BufReader, DuplexStream};
use tokio::process::ChildStdout;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::fault::{ConnectionFault, FaultSender};
use super::process::ExitInfo;
use super::raw::RawMessages;
use crate::ndjson::{Line, frame_of, read_line};

/// Size of the in-memory pipe between the reader and rmcp.
const PIPE_CAPACITY: usize = 64 * 1024;

/// The stdout read buffer. Every waiting execution holds one for its whole life, so it is
/// small; a longer frame is assembled in the line buffer, which shrinks back after it.
const READ_BUFFER: usize = 8 * 1024;

/// How long to wait for the exit status after stdout closed, to report it.
const EXIT_STATUS_WAIT: Duration = Duration::from_millis(300);

/// Start reading `stdout`; returns the read half rmcp should consume.
pub(crate) fn spawn_reader(
    stdout: ChildStdout,
    max_frame_bytes: usize,
    faults: FaultSender,
    kill: CancellationToken,
    exited: watch::Receiver<Option<ExitInfo>>,
    raw: Arc<RawMessages>,
) -> DuplexStream {
    let (rmcp_side, our_side) = tokio::io::duplex(PIPE_CAPACITY);
    let ends = Ends {
        faults,
        kill,
        exited,
        raw,
    };
    tokio::spawn(pump(stdout, our_side, max_frame_bytes, ends));
    rmcp_side
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

/// Where the reader reports: faults, the kill switch, the exit status, raw messages.
struct Ends {
    faults: FaultSender,
    kill: CancellationToken,
    exited: watch::Receiver<Option<ExitInfo>>,
    raw: Arc<RawMessages>,
}

async fn pump(stdout: ChildStdout, mut out: DuplexStream, max: usize, ends: Ends) {
    let Ends {
        faults,
        kill,
        mut exited,
        raw,
    } = ends;
    let mut reader = BufReader::with_capacity(READ_BUFFER, stdout);
    let mut line = Vec::new();
    let fault = loop {
        if line.capacity() > READ_BUFFER {
            line = Vec::new();
        }
        match read_line(&mut reader, &mut line, max).await {
            Line::Complete => {
                let frame = frame_of(&line);
                if frame.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                // A `Value` (not `IgnoredAny`, which skips without a depth limit) fails
                // exactly where rmcp's own parse would.
                match serde_json::from_slice::<serde_json::Value>(frame) {
                    // Kept before rmcp sees the frame, so it is there when rmcp delivers.
                    Ok(message) => raw.observe(&message),
                    Err(error) => {
                        kill.cancel();
                        break unreadable(&error, frame);
                    }
                }
                if out.write_all(&line).await.is_err() {
                    // rmcp dropped its side: the connection is closing.
                    break ConnectionFault::transport("connection closed");
                }
                if !line.ends_with(b"\n") && out.write_all(b"\n").await.is_err() {
                    break ConnectionFault::transport("connection closed");
                }
            }
            Line::Oversized => {
                kill.cancel();
                break ConnectionFault::protocol(format!(
                    "MCP server wrote a frame larger than {max} bytes"
                ))
                .with_detail("max_frame_bytes", max as u64);
            }
            Line::Eof => {
                let status =
                    tokio::time::timeout(EXIT_STATUS_WAIT, exited.wait_for(Option::is_some))
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
                break fault;
            }
            Line::Failed(error) => {
                break ConnectionFault::transport(format!(
                    "reading MCP server stdout failed: {error}"
                ));
            }
        }
    };
    faults.raise(fault);
    let _ = out.shutdown().await;
}
