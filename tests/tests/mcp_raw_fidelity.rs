//! The request as a raw (no SDK) server sent it is what is stored, shown and
//! validated against, in both eras: every JSON Schema keyword validation uses,
//! `x-` extensions, `_meta` and `task` survive the trip into the store, content the
//! schema forbids is refused, and the accepted answer reaches the server unchanged.
//! Over stdio, and over Streamable HTTP answered with plain `application/json`
//! (the legacy era's `elicitation/create` then comes on the GET event stream).

// Helpers outside #[test] fns fail the test on purpose (clippy.toml only relaxes
// these lints inside test functions).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use m3_kit::{AgentSelection, AsyncExecutionHandle, Script, SubmitOptions};
use m3_tests::http_support::{HttpPeer, free_port};
use m3_tests::runtime_support::{WAIT, completes, ends, failure, kit, pending, python};
use m3_types::{
    ElicitationRequest, ElicitationResponse, ExecutionOutcome, HttpServer, HumanInput, ResponseMap,
    ServerBinding, ServerTrust, StdioServer,
};
use serde_json::{Map, Value, json};

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/peers/raw_elicitation_server.py"
);

/// How the raw server is reached.
#[derive(Clone, Copy, Debug)]
enum Transport {
    Stdio,
    PlainJsonHttp,
}

fn script_args(era: &str, params: &Value) -> Vec<String> {
    vec![
        SCRIPT.to_owned(),
        "--era".to_owned(),
        era.to_owned(),
        "--params".to_owned(),
        params.to_string(),
    ]
}

/// The raw server serving plain-JSON Streamable HTTP with `extra` arguments, and
/// its loopback binding.
async fn raw_http(era: &str, params: &Value, extra: &[&str]) -> (HttpPeer, HttpServer) {
    let port = free_port().unwrap();
    let mut command = tokio::process::Command::new(python());
    command
        .args(script_args(era, params))
        .args(["--http", &port.to_string()])
        .args(extra);
    let peer = HttpPeer::start(command, port).await.unwrap();
    let server = HttpServer::new("raw", peer.url()).with_trust(ServerTrust::Loopback);
    (peer, server)
}

/// The raw server's binding, and its process when it serves HTTP.
async fn raw_server(
    era: &str,
    transport: Transport,
    params: &Value,
) -> (ServerBinding, Option<HttpPeer>) {
    match transport {
        Transport::Stdio => {
            let server = StdioServer::new("raw", python()).with_args(script_args(era, params));
            (server.into(), None)
        }
        Transport::PlainJsonHttp => {
            let (peer, server) = raw_http(era, params, &[]).await;
            (server.into(), Some(peer))
        }
    }
}

/// Every keyword validation uses, plus `x-` extensions kept as data.
fn schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "x-form-layout": {"columns": 2},
        "properties": {
            "s": {"type": "string", "pattern": "^a+$", "minLength": 2, "maxLength": 4},
            "c": {"type": "string", "const": "z"},
            "e": {"type": "string", "enum": ["red", "blue"], "x-labels": ["Red", "Blue"]},
            "n": {"type": "number", "minimum": 1, "maximum": 10, "multipleOf": 0.5},
            "m": {"type": "string", "format": "email", "x-widget": "email"}
        },
        "required": ["s"]
    })
}

fn meta() -> Value {
    json!({"io.example/trace": "t-1", "x-ui": {"hint": "short"}})
}

fn task() -> Value {
    json!({"taskId": "task-7", "ttl": 60000})
}

fn content(value: Value) -> Map<String, Value> {
    value.as_object().unwrap().clone()
}

struct Started {
    _dir: tempfile::TempDir,
    _peer: Option<HttpPeer>,
    kit: m3_kit::AsyncMcpTestKit,
    handle: AsyncExecutionHandle,
}

async fn start(era: &str, transport: Transport, params: &Value) -> Started {
    let (server, peer) = raw_server(era, transport, params).await;
    submit(server, peer).await
}

async fn submit(server: ServerBinding, peer: Option<HttpPeer>) -> Started {
    let dir = tempfile::tempdir().unwrap();
    let kit = kit(&dir.path().join("m3.sqlite")).await.unwrap();
    let agent = kit
        .agents([AgentSelection::scripted(Script::call(
            "raw:ask",
            Map::new(),
        ))])
        .unwrap()
        .remove(0);
    let options = SubmitOptions::new()
        .server(server)
        .tools(["raw:ask"])
        .human_input(HumanInput::Managed);
    let handle = agent.submit("Ask the raw server.", options).await.unwrap();
    Started {
        _dir: dir,
        _peer: peer,
        kit,
        handle,
    }
}

/// The request's `_meta` and `task` are the ones the server sent.
fn assert_context(
    meta: Option<&Map<String, Value>>,
    task: Option<&Map<String, Value>>,
    case: &str,
) {
    assert_eq!(
        meta.cloned().map(Value::Object),
        Some(self::meta()),
        "{case}"
    );
    assert_eq!(
        task.cloned().map(Value::Object),
        Some(self::task()),
        "{case}"
    );
}

/// The text the server returned: the JSON of the answer it received.
async fn delivered(handle: &AsyncExecutionHandle) -> Value {
    let trace = completes(handle, WAIT).await.unwrap();
    let call = trace.tool_calls().next().unwrap();
    let outcome = serde_json::to_value(&call.attempts.last().unwrap().outcome).unwrap();
    let text = outcome["result"]["content"][0]["text"].as_str().unwrap();
    serde_json::from_str(text).unwrap()
}

