//! Traces end to end. A raw MCP server (`tests/peers/raw_elicitation_server.py
//! --meta-log`) records the `_meta` of every request it receives: under `m3 run` every
//! `tools/call` carries a `traceparent` whose trace id is the execution's, in both protocol
//! eras. With `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at a local OTLP/HTTP receiver
//! (`tests/peers/otlp_receiver.py`, decoding the protobuf with the official
//! `opentelemetry-proto` definitions), `m3 run` exports its spans: the execution span is
//! the ancestor of the MCP operation and of the round's wait and delivery, the server saw
//! the operation span as its parent, and no answer value is in any span.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{Running, Store, managed_raw_run, python, refs, shell_quote, wait_until};
use serde_json::{Value, json};

/// A value only the answer holds: it must reach the server and no span.
const ANSWER: &str = "Ada-trace-secret-4711";

fn peer(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/peers")
        .join(name)
        .display()
        .to_string()
}

/// `--server raw=...` asking one form question in `era`, logging request `_meta` to `log`.
fn raw_server(era: &str, log: &Path) -> String {
    let params = json!({
        "message": "Your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}
    });
    format!(
        "raw={} {} --era {era} --params {} --meta-log {}",
        shell_quote(&python()),
        shell_quote(&peer("raw_elicitation_server.py")),
        shell_quote(&params.to_string()),
        shell_quote(&log.display().to_string()),
    )
}

fn json_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Runs `m3 run` against the raw server in `era` (with `env`), answers its round and
/// returns the execution id and the `_meta` of every `tools/call` the server received.
fn run_and_answer(store: &Store, era: &str, env: &[(&str, &str)]) -> (String, Vec<Value>) {
    let log = store.db().with_file_name(format!("meta-{era}.jsonl"));
    let server = raw_server(era, &log);
    let mut command = store.command(&refs(&managed_raw_run(&server)));
    command.stderr(Stdio::piped()).envs(env.iter().copied());
    let mut run = Running::start(command);
    let execution = run.next_json()["execution_id"].as_str().unwrap().to_owned();
    let round = run.next_json()["round_id"].as_str().unwrap().to_owned();
    let key = if era == "legacy" { "elicitation" } else { "q" };
    store
        .m3(&[
            "respond",
            &execution,
            &round,
            "--idempotency-key",
            "k1",
            "--accept",
            &format!("{key}={}", json!({"name": ANSWER})),
        ])
        .expect_code(0);
    let done = run.finish().expect_code(0);
    assert!(
        done.stdout.contains(ANSWER),
        "the server got the answer: {}",
        done.stdout
    );
    let calls = json_lines(&log)
        .into_iter()
        .filter(|line| line["method"] == "tools/call")
        .map(|line| line["meta"].clone())
        .collect();
    (execution, calls)
}

/// The trace id and the parent span id of a version-00 `traceparent`.
fn parse_traceparent(meta: &Value) -> (String, String, String) {
    let value = meta["traceparent"]
        .as_str()
        .unwrap_or_else(|| panic!("no traceparent in {meta}"));
    let parts: Vec<&str> = value.split('-').collect();
    assert_eq!(parts.len(), 4, "{value}");
    assert_eq!(parts[0], "00", "{value}");
    assert!(parts[1].len() == 32 && parts[2].len() == 16, "{value}");
    let lower_hex = |s: &str| s.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f'));
    assert!(
        lower_hex(parts[1]) && lower_hex(parts[2]) && lower_hex(parts[3]),
        "{value}"
    );
    (
        parts[1].to_owned(),
        parts[2].to_owned(),
        parts[3].to_owned(),
    )
}

#[test]
fn every_call_carries_the_executions_trace_id_in_both_eras() {
    for (era, calls_expected) in [("modern", 2), ("legacy", 1)] {
        let store = Store::new();
        let (execution, calls) = run_and_answer(&store, era, &[]);
        // 2026-07-28: the call and the retry carrying the answer; legacy: one open call.
        assert_eq!(calls.len(), calls_expected, "{era}: {calls:?}");
        let expected = m3_runtime::execution_trace_id_hex(&execution);
        for meta in &calls {
            let (trace_id, _, _) = parse_traceparent(meta);
            assert_eq!(trace_id, expected, "{era}: {meta}");
        }
        if era == "modern" {
            // The 2026-07-28 envelope is still there next to the trace context.
            assert!(
                calls[0]
                    .get("io.modelcontextprotocol/protocolVersion")
                    .is_some()
            );
        }
    }
}

/// The receiver, killed on drop, and its endpoint.
struct Receiver {
    child: Child,
    endpoint: String,
    out: PathBuf,
}

impl Receiver {
    fn start(dir: &Path) -> Self {
        let out = dir.join("spans.jsonl");
        let mut child = Command::new(python())
            .arg(peer("otlp_receiver.py"))
            .arg("--out")
            .arg(&out)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut endpoint = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut endpoint)
            .unwrap();
        assert!(
            endpoint.starts_with("http://"),
            "receiver said {endpoint:?}"
        );
        Self {
            child,
            endpoint: endpoint.trim().to_owned(),
            out,
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether span `id` has `ancestor` among its ancestors.
fn descends(spans: &BTreeMap<String, Value>, id: &str, ancestor: &str) -> bool {
    let mut current = spans[id]["parent_span_id"].as_str().unwrap_or_default();
    while !current.is_empty() {
        if current == ancestor {
            return true;
        }
        let Some(parent) = spans.get(current) else {
            return false;
        };
        current = parent["parent_span_id"].as_str().unwrap_or_default();
    }
    false
}

fn only<'a>(spans: &'a BTreeMap<String, Value>, name: &str) -> &'a Value {
    let found: Vec<&Value> = spans.values().filter(|s| s["name"] == name).collect();
    assert_eq!(found.len(), 1, "one {name} span in {spans:#?}");
    found[0]
}

