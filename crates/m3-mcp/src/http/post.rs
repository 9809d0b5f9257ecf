//! The POST of a `tools/call`, done here instead of by rmcp's reqwest client.
//!
//! rmcp's client decodes a plain `application/json` answer into its typed model
//! before anyone sees it, and that model drops the schema keywords of an
//! `input_required` result outside MCP's restricted subset. This POST reads the
//! body itself (within the frame bound), hands the raw JSON to [`RawMessages`],
//! and only then decodes the envelope into rmcp's [`ServerJsonRpcMessage`], so a
//! plain JSON answer reaches the round exactly as over stdio or an event stream.
//! An event-stream answer is bounded per event here too; its events are
//! observed by the caller like those of any other stream.

use std::collections::HashMap;

use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::{Stream, StreamExt};
use reqwest::StatusCode;
use reqwest::header::{
    ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE,
};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, HttpStatusError, InsufficientScopeError, SseError, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::{Sse, SseStream};

use super::super::raw::RawMessages;

type HttpError = StreamableHttpError<reqwest::Error>;

const SESSION_HEADER: &str = "Mcp-Session-Id";
const EVENT_STREAM: &str = "text/event-stream";
const JSON: &str = "application/json";

/// Whether `message` is a POST this module does: a `tools/call`, the only request
/// whose answer can be an `input_required` result. Every other message (the
/// handshake, notifications, replies) keeps rmcp's own handling.
pub(super) fn is_ours(message: &ClientJsonRpcMessage) -> bool {
    matches!(
        message,
        ClientJsonRpcMessage::Request(request)
            if matches!(request.request, ClientRequest::CallToolRequest(_))
    )
}

/// One POST as rmcp's transport asks for it.
pub(super) struct Post<'a> {
    pub(super) uri: &'a str,
    pub(super) message: &'a ClientJsonRpcMessage,
    pub(super) session_id: Option<&'a str>,
    pub(super) auth_header: Option<String>,
    pub(super) headers: HashMap<HeaderName, HeaderValue>,
    pub(super) limits: StreamableHttpResponseLimits,
}

/// Send `post` and read its answer; a JSON body is observed raw into `raw`.
///
/// # Errors
/// What rmcp's client would report: the HTTP status (`HttpStatus`), an expired
/// session, a body over the bound, a body that is not JSON-RPC, a content type
/// that is neither JSON nor an event stream, or the client's own failure.
pub(super) async fn send(
    client: &reqwest::Client,
    post: Post<'_>,
    raw: &RawMessages,
) -> Result<StreamableHttpPostResponse, HttpError> {
    let mut request = client
        .post(post.uri)
        .header(ACCEPT, format!("{EVENT_STREAM}, {JSON}"));
    for (name, value) in post.headers {
        request = request.header(name, value);
    }
    if let Some(token) = post.auth_header {
        request = request.bearer_auth(token);
    }
    if let Some(session) = post.session_id {
        request = request.header(SESSION_HEADER, session);
    }
    let response = request.json(post.message).send().await?;
    let status = response.status();
    if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
        return Ok(StreamableHttpPostResponse::Accepted);
    }
    if status == StatusCode::NOT_FOUND && post.session_id.is_some() {
        return Err(StreamableHttpError::SessionExpired);
    }
    if let Some(error) = authorization_error(&response) {
        return Err(error);
    }
    let session = response
        .headers()
        .get(SESSION_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let media = media_type(response.headers().get(CONTENT_TYPE));
    match media.as_deref() {
        Some(JSON) if status.is_success() => {
            let body = read_bounded(response, post.limits.max_json_response_size).await?;
            decode(&body, raw).map(|message| StreamableHttpPostResponse::Json(message, session))
        }
        Some(JSON) => {
            let error = status_error(&response);
            let body = read_bounded(response, post.limits.max_json_response_size).await;
            match body.ok().and_then(|body| rpc_error(&body)) {
                // The server's own JSON-RPC error outranks the status, as in rmcp.
                Some(message) => Ok(StreamableHttpPostResponse::Json(message, session)),
                None => Err(error),
            }
        }
        Some(EVENT_STREAM) if status.is_success() => {
            let events = bounded_events(response.bytes_stream(), post.limits.max_sse_event_size);
            Ok(StreamableHttpPostResponse::Sse(events, session))
        }
        _ if !status.is_success() => Err(status_error(&response)),
        _ => Err(StreamableHttpError::UnexpectedContentType(
            response
                .headers()
                .get(CONTENT_TYPE)
                .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned()),
        )),
    }
}

