//! DNS rebinding against the answer page in a real headless Chromium (issue
//! 27): `evil.example` is mapped to 127.0.0.1 inside the browser (as a
//! rebinding attacker's DNS would do), so a script of the origin
//! `http://evil.example:P` talks to the server of a token-less `m3 serve`
//! as if it were same-origin. The server must refuse it every read and every
//! answer while the real loopback page keeps working.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use m3_kit::{AsyncMcpTestKit, SubmitOptions};
use m3_tests::browser_support::Browser;
use m3_tests::runtime_support::{WAIT, call, completes, pending, shipping};
use m3_types::{HumanInput, ManagedInputStatus};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const SERVER: &str = env!("CARGO_BIN_EXE_m3-test-shipping-server");

/// `fetch` from the page's own origin; resolves to `{status, body}`.
fn fetch(path: &str, post: Option<&str>) -> String {
    let init = match post {
        Some(body) => format!(
            "{{method: 'POST', headers: {{'content-type': 'application/json'}}, body: {}}}",
            serde_json::to_string(body).unwrap()
        ),
        None => "{}".to_owned(),
    };
    format!(
        "return fetch('{path}', {init}).then(r => r.text().then(body => ({{status: r.status, body}}))) \
         .catch(e => ({{status: 0, body: String(e)}}));"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebinding_page_can_neither_read_nor_answer_rounds() {
    let dir = tempfile::tempdir().unwrap();
    let kit = AsyncMcpTestKit::builder()
        .database(dir.path().join("m3.sqlite"))
        .build()
        .await
        .unwrap();
    let shutdown = CancellationToken::new();
    let router = m3_server::ServerBuilder::new(kit.clone())
        .poll_interval(Duration::from_millis(50))
        .shutdown(shutdown.clone())
        .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(m3_server::serve(
        listener,
        router,
        shutdown.clone().cancelled_owned(),
    ));

    let agent = kit.agents([call("book_shipment")]).unwrap().remove(0);
    let options = SubmitOptions::new()
        .server(shipping(SERVER, "modern"))
        .tools(["shipping:book_shipment"])
        .human_input(HumanInput::Managed);
    let handle = agent.submit("Book the shipment.", options).await.unwrap();
    let round = pending(&handle).await;

    let browser = Browser::start_with(
        1000,
        800,
        &["--host-resolver-rules=MAP evil.example 127.0.0.1"],
    )
    .await;
    let evil = format!("http://evil.example:{port}");
    browser.client.goto(&format!("{evil}/")).await.unwrap();
    let shown = browser
        .eval("return document.documentElement.outerHTML;")
        .await;
    let shown = shown.as_str().unwrap();
    assert!(shown.contains("forbidden_host"), "{shown}");
    assert!(
        !shown.contains(&round.round_id),
        "the inbox leaked: {shown}"
    );
    assert_eq!(
        browser.eval("return location.origin;").await,
        json!(evil),
        "the script runs as the attacker's origin"
    );

    let read = browser
        .eval(&fetch("/api/v1/rounds?status=pending", None))
        .await;
    assert_eq!(read["status"], json!(403), "{read}");
    assert!(!read["body"].as_str().unwrap().contains(&round.round_id));

    let answer = json!({
        "responses": {"shipping_address": {"action": "accept", "content": {"street": "1 Evil Street", "city": "Evil"}}},
        "idempotency_key": "evil"
    })
    .to_string();
    let path = format!(
        "/api/v1/executions/{}/rounds/{}/responses",
        round.execution_id, round.round_id
    );
    let posted = browser.eval(&fetch(&path, Some(&answer))).await;
    assert_eq!(posted["status"], json!(403), "{posted}");
    let still = handle.round(&round.round_id).await.unwrap();
    assert_eq!(still.diagnostics.status, ManagedInputStatus::Pending);

    // The loopback page itself still reads and answers.
    browser
        .client
        .goto(&format!("http://127.0.0.1:{port}/"))
        .await
        .unwrap();
    let good = answer.replace("Evil", "Pune").replace("evil", "good");
    let posted: Value = browser.eval(&fetch(&path, Some(&good))).await;
    assert_eq!(posted["status"], json!(200), "{posted}");
    let trace = completes(&handle, WAIT).await.unwrap();
    assert!(
        trace
            .final_text
            .as_deref()
            .unwrap()
            .contains("Shipment booked.")
    );

    browser.close().await;
    shutdown.cancel();
    kit.close().await.unwrap();
}
