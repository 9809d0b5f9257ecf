//! The MCP client against `@modelcontextprotocol/server-everything@2026.8.31`
//! (TypeScript SDK, legacy era only): its elicitation tools driven through our
//! client and answered accept, decline and cancel.

// Helpers outside #[test] fns fail the test on purpose (clippy.toml only relaxes
// these lints inside test functions).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod mcp_support;

use std::time::{Duration, Instant};

use m3_mcp::{ConnectOptions, LEGACY_REQUEST_KEY, McpConnection, OperationRequest, ProtocolEra};
use m3_types::{ElicitationRequest, ElicitationResponse, StdioServer};
use mcp_support::*;
use serde_json::{Map, json};

fn everything() -> StdioServer {
    let script =
        npm_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let mut server = StdioServer::new("everything", on_path("node").display().to_string());
    server.args = vec![script.display().to_string(), "stdio".into()];
    server
}

/// Connect (negotiating: server-everything answers server/discover with -32601, so
/// the client falls back to initialize on the same process) and wait for the
/// elicitation tools, which the server registers only after `initialized`.
async fn connect_everything() -> McpConnection {
    let connection = connect(&everything(), ConnectOptions::new()).await;
    assert_eq!(connection.era(), ProtocolEra::Legacy);
    assert_eq!(connection.protocol_version(), "2025-11-25");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let names: Vec<String> = tool_names(&connection).await;
        if names.iter().any(|n| n == "trigger-elicitation-request")
            && names.iter().any(|n| n == "trigger-url-elicitation")
        {
            return connection;
        }
        assert!(
            Instant::now() < deadline,
            "elicitation tools never appeared: {names:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn form_elicitation_accept_decline_cancel() {
    let connection = connect_everything().await;
    let cases = [
        ("accept", "User provided the requested information"),
        ("decline", "User declined"),
        ("cancel", "User cancelled"),
    ];
    for (action, expected) in cases {
        let progress = connection
            .start(OperationRequest::tool(
                "trigger-elicitation-request",
                Map::new(),
            ))
            .await
            .unwrap();
        let round = progress.input_round().expect("an input round");
        assert_eq!(
            round.requests().keys().collect::<Vec<_>>(),
            vec![LEGACY_REQUEST_KEY]
        );
        assert_eq!(round.attempt(), 1);
        let request = &round.requests()[LEGACY_REQUEST_KEY];
        let ElicitationRequest::Form(form) = request else {
            panic!("expected a form, got {request:?}")
        };
        assert_eq!(form.requested_schema["required"], json!(["name"]));
        assert!(
            properties(request).len() > 5,
            "the big form: {:?}",
            properties(request)
        );
        let response = match action {
            "accept" => {
                let mut content = Map::new();
                content.insert("name".into(), json!("Ada"));
                ElicitationResponse::accept(content)
            }
            "decline" => ElicitationResponse::decline(),
            _ => ElicitationResponse::cancel(),
        };
        let done = round
            .respond(
                [(LEGACY_REQUEST_KEY.to_string(), response)]
                    .into_iter()
                    .collect(),
            )
            .await
            .unwrap()
            .complete()
            .expect("complete");
        let text = done.text();
        assert!(text.contains(expected), "{action}: {text}");
        if action == "accept" {
            assert!(text.contains("Ada"), "{text}");
        }
        let record = done.record();
        assert_eq!(record.attempts.len(), 1);
        assert_eq!(record.attempts[0].rounds.len(), 1);
        assert!(record.attempts[0].input_required);
    }
    let pid = connection.pid().unwrap();
    connection.close().await.unwrap();
    assert!(!alive(pid));
}

#[tokio::test]
async fn url_elicitation_accept_decline_cancel() {
    let connection = connect_everything().await;
    let cases = [
        ("accept", "User completed the URL elicitation flow"),
        ("decline", "User declined to open the URL"),
        ("cancel", "User cancelled the URL elicitation"),
    ];
    for (action, expected) in cases {
        let mut args = Map::new();
        args.insert("url".into(), json!("https://example.com/m3-check"));
        let progress = connection
            .start(OperationRequest::tool("trigger-url-elicitation", args))
            .await
            .unwrap();
        let round = progress.input_round().expect("an input round");
        let request = &round.requests()[LEGACY_REQUEST_KEY];
        let ElicitationRequest::Url(url) = request else {
            panic!("expected a URL request, got {request:?}")
        };
        assert_eq!(url.url, "https://example.com/m3-check");
        assert!(
            url.elicitation_id
                .as_deref()
                .is_some_and(|id| !id.is_empty())
        );
        let response = match action {
            "accept" => ElicitationResponse::accept_url(),
            "decline" => ElicitationResponse::decline(),
            _ => ElicitationResponse::cancel(),
        };
        let done = round
            .respond(
                [(LEGACY_REQUEST_KEY.to_string(), response)]
                    .into_iter()
                    .collect(),
            )
            .await
            .unwrap()
            .complete()
            .expect("complete");
        assert!(done.text().contains(expected), "{action}: {}", done.text());
    }
    connection.close().await.unwrap();
}
