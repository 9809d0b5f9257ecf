//! The MCP client over Streamable HTTP: the shipping fixture in both eras, and
//! misbehaving endpoints (500, a body cut off, an oversized body, a redirect to
//! another host), and trust refusals.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod mcp_support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use m3_fixtures::Era;
use m3_mcp::{
    ConnectOptions, LEGACY_REQUEST_KEY, McpConnection, OperationRequest, ProtocolEra, ResumeRequest,
};
use m3_tests::http_support::{HttpPeer, free_port};
use m3_types::{ElicitationRequest, ElicitationResponse, HttpServer, ServerTrust};
use mcp_support::{
    accept, accept_all, connect_http, drive, http_binding as binding, http_fixture, shipping_tool,
    tampered,
};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

async fn shipping_flows(era: Era, expected: ProtocolEra) {
    let server = http_fixture(era).await;
    let connection = connect_http(server.url(), ConnectOptions::new()).await;
    assert_eq!(connection.era(), expected);
    assert_eq!(connection.pid(), None);
    let tools = connection.list_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "book_shipment"));
    let (done, rounds) = drive(&connection, shipping_tool("book_shipment"), accept)
        .await
        .unwrap();
    assert!(!done.is_error(), "{}", done.text());
    assert!(done.text().contains("Shipment booked"), "{}", done.text());
    let key = |modern: &'static str| match expected {
        ProtocolEra::Legacy => LEGACY_REQUEST_KEY,
        _ => modern,
    };
    assert_eq!(rounds, [[key("shipping_address")]]);
    for (answer, word) in [
        (ElicitationResponse::decline(), "declined"),
        (ElicitationResponse::cancel(), "cancelled"),
    ] {
        let (done, _) = drive(&connection, shipping_tool("book_shipment"), |_| {
            answer.clone()
        })
        .await
        .unwrap();
        assert!(done.is_error(), "{}", done.text());
        assert!(done.text().contains(word), "{word}: {}", done.text());
    }
    // A form round, then a URL round.
    let urls = std::sync::atomic::AtomicUsize::new(0);
    let (done, rounds) = drive(
        &connection,
        shipping_tool("book_verified_shipment"),
        |request| {
            if matches!(request, ElicitationRequest::Url(_)) {
                urls.fetch_add(1, Ordering::SeqCst);
            }
            accept(request)
        },
    )
    .await
    .unwrap();
    assert!(!done.is_error(), "{}", done.text());
    assert_eq!(urls.load(Ordering::SeqCst), 1, "one URL round");
    assert_eq!(rounds, [[key("shipping_address")], [key("verification")]]);
    connection.close().await.unwrap();
    server.stop().await.unwrap();
}

#[tokio::test]
async fn shipping_over_http_in_the_2026_era() {
    shipping_flows(Era::Modern, ProtocolEra::Modern).await;
}

#[tokio::test]
async fn shipping_over_http_in_the_legacy_era() {
    shipping_flows(Era::Legacy, ProtocolEra::Legacy).await;
}

#[tokio::test]
async fn a_dual_era_http_server_is_reached_in_the_2026_era() {
    shipping_flows(Era::Auto, ProtocolEra::Modern).await;
}

#[tokio::test]
async fn a_tampered_request_state_is_rejected_and_the_stored_one_resumes() {
    let server = http_fixture(Era::Modern).await;
    let connection = connect_http(server.url(), ConnectOptions::new()).await;
    let round = connection
        .start(shipping_tool("book_shipment"))
        .await
        .unwrap()
        .input_round()
        .unwrap();
    let state = round.request_state().unwrap().to_owned();
    let responses = accept_all(&round);
    let tampered = tampered(&state);
    let error = connection
        .resume(
            ResumeRequest::new(shipping_tool("book_shipment"), responses.clone())
                .with_request_state(tampered),
        )
        .await
        .unwrap_err();
    assert_eq!(error.code(), "protocol_error", "{error}");
    // The retry carries the stored state byte for byte, on a fresh connection.
    let again = connect_http(server.url(), ConnectOptions::new()).await;
    let done = again
        .resume(
            ResumeRequest::new(shipping_tool("book_shipment"), responses)
                .with_request_state(state.clone())
                .with_completed_rounds(1),
        )
        .await
        .unwrap()
        .complete()
        .unwrap();
    assert!(done.text().contains("Shipment booked"), "{}", done.text());
    let record = done.record();
    assert_eq!(
        record.attempts[0].request_state.as_deref(),
        Some(state.as_str())
    );
    drop(round);
    again.close().await.unwrap();
    connection.close().await.unwrap();
    server.stop().await.unwrap();
}

