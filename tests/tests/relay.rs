//! The MCP relay as a real process (`m3-test-relay`, the body of `m3 mcp-relay`) around
//! real servers (the fixture shipping server, `cat`, `env`, `sh`), observed by a real
//! `RelayObserver`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use m3_runtime::relay::{Direction, Observation, RelayEvent, RelayObserver};
use m3_types::StdioServer;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// A hang guard, not a timing target.
const STEP: Duration = Duration::from_secs(20);

fn relay_bin() -> &'static str {
    env!("CARGO_BIN_EXE_m3-test-relay")
}

fn shipping_bin() -> &'static str {
    env!("CARGO_BIN_EXE_m3-test-shipping-server")
}

struct Relay {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Relay {
    fn start(handoff: &Path, command: &[&str]) -> Self {
        let mut child = Command::new(relay_bin())
            .arg(handoff)
            .arg("--")
            .args(command)
            .env("M3_RELAY_OUTER", "outside")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Self {
            child,
            stdin,
            stdout,
        }
    }

    async fn send(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).await.unwrap();
        stdin.flush().await.unwrap();
    }

    /// One raw line (with its newline) from the relay's stdout.
    async fn line(&mut self) -> Vec<u8> {
        let mut line = Vec::new();
        tokio::time::timeout(STEP, self.stdout.read_until(b'\n', &mut line))
            .await
            .expect("the relay answered in time")
            .unwrap();
        line
    }

    async fn json(&mut self) -> Value {
        let line = self.line().await;
        serde_json::from_slice(&line)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&line)))
    }

    /// Closes stdin and returns the rest of stdout and the exit code.
    async fn finish(mut self) -> (Vec<u8>, i32) {
        drop(self.stdin.take());
        let mut rest = Vec::new();
        tokio::time::timeout(STEP, self.stdout.read_to_end(&mut rest))
            .await
            .expect("the relay closed its stdout in time")
            .unwrap();
        let status = tokio::time::timeout(STEP, self.child.wait())
            .await
            .expect("the relay exited in time")
            .unwrap();
        (rest, status.code().expect("the relay exited normally"))
    }
}

/// A private directory for the observer (short path: Unix socket addresses are short).
fn private_dir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("m3relay")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

async fn next(observer: &mut RelayObserver) -> RelayEvent {
    tokio::time::timeout(STEP, observer.next())
        .await
        .expect("an event in time")
        .expect("the observer is open")
}

/// Every event up to and including the next `Disconnected`.
async fn until_disconnected(observer: &mut RelayObserver) -> Vec<RelayEvent> {
    let mut events = Vec::new();
    loop {
        let event = next(observer).await;
        let done = matches!(event, RelayEvent::Disconnected { .. });
        events.push(event);
        if done {
            return events;
        }
    }
}

fn frames(events: &[RelayEvent]) -> Vec<&Observation> {
    events
        .iter()
        .filter_map(|event| match event {
            RelayEvent::Frame(observation) => Some(observation),
            _ => None,
        })
        .collect()
}