/// The media type of a `Content-Type` value, lower case, without parameters.
fn media_type(value: Option<&HeaderValue>) -> Option<String> {
    let text = value?.to_str().ok()?;
    let essence = text.split(';').next()?.trim();
    Some(essence.to_ascii_lowercase())
}

/// A `401` or `403` with a `WWW-Authenticate` challenge, as rmcp's client reports it.
fn authorization_error(response: &reqwest::Response) -> Option<HttpError> {
    let challenge = response.headers().get(WWW_AUTHENTICATE)?.to_str().ok()?;
    match response.status() {
        StatusCode::UNAUTHORIZED => Some(StreamableHttpError::AuthRequired(
            AuthRequiredError::new(challenge.to_owned()),
        )),
        StatusCode::FORBIDDEN => Some(StreamableHttpError::InsufficientScope(
            InsufficientScopeError::new(challenge.to_owned(), None),
        )),
        _ => None,
    }
}

fn status_error(response: &reqwest::Response) -> HttpError {
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .filter(|value| value.len() <= 64)
        .map(str::to_owned);
    HttpStatusError::new(response.status().as_u16(), retry_after).into()
}

/// The whole body, refused once it passes `max` bytes (declared or read).
async fn read_bounded(response: reqwest::Response, max: usize) -> Result<Vec<u8>, HttpError> {
    if response
        .content_length()
        .is_some_and(|length| length > max as u64)
    {
        return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: max });
    }
    let mut stream = response.bytes_stream();
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if chunk.len() > max - body.len() {
            return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: max });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Observe `body` raw, then decode it as rmcp would.
fn decode(body: &[u8], raw: &RawMessages) -> Result<ServerJsonRpcMessage, HttpError> {
    let value: serde_json::Value = serde_json::from_slice(body)?;
    raw.observe(&value);
    Ok(serde_json::from_value(value)?)
}

fn rpc_error(body: &[u8]) -> Option<ServerJsonRpcMessage> {
    match serde_json::from_slice::<ServerJsonRpcMessage>(body) {
        Ok(message @ JsonRpcMessage::Error(_)) => Some(message),
        _ => None,
    }
}

/// Why an event stream's body ended early.
#[derive(Debug)]
pub(super) enum EventBodyError {
    /// One event grew past this many bytes before it ended.
    TooLarge(usize),
    /// The body could not be read.
    Read(reqwest::Error),
}

impl std::fmt::Display for EventBodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooLarge(max) => write!(f, "an event-stream event is larger than {max} bytes"),
            Self::Read(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for EventBodyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::TooLarge(_) => None,
            Self::Read(error) => error.source(),
        }
    }
}

/// Counts the bytes of the event being received; a blank line ends an event and a
/// completed comment line (`:` keep-alive) does not count.
#[derive(Debug)]
struct EventBound {
    max: usize,
    event: usize,
    line_start: usize,
    line: usize,
    comment: bool,
    after_cr: bool,
}

impl EventBound {
    fn new(max: usize) -> Self {
        Self {
            max,
            event: 0,
            line_start: 0,
            line: 0,
            comment: false,
            after_cr: false,
        }
    }