#[tokio::test]
async fn untrusted_and_public_bindings_refuse_a_loopback_endpoint() {
    let server = http_fixture(Era::Modern).await;
    for trust in [ServerTrust::Untrusted, ServerTrust::Public] {
        let binding = HttpServer::new("shipping", server.url()).with_trust(trust);
        let error = McpConnection::connect_http(&binding, ConnectOptions::new())
            .await
            .unwrap_err();
        assert_eq!(error.code(), "invalid_argument", "{error}");
        assert_eq!(error.details()["trust"], json!(trust.as_str()));
        assert_eq!(error.details()["host"], json!("127.0.0.1"));
        assert!(error.to_string().contains("127.0.0.1"), "{error}");
    }
    let private = HttpServer::new("shipping", server.url()).with_trust(ServerTrust::TrustedPrivate);
    let connection = McpConnection::connect_http(&private, ConnectOptions::new())
        .await
        .unwrap();
    connection.close().await.unwrap();
    server.stop().await.unwrap();
}

#[tokio::test]
async fn an_unset_header_variable_is_refused_and_a_set_one_is_sent_and_kept_secret() {
    let server = http_fixture(Era::Modern).await;
    let binding = binding(server.url()).with_header("X-Token", "${M3_TEST_UNSET_HTTP_TOKEN}");
    let error = McpConnection::connect_http(&binding, ConnectOptions::new())
        .await
        .unwrap_err();
    assert_eq!(error.code(), "invalid_argument", "{error}");
    assert_eq!(
        error.details()["variable"],
        json!("M3_TEST_UNSET_HTTP_TOKEN")
    );
    let binding = self::binding(server.url()).with_header("X-Token", "Bearer ${PATH}");
    let connection = McpConnection::connect_http(&binding, ConnectOptions::new())
        .await
        .unwrap();
    let path = std::env::var("PATH").unwrap();
    assert!(connection.secret_values().contains(&path));
    connection.close().await.unwrap();
    server.stop().await.unwrap();
}

/// What a canned endpoint does with a request other than `server/discover`.
#[derive(Clone, Copy)]
enum Misbehaviour {
    ServerError,
    CutOff,
    Oversized,
    Redirect(SocketAddr),
}

/// A raw HTTP/1.1 endpoint that answers `server/discover` properly and every
/// other POST with `misbehaviour`.
async fn canned(misbehaviour: Misbehaviour) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(answer(stream, misbehaviour));
        }
    });
    format!("http://{address}/mcp")
}

async fn read_request(stream: &mut TcpStream) -> Option<(String, Value)> {
    let mut buffer = Vec::new();
    let mut chunk = [0_u8; 4096];
    let header_end = loop {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(i) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buffer[..header_end]).to_string();
    let length = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
        })
        .unwrap_or(0);
    while buffer.len() < header_end + length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    let body =
        serde_json::from_slice(&buffer[header_end..header_end + length]).unwrap_or(Value::Null);
    Some((head, body))
}

