//! Answer links in a real headless Chromium: a link a notification would carry opens its
//! round's form on a token-protected `m3 serve` without the token, answers it, and the
//! execution completes; the same link then, a tampered one, an expired one and one signed
//! before a key rotation are refused with 403 and their code, never showing the round.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use m3_kit::notify::links::{self, LinkGrant};
use m3_kit::{AsyncMcpTestKit, SubmitOptions};
use m3_store::RoundRef;
use m3_tests::browser_support::Browser;
use m3_tests::runtime_support::{WAIT, call, completes, pending, shipping};
use m3_tests::store_support::TestDb;
use m3_types::HumanInput;
use tokio_util::sync::CancellationToken;

const SERVER: &str = env!("CARGO_BIN_EXE_m3-test-shipping-server");

/// The refusal code the page shows, or `None` when it shows a form.
async fn refusal(browser: &Browser, url: &str) -> Option<String> {
    browser.client.goto(url).await.unwrap();
    let code = browser
        .eval("var e = document.querySelector('[data-error-code]'); return e === null ? null : e.getAttribute('data-error-code');")
        .await;
    code.as_str().map(str::to_owned)
}

async fn status(url: &str) -> u16 {
    // Plain http: no TLS provider is used, but reqwest wants one installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::get(url).await.unwrap().status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_link_answers_its_round_once_and_bad_links_are_refused() {
    answer_link(TestDb::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_link_answers_its_round_once_and_bad_links_are_refused_on_postgres() {
    answer_link(TestDb::Postgres).await;
}

async fn answer_link(db: TestDb) {
    let dir = tempfile::tempdir().unwrap();
    let kit = AsyncMcpTestKit::builder()
        .database(db.location(dir.path()).unwrap())
        .build()
        .await
        .unwrap();
    let shutdown = CancellationToken::new();
    let router = m3_server::ServerBuilder::new(kit.clone())
        .token("a-token-the-link-user-never-sees")
        .shutdown(shutdown.clone())
        .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
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
    let subscriptions = kit.store().subscription_store().await.unwrap();
    let key = subscriptions.link_key().await.unwrap();
    let now = time::OffsetDateTime::now_utc();
    let reference = LinkGrant::new(
        RoundRef::new(round.execution_id.clone(), round.round_id.clone()),
        "sub_browser",
    );
    let token = links::mint(&key, &reference, now + Duration::from_secs(600));
    let link = format!("{base}/answer/{token}");

    let browser = Browser::start(1000, 1100).await;
    assert_eq!(
        refusal(&browser, &link).await,
        None,
        "the link shows the form"
    );
    let form = format!("form[data-round-id=\"{}\"]", round.round_id);
    browser
        .fill(&form, "shipping_address.street", "1 Link Street")
        .await;
    browser
        .fill(&form, "shipping_address.city", "Pune-link")
        .await;
    browser.click(&format!("{form} button[type=submit]")).await;
    browser
        .wait_until(
            "the answered round",
            "var e = document.querySelector('[data-round-status]'); return e !== null && e.getAttribute('data-round-status') !== 'pending';",
        )
        .await;
    let trace = completes(&handle, WAIT).await.unwrap();
    let operations = serde_json::to_string(&trace.operations).unwrap();
    assert!(operations.contains("Pune-link"), "{operations}");
    // The answer is recorded as the link's subscription, on the page and in the store.
    let answered_by = browser
        .eval("return document.querySelector('.answered-by').getAttribute('data-principal');")
        .await;
    assert_eq!(answered_by, serde_json::json!("link:sub_browser"));
    let details = handle.round(&round.round_id).await.unwrap();
    let actor = details.diagnostics.answered_by.unwrap();
    assert_eq!(
        (actor.principal.as_str(), actor.surface),
        ("link:sub_browser", m3_kit::ActorSurface::Link)
    );

    assert_eq!(refusal(&browser, &link).await.as_deref(), Some("link_used"));
    assert_eq!(status(&link).await, 403);
    let (payload, signature) = token.split_once('.').unwrap();
    let tampered = format!("{base}/answer/{payload}.{}", &signature[2..]);
    assert_eq!(
        refusal(&browser, &tampered).await.as_deref(),
        Some("link_invalid")
    );
    assert_eq!(status(&tampered).await, 403);
    let expired = links::mint(&key, &reference, now - Duration::from_secs(1));
    let expired = format!("{base}/answer/{expired}");
    assert_eq!(
        refusal(&browser, &expired).await.as_deref(),
        Some("link_expired")
    );
    let unknown = links::mint(
        &key,
        &LinkGrant::new(RoundRef::new("no-such", "round"), "sub_browser"),
        now + Duration::from_secs(600),
    );
    assert_eq!(status(&format!("{base}/answer/{unknown}")).await, 403);

    // A second round, then a key rotation: its link stops working.
    let handle = agent
        .submit(
            "Book another.",
            SubmitOptions::new()
                .server(shipping(SERVER, "modern"))
                .tools(["shipping:book_shipment"])
                .human_input(HumanInput::Managed),
        )
        .await
        .unwrap();
    let second = pending(&handle).await;
    let reference = LinkGrant::new(
        RoundRef::new(second.execution_id.clone(), second.round_id.clone()),
        "sub_browser",
    );
    let before = format!(
        "{base}/answer/{}",
        links::mint(&key, &reference, now + Duration::from_secs(600))
    );
    assert_eq!(refusal(&browser, &before).await, None);
    subscriptions.rotate_link_key().await.unwrap();
    assert_eq!(
        refusal(&browser, &before).await.as_deref(),
        Some("link_invalid")
    );
    handle.cancel().await.unwrap();

    shutdown.cancel();
    browser.close().await;
    kit.close().await.unwrap();
}
