//! The event stream over real HTTP: change records arrive live with their cursors as ids,
//! and a reconnect with `Last-Event-ID` gets exactly what came after; bad cursors are
//! refused before the stream starts.

// Helpers outside #[test] fns fail the test on purpose.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::body::Incoming;
use serde_json::{Value, json};
use support::{Served, address_form, responses_path, serve};

/// One parsed SSE event.
#[derive(Debug)]
struct Sse {
    id: String,
    event: String,
    data: Value,
}

struct Reader {
    body: Incoming,
    buffer: String,
}

impl Reader {
    async fn open(served: &Served, last_event_id: Option<&str>) -> Self {
        Self::open_with(served, "/api/v1/events", last_event_id).await
    }

    async fn open_path(served: &Served, path: &str) -> Self {
        Self::open_with(served, path, None).await
    }

    async fn open_with(served: &Served, path: &str, last_event_id: Option<&str>) -> Self {
        let mut request = Request::get(served.url(path));
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        let response = served
            .client
            .request(request.body(Full::new(Bytes::new())).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Self {
            body: response.into_body(),
            buffer: String::new(),
        }
    }

    /// The next `round.*` event (execution records between are skipped).
    async fn next_round(&mut self) -> Sse {
        loop {
            let event = self.next().await;
            if event.event.starts_with("round.") {
                return event;
            }
        }
    }

    /// The next event that is not a keep-alive comment.
    async fn next(&mut self) -> Sse {
        tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                if let Some(end) = self.buffer.find("\n\n") {
                    let block: String = self.buffer.drain(..end + 2).collect();
                    let mut event = Sse {
                        id: String::new(),
                        event: String::new(),
                        data: Value::Null,
                    };
                    for line in block.lines() {
                        if let Some(v) = line.strip_prefix("id:") {
                            event.id = v.trim().to_owned();
                        }
                        if let Some(v) = line.strip_prefix("event:") {
                            event.event = v.trim().to_owned();
                        }
                        if let Some(v) = line.strip_prefix("data:") {
                            event.data = serde_json::from_str(v.trim()).unwrap();
                        }
                    }
                    if !event.event.is_empty() {
                        return event;
                    }
                    continue;
                }
                let frame = self.body.frame().await.unwrap().unwrap();
                if let Ok(data) = frame.into_data() {
                    self.buffer.push_str(&String::from_utf8_lossy(&data));
                }
            }
        })
        .await
        .unwrap()
    }
}

#[tokio::test]
async fn records_stream_live_and_resume_after_the_last_id() {
    let served = serve(|b| b).await;
    let mut live = Reader::open(&served, None).await;
    let round = served.round(vec![address_form()]).await;
    let pending = live.next_round().await;
    assert_eq!(pending.event, "round.pending");
    assert_eq!(pending.data["round_id"], json!(round.round_id));
    assert_eq!(pending.data["execution_id"], json!(round.execution_id));
    assert_eq!(pending.id, pending.data["cursor"].to_string());
    drop(live);

    let body = json!({"responses": {"shipping_address": {"action": "accept", "content": {"street": "1 Main Street", "city": "Pune"}}}, "idempotency_key": "k"});
    assert_eq!(
        served
            .post_json(&responses_path(&round), &body)
            .await
            .status,
        200
    );
    let mut resumed = Reader::open(&served, Some(&pending.id)).await;
    let answered = resumed.next_round().await;
    assert_eq!(
        answered.event, "round.answered",
        "the pending record is not repeated"
    );
    assert_eq!(answered.data["round"]["status"], "response_validated");
    assert!(answered.data["cursor"].as_u64() > pending.data["cursor"].as_u64());
    assert!(
        !serde_json::to_string(&answered.data)
            .unwrap()
            .contains("1 Main Street"),
        "ids and states only"
    );

    // `?after=` resumes the same way for clients without the header.
    let mut after =
        Reader::open_path(&served, &format!("/api/v1/events?after={}", pending.id)).await;
    assert_eq!(after.next_round().await.id, answered.id);
    served.shutdown.cancel();
}

#[tokio::test]
async fn malformed_and_future_cursors_are_refused_before_the_stream() {
    let served = serve(|b| b).await;
    served.round(vec![address_form()]).await;
    for (cursor, reason) in [
        ("abc", "invalid_cursor"),
        ("-1", "invalid_cursor"),
        ("999999", "cursor_in_future"),
    ] {
        let response = served
            .client
            .request(
                Request::get(served.url("/api/v1/events"))
                    .header("last-event-id", cursor)
                    .body(Full::new(Bytes::new()))
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(response.status(), 422, "{cursor}");
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["code"], "invalid_argument", "{body}");
        assert_eq!(body["error"]["details"]["reason"], reason, "{body}");
    }
    served.shutdown.cancel();
}
