//! Drives the shipping server in-process with an rmcp client, in both eras.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use m3_fixtures::{
    Era, GARBAGE_LINE, OVERSIZED_TEXT_BYTES, ServeOutcome, ShippingOptions, serve_shipping,
};
use rmcp::{
    ClientHandler, ErrorData, RoleClient, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
        ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
        FormElicitationCapability, GetPromptRequestParams, GetPromptResponse, Implementation,
        InputRequest, InputRequiredResult, InputResponses, JsonObject, ProtocolVersion,
        ReadResourceRequestParams, ReadResourceResponse, ResourceContents,
        UrlElicitationCapability,
    },
    service::{
        ClientLifecycleMode, ClientServiceExt, RequestContext, RunningService, ServiceError,
    },
};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    task::JoinHandle,
};

type Answerer = Arc<dyn Fn(&ElicitRequestParams) -> ElicitResult + Send + Sync>;

/// A client that answers every elicitation with `answer` and records what it was asked.
#[derive(Clone)]
struct TestClient {
    answer: Answerer,
    asked: Arc<Mutex<Vec<ElicitRequestParams>>>,
}

impl TestClient {
    fn new(answer: impl Fn(&ElicitRequestParams) -> ElicitResult + Send + Sync + 'static) -> Self {
        Self {
            answer: Arc::new(answer),
            asked: Arc::default(),
        }
    }

    fn asked(&self) -> Vec<ElicitRequestParams> {
        self.asked.lock().unwrap().clone()
    }
}

impl ClientHandler for TestClient {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.asked.lock().unwrap().push(request.clone());
        Ok((self.answer)(&request))
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(
            ElicitationCapability::new()
                .with_form(FormElicitationCapability::new())
                .with_url(UrlElicitationCapability::new()),
        );
        ClientConfig::new(capabilities, Implementation::new("fixture-test", "0.1.0"))
    }
}

fn accept(content: Value) -> ElicitResult {
    ElicitResult::new(ElicitationAction::Accept).with_content(content)
}

fn address() -> Value {
    json!({"street": "1 Main Street", "city": "Pune"})
}

/// Answers a form by its message and a URL with accept.
fn happy(request: &ElicitRequestParams) -> ElicitResult {
    match request {
        ElicitRequestParams::FormElicitationParams { message, .. } => match message.as_str() {
            "Enter the delivery address." => accept(address()),
            "Enter a gift message." => accept(json!({"message": "Happy birthday"})),
            "Show the latest quote?" => accept(json!({"confirm": true})),
            other => panic!("unexpected question {other}"),
        },
        ElicitRequestParams::UrlElicitationParams { .. } => {
            ElicitResult::new(ElicitationAction::Accept)
        }
        other => panic!("unexpected request {other:?}"),
    }
}

struct Connection {
    client: RunningService<RoleClient, TestClient>,
    handler: TestClient,
    server: JoinHandle<Result<ServeOutcome, m3_fixtures::FixtureError>>,
}

fn start_server(
    options: ShippingOptions,
) -> (
    tokio::io::DuplexStream,
    JoinHandle<Result<ServeOutcome, m3_fixtures::FixtureError>>,
) {
    let (client_side, server_side) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(server_side);
    let server = tokio::spawn(serve_shipping(options, read, write));
    (client_side, server)
}

async fn connect_with(options: ShippingOptions, era: Era, handler: TestClient) -> Connection {
    let (client_side, server) = start_server(options);
    let (read, write) = tokio::io::split(client_side);
    let client = match era {
        Era::Legacy => handler.clone().serve((read, write)).await.unwrap(),
        Era::Auto => handler
            .clone()
            .serve_with_lifecycle(
                (read, write),
                ClientLifecycleMode::Auto {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                    legacy_version: Some(ProtocolVersion::V_2025_11_25),
                },
            )
            .await
            .unwrap(),
        _ => handler
            .clone()
            .serve_with_lifecycle(
                (read, write),
                ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                },
            )
            .await
            .unwrap(),
    };
    Connection {
        client,
        handler,
        server,
    }
}

async fn connect(era: Era, handler: TestClient) -> Connection {
    connect_with(ShippingOptions::new(Era::Auto), era, handler).await
}

