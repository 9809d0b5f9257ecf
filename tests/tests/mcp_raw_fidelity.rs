//! The request as a raw (no SDK) server sent it is what is stored, shown and
//! validated against, in both eras: every JSON Schema keyword validation uses,
//! `x-` extensions, `_meta` and `task` survive the trip into the store, content the
//! schema forbids is refused, and the accepted answer reaches the server unchanged.

// Helpers outside #[test] fns fail the test on purpose (clippy.toml only relaxes
// these lints inside test functions).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use m3_kit::{AgentSelection, AsyncExecutionHandle, Script, SubmitOptions};
use m3_tests::runtime_support::{WAIT, completes, kit, pending, python};
use m3_types::{ElicitationRequest, ElicitationResponse, HumanInput, ResponseMap, StdioServer};
use serde_json::{Map, Value, json};

fn raw_server(era: &str, params: &Value) -> StdioServer {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/peers/raw_elicitation_server.py"
    );
    StdioServer::new("raw", python()).with_args([
        script.to_owned(),
        "--era".to_owned(),
        era.to_owned(),
        "--params".to_owned(),
        params.to_string(),
    ])
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
    kit: m3_kit::AsyncMcpTestKit,
    handle: AsyncExecutionHandle,
}

async fn start(era: &str, params: &Value) -> Started {
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
        .server(raw_server(era, params))
        .tools(["raw:ask"])
        .human_input(HumanInput::Managed);
    let handle = agent.submit("Ask the raw server.", options).await.unwrap();
    Started {
        _dir: dir,
        kit,
        handle,
    }
}

/// The text the server returned: the JSON of the answer it received.
async fn delivered(handle: &AsyncExecutionHandle) -> Value {
    let trace = completes(handle, WAIT).await.unwrap();
    let call = trace.tool_calls().next().unwrap();
    let outcome = serde_json::to_value(&call.attempts.last().unwrap().outcome).unwrap();
    let text = outcome["result"]["content"][0]["text"].as_str().unwrap();
    serde_json::from_str(text).unwrap()
}

async fn form_fidelity(era: &str) {
    let params = json!({
        "message": "Fill the raw form.",
        "requestedSchema": schema(),
        "_meta": meta(),
        "task": task(),
    });
    let Started { _dir, kit, handle } = start(era, &params).await;
    let round = pending(&handle).await;
    let (key, request) = round.requests.iter().next().unwrap();
    let ElicitationRequest::Form(form) = request else {
        panic!("form expected, got {request:?}")
    };
    assert_eq!(form.message, "Fill the raw form.");
    assert_eq!(
        Value::Object(form.requested_schema.clone()),
        schema(),
        "{era}"
    );
    assert_eq!(form.meta.clone().map(Value::Object), Some(meta()), "{era}");
    assert_eq!(form.task.clone().map(Value::Object), Some(task()), "{era}");

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
        let error = handle
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
    handle
        .respond_elicitation(&round.round_id, answer, "good")
        .await
        .unwrap();
    assert_eq!(
        delivered(&handle).await,
        json!({"action": "accept", "content": good})
    );
    kit.close().await.unwrap();
}

async fn url_task_context(era: &str) {
    let params = json!({
        "mode": "url",
        "message": "Verify on the web.",
        "url": "https://example.test/verify/1",
        "elicitationId": "el-1",
        "_meta": meta(),
        "task": task(),
    });
    let Started { _dir, kit, handle } = start(era, &params).await;
    let round = pending(&handle).await;
    let (key, request) = round.requests.iter().next().unwrap();
    let ElicitationRequest::Url(url) = request else {
        panic!("URL request expected, got {request:?}")
    };
    assert_eq!(url.url, "https://example.test/verify/1");
    assert_eq!(url.elicitation_id.as_deref(), Some("el-1"));
    assert_eq!(url.meta.clone().map(Value::Object), Some(meta()), "{era}");
    assert_eq!(url.task.clone().map(Value::Object), Some(task()), "{era}");
    let answer = ResponseMap::from([(key.clone(), ElicitationResponse::accept_url())]);
    handle
        .respond_elicitation(&round.round_id, answer, "url")
        .await
        .unwrap();
    assert_eq!(delivered(&handle).await, json!({"action": "accept"}));
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_form_schema_survives_and_is_enforced_modern_era() {
    form_fidelity("modern").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_form_schema_survives_and_is_enforced_legacy_era() {
    form_fidelity("legacy").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_url_request_keeps_task_and_meta_modern_era() {
    url_task_context("modern").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_url_request_keeps_task_and_meta_legacy_era() {
    url_task_context("legacy").await;
}
