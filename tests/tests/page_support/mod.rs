//! The answer page in headless Chromium, shared by the browser tests: a kit on a fresh
//! SQLite store, `m3 serve`'s router on a loopback port, a browser on its inbox, and
//! rounds stored directly.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use m3_kit::{AsyncExecutionHandle, AsyncMcpTestKit, SubmitOptions};
use m3_store::{CreateRound, NewExecution};
use m3_tests::browser_support::Browser;
use m3_tests::runtime_support::{call, shipping};
use m3_types::{ElicitationRequest, HumanInput, OperationKind, PendingElicitationRound};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub const SERVER: &str = env!("CARGO_BIN_EXE_m3-test-shipping-server");
pub const TOKEN: &str = "browser-test-token";

pub struct Page {
    pub kit: AsyncMcpTestKit,
    pub base: String,
    pub browser: Browser,
    pub shutdown: CancellationToken,
    started: Instant,
    _dir: tempfile::TempDir,
}

impl Page {
    pub fn step(&self, what: &str) {
        eprintln!(
            "[browser {:>6.2} s] {what}",
            self.started.elapsed().as_secs_f64()
        );
    }

    pub async fn submit(&self, tool: &str) -> AsyncExecutionHandle {
        let agent = self.kit.agents([call(tool)]).unwrap().remove(0);
        let options = SubmitOptions::new()
            .server(shipping(SERVER, "modern"))
            .tools([format!("shipping:{tool}")])
            .human_input(HumanInput::Managed);
        agent.submit("Book the shipment.", options).await.unwrap()
    }

    pub fn form(round_id: &str) -> String {
        format!("form[data-round-id=\"{round_id}\"]")
    }

    /// The summary line of round `round_id` in the inbox list.
    pub fn line(round_id: &str) -> String {
        format!("li[data-inbox-round=\"{round_id}\"]")
    }

    /// Waits for round `round_id` to appear in the open inbox's list (no reload), then
    /// selects it there so its form opens below its line.
    pub async fn wait_for_form(&self, round_id: &str) {
        let line = Self::line(round_id);
        self.browser
            .wait_until(
                &format!("round {round_id} in the inbox"),
                &format!("return document.querySelector('{line}') !== null;"),
            )
            .await;
        let css = Self::form(round_id);
        self.browser.click(&format!("{line} a.open")).await;
        self.browser
            .wait_until(
                &format!("the form of round {round_id}"),
                &format!("return document.querySelector('{css}') !== null;"),
            )
            .await;
        assert_eq!(
            self.browser.eval("return window.__m3_loaded_once;").await,
            json!(true),
            "the page was not reloaded"
        );
    }

    pub async fn wait_for_status(&self, round_id: &str) {
        let script = format!(
            "var e = document.querySelector('[data-round-id=\"{round_id}\"]'); \
             return e !== null && e.getAttribute('data-round-status') !== 'pending';"
        );
        self.browser
            .wait_until("the answered status", &script)
            .await;
    }
}

pub async fn open() -> Page {
    open_with(&[]).await
}

/// [`open`] with extra Chromium arguments (for example a dark colour scheme).
pub async fn open_with(extra_args: &[&str]) -> Page {
    open_on(None, extra_args).await
}

/// [`open_with`] on the store at `database` (a `postgres://` URL, for example) instead of
/// a fresh SQLite file.
pub async fn open_on(database: Option<&str>, extra_args: &[&str]) -> Page {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let sqlite = dir.path().join("m3.sqlite");
    let kit = AsyncMcpTestKit::builder()
        .database(database.map_or(sqlite, std::path::PathBuf::from))
        .build()
        .await
        .unwrap();
    let shutdown = CancellationToken::new();
    let router = m3_server::ServerBuilder::new(kit.clone())
        .token(TOKEN)
        .poll_interval(Duration::from_millis(50))
        .shutdown(shutdown.clone())
        .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(m3_server::serve(
        listener,
        router,
        shutdown.clone().cancelled_owned(),
    ));
    let browser = Browser::start_with(1000, 1100, extra_args).await;
    let page = Page {
        kit,
        base,
        browser,
        shutdown,
        started,
        _dir: dir,
    };
    page.step("browser started");
    page.browser
        .client
        .goto(&format!("{}/?token={TOKEN}", page.base))
        .await
        .unwrap();
    let url = page.browser.client.current_url().await.unwrap();
    assert_eq!(
        url.as_str(),
        format!("{}/", page.base),
        "the token leaves the address"
    );
    page.browser
        .eval("window.__m3_loaded_once = true; return null;")
        .await;
    page.step("inbox open");
    page
}

pub fn object(value: Value) -> serde_json::Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    }
}

pub async fn store_round(
    kit: &AsyncMcpTestKit,
    (server, operation): (&str, &str),
    requests: Vec<ElicitationRequest>,
) -> PendingElicitationRound {
    let store = kit.store();
    let execution = store
        .create_execution(
            NewExecution::new(json!({"browser": true})).with_human_input(HumanInput::Managed),
        )
        .await
        .unwrap();
    let round = PendingElicitationRound {
        round_id: m3_types::new_id(),
        execution_id: execution.execution_id,
        logical_operation_id: "op".into(),
        server: server.into(),
        operation_kind: OperationKind::Tool,
        operation_name: operation.into(),
        request_state: None,
        requests: requests
            .into_iter()
            .map(|r| (r.request_key().to_owned(), r))
            .collect::<BTreeMap<_, _>>(),
        created_at: time::OffsetDateTime::now_utc(),
        deadline: None,
    };
    let managed = store.managed_input_store().await.unwrap();
    managed
        .create_round(CreateRound::new(
            round.clone(),
            "browser-test",
            Duration::from_secs(600),
        ))
        .await
        .unwrap();
    round
}

/// Stores a round with one form request `key` (`message`, `schema`) and waits until the
/// open inbox shows it.
pub async fn open_form(
    page: &Page,
    origin: (&str, &str),
    key: &str,
    message: &str,
    schema: Value,
) -> PendingElicitationRound {
    let request = m3_types::FormElicitationRequest::new(key, message, object(schema));
    let round = store_round(&page.kit, origin, vec![ElicitationRequest::Form(request)]).await;
    page.wait_for_form(&round.round_id).await;
    round
}

/// The answer content the store holds for request `key` of `round` (redacted projection).
pub async fn stored_content(page: &Page, round: &PendingElicitationRound, key: &str) -> Value {
    let details = page
        .kit
        .attach(&round.execution_id)
        .await
        .unwrap()
        .round(&round.round_id)
        .await
        .unwrap();
    details.diagnostics.redacted_responses.unwrap()[key]["content"].clone()
}