impl Connection {
    async fn close(self) {
        self.client.cancel().await.unwrap();
        let outcome = tokio::time::timeout(Duration::from_secs(10), self.server)
            .await
            .expect("the server ends within 10 s")
            .unwrap()
            .unwrap();
        assert_eq!(outcome, ServeOutcome::Closed);
    }
}

fn weight(kg: f64) -> JsonObject {
    let Value::Object(map) = json!({"weight_kg": kg}) else {
        unreachable!()
    };
    map
}

fn tool(name: &'static str) -> CallToolRequestParams {
    CallToolRequestParams::new(name).with_arguments(weight(2.0))
}

fn input_required(response: CallToolResponse) -> InputRequiredResult {
    match response {
        CallToolResponse::InputRequired(result) => result,
        other => panic!("expected input_required, got {other:?}"),
    }
}

fn complete(response: CallToolResponse) -> CallToolResult {
    match response {
        CallToolResponse::Complete(result) => result,
        other => panic!("expected a complete result, got {other:?}"),
    }
}

fn form_of(result: &InputRequiredResult, key: &str) -> (String, Value) {
    let requests = result.input_requests.as_ref().unwrap();
    match &requests[key] {
        InputRequest::Elicitation(request) => match &request.params {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => (
                message.clone(),
                serde_json::to_value(requested_schema).unwrap(),
            ),
            other => panic!("expected a form, got {other:?}"),
        },
        other => panic!("expected an elicitation, got {other:?}"),
    }
}

fn responses(entries: &[(&str, ElicitResult)]) -> InputResponses {
    entries
        .iter()
        .map(|(key, result)| (key.to_string(), serde_json::to_value(result).unwrap()))
        .collect()
}

fn retry(
    params: CallToolRequestParams,
    round: &InputRequiredResult,
    answers: &[(&str, ElicitResult)],
) -> CallToolRequestParams {
    params
        .with_input_responses(responses(answers))
        .with_request_state(round.request_state.clone().unwrap())
}

fn text(result: &CallToolResult) -> String {
    result.content[0].as_text().unwrap().text.clone()
}

fn never_asked() -> TestClient {
    TestClient::new(|request| panic!("asked unexpectedly: {request:?}"))
}

// ---------------------------------------------------------------- 2026-07-28

#[tokio::test]
async fn modern_book_shipment_one_round_accept() {
    let connection = connect(Era::Modern, never_asked()).await;
    let peer = &connection.client;
    assert_eq!(
        peer.peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2026_07_28
    );
    let round = input_required(peer.call_tool_once(tool("book_shipment")).await.unwrap());
    assert_eq!(round.input_requests.as_ref().unwrap().len(), 1);
    let (message, schema) = form_of(&round, "shipping_address");
    assert_eq!(message, "Enter the delivery address.");
    assert_eq!(schema["required"], json!(["street", "city"]));
    assert_eq!(schema["properties"]["city"]["type"], "string");
    let done = complete(
        peer.call_tool_once(retry(
            tool("book_shipment"),
            &round,
            &[("shipping_address", accept(address()))],
        ))
        .await
        .unwrap(),
    );
    assert_eq!(text(&done), "Shipment booked.");
    assert_ne!(done.is_error, Some(true));
    assert_eq!(
        done.structured_content,
        Some(json!({"status": "booked", "city": "Pune"}))
    );
    connection.close().await;
}

#[tokio::test]
async fn modern_decline_cancel_and_bad_address_are_error_results() {
    let connection = connect(Era::Modern, never_asked()).await;
    let peer = &connection.client;
    for (answer, expected) in [
        (ElicitResult::new(ElicitationAction::Decline), "declined"),
        (ElicitResult::new(ElicitationAction::Cancel), "cancelled"),
        (
            accept(json!({"street": "1 Main Street"})),
            "street and a city",
        ),
    ] {
        let round = input_required(peer.call_tool_once(tool("book_shipment")).await.unwrap());
        let done = complete(
            peer.call_tool_once(retry(
                tool("book_shipment"),
                &round,
                &[("shipping_address", answer)],
            ))
            .await
            .unwrap(),
        );
        assert_eq!(done.is_error, Some(true));
        assert!(text(&done).contains(expected), "{}", text(&done));
        assert_eq!(done.structured_content, None);
    }
    connection.close().await;
}

