//! Bad peers never hang or crash the client: every fault mode of the m3-fixtures
//! shipping server (and a hand-written raw peer for malformed replies) ends in a
//! typed error within 10 seconds, in both eras, and leaves no child process.

// Helpers outside #[test] fns fail the test on purpose (clippy.toml only relaxes
// these lints inside test functions).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod mcp_support;

use std::time::{Duration, Instant};

use m3_mcp::{ConnectOptions, McpConnection, OperationRequest, ProtocolEra};
use m3_types::StdioServer;
use mcp_support::*;
use serde_json::{Map, json};

const BOUND: Duration = Duration::from_secs(10);

fn book() -> OperationRequest {
    let mut args = Map::new();
    args.insert("weight_kg".into(), json!(2.5));
    OperationRequest::tool("book_shipment", args)
}

fn era_flag(era: ProtocolEra) -> &'static str {
    match era {
        ProtocolEra::Modern => "2026-07-28",
        ProtocolEra::Legacy => "legacy",
    }
}

async fn connect_fast(server: &StdioServer, era: ProtocolEra) -> McpConnection {
    McpConnection::connect(
        server,
        ConnectOptions::new()
            .with_era(Some(era))
            .with_request_timeout(Duration::from_secs(3)),
    )
    .await
    .unwrap_or_else(|e| panic!("connect failed: {e} {:?}", e.details()))
}

/// Run `request` against a faulty server; assert the typed error, the time bound
/// and that the server is gone after close.
async fn expect_fault(
    server: StdioServer,
    era: ProtocolEra,
    request: OperationRequest,
    code: &str,
) {
    let connection = connect_fast(&server, era).await;
    let pid = connection.pid().unwrap();
    let started = Instant::now();
    let outcome = tokio::time::timeout(BOUND, drive(&connection, request, accept)).await;
    let elapsed = started.elapsed();
    let error = match outcome {
        Err(_) => panic!(
            "{} {era}: no answer within {BOUND:?}",
            server.args.join(" ")
        ),
        Ok(Ok((done, _))) => panic!(
            "{} {era}: expected {code}, got a result {:?}",
            server.args.join(" "),
            done.result()
        ),
        Ok(Err(error)) => error,
    };
    assert_eq!(
        error.code(),
        code,
        "{} {era}: {error} {:?}",
        server.args.join(" "),
        error.details()
    );
    assert!(
        error.details().contains_key("logical_operation_id"),
        "{error:?}"
    );
    assert!(elapsed < BOUND, "took {elapsed:?}");
    // The record shows the failed attempt.
    let id = error.details()["logical_operation_id"].as_str().unwrap();
    let record = connection.operation_record(id).unwrap();
    assert!(record.is_finished());
    assert_eq!(record.error.as_ref().map(|e| e.code.as_str()), Some(code));
    let close_started = Instant::now();
    connection.close().await.unwrap();
    assert!(close_started.elapsed() < BOUND);
    assert!(
        !alive(pid),
        "server {pid} is still in the process table after close ({code})"
    );
}

#[tokio::test]
async fn crash_mid_call_is_a_transport_error() {
    for era in [ProtocolEra::Modern, ProtocolEra::Legacy] {
        let server = shipping(era_flag(era), Some("crash-mid-call"));
        let connection = connect_fast(&server, era).await;
        let pid = connection.pid().unwrap();
        let error = tokio::time::timeout(BOUND, connection.start(book()))
            .await
            .expect("bounded")
            .unwrap_err();
        assert_eq!(error.code(), "transport_error", "{era}: {error}");
        assert_eq!(
            error.details()["exit_code"],
            json!(70),
            "{era}: {:?}",
            error.details()
        );
        // The crashed server is reaped without waiting for close.
        assert!(
            gone_within(pid, Duration::from_secs(5)).await,
            "{era}: crashed server not reaped"
        );
        assert!(connection.fault().is_some());
        // Later calls fail at once with the same typed error.
        let again = connection.start(book()).await.unwrap_err();
        assert_eq!(again.code(), "transport_error");
        connection.close().await.unwrap();
        expect_fault(
            shipping(era_flag(era), Some("crash-mid-call")),
            era,
            book(),
            "transport_error",
        )
        .await;
    }
}

#[tokio::test]
async fn garbage_line_is_a_protocol_error() {
    for era in [ProtocolEra::Modern, ProtocolEra::Legacy] {
        expect_fault(
            shipping(era_flag(era), Some("garbage")),
            era,
            book(),
            "protocol_error",
        )
        .await;
    }
}

