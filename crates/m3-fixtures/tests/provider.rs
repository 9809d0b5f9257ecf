//! The example Responses API provider, driven over real HTTP on loopback by a tiny client.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::time::Duration;

use m3_fixtures::provider::{
    ExampleProvider, ProviderOptions, ProviderScript, ProviderStep, RecordedRequest,
    SCRIPT_EXHAUSTED_TEXT, tool_namespace,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One HTTP/1.1 exchange (`connection: close`, read to EOF).
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// The SSE frames as `(event, data)`.
    fn events(&self) -> Vec<(String, Value)> {
        assert!(
            self.body.ends_with("\n\n"),
            "unterminated SSE: {:?}",
            self.body
        );
        self.body
            .split("\n\n")
            .filter(|frame| !frame.is_empty())
            .map(|frame| {
                let mut event = None;
                let mut data = None;
                for line in frame.lines() {
                    if let Some(rest) = line.strip_prefix("event: ") {
                        event = Some(rest.to_owned());
                    } else if let Some(rest) = line.strip_prefix("data: ") {
                        data = Some(serde_json::from_str::<Value>(rest).unwrap());
                    } else {
                        panic!("unexpected SSE line {line:?}");
                    }
                }
                let (event, data) = (event.unwrap(), data.unwrap());
                assert_eq!(data["type"], event.as_str(), "event name matches data.type");
                (event, data)
            })
            .collect()
    }
}

async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut request = format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() {
        request.push_str(&format!(
            "content-type: application/json\r\ncontent-length: {}\r\n",
            body.len()
        ));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw))
        .await
        .expect("the provider answers within 10 s")
        .unwrap();
    let raw = String::from_utf8(raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status = status_line.split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .map(|line| {
            let (name, value) = line.split_once(':').unwrap();
            (name.trim().to_owned(), value.trim().to_owned())
        })
        .collect();
    let reply = Reply {
        status,
        headers,
        body: body.to_owned(),
    };
    if let Some(length) = reply.header("content-length") {
        assert_eq!(length.parse::<usize>().unwrap(), reply.body.len());
    }
    reply
}

async fn post_responses(provider: &ExampleProvider, input: Value) -> Reply {
    let body = json!({"model": "m3-example-model", "stream": true, "input": input, "tools": []});
    http(
        provider.local_addr(),
        "POST",
        "/v1/responses",
        &[("accept", "text/event-stream")],
        &body.to_string(),
    )
    .await
}

fn user(text: &str) -> Value {
    json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
}

fn call_output(call_id: &str) -> Value {
    json!({"type": "function_call_output", "call_id": call_id, "output": "{\"status\":\"booked\"}"})
}

fn shipping_script() -> ProviderScript {
    ProviderScript::from_json(
        r#"{"model": "m3-example-model",
            "steps": [
              {"call": "shipping:book_shipment", "arguments": {"weight_kg": 2}},
              {"text": "Shipment booked."}
            ]}"#,
    )
    .unwrap()
}

/// The single output item of an SSE reply, after checking the framing and usage.
fn output_item(reply: &Reply) -> Value {
    assert_eq!(reply.status, 200, "body: {}", reply.body);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    let events = reply.events();
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.output_item.done",
            "response.completed"
        ]
    );
    let created = &events[0].1["response"];
    let done = &events[1].1;
    let completed = &events[2].1["response"];
    assert_eq!(created["status"], "in_progress");
    assert_eq!(completed["status"], "completed");
    assert_eq!(created["id"], completed["id"]);
    assert!(completed["id"].as_str().unwrap().starts_with("resp_"));
    assert_eq!(done["output_index"], 0);
    assert_eq!(completed["output"], json!([done["item"].clone()]));
    let usage = &completed["usage"];
    let input = usage["input_tokens"].as_u64().unwrap();
    let output = usage["output_tokens"].as_u64().unwrap();
    assert!(input > 0 && output > 0, "usage {usage}");
    assert_eq!(usage["input_tokens_details"]["cached_tokens"], 0);
    assert_eq!(usage["output_tokens_details"]["reasoning_tokens"], 0);
    assert_eq!(usage["total_tokens"].as_u64().unwrap(), input + output);
    done["item"].clone()
}