#[tokio::test]
async fn modern_verified_shipment_asks_a_form_then_a_url() {
    let connection = connect(Era::Modern, never_asked()).await;
    let peer = &connection.client;
    let first = input_required(
        peer.call_tool_once(tool("book_verified_shipment"))
            .await
            .unwrap(),
    );
    form_of(&first, "shipping_address");
    let second = input_required(
        peer.call_tool_once(retry(
            tool("book_verified_shipment"),
            &first,
            &[("shipping_address", accept(address()))],
        ))
        .await
        .unwrap(),
    );
    assert_ne!(second.request_state, first.request_state);
    let requests = second.input_requests.as_ref().unwrap();
    assert_eq!(requests.keys().collect::<Vec<_>>(), ["verification"]);
    let InputRequest::Elicitation(request) = &requests["verification"] else {
        panic!("not an elicitation")
    };
    let ElicitRequestParams::UrlElicitationParams { url, .. } = &request.params else {
        panic!("not a url request")
    };
    let id = url.strip_prefix("https://example.test/verify/").unwrap();
    assert!(!id.is_empty());
    let done = complete(
        peer.call_tool_once(retry(
            tool("book_verified_shipment"),
            &second,
            &[("verification", ElicitResult::new(ElicitationAction::Accept))],
        ))
        .await
        .unwrap(),
    );
    assert_eq!(text(&done), "Verified shipment booked.");
    assert_eq!(
        done.structured_content,
        Some(json!({"status": "booked", "city": "Pune", "verification_id": id}))
    );
    connection.close().await;
}

#[tokio::test]
async fn modern_gift_shipment_asks_two_keys_in_one_round() {
    let connection = connect(Era::Modern, never_asked()).await;
    let peer = &connection.client;
    let round = input_required(
        peer.call_tool_once(tool("book_gift_shipment"))
            .await
            .unwrap(),
    );
    let keys: Vec<_> = round
        .input_requests
        .as_ref()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys, ["gift_message", "shipping_address"]);
    assert_eq!(form_of(&round, "gift_message").0, "Enter a gift message.");
    // Only one of the two answers is not enough.
    let error = peer
        .call_tool_once(retry(
            tool("book_gift_shipment"),
            &round,
            &[("shipping_address", accept(address()))],
        ))
        .await
        .unwrap_err();
    assert_invalid_params(error);
    let done = complete(
        peer.call_tool_once(retry(
            tool("book_gift_shipment"),
            &round,
            &[
                ("shipping_address", accept(address())),
                ("gift_message", accept(json!({"message": "Happy birthday"}))),
            ],
        ))
        .await
        .unwrap(),
    );
    assert_eq!(text(&done), "Gift shipment booked.");
    assert_eq!(
        done.structured_content,
        Some(json!({"status": "booked", "city": "Pune", "gift_message": "Happy birthday"}))
    );
    connection.close().await;
}

fn assert_invalid_params(error: ServiceError) {
    match error {
        ServiceError::McpError(data) => assert_eq!(data.code.0, -32602, "{data:?}"),
        other => panic!("expected -32602, got {other:?}"),
    }
}

