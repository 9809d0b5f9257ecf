//! Watching a response body go by: every chunk is forwarded unchanged; a JSON body is
//! reported once complete, an event stream event by event (`data:` lines joined).

use bytes::Bytes;

use super::super::local::LocalReporter;
use super::super::{Direction, MAX_FRAME_BYTES};

/// How a response body is observed.
#[derive(Debug)]
pub(super) enum BodyWatch {
    /// `application/json`: buffered (up to the frame bound) and reported at the end.
    Json(Vec<u8>, bool),
    /// `text/event-stream`: parsed as it goes.
    Events(EventParser),
    /// Anything else (an error page): forwarded unobserved.
    Opaque,
}

impl BodyWatch {
    /// The watch for a response with this `content-type`.
    pub(super) fn for_content_type(content_type: Option<&str>) -> Self {
        let media = content_type
            .and_then(|value| value.split(';').next())
            .map(|media| media.trim().to_ascii_lowercase());
        match media.as_deref() {
            Some("application/json") => Self::Json(Vec::new(), false),
            Some("text/event-stream") => Self::Events(EventParser::default()),
            _ => Self::Opaque,
        }
    }

    /// Sees one chunk on its way to the client.
    pub(super) fn chunk(&mut self, chunk: &Bytes, reporter: &LocalReporter) {
        match self {
            Self::Json(buffer, overflowed) => {
                if *overflowed {
                    return;
                }
                if buffer.len() + chunk.len() > MAX_FRAME_BYTES {
                    *overflowed = true;
                    buffer.clear();
                    reporter.incomplete(&format!(
                        "a server-to-client JSON body longer than {MAX_FRAME_BYTES} bytes was forwarded unobserved"
                    ));
                } else {
                    buffer.extend_from_slice(chunk);
                }
            }
            Self::Events(parser) => parser.feed(chunk, reporter),
            Self::Opaque => {}
        }
    }

    /// The body ended (`complete`: without an error).
    pub(super) fn end(&mut self, complete: bool, reporter: &LocalReporter) {
        match self {
            Self::Json(buffer, false) if complete && !buffer.is_empty() => {
                report(buffer, reporter);
                buffer.clear();
            }
            Self::Json(buffer, false) if !buffer.is_empty() => {
                reporter.incomplete("a server-to-client JSON body broke off");
                buffer.clear();
            }
            Self::Events(parser) => parser.finish(reporter),
            _ => {}
        }
    }
}

/// Reports `bytes` as one server-to-client frame if it is JSON.
fn report(bytes: &[u8], reporter: &LocalReporter) {
    match serde_json::from_slice(bytes) {
        Ok(payload) => reporter.frame(Direction::ServerToClient, payload),
        Err(_) => reporter.incomplete("a server-to-client body is not JSON (forwarded unobserved)"),
    }
}

/// An incremental `text/event-stream` parser that reports each event's data.
#[derive(Debug, Default)]
pub(super) struct EventParser {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    overflowed: bool,
}

impl EventParser {
    fn feed(&mut self, chunk: &[u8], reporter: &LocalReporter) {
        for &byte in chunk {
            if byte == b'\n' {
                let line = std::mem::take(&mut self.line);
                self.line_done(&line, reporter);
            } else if self.line.len() <= MAX_FRAME_BYTES {
                self.line.push(byte);
            }
        }
    }

    fn line_done(&mut self, line: &[u8], reporter: &LocalReporter) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            self.dispatch(reporter);
            return;
        }
        let Some(value) = line.strip_prefix(b"data:") else {
            return; // `event:`, `id:`, `retry:` and comments carry no frame.
        };
        let value = value.strip_prefix(b" ").unwrap_or(value);
        if self.overflowed || self.data.len() + value.len() + 1 > MAX_FRAME_BYTES {
            self.overflowed = true;
            self.data.clear();
            return;
        }
        if self.has_data {
            self.data.push(b'\n');
        }
        self.data.extend_from_slice(value);
        self.has_data = true;
    }

    fn dispatch(&mut self, reporter: &LocalReporter) {
        if self.overflowed {
            reporter.incomplete(&format!(
                "a server-to-client event longer than {MAX_FRAME_BYTES} bytes was forwarded unobserved"
            ));
        } else if self.has_data && !self.data.iter().all(u8::is_ascii_whitespace) {
            report(&self.data, reporter);
        }
        self.data.clear();
        self.has_data = false;
        self.overflowed = false;
    }

    fn finish(&mut self, reporter: &LocalReporter) {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.line_done(&line, reporter);
        }
        if self.has_data {
            self.dispatch(reporter);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tokio::sync::mpsc;

    use super::super::super::RelayEvent;
    use super::*;

    fn frames(rx: &mut mpsc::Receiver<RelayEvent>) -> Vec<serde_json::Value> {
        let mut out = Vec::new();
        while let Ok(event) = rx.try_recv() {
            if let RelayEvent::Frame(frame) = event {
                out.push(frame.payload);
            }
        }
        out
    }

    #[test]
    fn events_split_across_chunks_are_reported_whole() {
        let (tx, mut rx) = mpsc::channel(16);
        let reporter = LocalReporter::new("s", tx);
        let mut watch = BodyWatch::for_content_type(Some("text/event-stream; charset=utf-8"));
        for chunk in [
            &b"id: 1\r\nevent: message\r\ndata: {\"id\":"[..],
            b"1,\"result\":{}}\r\n\r\n: keep-alive\n\ndata: {\"a\":\n",
            b"data: 2}\n\ndata: {\"tail\":true}",
        ] {
            watch.chunk(&Bytes::copy_from_slice(chunk), &reporter);
        }
        watch.end(true, &reporter);
        assert_eq!(
            frames(&mut rx),
            [
                json!({"id": 1, "result": {}}),
                json!({"a": 2}),
                json!({"tail": true})
            ]
        );
    }

    #[test]
    fn a_json_body_is_reported_when_complete_and_opaque_bodies_never() {
        let (tx, mut rx) = mpsc::channel(16);
        let reporter = LocalReporter::new("s", tx);
        let mut watch = BodyWatch::for_content_type(Some("application/json"));
        watch.chunk(&Bytes::from_static(b"{\"id\":"), &reporter);
        watch.chunk(&Bytes::from_static(b"7}"), &reporter);
        watch.end(true, &reporter);
        let mut opaque = BodyWatch::for_content_type(Some("text/plain"));
        opaque.chunk(&Bytes::from_static(b"{\"id\":8}"), &reporter);
        opaque.end(true, &reporter);
        assert_eq!(frames(&mut rx), [json!({"id": 7})]);
    }
}