#[tokio::test]
async fn the_step_is_the_number_of_function_call_outputs() {
    let provider = ExampleProvider::start(shipping_script()).await.unwrap();
    assert_eq!(
        provider.base_url(),
        format!("http://127.0.0.1:{}/v1", provider.local_addr().port())
    );

    // No output yet: the namespaced tool call, exactly as Codex resolves it.
    let first = output_item(&post_responses(&provider, json!([user("Book it.")])).await);
    assert_eq!(
        first,
        json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "status": "completed",
               "name": "book_shipment", "namespace": "mcp__shipping",
               "arguments": first["arguments"].clone()})
    );
    let arguments: Value = serde_json::from_str(first["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"weight_kg": 2}));

    // A re-send of the same request gets the same call (the step does not follow the count
    // of requests).
    let again = output_item(&post_responses(&provider, json!([user("Book it.")])).await);
    assert_eq!(again, first);

    // One output: the text message.
    let history = json!([user("Book it."), first.clone(), call_output("call_1")]);
    let second = output_item(&post_responses(&provider, history).await);
    assert_eq!(second["type"], "message");
    assert_eq!(second["role"], "assistant");
    assert_eq!(second["id"], "msg_2");
    assert_eq!(
        second["content"][0],
        json!({"type": "output_text", "text": "Shipment booked.", "annotations": []})
    );

    // Past the end: the last step, because it is text.
    let history = json!([
        user("x"),
        call_output("call_1"),
        call_output("call_2"),
        call_output("call_3")
    ]);
    let past = output_item(&post_responses(&provider, history).await);
    assert_eq!(past["content"][0]["text"], "Shipment booked.");
    assert_eq!(past["id"], "msg_4");

    assert_eq!(provider.requests().len(), 4);
}

#[tokio::test]
async fn a_script_ending_in_a_call_is_exhausted_past_its_end() {
    let script = ProviderScript::from_json(r#"{"steps": [{"call": "shipping:quote"}]}"#).unwrap();
    assert_eq!(script.model, "m3-example-model");
    let provider = ExampleProvider::start(script).await.unwrap();
    let call = output_item(&post_responses(&provider, json!([user("q")])).await);
    assert_eq!(call["name"], "quote");
    assert_eq!(call["arguments"], "{}");
    let after =
        output_item(&post_responses(&provider, json!([user("q"), call_output("call_1")])).await);
    assert_eq!(after["type"], "message");
    assert_eq!(after["content"][0]["text"], SCRIPT_EXHAUSTED_TEXT);
}

#[tokio::test]
async fn a_builtin_step_calls_a_codex_tool_without_a_namespace() {
    let script = ProviderScript::from_json(
        r#"{"steps": [{"builtin": "exec_command", "arguments": {"cmd": "true"}}, {"text": "ok"}]}"#,
    )
    .unwrap();
    let provider = ExampleProvider::start(script).await.unwrap();
    let call = output_item(&post_responses(&provider, json!([user("go")])).await);
    assert_eq!(call["type"], "function_call");
    assert_eq!(call["name"], "exec_command");
    assert!(call.get("namespace").is_none(), "{call}");
    assert_eq!(call["arguments"], r#"{"cmd":"true"}"#);
}

#[tokio::test]
async fn server_names_are_sanitised_into_the_namespace() {
    assert_eq!(tool_namespace("m3-ship.v2"), "mcp__m3_ship_v2");
    assert_eq!(tool_namespace("shipping"), "mcp__shipping");
    assert_eq!(tool_namespace("a b/c_d"), "mcp__a_b_c_d");
    let script = ProviderScript::from_json(
        r#"{"steps": [{"call": "m3-ship.v2:book_shipment", "arguments": {"weight_kg": 1.5}}]}"#,
    )
    .unwrap();
    let provider = ExampleProvider::start(script).await.unwrap();
    let call = output_item(&post_responses(&provider, json!([user("go")])).await);
    assert_eq!(call["name"], "book_shipment");
    assert_eq!(call["namespace"], "mcp__m3_ship_v2");
}

#[tokio::test]
async fn the_alias_path_models_and_unknown_routes() {
    let provider = ExampleProvider::start(shipping_script()).await.unwrap();
    let addr = provider.local_addr();

    let alias = http(
        addr,
        "POST",
        "/responses",
        &[],
        &json!({"input": []}).to_string(),
    )
    .await;
    assert_eq!(output_item(&alias)["type"], "function_call");

    for path in ["/v1/models", "/models"] {
        let models = http(addr, "GET", path, &[], "").await;
        assert_eq!(models.status, 200);
        assert_eq!(models.header("content-type"), Some("application/json"));
        let list: Value = serde_json::from_str(&models.body).unwrap();
        assert_eq!(list["object"], "list");
        assert_eq!(list["data"][0]["id"], "m3-example-model");
        assert_eq!(list["data"].as_array().unwrap().len(), 1);
    }

    let missing = http(addr, "GET", "/v1/chat/completions", &[], "").await;
    assert_eq!(missing.status, 404);
    let not_json = http(addr, "POST", "/v1/responses", &[], "not json").await;
    assert_eq!(not_json.status, 400);

    let recorded: Vec<(String, String, u16)> = provider
        .requests()
        .into_iter()
        .map(|r| (r.method, r.path, r.status))
        .collect();
    assert_eq!(
        recorded,
        [
            ("POST".to_owned(), "/responses".to_owned(), 200),
            ("GET".to_owned(), "/v1/models".to_owned(), 200),
            ("GET".to_owned(), "/models".to_owned(), 200),
            ("GET".to_owned(), "/v1/chat/completions".to_owned(), 404),
            ("POST".to_owned(), "/v1/responses".to_owned(), 400),
        ]
    );
    assert_eq!(provider.requests()[4].body, json!("not json"));
}

#[tokio::test]
async fn every_request_is_recorded_with_lower_cased_headers_and_its_body() {
    let provider = ExampleProvider::start(shipping_script()).await.unwrap();
    let body = json!({"model": "m3-example-model", "stream": true, "input": [user("hi")]});
    let reply = http(
        provider.local_addr(),
        "POST",
        "/v1/responses",
        &[
            ("X-Codex-Turn-Metadata", "{\"turn\":1}"),
            ("Originator", "m3"),
        ],
        &body.to_string(),
    )
    .await;
    assert_eq!(reply.status, 200);
    let requests = provider.requests();
    assert_eq!(requests.len(), 1);
    let recorded = &requests[0];
    assert_eq!(recorded.method, "POST");
    assert_eq!(recorded.path, "/v1/responses");
    assert_eq!(recorded.body, body);
    assert_eq!(recorded.status, 200);
    assert!(!recorded.refused);
    assert_eq!(recorded.headers["x-codex-turn-metadata"], "{\"turn\":1}");
    assert_eq!(recorded.headers["originator"], "m3");
    assert!(
        recorded
            .headers
            .keys()
            .all(|name| name == &name.to_lowercase())
    );
    assert!(!recorded.headers.contains_key("authorization"));
}

#[tokio::test]
async fn a_request_with_an_authorization_header_is_refused_and_recorded() {
    let provider = ExampleProvider::start(shipping_script()).await.unwrap();
    let reply = http(
        provider.local_addr(),
        "POST",
        "/v1/responses",
        &[("Authorization", "Bearer sk-test")],
        &json!({"input": []}).to_string(),
    )
    .await;
    assert_eq!(reply.status, 401);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let error: Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(error["error"]["code"], "unauthorized");
    let requests = provider.requests();
    assert_eq!(requests.len(), 1);
    assert!(requests[0].refused);
    assert_eq!(requests[0].status, 401);
    assert_eq!(requests[0].headers["authorization"], "Bearer sk-test");

    // Refused on every route, models included.
    let models = http(
        provider.local_addr(),
        "GET",
        "/v1/models",
        &[("authorization", "x")],
        "",
    )
    .await;
    assert_eq!(models.status, 401);
    assert!(provider.requests()[1].refused);
}

#[tokio::test]
async fn the_record_file_gets_one_json_line_per_request() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("requests.jsonl");
    let provider = ExampleProvider::start_with(
        shipping_script(),
        ProviderOptions::default().with_record(&path),
    )
    .await
    .unwrap();
    post_responses(&provider, json!([user("a")])).await;
    http(
        provider.local_addr(),
        "GET",
        "/v1/models",
        &[("authorization", "k")],
        "",
    )
    .await;
    let lines: Vec<RecordedRequest> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines, provider.requests());
    assert_eq!(lines.len(), 2);
    assert!(lines[1].refused);
}

#[tokio::test]
async fn a_stopped_provider_refuses_connections() {
    let provider = ExampleProvider::start(shipping_script()).await.unwrap();
    let addr = provider.local_addr();
    assert_eq!(http(addr, "GET", "/v1/models", &[], "").await.status, 200);
    provider.stop().await;
    assert!(TcpStream::connect(addr).await.is_err());
}

#[test]
fn script_errors_are_invalid_arguments() {
    let cases = [
        ("not json", "provider script"),
        (r#"{"model": "m"}"#, "steps"),
        (r#"{"steps": []}"#, "steps must not be empty"),
        (
            r#"{"model": " ", "steps": [{"text": "x"}]}"#,
            "model must not be empty",
        ),
        (
            r#"{"steps": [{"call": "book_shipment"}]}"#,
            "is not SERVER:TOOL",
        ),
        (
            r#"{"steps": [{"call": ":book_shipment"}]}"#,
            "is not SERVER:TOOL",
        ),
        (
            r#"{"steps": [{"call": "s:t", "arguments": [1]}]}"#,
            "not an object",
        ),
        (
            r#"{"steps": [{"text": "x", "call": "s:t"}]}"#,
            "exactly one of",
        ),
        (
            r#"{"steps": [{"builtin": "exec_command", "call": "s:t"}]}"#,
            "exactly one of",
        ),
        (r#"{"steps": [{"builtin": ""}]}"#, "needs a function name"),
        (
            r#"{"steps": [{"builtin": "exec_command", "arguments": 1}]}"#,
            "not an object",
        ),
        (
            r#"{"steps": [{"text": "x", "arguments": {}}]}"#,
            "no arguments",
        ),
        (r#"{"steps": [{}]}"#, "needs call, builtin or text"),
        (r#"{"steps": [{"text": "x", "extra": 1}]}"#, "unknown field"),
        (r#"{"steps": [{"text": "x"}], "extra": 1}"#, "unknown field"),
    ];
    for (text, needle) in cases {
        let error = ProviderScript::from_json(text).unwrap_err();
        assert_eq!(error.code(), "invalid_argument", "{text}");
        assert!(error.to_string().contains(needle), "{text}: {error}");
    }
}

#[test]
fn scripts_round_trip_through_json() {
    let script = shipping_script();
    assert_eq!(
        script.steps[0],
        ProviderStep::Call {
            server: "shipping".into(),
            tool: "book_shipment".into(),
            arguments: json!({"weight_kg": 2}).as_object().unwrap().clone(),
        }
    );
    let text = serde_json::to_string(&script).unwrap();
    assert_eq!(ProviderScript::from_json(&text).unwrap(), script);
}

#[tokio::test]
async fn starting_a_script_without_steps_fails() {
    let script = ProviderScript {
        model: "m".into(),
        steps: vec![],
    };
    let error = ExampleProvider::start(script).await.unwrap_err();
    assert_eq!(error.code(), "invalid_argument");
}