#[tokio::test]
async fn oversized_frame_is_a_protocol_error() {
    for era in [ProtocolEra::Modern, ProtocolEra::Legacy] {
        expect_fault(
            shipping(era_flag(era), Some("oversized")),
            era,
            book(),
            "protocol_error",
        )
        .await;
    }
}

#[tokio::test]
async fn endless_rounds_hit_the_round_limit() {
    for era in [ProtocolEra::Modern, ProtocolEra::Legacy] {
        expect_fault(
            shipping(era_flag(era), Some("endless-rounds")),
            era,
            book(),
            "elicitation_round_limit",
        )
        .await;
    }
}

#[tokio::test]
async fn silence_is_a_timeout() {
    for era in [ProtocolEra::Modern, ProtocolEra::Legacy] {
        expect_fault(
            shipping(era_flag(era), Some("hang")),
            era,
            book(),
            "timeout",
        )
        .await;
    }
}

/// A frame nested deeper than the JSON parser's recursion limit is valid JSON
/// that cannot be read: it ends the call at once, saying why (no request timeout).
#[tokio::test]
async fn too_deeply_nested_frame_is_a_protocol_error() {
    for era in ["modern", "legacy"] {
        let protocol_era = if era == "modern" {
            ProtocolEra::Modern
        } else {
            ProtocolEra::Legacy
        };
        let connection = McpConnection::connect(
            &fault_peer("deep", era),
            ConnectOptions::new()
                .with_era(Some(protocol_era))
                .with_request_timeout(Duration::from_secs(60)),
        )
        .await
        .unwrap();
        let started = Instant::now();
        let error = tokio::time::timeout(
            BOUND,
            connection.start(OperationRequest::tool("ship", Map::new())),
        )
        .await
        .unwrap_or_else(|_| panic!("{era}: the unreadable frame was dropped and the call hung"))
        .unwrap_err();
        assert_eq!(error.code(), "protocol_error", "{era}: {error}");
        assert!(
            error.to_string().contains("recursion limit"),
            "{era}: the error says why: {error}"
        );
        assert!(started.elapsed() < BOUND);
        connection.close().await.unwrap();
    }
}

#[tokio::test]
async fn malformed_input_required_is_a_protocol_error() {
    for fault in ["malformed-input-required", "bad-request-method"] {
        let request = OperationRequest::tool("ship", Map::new());
        expect_fault(
            fault_peer(fault, "modern"),
            ProtocolEra::Modern,
            request,
            "protocol_error",
        )
        .await;
    }
}

#[tokio::test]
async fn raw_peer_faults_end_typed_in_both_eras() {
    for (era, flag) in [
        (ProtocolEra::Modern, "modern"),
        (ProtocolEra::Legacy, "legacy"),
    ] {
        for (fault, code) in [
            ("crash-mid-call", "transport_error"),
            ("garbage", "protocol_error"),
            ("endless-rounds", "elicitation_round_limit"),
            ("hang", "timeout"),
        ] {
            let request = OperationRequest::tool("ship", Map::new());
            expect_fault(fault_peer(fault, flag), era, request, code).await;
        }
    }
}

#[tokio::test]
async fn the_fixture_works_when_it_behaves() {
    for era in [ProtocolEra::Modern, ProtocolEra::Legacy] {
        let connection = connect_fast(&shipping(era_flag(era), None), era).await;
        let (done, rounds) = drive(&connection, book(), accept).await.unwrap();
        assert_eq!(rounds.len(), 1, "{era}");
        assert!(!done.is_error(), "{era}: {:?}", done.result());
        assert_eq!(done.result()["structuredContent"]["city"], json!("Paris"));
        let pid = connection.pid().unwrap();
        connection.close().await.unwrap();
        assert!(!alive(pid));
    }
}

#[tokio::test]
async fn a_legacy_server_that_ignores_discover_falls_back_to_initialize() {
    // The fixture's legacy mode answers server/discover with -32601: Auto falls back
    // on the same process.
    let connection = McpConnection::connect(&shipping("legacy", None), ConnectOptions::new())
        .await
        .unwrap();
    assert_eq!(connection.era(), ProtocolEra::Legacy);
    connection.close().await.unwrap();
    let connection = McpConnection::connect(&shipping("auto", None), ConnectOptions::new())
        .await
        .unwrap();
    assert_eq!(connection.era(), ProtocolEra::Modern);
    connection.close().await.unwrap();
}

#[tokio::test]
async fn a_server_that_answers_discover_with_no_discover_result_falls_back_to_initialize() {
    // Servers that answer every unknown method with `{}` or an error of their own.
    for era in ["empty-discover", "error-discover"] {
        let connection = McpConnection::connect(&fault_peer("none", era), ConnectOptions::new())
            .await
            .unwrap_or_else(|e| panic!("{era}: {e}"));
        assert_eq!(connection.era(), ProtocolEra::Legacy, "{era}");
        let listed = connection.list_tools().await.unwrap();
        assert!(listed.iter().any(|tool| tool.name == "ship"), "{era}");
        connection.close().await.unwrap();
    }
}