fn server(command: &str) -> StdioServer {
    StdioServer::new("shipping", command)
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"relay-test","version":"1.0.0"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const TOOLS_LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;

#[tokio::test]
async fn traffic_is_byte_identical_in_both_directions() {
    let dir = private_dir();
    let mut observer = RelayObserver::bind(dir.path()).await.unwrap();
    let handoff = observer.handoff("echo", &server("cat"), None).unwrap();
    // `cat` echoes: what comes back went to the server and back through the relay.
    let input: &[u8] = b"{ \"jsonrpc\" : \"2.0\", \"id\": 1, \"method\": \"ping\" }\n\
        {\"jsonrpc\":\"2.0\",\"id\":\"\\u00e9\",\"result\":{\"text\":\"caf\xc3\xa9 \\/ \\n\"}}\r\n\
        \n\
        [{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}]\n\
        {\"no newline at the end\":true}";
    let mut relay = Relay::start(&handoff, &["cat"]);
    relay.send(input).await;
    let (output, code) = relay.finish().await;
    assert_eq!(output, input, "the relay changed the bytes");
    assert_eq!(code, 0);

    let events = until_disconnected(&mut observer).await;
    assert_eq!(
        events[0],
        RelayEvent::Connected {
            connection_id: "echo".to_owned()
        }
    );
    assert!(
        !events
            .iter()
            .any(|event| matches!(event, RelayEvent::Incomplete { .. })),
        "{events:?}"
    );
    let observed = frames(&events);
    let expected: Vec<Value> = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": "é", "result": {"text": "café / \n"}}),
        json!([{"jsonrpc": "2.0", "method": "notifications/progress"}]),
        json!({"no newline at the end": true}),
    ]
    .into();
    let sent: Vec<&Value> = observed
        .iter()
        .filter(|o| o.direction == Direction::ClientToServer)
        .map(|o| &o.payload)
        .collect();
    let echoed: Vec<&Value> = observed
        .iter()
        .filter(|o| o.direction == Direction::ServerToClient)
        .map(|o| &o.payload)
        .collect();
    assert_eq!(sent, expected.iter().collect::<Vec<_>>());
    assert_eq!(echoed, expected.iter().collect::<Vec<_>>());
    let sequences: Vec<u64> = observed.iter().map(|o| o.sequence).collect();
    assert_eq!(sequences, (1..=8).collect::<Vec<u64>>());
    assert!(observed.iter().all(|o| o.connection_id == "echo"));
}

#[tokio::test]
async fn an_mcp_session_with_the_shipping_server_is_observed_in_order() {
    let dir = private_dir();
    let mut observer = RelayObserver::bind(dir.path()).await.unwrap();
    let handoff = observer
        .handoff("shipping", &server(shipping_bin()), None)
        .unwrap();
    let mut relay = Relay::start(&handoff, &[shipping_bin(), "legacy"]);
    relay.send(format!("{INITIALIZE}\n").as_bytes()).await;
    let initialized = relay.json().await;
    assert_eq!(initialized["id"], 1);
    assert_eq!(initialized["result"]["protocolVersion"], "2025-06-18");
    relay
        .send(format!("{INITIALIZED}\n{TOOLS_LIST}\n").as_bytes())
        .await;
    let tools = relay.json().await;
    assert_eq!(tools["id"], 2);
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"book_shipment"), "{names:?}");
    let (_, code) = relay.finish().await;
    assert_eq!(code, 0);

    let events = until_disconnected(&mut observer).await;
    let observed = frames(&events);
    let shape: Vec<(u64, Direction, Value)> = observed
        .iter()
        .map(|o| {
            (
                o.sequence,
                o.direction,
                o.payload
                    .get("id")
                    .cloned()
                    .or_else(|| o.payload.get("method").cloned())
                    .unwrap(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            (1, Direction::ClientToServer, json!(1)),
            (2, Direction::ServerToClient, json!(1)),
            (
                3,
                Direction::ClientToServer,
                json!("notifications/initialized")
            ),
            (4, Direction::ClientToServer, json!(2)),
            (5, Direction::ServerToClient, json!(2)),
        ]
    );
    assert_eq!(observed[4].payload, tools);
    assert_eq!(observed[1].payload, initialized);
}

#[tokio::test]
async fn a_tool_outside_the_policy_is_answered_by_the_relay_and_reported() {
    let dir = private_dir();
    let mut observer = RelayObserver::bind(dir.path()).await.unwrap();
    let handoff = observer
        .handoff(
            "shipping",
            &server(shipping_bin()),
            Some(vec!["book_shipment".to_owned()]),
        )
        .unwrap();
    let mut relay = Relay::start(&handoff, &[shipping_bin(), "legacy"]);
    relay
        .send(format!("{INITIALIZE}\n{INITIALIZED}\n").as_bytes())
        .await;
    assert_eq!(relay.json().await["id"], 1);
    relay
        .send(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"cancel_everything\",\"arguments\":{}}}\n")
        .await;
    let denied = relay.line().await;
    assert_eq!(
        serde_json::from_slice::<Value>(&denied).unwrap(),
        json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32001, "message": "MCP tool call denied by policy"}})
    );
    // The connection goes on: the next request reaches the server.
    relay.send(format!("{TOOLS_LIST}\n").as_bytes()).await;
    assert_eq!(relay.json().await["id"], 2);
    let (_, code) = relay.finish().await;
    assert_eq!(code, 0);

    let events = until_disconnected(&mut observer).await;
    let denials: Vec<&RelayEvent> = events
        .iter()
        .filter(|event| matches!(event, RelayEvent::PolicyDenied { .. }))
        .collect();
    assert_eq!(
        denials,
        vec![&RelayEvent::PolicyDenied {
            connection_id: "shipping".to_owned(),
            tool: "cancel_everything".to_owned(),
            request_id: json!(7),
        }]
    );
    // The refused call never crossed the relay.
    assert!(
        frames(&events)
            .iter()
            .all(|o| o.payload["method"] != "tools/call"),
        "{events:?}"
    );
    assert_eq!(frames(&events).len(), 5);
}