#[tokio::test]
async fn modern_tampered_foreign_or_misused_state_is_rejected_with_32602() {
    let connection = connect(Era::Modern, never_asked()).await;
    let other = connect(Era::Modern, never_asked()).await;
    let peer = &connection.client;
    let round = input_required(peer.call_tool_once(tool("book_shipment")).await.unwrap());
    let answers = [("shipping_address", accept(address()))];
    let state = round.request_state.clone().unwrap();

    // One character changed.
    let mut tampered: Vec<char> = state.chars().collect();
    let last = tampered.len() - 1;
    tampered[last] = if tampered[last] == 'A' { 'B' } else { 'A' };
    let tampered: String = tampered.into_iter().collect();
    let params = tool("book_shipment")
        .with_input_responses(responses(&answers))
        .with_request_state(tampered);
    assert_invalid_params(peer.call_tool_once(params).await.unwrap_err());

    // Another server (another key).
    assert_invalid_params(
        other
            .client
            .call_tool_once(retry(tool("book_shipment"), &round, &answers))
            .await
            .unwrap_err(),
    );
    // Other arguments, another tool.
    let params = CallToolRequestParams::new("book_shipment").with_arguments(weight(3.0));
    assert_invalid_params(
        peer.call_tool_once(retry(params, &round, &answers))
            .await
            .unwrap_err(),
    );
    assert_invalid_params(
        peer.call_tool_once(retry(tool("book_gift_shipment"), &round, &answers))
            .await
            .unwrap_err(),
    );
    // The genuine state still works.
    let done = complete(
        peer.call_tool_once(retry(tool("book_shipment"), &round, &answers))
            .await
            .unwrap(),
    );
    assert_eq!(text(&done), "Shipment booked.");
    other.close().await;
    connection.close().await;
}

#[tokio::test]
async fn modern_quote_never_asks() {
    let connection = connect(Era::Modern, never_asked()).await;
    let done = complete(
        connection
            .client
            .call_tool_once(tool("quote"))
            .await
            .unwrap(),
    );
    assert_eq!(text(&done), "Quote: 7.00 EUR for 2 kg.");
    assert_eq!(
        done.structured_content,
        Some(json!({"weight_kg": 2.0, "price": 7.0, "currency": "EUR"}))
    );
    connection.close().await;
}

#[tokio::test]
async fn modern_prompt_and_resource_ask_then_complete() {
    let connection = connect(Era::Modern, never_asked()).await;
    let peer = &connection.client;
    let GetPromptResponse::InputRequired(round) = peer
        .get_prompt_once(GetPromptRequestParams::new("shipping_label"))
        .await
        .unwrap()
    else {
        panic!("the prompt did not ask")
    };
    assert_eq!(
        form_of(&round, "shipping_address").0,
        "Enter the delivery address."
    );
    let mut params = GetPromptRequestParams::new("shipping_label")
        .with_input_responses(responses(&[("shipping_address", accept(address()))]));
    params.request_state = round.request_state.clone();
    let GetPromptResponse::Complete(prompt) = peer.get_prompt_once(params).await.unwrap() else {
        panic!("the prompt did not complete")
    };
    let message = serde_json::to_value(&prompt.messages[0]).unwrap();
    assert_eq!(
        message["content"]["text"],
        "Print a shipping label for 1 Main Street, Pune."
    );

    let ReadResourceResponse::InputRequired(round) = peer
        .read_resource_once(ReadResourceRequestParams::new("shipping://quote/latest"))
        .await
        .unwrap()
    else {
        panic!("the resource did not ask")
    };
    assert_eq!(form_of(&round, "confirmation").0, "Show the latest quote?");
    let params = ReadResourceRequestParams::new("shipping://quote/latest")
        .with_input_responses(responses(&[(
            "confirmation",
            accept(json!({"confirm": true})),
        )]))
        .with_request_state(round.request_state.clone().unwrap());
    let ReadResourceResponse::Complete(resource) = peer.read_resource_once(params).await.unwrap()
    else {
        panic!("the resource did not complete")
    };
    let ResourceContents::TextResourceContents { text, .. } = &resource.contents[0] else {
        panic!("not text")
    };
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        json!({"weight_kg": 1.0, "price": 5.5, "currency": "EUR"})
    );
    connection.close().await;
}

#[tokio::test]
async fn modern_rounds_are_driven_by_the_rmcp_client_loop_too() {
    let connection = connect(Era::Modern, TestClient::new(happy)).await;
    let done = connection
        .client
        .call_tool(tool("book_verified_shipment"))
        .await
        .unwrap();
    assert_eq!(text(&done), "Verified shipment booked.");
    assert_eq!(connection.handler.asked().len(), 2);
    connection.close().await;
}

// ---------------------------------------------------------------- legacy

