//! The `codex` harness with a Streamable HTTP binding: Codex reaches the shipping
//! fixture's HTTP endpoint through M3's HTTP relay, and the managed round a person
//! answers works as with a stdio binding, in both eras and both tested Codex versions.

use m3_fixtures::{Era, ShippingOptions};
use m3_kit::CodexMcpProtocol;
use m3_tests::codex_support::{CODEX, CODEX_OLD, CODEX_WAIT, CodexSetup, Peers};
use m3_tests::runtime_support::{
    TestResult, address, completes, final_result, only, pending, resolved_rounds, retried_content,
};
use m3_types::{HttpServer, HumanInput, ServerTrust};

const PEERS: Peers = Peers {
    server: env!("CARGO_BIN_EXE_m3-test-shipping-server"),
    relay: env!("CARGO_BIN_EXE_m3-test-relay"),
};

async fn one_form_round_over_http(version: &str, protocol: CodexMcpProtocol) -> TestResult {
    let legacy = protocol == CodexMcpProtocol::Legacy;
    let server =
        m3_fixtures::serve_shipping_http(ShippingOptions::new(Era::Auto), "127.0.0.1:0".parse()?)
            .await?;
    let binding = HttpServer::new("shipping", server.url()).with_trust(ServerTrust::Loopback);
    let setup = CodexSetup::new(PEERS, "shipping:book_shipment").await?;
    let agent = setup.agent(version, protocol);
    let tools = ["shipping:book_shipment"];
    let handle = setup
        .submit_to(binding, agent, &tools, HumanInput::Managed)
        .await?;
    let round = pending(&handle).await;
    assert_eq!(round.server, "shipping");
    assert_eq!(round.operation_name, "book_shipment");
    let key = only(round.requests.keys().cloned().collect())?;
    assert_eq!(
        key,
        if legacy {
            "elicitation"
        } else {
            "shipping_address"
        }
    );
    let idempotency_key = format!("address-{}", round.round_id);
    handle
        .respond_elicitation(&round.round_id, address(&key, "Pune"), &idempotency_key)
        .await?;
    let trace = completes(&handle, CODEX_WAIT).await?;
    assert_eq!(trace.harness, "codex");
    assert_eq!(trace.final_text.as_deref(), Some("Shipment booked."));
    let calls: Vec<_> = trace.tool_calls().collect();
    assert_eq!(calls.len(), 1, "one logical tool call: {calls:?}");
    let call = calls[0];
    if legacy {
        assert_eq!(call.attempts.len(), 1, "{call:?}");
        let exchange = &call.attempts[0].rounds[0];
        let responses = exchange.responses.as_ref().ok_or("no responses")?;
        let content = responses["elicitation"].content.as_ref();
        assert_eq!(content.ok_or("no content")?["city"], "Pune");
    } else {
        assert_eq!(call.attempts.len(), 2, "{call:?}");
        assert_eq!(retried_content(call, "shipping_address", "city")?, "Pune");
    }
    let (_, is_error) = final_result(call)?;
    assert!(!is_error, "{call:?}");
    resolved_rounds(&handle, 1).await?;
    server.stop().await?;
    setup.temp.close().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_over_http_2026_07_28() -> TestResult {
    one_form_round_over_http(CODEX, CodexMcpProtocol::V2026_07_28).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_over_http_legacy_era() -> TestResult {
    one_form_round_over_http(CODEX, CodexMcpProtocol::Legacy).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_0_156_1_over_http_2026_07_28() -> TestResult {
    one_form_round_over_http(CODEX_OLD, CodexMcpProtocol::V2026_07_28).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_0_156_1_over_http_legacy_era() -> TestResult {
    one_form_round_over_http(CODEX_OLD, CodexMcpProtocol::Legacy).await
}