async fn form_fidelity(era: &str, transport: Transport) {
    let params = json!({
        "message": "Fill the raw form.",
        "requestedSchema": schema(),
        "_meta": meta(),
        "task": task(),
    });
    let run = start(era, transport, &params).await;
    let case = format!("{era} {transport:?}");
    let round = pending(&run.handle).await;
    let (key, request) = round.requests.iter().next().unwrap();
    let ElicitationRequest::Form(form) = request else {
        panic!("form expected, got {request:?}")
    };
    assert_eq!(form.message, "Fill the raw form.");
    assert_eq!(
        Value::Object(form.requested_schema.clone()),
        schema(),
        "{case}"
    );
    assert_context(form.meta.as_ref(), form.task.as_ref(), &case);

    let forbidden = [
        ("pattern", json!({"s": "bbb"})),
        ("minLength", json!({"s": "a"})),
        ("maxLength", json!({"s": "aaaaa"})),
        ("const", json!({"s": "aa", "c": "nope"})),
        ("enum", json!({"s": "aa", "e": "green"})),
        ("minimum", json!({"s": "aa", "n": 0.5})),
        ("maximum", json!({"s": "aa", "n": 11})),
        ("multipleOf", json!({"s": "aa", "n": 1.25})),
        ("format", json!({"s": "aa", "m": "not-an-email"})),
        ("additionalProperties", json!({"s": "aa", "extra": 1})),
        ("required", json!({"c": "z"})),
    ];
    for (keyword, bad) in forbidden {
        let answer = ResponseMap::from([(
            key.clone(),
            ElicitationResponse::accept(content(bad.clone())),
        )]);
        let error = run
            .handle
            .respond_elicitation(&round.round_id, answer, &format!("bad-{keyword}"))
            .await
            .expect_err(&format!("{era}: {keyword} must refuse {bad}"));
        assert_eq!(
            error.code(),
            "managed_input_invalid",
            "{era} {keyword}: {error}"
        );
    }
    let good = json!({"s": "aaa", "c": "z", "e": "blue", "n": 2.5, "m": "ada@example.test"});
    let answer = ResponseMap::from([(
        key.clone(),
        ElicitationResponse::accept(content(good.clone())),
    )]);
    run.handle
        .respond_elicitation(&round.round_id, answer, "good")
        .await
        .unwrap();
    assert_eq!(
        delivered(&run.handle).await,
        json!({"action": "accept", "content": good})
    );
    run.kit.close().await.unwrap();
}

async fn url_task_context(era: &str, transport: Transport) {
    let params = json!({
        "mode": "url",
        "message": "Verify on the web.",
        "url": "https://example.test/verify/1",
        "elicitationId": "el-1",
        "_meta": meta(),
        "task": task(),
    });
    let run = start(era, transport, &params).await;
    let case = format!("{era} {transport:?}");
    let round = pending(&run.handle).await;
    let (key, request) = round.requests.iter().next().unwrap();
    let ElicitationRequest::Url(url) = request else {
        panic!("URL request expected, got {request:?}")
    };
    assert_eq!(url.url, "https://example.test/verify/1");
    assert_eq!(url.elicitation_id.as_deref(), Some("el-1"));
    assert_context(url.meta.as_ref(), url.task.as_ref(), &case);
    let answer = ResponseMap::from([(key.clone(), ElicitationResponse::accept_url())]);
    run.handle
        .respond_elicitation(&round.round_id, answer, "url")
        .await
        .unwrap();
    assert_eq!(delivered(&run.handle).await, json!({"action": "accept"}));
    run.kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_form_schema_survives_and_is_enforced_modern_era() {
    form_fidelity("modern", Transport::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_form_schema_survives_and_is_enforced_legacy_era() {
    form_fidelity("legacy", Transport::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_url_request_keeps_task_and_meta_modern_era() {
    url_task_context("modern", Transport::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_url_request_keeps_task_and_meta_legacy_era() {
    url_task_context("legacy", Transport::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_form_schema_survives_a_plain_json_http_answer_in_both_eras() {
    // Legacy: the answer to the tools/call is plain JSON, the elicitation/create
    // comes on the GET event stream.
    for era in ["modern", "legacy"] {
        form_fidelity(era, Transport::PlainJsonHttp).await;
    }
}

/// A server that copies a resolved `${NAME}` header value into its question gets
/// its request refused before any round is stored: the value reaches neither the
/// store nor the error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_carrying_a_resolved_header_value_is_refused_in_both_eras() {
    for era in ["modern", "legacy"] {
        header_secret_is_refused(era).await;
    }
}

async fn header_secret_is_refused(era: &str) {
    let params = json!({"message": "Your token is", "requestedSchema": schema()});
    let (peer, server) = raw_http(era, &params, &["--echo-header", "X-Token"]).await;
    let server = server.with_header("X-Token", "Bearer ${PATH}");
    let secret = std::env::var("PATH").unwrap();
    let Started {
        _dir: dir,
        _peer,
        kit,
        handle,
    } = submit(server.into(), Some(peer)).await;
    let result = ends(&handle, WAIT, ExecutionOutcome::Failed).await.unwrap();
    let error = failure(&result, "protocol_error", "request_carries_header_secret").unwrap();
    assert!(!format!("{error:?}").contains(&secret), "{era}: {error:?}");
    assert!(handle.rounds().await.unwrap().is_empty(), "{era}");
    kit.close().await.unwrap();
    for path in files_under(dir.path()) {
        let bytes = std::fs::read(&path).unwrap();
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "{era}: the header value is in {}",
            path.display()
        );
    }
}

/// Every regular file below `dir` (the database, its WAL, anything else).
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else if path.is_file() {
            files.push(path);
        }
    }
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_url_request_keeps_task_and_meta_over_plain_json_http() {
    url_task_context("modern", Transport::PlainJsonHttp).await;
}
