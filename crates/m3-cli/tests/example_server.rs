//! Spawns the built `m3 example-server shipping` binary and talks to it as an MCP client.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::{process::Stdio, time::Duration};

use rmcp::{
    ClientHandler, ErrorData, RoleClient,
    model::{
        CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
        ElicitationAction, ElicitationCapability, FormElicitationCapability, Implementation,
        ProtocolVersion, UrlElicitationCapability,
    },
    service::{ClientLifecycleMode, ClientServiceExt, RequestContext},
    transport::TokioChildProcess,
};
use serde_json::json;
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    process::Command,
};

#[derive(Debug, Clone)]
struct Client;

impl ClientHandler for Client {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        match request {
            ElicitRequestParams::FormElicitationParams { message, .. } => {
                assert_eq!(message, "Enter the delivery address.");
                Ok(ElicitResult::new(ElicitationAction::Accept)
                    .with_content(json!({"street": "1 Main Street", "city": "Pune"})))
            }
            other => panic!("unexpected request {other:?}"),
        }
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(
            ElicitationCapability::new()
                .with_form(FormElicitationCapability::new())
                .with_url(UrlElicitationCapability::new()),
        );
        ClientConfig::new(capabilities, Implementation::new("cli-test", "0.1.0"))
    }
}

fn m3(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_m3"));
    command.args(args).kill_on_drop(true);
    command
}

async fn book_once(era: &str, expected: ProtocolVersion) {
    let transport = TokioChildProcess::builder(m3(&["example-server", "shipping", "--era", era]))
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
        .0;
    let client = Client
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::V_2025_11_25),
            },
        )
        .await
        .unwrap();
    assert_eq!(client.peer_info().unwrap().protocol_version, expected);
    let mut arguments = serde_json::Map::new();
    arguments.insert("weight_kg".into(), json!(2.5));
    let result = tokio::time::timeout(
        Duration::from_secs(30),
        client.call_tool(CallToolRequestParams::new("book_shipment").with_arguments(arguments)),
    )
    .await
    .expect("the call ends within 30 s")
    .unwrap();
    assert_eq!(
        result.structured_content,
        Some(json!({"status": "booked", "city": "Pune"}))
    );
    let text = result.content[0].as_text().unwrap().text.clone();
    assert_eq!(text, "Shipment booked.");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn example_server_books_a_shipment_in_the_2026_era() {
    book_once("2026-07-28", ProtocolVersion::V_2026_07_28).await;
}

#[tokio::test]
async fn example_server_books_a_shipment_in_the_legacy_era() {
    book_once("legacy", ProtocolVersion::V_2025_11_25).await;
}

#[tokio::test]
async fn example_server_auto_serves_2026_to_a_discovering_client() {
    book_once("auto", ProtocolVersion::V_2026_07_28).await;
}

#[tokio::test]
async fn crash_mid_call_exits_the_process_with_code_70() {
    let mut child = m3(&["example-server", "shipping", "--fault", "crash-mid-call"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": "book_shipment", "arguments": {"weight_kg": 1},
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    }}});
    stdin
        .write_all(format!("{call}\n").as_bytes())
        .await
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .expect("stdout closes within 10 s")
        .unwrap();
    assert_eq!(line, None, "no response before the crash");
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("the process exits within 10 s")
        .unwrap();
    assert_eq!(status.code(), Some(70));
    drop(stdin);
}

#[tokio::test]
async fn unknown_server_or_era_is_a_usage_error() {
    let output = m3(&["example-server", "nope"]).output().await.unwrap();
    assert_eq!(output.status.code(), Some(2));
    let output = m3(&["example-server", "shipping", "--era", "2099"])
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("era must be"), "{stderr}");
}
