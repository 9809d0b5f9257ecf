//! The HTTP relay (the Streamable HTTP counterpart of `m3 mcp-relay`), exercised with
//! M3's own MCP client through it against the shipping fixture's HTTP endpoint: both
//! eras flow unchanged (JSON answers and event streams), every JSON-RPC message is
//! reported to the observer, and a `tools/call` outside the selection is refused.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod mcp_support;

use std::time::Duration;

use m3_fixtures::{Era, HttpFixture};
use m3_mcp::{ConnectOptions, McpConnection, ProtocolEra};
use m3_runtime::relay::{Direction, HttpRelay, POLICY_DENIED_MESSAGE, RelayEvent, RelayObserver};
use mcp_support::{
    accept, connect_http, drive, http_binding as binding, http_fixture, shipping_tool,
};
use serde_json::Value;

/// The relay for `server` (the selection allows `book_shipment` only) and the
/// observer it reports to, in a temporary directory.
async fn relay_for(server: &HttpFixture) -> (tempfile::TempDir, RelayObserver, HttpRelay) {
    let dir = tempfile::tempdir().unwrap();
    let observer = RelayObserver::bind(dir.path()).await.unwrap();
    let relay = observer
        .http_relay(
            "shipping",
            &binding(server.url()),
            Some(vec!["book_shipment".to_owned()]),
        )
        .await
        .unwrap();
    (dir, observer, relay)
}

async fn connect(url: &str) -> McpConnection {
    connect_http(url, ConnectOptions::new()).await
}

/// Every event buffered so far (the relay reports before it forwards, so by the time
/// the client has its answer the frames are queued).
async fn drain(observer: &mut RelayObserver) -> Vec<RelayEvent> {
    let mut events = Vec::new();
    while let Ok(Some(event)) =
        tokio::time::timeout(Duration::from_millis(300), observer.next()).await
    {
        events.push(event);
    }
    events
}

fn frames(events: &[RelayEvent], direction: Direction) -> Vec<Value> {
    events
        .iter()
        .filter_map(|event| match event {
            RelayEvent::Frame(frame) if frame.direction == direction => {
                assert_eq!(frame.connection_id, "shipping");
                Some(frame.payload.clone())
            }
            _ => None,
        })
        .collect()
}

async fn relayed_booking(era: Era, expected: ProtocolEra) {
    let server = http_fixture(era).await;
    let (_dir, mut observer, relay) = relay_for(&server).await;
    assert!(
        relay.url().starts_with("http://127.0.0.1:"),
        "{}",
        relay.url()
    );
    let connection = connect(relay.url()).await;
    assert_eq!(connection.era(), expected);
    let (done, rounds) = drive(&connection, shipping_tool("book_shipment"), accept)
        .await
        .unwrap();
    assert!(done.text().contains("Shipment booked"), "{}", done.text());
    assert_eq!(rounds.len(), 1);
    connection.close().await.unwrap();
    let events = drain(&mut observer).await;
    assert!(
        matches!(events[0], RelayEvent::Connected { .. }),
        "{events:?}"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, RelayEvent::Incomplete { .. })),
        "{events:?}"
    );
    let sent = frames(&events, Direction::ClientToServer);
    let calls: Vec<_> = sent
        .iter()
        .filter(|f| f["method"] == "tools/call")
        .collect();
    let received = frames(&events, Direction::ServerToClient);
    match expected {
        ProtocolEra::Legacy => {
            assert_eq!(calls.len(), 1, "{sent:?}");
            assert!(
                received.iter().any(|f| f["method"] == "elicitation/create"),
                "{received:?}"
            );
            let answered = sent.iter().any(|f| f["result"]["action"] == "accept");
            assert!(
                answered,
                "the elicitation answer crossed the relay: {sent:?}"
            );
        }
        _ => {
            assert_eq!(calls.len(), 2, "the call and its retry: {sent:?}");
            assert!(calls[1]["params"]["inputResponses"].is_object(), "{sent:?}");
            assert!(
                received
                    .iter()
                    .any(|f| f["result"]["resultType"] == "input_required"),
                "{received:?}"
            );
        }
    }
    assert!(
        received.iter().any(|f| f["result"]["content"].is_array()),
        "the final result crossed the relay: {received:?}"
    );
    drop(relay);
    server.stop().await.unwrap();
}

#[tokio::test]
async fn the_http_relay_carries_a_2026_era_round_and_reports_it() {
    relayed_booking(Era::Modern, ProtocolEra::Modern).await;
}

#[tokio::test]
async fn the_http_relay_carries_a_legacy_round_over_the_event_stream() {
    relayed_booking(Era::Legacy, ProtocolEra::Legacy).await;
}

#[tokio::test]
async fn the_http_relay_refuses_a_tool_outside_the_selection() {
    let server = http_fixture(Era::Modern).await;
    let (_dir, mut observer, relay) = relay_for(&server).await;
    let connection = connect(relay.url()).await;
    let error = connection
        .start(shipping_tool("book_gift_shipment"))
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains(POLICY_DENIED_MESSAGE),
        "{error} {:?}",
        error.details()
    );
    connection.close().await.unwrap();
    let events = drain(&mut observer).await;
    let denied: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            RelayEvent::PolicyDenied { tool, .. } => Some(tool.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(denied, ["book_gift_shipment"]);
    let sent = frames(&events, Direction::ClientToServer);
    assert!(
        !sent.iter().any(|f| f["method"] == "tools/call"),
        "the refused call is not reported as sent: {sent:?}"
    );
    // Another path on the relay's port is not the relay.
    let other = format!("{}-not", relay.url());
    let options = ConnectOptions::new().with_request_timeout(Duration::from_secs(5));
    let refused = McpConnection::connect_http(&binding(&other), options).await;
    assert!(refused.is_err(), "a wrong token path must not be served");
    server.stop().await.unwrap();
}
