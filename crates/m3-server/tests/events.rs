//! The event stream over real HTTP: facts arrive live with ids, and a
//! reconnect with `Last-Event-ID` gets exactly what came after.

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
        let mut request = Request::get(served.url("/api/v1/events"));
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
async fn facts_stream_live_and_resume_after_the_last_id() {
    let served = serve(|b| b).await;
    let mut live = Reader::open(&served, None).await;
    let round = served.round(vec![address_form()]).await;
    let pending = live.next().await;
    assert_eq!(pending.event, "round.pending");
    assert_eq!(pending.data["round_id"], json!(round.round_id));
    assert_eq!(pending.data["execution_id"], json!(round.execution_id));
    assert!(!pending.id.is_empty());
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
    let answered = resumed.next().await;
    assert_eq!(
        answered.event, "round.answered",
        "the pending fact is not repeated"
    );
    assert_eq!(answered.data["status"], "response_validated");
    assert!(!answered.id.is_empty() && answered.id != pending.id);
    assert!(
        !serde_json::to_string(&answered.data)
            .unwrap()
            .contains("1 Main Street"),
        "ids only"
    );

    // A foreign id (another server's log) replays by store time.
    let foreign = format!("other.0.{}", pending.id.rsplit('.').next().unwrap());
    let mut replayed = Reader::open(&served, Some(&foreign)).await;
    assert_eq!(replayed.next().await.event, "round.pending");
    assert_eq!(replayed.next().await.event, "round.answered");
    served.shutdown.cancel();
}