#[tokio::test]
async fn a_withdrawn_legacy_round_is_reported_and_not_answered() {
    let connection = connect_fast(&fault_peer("withdraw", "legacy"), ProtocolEra::Legacy).await;
    let round = connection
        .start(OperationRequest::tool("ship", Map::new()))
        .await
        .unwrap()
        .input_round()
        .unwrap();
    assert!(!round.is_withdrawn());
    tokio::time::timeout(BOUND, round.withdrawn())
        .await
        .expect("the server's notifications/cancelled ends the round");
    assert!(round.is_withdrawn());
    let done = round.cancel().await.unwrap().complete().unwrap();
    assert_eq!(done.text(), "withdrawn");
    let exchange = &done.record().attempts[0].rounds[0];
    assert!(exchange.withdrawn);
    connection.close().await.unwrap();
}

#[tokio::test]
async fn a_silent_discover_probe_falls_back_to_a_fresh_initialize_process() {
    let started = Instant::now();
    let connection = McpConnection::connect(
        &fault_peer("hang", "silent-legacy"),
        ConnectOptions::new().with_discover_timeout(Duration::from_secs(3)),
    )
    .await
    .unwrap();
    assert_eq!(connection.era(), ProtocolEra::Legacy);
    assert_eq!(connection.protocol_version(), "2025-11-25");
    assert!(
        started.elapsed() < BOUND,
        "fallback took {:?}",
        started.elapsed()
    );
    let names: Vec<String> = tool_names(&connection).await;
    assert_eq!(names, vec!["ship".to_string()]);
    connection.close().await.unwrap();
}

#[tokio::test]
async fn a_server_that_cannot_start_is_a_transport_error() {
    let missing = StdioServer::new("missing", "/nonexistent/m3-no-such-server");
    let error = McpConnection::connect(&missing, ConnectOptions::new())
        .await
        .unwrap_err();
    assert_eq!(error.code(), "transport_error", "{error}");

    let mut exits = StdioServer::new("exits", python().display().to_string());
    exits.args = vec![
        "-c".into(),
        "import sys; sys.stderr.write('bye\\n'); sys.exit(5)".into(),
    ];
    let started = Instant::now();
    let error = McpConnection::connect(&exits, ConnectOptions::new())
        .await
        .unwrap_err();
    assert!(started.elapsed() < BOUND);
    assert_eq!(
        error.code(),
        "transport_error",
        "{error} {:?}",
        error.details()
    );
    assert_eq!(
        error.details()["exit_code"],
        json!(5),
        "{:?}",
        error.details()
    );
    assert!(
        error.details()["stderr"].as_str().unwrap().contains("bye"),
        "{:?}",
        error.details()
    );
}

/// A round over the bounds of `m3_types::limits` (5,000 requests, a 5 MB message, a result
/// nested past the nesting bound) is refused as `protocol_error` naming the bound, before
/// any round exists, in both eras.
#[tokio::test]
async fn rounds_and_results_over_the_bounds_are_protocol_errors() {
    for (era, flag) in [
        (ProtocolEra::Modern, "modern"),
        (ProtocolEra::Legacy, "legacy"),
    ] {
        for (fault, limit) in [
            (
                "many-requests",
                if flag == "modern" {
                    "requests_per_round"
                } else {
                    "request_bytes"
                },
            ),
            ("huge-message", "request_bytes"),
            ("deep-result", "nesting_depth"),
        ] {
            let connection = connect_fast(&fault_peer(fault, flag), era).await;
            let request = OperationRequest::tool("ship", Map::new());
            let outcome = tokio::time::timeout(BOUND, drive(&connection, request, accept))
                .await
                .unwrap_or_else(|_| panic!("{fault} {era}: no answer within {BOUND:?}"));
            let error = match outcome {
                Ok((done, rounds)) => panic!(
                    "{fault} {era}: accepted ({} rounds): {:?}",
                    rounds.len(),
                    done.result().get("content")
                ),
                Err(error) => error,
            };
            assert_eq!(error.code(), "protocol_error", "{fault} {era}: {error}");
            assert_eq!(
                error.details()["reason"],
                json!("limit_exceeded"),
                "{fault} {era}: {:?}",
                error.details()
            );
            assert_eq!(
                error.details()["limit"],
                json!(limit),
                "{fault} {era}: {:?}",
                error.details()
            );
            connection.close().await.unwrap();
        }
    }
}