#[test]
fn spans_reach_an_otlp_receiver_with_their_parents_and_no_answer() {
    let store = Store::new();
    let receiver = Receiver::start(store.db().parent().unwrap());
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    let (execution, calls) = run_and_answer(&store, "modern", &env);
    let expected_trace = m3_runtime::execution_trace_id_hex(&execution);
    let names = [
        "m3.execution",
        "m3.mcp.operation",
        "m3.round.wait",
        "m3.round.delivery",
    ];
    // The exporter flushed at exit: every span is there once `m3 run` ended.
    let spans: BTreeMap<String, Value> = wait_until(Duration::from_secs(10), "the spans", || {
        let lines = json_lines(&receiver.out);
        assert!(lines.iter().all(|l| l.get("error").is_none()), "{lines:?}");
        let spans: BTreeMap<String, Value> = lines
            .into_iter()
            .map(|s| (s["span_id"].as_str().unwrap().to_owned(), s))
            .collect();
        names
            .iter()
            .all(|name| spans.values().any(|s| s["name"] == *name))
            .then_some(spans)
    });
    let raw = std::fs::read_to_string(&receiver.out).unwrap();
    assert!(
        !raw.contains(ANSWER),
        "an answer value reached a span: {raw}"
    );
    for span in spans.values() {
        assert_eq!(span["trace_id"], expected_trace.as_str(), "{span}");
        assert_eq!(span["service"], "m3", "{span}");
    }
    let execution_span = only(&spans, "m3.execution");
    assert_eq!(
        execution_span["attributes"]["execution.id"],
        execution.as_str()
    );
    let root = execution_span["span_id"].as_str().unwrap();
    let operation = only(&spans, "m3.mcp.operation");
    let operation_id = operation["span_id"].as_str().unwrap();
    assert_eq!(operation["attributes"]["mcp.server"], "raw");
    assert_eq!(operation["attributes"]["mcp.method"], "tools/call");
    assert_eq!(operation["attributes"]["mcp.operation"], "ask");
    assert!(
        descends(&spans, operation_id, root),
        "{operation} under the execution"
    );
    for name in ["m3.round.wait", "m3.round.delivery"] {
        let span = only(&spans, name);
        let id = span["span_id"].as_str().unwrap();
        assert!(
            descends(&spans, id, operation_id),
            "{span} under the operation"
        );
        assert!(descends(&spans, id, root), "{span} under the execution");
        assert!(
            span["attributes"]["round.id"]
                .as_str()
                .is_some_and(|id| id.len() == 26)
        );
    }
    // The server saw the operation span as the parent of its work, sampled.
    for meta in &calls {
        let (trace_id, parent, flags) = parse_traceparent(meta);
        assert_eq!(
            (trace_id.as_str(), parent.as_str(), flags.as_str()),
            (expected_trace.as_str(), operation_id, "01")
        );
    }
}

#[test]
fn serve_exports_one_span_per_request_with_its_route_template_and_status() {
    let store = Store::new();
    let receiver = Receiver::start(store.db().parent().unwrap());
    let mut command = store.command(&["serve", "--create", "--bind", "127.0.0.1:0"]);
    command
        .stderr(Stdio::piped())
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint);
    let mut serve = Running::start(command);
    let url = serve.next_line().trim_end_matches('/').to_owned();
    let missing = "01NOSUCHEXECUTION000000000";
    let status = |path: &str| -> String {
        let output = Command::new("curl")
            .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}"])
            .arg(format!("{url}{path}"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    assert_eq!(status("/api/v1/executions"), "200");
    assert_eq!(status(&format!("/api/v1/executions/{missing}")), "404");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(serve.child.id()).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    serve.finish();
    // Flushed at exit: both requests are there.
    let spans = wait_until(Duration::from_secs(10), "the request spans", || {
        let spans: Vec<Value> = json_lines(&receiver.out)
            .into_iter()
            .filter(|s| s["name"] == "m3.http.request")
            .collect();
        (spans.len() >= 2).then_some(spans)
    });
    let seen: Vec<(String, String, String)> = spans
        .iter()
        .map(|s| {
            let attribute =
                |key: &str| s["attributes"][key].as_str().unwrap_or_default().to_owned();
            (
                attribute("http.request.method"),
                attribute("http.route"),
                attribute("http.response.status_code"),
            )
        })
        .collect();
    for expected in [
        ("GET", "/api/v1/executions", "200"),
        ("GET", "/api/v1/executions/{execution_id}", "404"),
    ] {
        let expected = (
            expected.0.to_owned(),
            expected.1.to_owned(),
            expected.2.to_owned(),
        );
        assert!(seen.contains(&expected), "{expected:?} in {seen:?}");
    }
    let raw = std::fs::read_to_string(&receiver.out).unwrap();
    assert!(!raw.contains(missing), "the raw path reached a span: {raw}");
}