async fn answer(mut stream: TcpStream, misbehaviour: Misbehaviour) {
    while let Some((head, body)) = read_request(&mut stream).await {
        if !head.starts_with("POST") {
            let _ = stream
                .write_all(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
                .await;
            continue;
        }
        if body["method"] == "server/discover" {
            let result = json!({"jsonrpc": "2.0", "id": body["id"], "result": {
                "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                "resultType": "complete", "ttlMs": 0, "cacheScope": "private",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "canned", "version": "1"}}}})
            .to_string();
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{result}",
                result.len()
            );
            let _ = stream.write_all(reply.as_bytes()).await;
            continue;
        }
        if body.get("id").is_none() {
            let _ = stream
                .write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
                .await;
            continue;
        }
        let reply = match misbehaviour {
            Misbehaviour::ServerError => {
                "HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\ncontent-length: 4\r\n\r\noops".to_owned()
            }
            Misbehaviour::CutOff => {
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":".to_owned()
            }
            Misbehaviour::Oversized => {
                let text = "x".repeat(64 * 1024);
                let result = json!({"jsonrpc": "2.0", "id": body["id"], "result": {
                    "content": [{"type": "text", "text": text}], "resultType": "complete"}})
                .to_string();
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{result}",
                    result.len()
                )
            }
            Misbehaviour::Redirect(target) => format!(
                "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://{target}/mcp\r\ncontent-length: 0\r\n\r\n"
            ),
        };
        let _ = stream.write_all(reply.as_bytes()).await;
        // The cut-off body ends with the connection.
        return;
    }
}

async fn failing_call(url: &str, options: ConnectOptions) -> m3_types::Error {
    let connection = connect_http(url, options).await;
    assert_eq!(connection.era(), ProtocolEra::Modern);
    let error = connection
        .start(shipping_tool("anything"))
        .await
        .unwrap_err();
    drop(connection);
    error
}

#[tokio::test]
async fn a_500_answer_is_a_transport_error_naming_the_status() {
    let url = canned(Misbehaviour::ServerError).await;
    let error = failing_call(&url, ConnectOptions::new()).await;
    assert_eq!(error.code(), "transport_error", "{error}");
    assert_eq!(error.details()["http_status"], json!(500), "{error}");
}

#[tokio::test]
async fn a_body_cut_off_mid_response_is_a_transport_error() {
    let url = canned(Misbehaviour::CutOff).await;
    let error = failing_call(&url, ConnectOptions::new()).await;
    assert_eq!(
        error.code(),
        "transport_error",
        "{error} {:?}",
        error.details()
    );
}

#[tokio::test]
async fn an_oversized_body_is_a_protocol_error() {
    let url = canned(Misbehaviour::Oversized).await;
    let error = failing_call(&url, ConnectOptions::new().with_max_frame_bytes(16 * 1024)).await;
    assert_eq!(error.code(), "protocol_error", "{error}");
    assert_eq!(
        error.details()["max_frame_bytes"],
        json!(16 * 1024),
        "{error}"
    );
}

#[tokio::test]
async fn a_redirect_to_another_host_is_not_followed() {
    let other = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target = other.local_addr().unwrap();
    let contacted = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&contacted);
    tokio::spawn(async move {
        while other.accept().await.is_ok() {
            seen.fetch_add(1, Ordering::SeqCst);
        }
    });
    let url = canned(Misbehaviour::Redirect(target)).await;
    let error = failing_call(&url, ConnectOptions::new()).await;
    assert_eq!(error.code(), "transport_error", "{error}");
    assert_eq!(error.details()["http_status"], json!(307), "{error}");
    assert!(error.to_string().contains("redirect"), "{error}");
    assert_eq!(
        contacted.load(Ordering::SeqCst),
        0,
        "the redirect target was contacted"
    );
}

async fn python_peer() -> HttpPeer {
    let port = free_port().unwrap();
    let mut command = tokio::process::Command::new(mcp_support::python());
    command
        .arg(mcp_support::peer_script("dual_era_server.py"))
        .args(["--http", &port.to_string()]);
    HttpPeer::start(command, port).await.unwrap()
}

async fn everything_peer() -> HttpPeer {
    let port = free_port().unwrap();
    let script = mcp_support::npm_dir()
        .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let mut command = tokio::process::Command::new(mcp_support::on_path("node"));
    command
        .arg(script)
        .arg("streamableHttp")
        .env("PORT", port.to_string());
    HttpPeer::start(command, port).await.unwrap()
}

fn plan(name: &str) -> OperationRequest {
    let mut arguments = Map::new();
    arguments.insert("plan".into(), json!(name));
    OperationRequest::tool("ask", arguments)
}

#[tokio::test]
async fn the_python_sdk_http_server_in_both_eras() {
    let peer = python_peer().await;
    for era in [ProtocolEra::Modern, ProtocolEra::Legacy] {
        let connection = connect_http(peer.url(), ConnectOptions::new().with_era(Some(era))).await;
        assert_eq!(connection.era(), era);
        let (done, rounds) = drive(&connection, plan("name"), accept).await.unwrap();
        assert_eq!(rounds.len(), 1, "{era}");
        let answers = mcp_support::peer_answers(&done);
        assert_eq!(
            answers["answers"]["name"]["content"]["name"],
            json!("Ada"),
            "{era}"
        );
        let (done, _) = drive(&connection, plan("name"), |_| {
            ElicitationResponse::decline()
        })
        .await
        .unwrap();
        let answers = mcp_support::peer_answers(&done);
        assert_eq!(
            answers["answers"]["name"]["action"],
            json!("decline"),
            "{era}"
        );
        connection.close().await.unwrap();
    }
    let negotiated = connect_http(peer.url(), ConnectOptions::new()).await;
    assert_eq!(negotiated.era(), ProtocolEra::Modern);
    negotiated.close().await.unwrap();
}

#[tokio::test]
async fn server_everything_over_http_asks_with_legacy_elicitation() {
    let peer = everything_peer().await;
    let connection = connect_http(peer.url(), ConnectOptions::new()).await;
    assert_eq!(connection.era(), ProtocolEra::Legacy);
    // The elicitation tools are registered only after `initialized`.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !connection
        .list_tools()
        .await
        .unwrap()
        .iter()
        .any(|t| t.name == "trigger-elicitation-request")
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no elicitation tool"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for (answer, expected) in [
        (ElicitationResponse::decline(), "User declined"),
        (ElicitationResponse::cancel(), "User cancelled"),
    ] {
        let (done, rounds) = drive(
            &connection,
            OperationRequest::tool("trigger-elicitation-request", Map::new()),
            |_| answer.clone(),
        )
        .await
        .unwrap();
        assert_eq!(rounds.len(), 1);
        assert!(done.text().contains(expected), "{}", done.text());
    }
    let (done, _) = drive(
        &connection,
        OperationRequest::tool("trigger-elicitation-request", Map::new()),
        |_| {
            let mut content = Map::new();
            content.insert("name".into(), json!("Ada"));
            ElicitationResponse::accept(content)
        },
    )
    .await
    .unwrap();
    assert!(done.text().contains("Ada"), "{}", done.text());
    connection.close().await.unwrap();
}
