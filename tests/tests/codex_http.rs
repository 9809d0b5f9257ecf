//! The `codex` harness with a Streamable HTTP binding: Codex reaches the shipping
//! fixture's HTTP endpoint through M3's HTTP relay, and the managed round a person
//! answers works as with a stdio binding, in both eras and both tested Codex versions.

use m3_fixtures::{Era, ShippingOptions};
use m3_kit::CodexMcpProtocol;
use m3_tests::codex_support::{CODEX, CODEX_OLD, CodexSetup, Peers, answer_the_booking_round};
use m3_tests::runtime_support::TestResult;
use m3_types::{HttpServer, HumanInput, ServerTrust};

const PEERS: Peers = Peers {
    server: env!("CARGO_BIN_EXE_m3-test-shipping-server"),
    relay: env!("CARGO_BIN_EXE_m3-test-relay"),
};

async fn one_form_round_over_http(version: &str, protocol: CodexMcpProtocol) -> TestResult {
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
    answer_the_booking_round(&handle, protocol).await?;
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