#[tokio::test]
async fn legacy_book_shipment_accept_decline_cancel() {
    let connection = connect(Era::Legacy, TestClient::new(happy)).await;
    assert_eq!(
        connection.client.peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2025_11_25
    );
    let done = connection
        .client
        .call_tool(tool("book_shipment"))
        .await
        .unwrap();
    assert_eq!(text(&done), "Shipment booked.");
    assert_eq!(
        done.structured_content,
        Some(json!({"status": "booked", "city": "Pune"}))
    );
    let asked = connection.handler.asked();
    assert_eq!(asked.len(), 1);
    let ElicitRequestParams::FormElicitationParams { message, .. } = &asked[0] else {
        panic!("not a form")
    };
    assert_eq!(message, "Enter the delivery address.");
    connection.close().await;

    for (action, expected) in [
        (ElicitationAction::Decline, "declined"),
        (ElicitationAction::Cancel, "cancelled"),
    ] {
        let connection = connect(
            Era::Legacy,
            TestClient::new(move |_| ElicitResult::new(action.clone())),
        )
        .await;
        let done = connection
            .client
            .call_tool(tool("book_shipment"))
            .await
            .unwrap();
        assert_eq!(done.is_error, Some(true));
        assert!(text(&done).contains(expected));
        connection.close().await;
    }
}

#[tokio::test]
async fn legacy_verified_shipment_asks_two_rounds_and_gift_asks_one_after_another() {
    let connection = connect(Era::Legacy, TestClient::new(happy)).await;
    let done = connection
        .client
        .call_tool(tool("book_verified_shipment"))
        .await
        .unwrap();
    assert_eq!(text(&done), "Verified shipment booked.");
    let asked = connection.handler.asked();
    assert_eq!(asked.len(), 2);
    let ElicitRequestParams::UrlElicitationParams {
        url,
        elicitation_id,
        ..
    } = &asked[1]
    else {
        panic!("the second round is not a url request")
    };
    assert_eq!(
        url,
        &format!("https://example.test/verify/{elicitation_id}")
    );

    let done = connection
        .client
        .call_tool(tool("book_gift_shipment"))
        .await
        .unwrap();
    assert_eq!(text(&done), "Gift shipment booked.");
    let messages: Vec<String> = connection.handler.asked()[2..]
        .iter()
        .map(|request| match request {
            ElicitRequestParams::FormElicitationParams { message, .. } => message.clone(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        messages,
        ["Enter the delivery address.", "Enter a gift message."]
    );
    connection.close().await;
}

#[tokio::test]
async fn legacy_quote_prompt_and_resource() {
    let connection = connect(Era::Legacy, TestClient::new(happy)).await;
    let done = connection.client.call_tool(tool("quote")).await.unwrap();
    assert_eq!(text(&done), "Quote: 7.00 EUR for 2 kg.");
    assert!(connection.handler.asked().is_empty());

    let prompt = connection
        .client
        .get_prompt(GetPromptRequestParams::new("shipping_label"))
        .await
        .unwrap();
    let message = serde_json::to_value(&prompt.messages[0]).unwrap();
    assert_eq!(
        message["content"]["text"],
        "Print a shipping label for 1 Main Street, Pune."
    );
    let resource = connection
        .client
        .read_resource(ReadResourceRequestParams::new("shipping://quote/latest"))
        .await
        .unwrap();
    let ResourceContents::TextResourceContents { text, .. } = &resource.contents[0] else {
        panic!("not text")
    };
    // The latest quote is the 2 kg quote above.
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        json!({"weight_kg": 2.0, "price": 7.0, "currency": "EUR"})
    );
    assert_eq!(connection.handler.asked().len(), 2);
    connection.close().await;
}

// ---------------------------------------------------------------- eras

#[tokio::test]
async fn a_legacy_only_server_refuses_discover_and_a_modern_only_server_refuses_initialize() {
    let (client_side, server) = start_server(ShippingOptions::new(Era::Legacy));
    let result = never_asked()
        .serve_with_lifecycle(
            tokio::io::split(client_side),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await;
    assert!(result.is_err());
    drop(result);
    let _ = tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .unwrap();

    // Auto falls back to initialize on the legacy-only server.
    let connection = connect_with(
        ShippingOptions::new(Era::Legacy),
        Era::Auto,
        TestClient::new(happy),
    )
    .await;
    assert_eq!(
        connection.client.peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2025_11_25
    );
    connection.close().await;

    let (client_side, server) = start_server(ShippingOptions::new(Era::Modern));
    let result = never_asked().serve(tokio::io::split(client_side)).await;
    assert!(result.is_err());
    let outcome = tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcome.unwrap_err().code(), "transport_error");
}

// ---------------------------------------------------------------- faults

const ENVELOPE: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{},"url":{}}},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}"#;