#[tokio::test]
async fn the_server_sees_the_handoff_environment_only() {
    let dir = private_dir();
    let mut observer = RelayObserver::bind(dir.path()).await.unwrap();
    let handoff = observer
        .handoff(
            "envdump",
            &server("env").with_env("M3_HANDOFF_VAR", "inside"),
            None,
        )
        .unwrap();
    // `env` is found through the relay's PATH, but runs with exactly the handoff env.
    let relay = Relay::start(&handoff, &["env"]);
    let (output, code) = relay.finish().await;
    assert_eq!(code, 0);
    assert_eq!(
        String::from_utf8(output).unwrap(),
        "M3_HANDOFF_VAR=inside\n"
    );
    // A non-JSON line is forwarded and reported as incomplete observation.
    let events = until_disconnected(&mut observer).await;
    assert!(
        events
            .iter()
            .any(|event| matches!(event, RelayEvent::Incomplete { .. })),
        "{events:?}"
    );
    assert!(frames(&events).is_empty());
}

#[tokio::test]
async fn the_working_directory_comes_from_the_handoff() {
    let dir = private_dir();
    let workdir = tempfile::tempdir().unwrap();
    let mut observer = RelayObserver::bind(dir.path()).await.unwrap();
    let handoff = observer
        .handoff(
            "pwd",
            &server("sh").with_cwd(workdir.path().to_path_buf()),
            None,
        )
        .unwrap();
    let relay = Relay::start(
        &handoff,
        &["sh", "-c", "printf '{\"cwd\":\"%s\"}\\n' \"$(pwd -P)\""],
    );
    let (output, code) = relay.finish().await;
    assert_eq!(code, 0);
    let reported: Value = serde_json::from_slice(&output).unwrap();
    let expected = workdir.path().canonicalize().unwrap();
    assert_eq!(reported["cwd"], expected.display().to_string());
    let events = until_disconnected(&mut observer).await;
    assert_eq!(frames(&events).len(), 1);
}

#[tokio::test]
async fn stdin_eof_ends_the_server_and_the_relay_exits_with_its_code() {
    let dir = private_dir();
    let mut observer = RelayObserver::bind(dir.path()).await.unwrap();
    let handoff = observer.handoff("sh", &server("sh"), None).unwrap();
    let mut relay = Relay::start(&handoff, &["sh", "-c", "cat; exit 3"]);
    relay.send(b"{\"a\":1}\n").await;
    assert_eq!(relay.line().await, b"{\"a\":1}\n");
    let (rest, code) = relay.finish().await;
    assert!(rest.is_empty());
    assert_eq!(code, 3);
    let events = until_disconnected(&mut observer).await;
    assert_eq!(frames(&events).len(), 2);
}

