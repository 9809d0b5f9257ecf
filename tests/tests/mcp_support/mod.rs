//! Shared helpers of the `mcp_*` tests: peer locations, server bindings, answering
//! rounds, and the process table.
#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::time::Duration;

use m3_mcp::{
    CompletedOperation, ConnectOptions, InputRound, McpConnection, OperationProgress,
    OperationRequest,
};
use m3_types::{
    ElicitationRequest, ElicitationResponse, HttpServer, ResponseMap, ServerTrust, StdioServer,
};
use serde_json::{Map, Value, json};

/// The venv python with mcp==2.3.0: `$M3_TEST_PYTHON`, else the scripts/test.sh location.
/// Panics (fails the test) when missing.
pub fn python() -> PathBuf {
    let path = std::env::var_os("M3_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| home().join(".cache/m3-rs/tools/venv/bin/python"));
    assert!(
        path.exists(),
        "the MCP Python SDK peer is missing at {} (run scripts/test.sh)",
        path.display()
    );
    path
}

/// The npm folder with server-everything: `$M3_TEST_NPM_DIR`, else the scripts/test.sh location.
pub fn npm_dir() -> PathBuf {
    let path = std::env::var_os("M3_TEST_NPM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| home().join(".cache/m3-rs/tools/npm"));
    assert!(
        path.join("node_modules/@modelcontextprotocol/server-everything")
            .exists(),
        "server-everything is missing under {} (run scripts/test.sh)",
        path.display()
    );
    path
}

fn home() -> PathBuf {
    PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
}

/// A program found on our PATH (absolute path).
pub fn on_path(program: &str) -> PathBuf {
    let paths = std::env::var_os("PATH").expect("PATH is set");
    std::env::split_paths(&paths)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| panic!("{program} is not on PATH"))
}

/// `tests/peers/<script>`.
pub fn peer_script(script: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("peers")
        .join(script)
}

/// The dual-era Python SDK peer as a binding named `peer`.
pub fn python_peer() -> StdioServer {
    let mut server = StdioServer::new("peer", python().display().to_string());
    server.args = vec![peer_script("dual_era_server.py").display().to_string()];
    server
}

/// The hand-written fault peer.
pub fn fault_peer(fault: &str, era: &str) -> StdioServer {
    let mut server = StdioServer::new("faulty", python().display().to_string());
    server.args = vec![
        peer_script("fault_server.py").display().to_string(),
        "--fault".into(),
        fault.into(),
        "--era".into(),
        era.into(),
    ];
    server
}

/// The m3-fixtures shipping server (built as this package's binary).
pub fn shipping(era: &str, fault: Option<&str>) -> StdioServer {
    let mut server = StdioServer::new("shipping", env!("CARGO_BIN_EXE_mcp_shipping_server"));
    server.args = vec!["--era".into(), era.into()];
    if let Some(fault) = fault {
        server.args.extend(["--fault".into(), fault.into()]);
    }
    server
}

/// Connect with test-friendly bounds.
pub async fn connect(server: &StdioServer, options: ConnectOptions) -> McpConnection {
    McpConnection::connect(
        server,
        options.with_request_timeout(Duration::from_secs(20)),
    )
    .await
    .unwrap_or_else(|e| panic!("connect to {} failed: {e} {:?}", server.name, e.details()))
}

/// The names of the tools `connection` lists.
pub async fn tool_names(connection: &McpConnection) -> Vec<String> {
    let tools = connection
        .list_tools()
        .await
        .unwrap_or_else(|e| panic!("tools/list failed: {e}"));
    tools.into_iter().map(|t| t.name).collect()
}

/// The names of a form request's schema properties.
pub fn properties(request: &ElicitationRequest) -> Vec<String> {
    match request {
        ElicitationRequest::Form(form) => form
            .requested_schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Accept a dual-era peer request with a fitting value.
pub fn accept(request: &ElicitationRequest) -> ElicitationResponse {
    match request {
        ElicitationRequest::Url(_) => ElicitationResponse::accept_url(),
        ElicitationRequest::Form(_) => {
            let mut content = Map::new();
            for key in properties(request) {
                let value = match key.as_str() {
                    "name" => json!("Ada"),
                    "age" => json!(36),
                    "confirm" | "ok" => json!(true),
                    "street" => json!("1 Main St"),
                    "city" => json!("Paris"),
                    "message" => json!("Happy birthday"),
                    _ => json!("x"),
                };
                content.insert(key, value);
            }
            ElicitationResponse::accept(content)
        }
    }
}

/// Drive an operation to its end, answering every request with `answer`.
/// Returns the result and, per round, its request keys.
pub async fn drive(
    connection: &McpConnection,
    request: OperationRequest,
    answer: impl Fn(&ElicitationRequest) -> ElicitationResponse,
) -> m3_types::Result<(CompletedOperation, Vec<Vec<String>>)> {
    let mut rounds = Vec::new();
    let mut progress = connection.start(request).await?;
    loop {
        match progress {
            OperationProgress::Complete(done) => return Ok((done, rounds)),
            OperationProgress::InputRequired(round) => {
                rounds.push(round.requests().keys().cloned().collect());
                let responses: ResponseMap = round
                    .requests()
                    .iter()
                    .map(|(k, r)| (k.clone(), answer(r)))
                    .collect();
                progress = round.respond(responses).await?;
            }
        }
    }
}

/// Whether a process with this pid exists (`kill -0`).
pub fn alive(pid: u32) -> bool {
    std::process::Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Whether `pid` is alive and not a zombie (/proc state).
pub fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Wait up to `limit` for `pid` to disappear from the process table.
pub async fn gone_within(pid: u32, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    !alive(pid)
}

/// Parse the dual-era peer's JSON answer text.
pub fn peer_answers(done: &CompletedOperation) -> Value {
    serde_json::from_str(&done.text())
        .unwrap_or_else(|e| panic!("not peer JSON: {e}: {}", done.text()))
}

/// Every request of `round` accepted with a fitting value ([`accept`]).
pub fn accept_all(round: &InputRound) -> ResponseMap {
    round
        .requests()
        .iter()
        .map(|(k, r)| (k.clone(), accept(r)))
        .collect()
}

/// `state` with one character in the middle flipped: a `requestState` the server
/// must reject.
pub fn tampered(state: &str) -> String {
    let mut bytes = state.as_bytes().to_vec();
    let middle = bytes.len() / 2;
    bytes[middle] = if bytes[middle] == b'A' { b'B' } else { b'A' };
    String::from_utf8(bytes).expect("state is ASCII around its middle")
}

/// The shipping fixture served over Streamable HTTP on a free loopback port.
pub async fn http_fixture(era: m3_fixtures::Era) -> m3_fixtures::HttpFixture {
    let address = "127.0.0.1:0".parse().expect("a socket address");
    m3_fixtures::serve_shipping_http(m3_fixtures::ShippingOptions::new(era), address)
        .await
        .expect("the shipping fixture serves HTTP")
}

/// A loopback-trusted binding named `shipping` for `url`.
pub fn http_binding(url: &str) -> HttpServer {
    HttpServer::new("shipping", url).with_trust(ServerTrust::Loopback)
}

/// A `tools/call` of the shipping fixture's `name` for a 2 kg parcel.
pub fn shipping_tool(name: &str) -> OperationRequest {
    let mut arguments = Map::new();
    arguments.insert("weight_kg".into(), json!(2));
    OperationRequest::tool(name, arguments)
}

/// Connect to an HTTP endpoint with test-friendly bounds.
pub async fn connect_http(url: &str, options: ConnectOptions) -> McpConnection {
    McpConnection::connect_http(
        &http_binding(url),
        options.with_request_timeout(Duration::from_secs(20)),
    )
    .await
    .unwrap_or_else(|e| panic!("connect to {url} failed: {e} {:?}", e.details()))
}