fn raw_call(id: u32, extra: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"book_shipment","arguments":{{"weight_kg":2}}{extra},{ENVELOPE}}}}}"#
    ) + "\n"
}

struct Raw {
    lines: tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    write: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    server: JoinHandle<Result<ServeOutcome, m3_fixtures::FixtureError>>,
}

fn raw(options: ShippingOptions) -> Raw {
    let (client_side, server) = start_server(options);
    let (read, write) = tokio::io::split(client_side);
    Raw {
        lines: BufReader::new(read).lines(),
        write,
        server,
    }
}

impl Raw {
    async fn send(&mut self, line: &str) {
        self.write.write_all(line.as_bytes()).await.unwrap();
        if !line.ends_with('\n') {
            self.write.write_all(b"\n").await.unwrap();
        }
    }

    async fn next(&mut self) -> Option<String> {
        tokio::time::timeout(Duration::from_secs(10), self.lines.next_line())
            .await
            .expect("a line within 10 s")
            .unwrap()
    }
}

#[tokio::test]
async fn fault_garbage_writes_a_non_json_line_instead_of_the_response() {
    let mut raw = raw(ShippingOptions::new(Era::Auto).with_fault(m3_fixtures::Fault::Garbage));
    raw.send(&raw_call(1, "")).await;
    let line = raw.next().await.unwrap();
    assert_eq!(line, GARBAGE_LINE);
    assert!(serde_json::from_str::<Value>(&line).is_err());
    raw.write.shutdown().await.unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(10), raw.server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(outcome, ServeOutcome::Closed);
}

#[tokio::test]
async fn fault_oversized_answers_with_a_frame_over_16_mib() {
    let mut raw = raw(ShippingOptions::new(Era::Auto).with_fault(m3_fixtures::Fault::Oversized));
    raw.send(&raw_call(1, "")).await;
    let line = raw.next().await.unwrap();
    assert!(line.len() > 16 * 1024 * 1024);
    assert!(line.len() > OVERSIZED_TEXT_BYTES);
    let frame: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(frame["id"], 1);
}

#[tokio::test]
async fn fault_crash_mid_call_closes_the_output_without_a_response() {
    let mut raw = raw(ShippingOptions::new(Era::Auto).with_fault(m3_fixtures::Fault::CrashMidCall));
    raw.send(&raw_call(1, "")).await;
    assert_eq!(raw.next().await, None);
    let outcome = tokio::time::timeout(Duration::from_secs(10), raw.server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(outcome, ServeOutcome::Crashed);
}

#[tokio::test]
async fn fault_hang_never_answers_but_other_requests_are_served() {
    let mut raw = raw(ShippingOptions::new(Era::Auto).with_fault(m3_fixtures::Fault::Hang));
    raw.send(&raw_call(1, "")).await;
    raw.send(&format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{{{ENVELOPE}}}}}"#
    ))
    .await;
    raw.send("\n").await;
    let line = raw.next().await.unwrap();
    let frame: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(frame["id"], 2, "only tools/list is answered: {line}");
    raw.write.shutdown().await.unwrap();
    // Closing the connection ends the server (and the hanging call) with no response for id 1.
    assert_eq!(raw.next().await, None);
    let outcome = tokio::time::timeout(Duration::from_secs(10), raw.server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(outcome, ServeOutcome::Closed);
}