#[tokio::test]
async fn the_server_ends_when_the_relay_is_killed() {
    let dir = private_dir();
    let mut observer = RelayObserver::bind(dir.path()).await.unwrap();
    let handoff = observer.handoff("sh", &server("sh"), None).unwrap();
    let mut relay = Relay::start(
        &handoff,
        &["sh", "-c", "echo \"{\\\"pid\\\":$$}\"; exec cat"],
    );
    let pid = relay.json().await["pid"].as_u64().unwrap();
    assert!(alive(pid));
    relay.child.start_kill().unwrap();
    relay.child.wait().await.unwrap();
    let deadline = tokio::time::Instant::now() + STEP;
    while alive(pid) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server outlived its relay"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let events = until_disconnected(&mut observer).await;
    assert_eq!(frames(&events).len(), 1);
}

/// Whether `pid` runs (a zombie waiting for its new parent counts as ended).
fn alive(pid: u64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[tokio::test]
async fn a_wrong_token_is_refused_by_the_observer() {
    let dir = private_dir();
    let mut observer = RelayObserver::bind(dir.path()).await.unwrap();
    let handoff = observer.handoff("echo", &server("cat"), None).unwrap();
    let good: Value = serde_json::from_slice(&std::fs::read(&handoff).unwrap()).unwrap();

    // A raw connection with a wrong token is closed without an event.
    let mut stream = UnixStream::connect(observer.socket_path()).await.unwrap();
    let hello = json!({"connection_id": "echo", "token": "0".repeat(64)});
    stream
        .write_all(format!("{hello}\n").as_bytes())
        .await
        .unwrap();
    stream
        .write_all(b"{\"sequence\":1,\"direction\":\"client_to_server\",\"payload\":{}}\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(STEP, stream.read_to_end(&mut buf))
        .await
        .expect("the observer closed the connection");
    assert!(read.is_err() || buf.is_empty());

    // A relay whose handoff carries a wrong token still relays, unobserved.
    let mut forged = good.clone();
    forged["token"] = json!("f".repeat(64));
    let forged_path = dir.path().join("forged.json");
    write_private(&forged_path, &forged);
    let mut relay = Relay::start(&forged_path, &["cat"]);
    relay.send(b"{\"forged\":true}\n").await;
    assert_eq!(relay.line().await, b"{\"forged\":true}\n");
    assert_eq!(relay.finish().await.1, 0);

    // An unknown connection id with the right token is refused as well.
    let mut unknown = good.clone();
    unknown["connection_id"] = json!("intruder");
    let unknown_path = dir.path().join("unknown.json");
    write_private(&unknown_path, &unknown);
    let relay = Relay::start(&unknown_path, &["cat"]);
    assert_eq!(relay.finish().await.1, 0);

    // The genuine relay is the only one the observer reports.
    let mut relay = Relay::start(&handoff, &["cat"]);
    relay.send(b"{\"genuine\":true}\n").await;
    assert_eq!(relay.line().await, b"{\"genuine\":true}\n");
    assert_eq!(relay.finish().await.1, 0);
    let events = until_disconnected(&mut observer).await;
    assert_eq!(
        events[0],
        RelayEvent::Connected {
            connection_id: "echo".to_owned()
        }
    );
    let payloads: Vec<&Value> = frames(&events).iter().map(|o| &o.payload).collect();
    assert_eq!(
        payloads,
        vec![&json!({"genuine": true}), &json!({"genuine": true})]
    );
    observer.close();
    let mut rest = Vec::new();
    while let Some(event) = observer.next().await {
        rest.push(event);
    }
    assert!(rest.is_empty(), "{rest:?}");
}

fn write_private(path: &PathBuf, value: &Value) {
    std::fs::write(path, value.to_string()).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

#[tokio::test]
async fn traffic_flows_when_the_observer_is_gone() {
    let dir = private_dir();
    let observer = RelayObserver::bind(dir.path()).await.unwrap();
    let handoff = observer
        .handoff("shipping", &server(shipping_bin()), None)
        .unwrap();
    drop(observer);
    assert!(!dir.path().join("relay.sock").exists());
    let mut relay = Relay::start(&handoff, &[shipping_bin(), "legacy"]);
    relay.send(format!("{INITIALIZE}\n").as_bytes()).await;
    assert_eq!(relay.json().await["id"], 1);
    relay
        .send(format!("{INITIALIZED}\n{TOOLS_LIST}\n").as_bytes())
        .await;
    assert_eq!(relay.json().await["id"], 2);
    assert_eq!(relay.finish().await.1, 0);
}

#[tokio::test]
async fn a_bad_handoff_or_command_fails_the_relay() {
    let dir = private_dir();
    let observer = RelayObserver::bind(dir.path()).await.unwrap();
    let handoff = observer.handoff("x", &server("cat"), None).unwrap();
    std::fs::set_permissions(&handoff, std::fs::Permissions::from_mode(0o644)).unwrap();
    let refused = Relay::start(&handoff, &["cat"]).finish().await;
    assert_eq!(refused, (Vec::new(), 1));
    let missing = dir.path().join("missing.json");
    assert_eq!(Relay::start(&missing, &["cat"]).finish().await.1, 1);
    let handoff = observer.handoff("y", &server("cat"), None).unwrap();
    let no_such_program = Relay::start(&handoff, &["/nonexistent/m3-server"])
        .finish()
        .await;
    assert_eq!(no_such_program.1, 1);
}

#[tokio::test]
async fn an_oversized_frame_passes_unobserved_unless_a_policy_must_inspect_it() {
    let dir = private_dir();
    let mut observer = RelayObserver::bind(dir.path()).await.unwrap();
    let big = format!("{{\"blob\":\"{}\"}}\n", "x".repeat(9 * 1024 * 1024));
    let expected = format!("{big}{{\"after\":1}}\n").into_bytes();

    // Without a policy: forwarded both ways, byte for byte, and reported incomplete.
    let handoff = observer.handoff("echo", &server("cat"), None).unwrap();
    let mut relay = Relay::start(&handoff, &["cat"]);
    let mut stdin = relay.stdin.take().unwrap();
    let writer = async {
        stdin.write_all(big.as_bytes()).await.unwrap();
        stdin.write_all(b"{\"after\":1}\n").await.unwrap();
        drop(stdin);
    };
    let reader = async {
        let mut rest = Vec::new();
        relay_output(&mut relay.stdout, &mut rest).await;
        rest
    };
    let ((), output) = tokio::join!(writer, reader);
    assert!(output == expected, "the relay changed the oversized frame");
    assert_eq!(relay.child.wait().await.unwrap().code(), Some(0));
    let events = until_disconnected(&mut observer).await;
    let lost = events
        .iter()
        .filter(|event| matches!(event, RelayEvent::Incomplete { .. }))
        .count();
    assert_eq!(lost, 2, "{events:?}");
    let payloads: Vec<&Value> = frames(&events).iter().map(|o| &o.payload).collect();
    assert_eq!(payloads, vec![&json!({"after": 1}), &json!({"after": 1})]);

    // With a policy the relay cannot inspect it, so it is not forwarded.
    let handoff = observer
        .handoff("policed", &server("cat"), Some(vec![]))
        .unwrap();
    let mut relay = Relay::start(&handoff, &["cat"]);
    relay.send(big.as_bytes()).await;
    relay.send(b"{\"after\":2}\n").await;
    assert_eq!(relay.line().await, b"{\"after\":2}\n");
    assert_eq!(relay.finish().await, (Vec::new(), 0));
    let events = until_disconnected(&mut observer).await;
    assert!(
        matches!(events[1], RelayEvent::Incomplete { .. }),
        "{events:?}"
    );
    assert_eq!(frames(&events).len(), 2);
}

async fn relay_output(stdout: &mut BufReader<ChildStdout>, out: &mut Vec<u8>) {
    tokio::time::timeout(STEP, stdout.read_to_end(out))
        .await
        .expect("the relay closed its stdout in time")
        .unwrap();
}