    fn feed(&mut self, chunk: &[u8]) -> Result<(), EventBodyError> {
        for &byte in chunk {
            let lf_of_crlf = byte == b'\n' && self.after_cr;
            self.after_cr = byte == b'\r';
            if lf_of_crlf {
                continue;
            }
            if byte == b'\n' || byte == b'\r' {
                self.end_line();
                continue;
            }
            if self.line == 0 {
                self.comment = byte == b':';
            }
            self.line += 1;
            self.event += 1;
            if self.event > self.max {
                return Err(EventBodyError::TooLarge(self.max));
            }
        }
        Ok(())
    }

    fn end_line(&mut self) {
        if self.line == 0 {
            self.event = 0;
        } else if self.comment {
            self.event = self.line_start;
        } else {
            // The line break joins `data:` lines, so it counts.
            self.event += 1;
        }
        self.line = 0;
        self.line_start = self.event;
        self.comment = false;
    }
}

/// `bytes` as SSE events, each bounded to `max` bytes; the stream ends after its
/// first error.
pub(super) fn bounded_events<S>(bytes: S, max: usize) -> BoxStream<'static, Result<Sse, SseError>>
where
    S: Stream<Item = Result<Bytes, reqwest::Error>> + Send + 'static,
{
    let checked = bytes.scan((EventBound::new(max), false), |(bound, failed), chunk| {
        let item = if *failed {
            None
        } else {
            let checked = chunk
                .map_err(EventBodyError::Read)
                .and_then(|chunk| bound.feed(&chunk).map(|()| chunk));
            *failed = checked.is_err();
            Some(checked)
        };
        std::future::ready(item)
    });
    SseStream::from_bytes_stream(checked).boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fed(max: usize, chunks: &[&str]) -> Result<(), String> {
        let mut bound = EventBound::new(max);
        for chunk in chunks {
            bound
                .feed(chunk.as_bytes())
                .map_err(|error| error.to_string())?;
        }
        Ok(())
    }

    #[test]
    fn an_event_at_the_bound_passes_and_one_byte_more_is_refused() {
        assert_eq!(fed(10, &["data: 1234\n\n"]), Ok(()));
        assert!(fed(10, &["data: 12345\n\n"]).is_err());
    }

    #[test]
    fn the_bound_counts_across_chunks_and_resets_after_a_blank_line() {
        assert!(fed(10, &["data: 12", "345\n\n"]).is_err());
        assert_eq!(
            fed(10, &["data: 1234\r\n\r\n", "data: 1234\r\n\r\n"]),
            Ok(())
        );
        assert_eq!(fed(10, &["data: 1234\r\r", "data: 1234\n\n"]), Ok(()));
    }

    #[test]
    fn completed_comments_do_not_count_but_joined_data_lines_do() {
        let mut pings = vec![": ping\n"; 100];
        pings.push("data: 1234\n\n");
        assert_eq!(fed(10, &pings), Ok(()));
        assert!(fed(10, &["data: 12\ndata: 3\n\n"]).is_err());
    }

    #[test]
    fn media_types_ignore_case_and_parameters() {
        let value = HeaderValue::from_static("Application/JSON; charset=utf-8");
        assert_eq!(media_type(Some(&value)).as_deref(), Some(JSON));
        assert_eq!(media_type(None), None);
    }

    #[test]
    fn a_json_body_is_observed_raw_before_it_is_decoded() {
        let raw = RawMessages::default();
        let body = br#"{"jsonrpc":"2.0","id":3,"result":{"resultType":"input_required",
            "inputRequests":{"q":{"method":"elicitation/create","params":{"message":"m",
            "requestedSchema":{"type":"object","x-a":1,"properties":{"s":{"type":"string","pattern":"^a$"}}}}}}}}"#;
        decode(body, &raw).unwrap();
        let kept = raw.take_result(&rmcp::model::RequestId::Number(3)).unwrap();
        assert_eq!(
            kept["inputRequests"]["q"]["params"]["requestedSchema"]["properties"]["s"]["pattern"],
            "^a$"
        );
        assert!(decode(b"{\"jsonrpc\":", &raw).is_err());
    }
}