#[tokio::test]
async fn fault_endless_rounds_asks_again_on_every_retry() {
    let connection = connect_with(
        ShippingOptions::new(Era::Auto).with_fault(m3_fixtures::Fault::EndlessRounds),
        Era::Modern,
        TestClient::new(happy),
    )
    .await;
    let peer = &connection.client;
    let mut round = input_required(peer.call_tool_once(tool("book_shipment")).await.unwrap());
    for _ in 0..5 {
        round = input_required(
            peer.call_tool_once(retry(
                tool("book_shipment"),
                &round,
                &[("shipping_address", accept(address()))],
            ))
            .await
            .unwrap(),
        );
        form_of(&round, "shipping_address");
    }
    // The client's own round limit stops the automatic loop.
    let error = peer.call_tool(tool("book_shipment")).await.unwrap_err();
    assert!(
        matches!(error, ServiceError::InputRequiredRoundsExceeded { .. }),
        "{error:?}"
    );
    connection.close().await;
}

#[tokio::test]
async fn fault_endless_rounds_in_legacy_asks_forever() {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let handler = TestClient::new(move |request| {
        let _ = tx.send(());
        happy(request)
    });
    let connection = connect_with(
        ShippingOptions::new(Era::Auto).with_fault(m3_fixtures::Fault::EndlessRounds),
        Era::Legacy,
        handler,
    )
    .await;
    let peer = connection.client.peer().clone();
    let call = tokio::spawn(async move { peer.call_tool(tool("book_shipment")).await });
    for _ in 0..20 {
        tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("another elicitation within 10 s")
            .unwrap();
    }
    assert!(!call.is_finished());
    call.abort();
    connection.close().await;
}

#[tokio::test]
async fn a_client_without_the_needed_elicitation_mode_gets_32021() {
    let mut raw = raw(ShippingOptions::new(Era::Auto));
    let no_elicitation = ENVELOPE.replace(r#"{"elicitation":{"form":{},"url":{}}}"#, "{}");
    raw.send(&format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"book_shipment","arguments":{{"weight_kg":2}},{no_elicitation}}}}}"#
    )).await;
    let frame: Value = serde_json::from_str(&raw.next().await.unwrap()).unwrap();
    assert_eq!(frame["error"]["code"], -32021, "{frame}");
    // A form-only client cannot get the URL round of book_verified_shipment.
    let form_only = ENVELOPE.replace(r#"{"form":{},"url":{}}"#, "{}");
    raw.send(&format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"book_verified_shipment","arguments":{{"weight_kg":2}},{form_only}}}}}"#
    )).await;
    let frame: Value = serde_json::from_str(&raw.next().await.unwrap()).unwrap();
    let state = frame["result"]["requestState"].as_str().unwrap().to_owned();
    let answer = json!({"shipping_address": {"action": "accept", "content": address()}});
    raw.send(&format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"book_verified_shipment","arguments":{{"weight_kg":2}},"inputResponses":{answer},"requestState":{},{form_only}}}}}"#,
        Value::String(state)
    )).await;
    let frame: Value = serde_json::from_str(&raw.next().await.unwrap()).unwrap();
    assert_eq!(frame["error"]["code"], -32021, "{frame}");
    assert_eq!(
        frame["error"]["data"]["requiredCapabilities"]["elicitation"],
        json!({"url": {}}),
        "{frame}"
    );
}

#[tokio::test]
async fn the_server_lists_its_tools_prompt_and_resource() {
    let connection = connect(Era::Auto, never_asked()).await;
    let peer = connection.client.peer();
    let mut tools: Vec<String> = peer
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect();
    tools.sort();
    assert_eq!(
        tools,
        [
            "book_gift_shipment",
            "book_shipment",
            "book_verified_shipment",
            "quote"
        ]
    );
    let prompts = peer.list_all_prompts().await.unwrap();
    assert_eq!(prompts[0].name, "shipping_label");
    let resources = peer.list_all_resources().await.unwrap();
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, ["shipping://rates", "shipping://quote/latest"]);
    // The rate table asks nothing and says how long it may be cached, by whom.
    let rates = peer
        .read_resource(ReadResourceRequestParams::new("shipping://rates"))
        .await
        .unwrap();
    let rates = serde_json::to_value(&rates).unwrap();
    assert_eq!(rates["ttlMs"], 3_600_000, "{rates}");
    assert_eq!(rates["cacheScope"], "public", "{rates}");
    assert!(rates.to_string().contains("per_kg"), "{rates}");
    connection.close().await;
}
