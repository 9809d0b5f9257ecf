//! The form card in headless Chromium, on SQLite and PostgreSQL: the fields in the order
//! the server listed them, not by name (the real shipping server's address, street then
//! city, and a stored form far from alphabetical order), and above them what the round
//! decides on: the operation's arguments and the agent's prompt, a secret-named argument
//! redacted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod page_support;

use std::time::Duration;

use m3_store::{CreateRound, NewExecution};
use m3_tests::runtime_support::pending;
use m3_types::{ElicitationRequest, FormElicitationRequest, HumanInput, OperationKind};
use page_support::{Page, object, open_form, open_on};
use serde_json::{Value, json};

const SECRET: &str = "sk-live-do-not-show-4242";

/// The field names of request `key` in the form of `round_id`, in document order (a
/// multi-select's boxes once, the action choice left out).
async fn field_order(page: &Page, round_id: &str, key: &str) -> Vec<String> {
    let form = Page::form(round_id);
    let script = format!(
        "var seen = []; \
         document.querySelectorAll('{form} [name^=\"{key}.\"]').forEach(function (e) {{ \
           var name = e.getAttribute('name').slice({skip}); \
           if (name !== 'action' && seen.indexOf(name) < 0) {{ seen.push(name); }} \
         }}); return seen;",
        skip = key.len() + 1
    );
    match page.browser.eval(&script).await {
        Value::Array(names) => names
            .into_iter()
            .map(|n| n.as_str().unwrap_or_default().to_owned())
            .collect(),
        other => panic!("no field names: {other}"),
    }
}

async fn fields_in_the_servers_order(database: Option<&str>) {
    let page = open_on(database, &[]).await;

    // End to end: the shipping server (MCP over stdio) asks street, then city.
    let handle = page.submit("book_shipment").await;
    let round = pending(&handle).await;
    page.wait_for_form(&round.round_id).await;
    assert_eq!(
        field_order(&page, &round.round_id, "shipping_address").await,
        ["street", "city"]
    );
    page.step("the shipping address: street before city");

    // Every kind of field, listed far from alphabetical order.
    let schema: Value = serde_json::from_str(
        r#"{"type": "object", "required": ["full_name"], "properties": {
            "full_name": {"type": "string", "title": "Full name"},
            "email": {"type": "string", "format": "email"},
            "count": {"type": "integer", "minimum": 1},
            "api_key": {"type": "string", "title": "API key"},
            "size": {"type": "string", "enum": ["s", "l"]},
            "extras": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
            "agree": {"type": "boolean"}
        }}"#,
    )
    .unwrap();
    let expected: Vec<String> = schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        expected[0], "full_name",
        "the schema parsed in its own order"
    );
    let stored = open_form(&page, ("probe", "ask"), "probe", "Who are you?", schema).await;
    assert_eq!(
        field_order(&page, &stored.round_id, "probe").await,
        expected
    );
    page.step("a form of every kind: the server's order");
    // The kit (what the API serializes) holds the same order.
    let details = handle.round(&round.round_id).await.unwrap();
    let shown = serde_json::to_value(&details.round).unwrap();
    let properties = &shown["requests"]["shipping_address"]["requested_schema"]["properties"];
    let names: Vec<&String> = properties.as_object().unwrap().keys().collect();
    assert_eq!(names, ["street", "city"]);
    page.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_renders_fields_in_the_servers_order() {
    fields_in_the_servers_order(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_renders_fields_in_the_servers_order_on_postgres() {
    let url = m3_store_postgres::testing::isolated_url().unwrap();
    fields_in_the_servers_order(Some(&url)).await;
}

/// The context block of round `round_id`: `[prompt, [[name, value], ...]]`.
async fn context_shown(page: &Page, round_id: &str) -> Value {
    let form = Page::form(round_id);
    let script = format!(
        "var c = document.querySelector('{form} section.context'); if (!c) {{ return null; }} \
         var p = c.querySelector('.prompt q'); var rows = []; \
         c.querySelectorAll('[data-argument]').forEach(function (d) {{ \
           rows.push([d.querySelector('dt').textContent, d.querySelector('dd').textContent]); }}); \
         var first = c.compareDocumentPosition(document.querySelector('{form} fieldset.request')); \
         return [p && p.textContent, rows, (first & 4) !== 0];"
    );
    page.browser.eval(&script).await
}

async fn context_above_the_form(database: Option<&str>) {
    let page = open_on(database, &[]).await;
    // End to end: the kit's scripted agent calls book_shipment {weight_kg: 2}.
    let handle = page.submit("book_shipment").await;
    let round = pending(&handle).await;
    page.wait_for_form(&round.round_id).await;
    assert_eq!(
        context_shown(&page, &round.round_id).await,
        json!(["Book the shipment.", [["weight_kg", "2"]], true])
    );
    page.step("the shipment's arguments and prompt above its form");
    let violations = page.browser.axe_violations().await;
    assert!(
        violations.is_empty(),
        "axe-core on a form with its context: {violations:#?}"
    );

    // A round whose arguments carry a secret, and a prompt that repeats it.
    let store = page.kit.store();
    let spec = json!({"prompt": format!("Ship it; the key is {SECRET}."), "browser": true});
    let execution = store
        .create_execution(NewExecution::new(spec).with_human_input(HumanInput::Managed))
        .await
        .unwrap();
    let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
    let form = FormElicitationRequest::new("confirm", "Go ahead?", object(schema));
    let requests =
        m3_types::PendingElicitationRound::request_map([ElicitationRequest::Form(form)]).unwrap();
    let stored = m3_types::PendingElicitationRound::new(
        m3_types::new_id(),
        execution.execution_id,
        "op",
        "shipping",
        OperationKind::Tool,
        "book_shipment",
        requests,
        time::OffsetDateTime::now_utc(),
    )
    .unwrap();
    let arguments = object(json!({"weight_kg": 2, "api_key": SECRET, "to": "Pune"}));
    store
        .managed_input_store()
        .await
        .unwrap()
        .create_round(
            CreateRound::new(stored.clone(), "browser-test", Duration::from_secs(600))
                .with_operation_parameters(arguments),
        )
        .await
        .unwrap();
    page.wait_for_form(&stored.round_id).await;
    assert_eq!(
        context_shown(&page, &stored.round_id).await,
        json!([
            "Ship it; the key is [REDACTED].",
            [
                ["weight_kg", "2"],
                ["api_key", "[REDACTED]"],
                ["to", "Pune"]
            ],
            true
        ])
    );
    let html = page
        .browser
        .eval("return document.documentElement.outerHTML;")
        .await;
    assert!(
        !html.as_str().unwrap().contains(SECRET),
        "the secret is on the page"
    );
    // The round's own page (what the inbox loads a new round from) shows it too.
    page.browser
        .client
        .goto(&format!(
            "{}/executions/{}/rounds/{}",
            page.base, stored.execution_id, stored.round_id
        ))
        .await
        .unwrap();
    assert_eq!(
        context_shown(&page, &stored.round_id).await[1][1],
        json!(["api_key", "[REDACTED]"])
    );
    page.step("a secret-named argument and its echo in the prompt are redacted");
    page.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_form_shows_the_redacted_arguments_and_prompt_above_it() {
    context_above_the_form(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_form_shows_the_redacted_arguments_and_prompt_above_it_on_postgres() {
    let url = m3_store_postgres::testing::isolated_url().unwrap();
    context_above_the_form(Some(&url)).await;
}
