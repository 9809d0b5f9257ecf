//! `--server-era`: the MCP server code people write most, the official MCP Python SDK's
//! `ctx.elicit` (mcp 2.3.0, `tests/peers/sdk_elicit_server.py`), can only ask for input in
//! the handshake eras. Pinned to 2025-11-25 (or 2025-06-18) a managed round works end to
//! end over stdio and over Streamable HTTP, answered by `m3 respond` from another process;
//! negotiated (2026-07-28) the execution fails with a hint naming the flag.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{Store, python, refs, shell_quote, wait_until};
use serde_json::Value;

fn peer_script() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/peers/sdk_elicit_server.py")
        .display()
        .to_string()
}

/// `py=python sdk_elicit_server.py` (stdio).
fn stdio_server() -> String {
    format!(
        "py={} {}",
        shell_quote(&python()),
        shell_quote(&peer_script())
    )
}

/// The peer over Streamable HTTP on a free loopback port, killed on drop.
struct HttpPeer {
    child: Child,
    url: String,
}

impl HttpPeer {
    fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(python())
            .args([peer_script(), "--http".into(), port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the MCP Python SDK peer starts (set M3_TEST_PYTHON or run scripts/test.sh)");
        wait_until(Duration::from_secs(30), "the HTTP peer to listen", || {
            TcpStream::connect(("127.0.0.1", port)).ok()
        });
        Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run_args(server: &str, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "--json",
        "run",
        "--server",
        server,
        "--call",
        "py:book_shipment",
        "--arguments",
        r#"{"weight_kg": 2}"#,
        "--human-input",
        "managed",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args
}

/// Runs the booking pinned by `extra`, answers its one round from another process, and
/// returns the final result.
fn managed_booking(server: &str, extra: &[&str]) -> Value {
    let store = Store::new();
    let mut run = store.spawn(&refs(&run_args(server, extra)));
    let execution = run.next_json()["execution_id"].as_str().unwrap().to_owned();
    let round = run.next_json();
    assert_eq!(round["type"], "round_pending", "{round}");
    assert_eq!(round["server"], "py", "{round}");
    let round_id = round["round_id"].as_str().unwrap().to_owned();
    let key = round["requests"]
        .as_object()
        .and_then(|requests| requests.keys().next())
        .unwrap()
        .clone();
    let answer = format!(r#"{key}={{"street": "1 Main Street", "city": "Pune"}}"#);
    store
        .m3(&[
            "respond",
            &execution,
            &round_id,
            "--idempotency-key",
            "era-1",
            "--accept",
            &answer,
        ])
        .expect_code(0);
    let done = run.finish();
    assert_eq!(
        done.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        done.stdout, done.stderr
    );
    serde_json::from_str(done.stdout.lines().last().unwrap()).unwrap()
}

fn assert_booked(result: &Value) {
    assert_eq!(result["snapshot"]["outcome"], "completed", "{result}");
    assert!(
        result
            .to_string()
            .contains("booked 2 kg to 1 Main Street, Pune"),
        "{result}"
    );
}

#[test]
fn ctx_elicit_over_stdio_works_pinned_to_a_handshake_version() {
    for era in ["2025-11-25", "2025-06-18"] {
        let result = managed_booking(&stdio_server(), &["--server-era", &format!("py={era}")]);
        assert_booked(&result);
        let operation = &result["trace"]["operations"][0];
        assert_eq!(operation["protocol_version"], era, "{result}");
        assert_eq!(operation["era"], "legacy", "{result}");
    }
}

#[test]
fn ctx_elicit_over_http_works_pinned_to_2025_11_25() {
    let peer = HttpPeer::start();
    let result = managed_booking(
        &format!("py={}", peer.url),
        &[
            "--server-era",
            "py=2025-11-25",
            "--server-trust",
            "py=loopback",
        ],
    );
    assert_booked(&result);
}

fn assert_hint(server: &str, extra: &[&str]) {
    let store = Store::new();
    let done = store.m3(&refs(&run_args(server, extra)));
    assert_eq!(
        done.code, 9,
        "stdout:\n{}\nstderr:\n{}",
        done.stdout, done.stderr
    );
    let result: Value = serde_json::from_str(done.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(result["snapshot"]["outcome"], "failed", "{result}");
    let error = &result["error"];
    assert_eq!(
        error["details"]["reason"], "needs_handshake_era",
        "{result}"
    );
    assert_eq!(error["details"]["negotiated_era"], "2026-07-28", "{result}");
    assert_eq!(error["details"]["suggested_era"], "2025-11-25", "{result}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("--server-era py=2025-11-25"), "{message}");
    assert!(message.contains("2026-07-28"), "{message}");
}

#[test]
fn ctx_elicit_unpinned_fails_with_a_hint_over_stdio_and_http() {
    assert_hint(&stdio_server(), &[]);
    let peer = HttpPeer::start();
    assert_hint(
        &format!("py={}", peer.url),
        &["--server-trust", "py=loopback"],
    );
}
