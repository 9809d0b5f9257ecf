//! Answering several rounds at once on the inbox, in headless Chromium, on SQLite and on
//! PostgreSQL: rounds are ticked (one with the keyboard), declined with one plain form
//! post, and the summary lists each round's outcome, one of them a round answered
//! elsewhere meanwhile (not answered, with its code); the store holds the declines as the
//! page's answers and leaves the other rounds pending. Deadlines show the time left on the
//! inbox and on the round's page, kept current by the script, and "deadline passed" once
//! gone. axe-core finds nothing on the inbox with its checkboxes or on the summary.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod page_support;

use std::time::Duration;

use m3_store::CreateRound;
use m3_types::{ElicitationRequest, FormElicitationRequest, ManagedInputStatus, ResponseMap};
use page_support::{Page, object, open_on, store_round};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selected_rounds_are_declined_at_once_on_sqlite() {
    selected_rounds_are_declined_at_once(None, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selected_rounds_are_declined_at_once_on_postgres() {
    let url = m3_store_postgres::testing::isolated_url().unwrap();
    selected_rounds_are_declined_at_once(Some(&url), false).await;
}

fn address() -> ElicitationRequest {
    let schema = json!({"type": "object", "required": ["street"],
        "properties": {"street": {"type": "string", "title": "Street"}}});
    ElicitationRequest::Form(FormElicitationRequest::new(
        "shipping_address",
        "Where to?",
        object(schema),
    ))
}

/// A pending round of `operation` whose deadline is `from_now` away (negative: passed).
/// Returns the execution's and the round's ids.
async fn round_with_deadline(
    page: &Page,
    operation: &str,
    from_now: time::Duration,
) -> (String, String) {
    let store = page.kit.store();
    let execution = store
        .create_execution(
            m3_store::NewExecution::new(json!({"bulk": true}))
                .with_human_input(m3_types::HumanInput::Managed),
        )
        .await
        .unwrap();
    let now = time::OffsetDateTime::now_utc();
    let round = m3_types::PendingElicitationRound {
        round_id: m3_types::new_id(),
        execution_id: execution.execution_id,
        logical_operation_id: "op".into(),
        server: "shipping".into(),
        operation_kind: m3_types::OperationKind::Tool,
        operation_name: operation.into(),
        request_state: None,
        requests: [("shipping_address".to_owned(), address())].into(),
        created_at: now,
        deadline: Some(now + from_now),
    };
    let managed = store.managed_input_store().await.unwrap();
    let request = CreateRound::new(round.clone(), "browser-test", Duration::from_secs(600));
    managed.create_round(request).await.unwrap();
    (round.execution_id, round.round_id)
}

async fn eval(page: &Page, script: &str) -> Value {
    page.browser.eval(script).await
}

async fn assert_accessible(page: &Page, what: &str) {
    let violations = page.browser.axe_violations().await;
    let summary: Vec<String> = violations
        .iter()
        .map(|v| format!("{}: {}: {}", v["id"], v["help"], v["nodes"]))
        .collect();
    assert!(violations.is_empty(), "axe-core on {what}: {summary:#?}");
    page.step(&format!("axe-core: 0 violations on {what}"));
}

fn checkbox(round_id: &str) -> String {
    format!("{} input.select", Page::line(round_id))
}

/// The scenario on `database` (SQLite without one); `pictures`: write the summary's
/// screenshots (once, from the SQLite run).
async fn selected_rounds_are_declined_at_once(database: Option<&str>, pictures: bool) {
    let page = open_on(database, &[]).await;
    let mut rounds = Vec::new();
    for _ in 0..4 {
        rounds.push(store_round(&page.kit, ("shipping", "book_shipment"), vec![address()]).await);
    }
    let (soon_execution, soon) =
        round_with_deadline(&page, "book_express", time::Duration::seconds(750)).await;
    let (_, gone) = round_with_deadline(&page, "book_late", time::Duration::seconds(-60)).await;
    countdown_on_the_round_page(&page, &soon_execution, &soon).await;
    page.browser
        .client
        .goto(&format!("{}/", page.base))
        .await
        .unwrap();
    countdowns_on_the_inbox(&page, &soon, &gone).await;
    assert_accessible(&page, "the inbox with checkboxes and the bulk form").await;

    // Tick three rounds with the mouse and one with the keyboard (Tab, then Space).
    for round in &rounds[..3] {
        page.browser.click(&checkbox(&round.round_id)).await;
    }
    page.browser
        .eval("document.activeElement.blur(); return null;")
        .await;
    page.browser.tab_to(&checkbox(&soon), 40).await;
    page.browser.type_keys(" ").await;
    let ticked = eval(
        &page,
        "return document.querySelectorAll('input.select:checked').length;",
    )
    .await;
    assert_eq!(ticked, json!(4));

    // Round 2 is answered elsewhere before the form is sent: it cannot take the decline.
    let elsewhere = &rounds[2];
    let mut responses = ResponseMap::new();
    responses.insert(
        "shipping_address".into(),
        m3_types::ElicitationResponse::accept(object(json!({"street": "1 Other Way"}))),
    );
    page.kit
        .respond_round(
            &elsewhere.execution_id,
            &elsewhere.round_id,
            responses,
            "elsewhere",
        )
        .await
        .unwrap();

    // Decline is the default answer; the submit button is reached with the keyboard.
    page.browser
        .tab_to("form#answer-selected button[type=submit]", 40)
        .await;
    page.browser
        .type_keys(&char::from(fantoccini::key::Key::Enter).to_string())
        .await;
    page.browser
        .wait_until(
            "the summary",
            "return document.querySelector('ol.bulk-results') !== null;",
        )
        .await;
    summary_lists_each_round(&page, &rounds, &soon).await;
    assert_accessible(&page, "the bulk answer's summary").await;
    if pictures {
        page.browser.screenshots_at_widths("bulk-summary").await;
    }

    store_holds_the_declines(&page, &rounds, &gone).await;
    page.shutdown.cancel();
}

/// The store: the declines from the page (as `token` via `page`, each under its own key),
/// the round answered elsewhere kept its answer, the rounds not ticked are pending.
async fn store_holds_the_declines(
    page: &Page,
    rounds: &[m3_types::PendingElicitationRound],
    gone: &str,
) {
    let elsewhere = &rounds[2];
    // The store: three declines from the page, the round answered elsewhere kept its
    // answer, the rounds not ticked are pending.
    for (round_id, execution_id) in [
        (&rounds[0].round_id, &rounds[0].execution_id),
        (&rounds[1].round_id, &rounds[1].execution_id),
    ] {
        let details = page
            .kit
            .attach(execution_id)
            .await
            .unwrap()
            .round(round_id)
            .await
            .unwrap();
        let d = details.diagnostics;
        assert_eq!(d.status, ManagedInputStatus::ResponseValidated);
        assert_eq!(
            d.redacted_responses.unwrap()["shipping_address"]["action"],
            "decline"
        );
        let actor = d.answered_by.unwrap();
        assert_eq!(
            (actor.principal.as_str(), actor.surface.as_str()),
            ("token", "page")
        );
        assert!(
            d.response_idempotency_key
                .unwrap()
                .ends_with(&format!("-{round_id}")),
            "each round under its own key"
        );
    }
    let kept = page
        .kit
        .attach(&elsewhere.execution_id)
        .await
        .unwrap()
        .round(&elsewhere.round_id)
        .await
        .unwrap();
    assert_eq!(
        kept.diagnostics.response_idempotency_key.as_deref(),
        Some("elsewhere")
    );
    let pending: Vec<String> = page
        .kit
        .pending_rounds_in_context()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.round.round_id)
        .collect();
    let mut expected = vec![rounds[3].round_id.clone(), gone.to_owned()];
    expected.sort();
    let mut pending = pending;
    pending.sort();
    assert_eq!(pending, expected, "only the rounds not ticked are pending");
}

/// The round's own page shows its deadline's countdown too.
async fn countdown_on_the_round_page(page: &Page, execution_id: &str, round_id: &str) {
    page.browser
        .client
        .goto(&format!(
            "{}/executions/{execution_id}/rounds/{round_id}",
            page.base
        ))
        .await
        .unwrap();
    let shown = eval(
        page,
        &format!(
            "return document.querySelector('{} .meta .countdown').textContent;",
            Page::form(round_id)
        ),
    )
    .await;
    assert!(
        ["12 min left", "11 min left"].contains(&shown.as_str().unwrap()),
        "{shown}"
    );
    assert_accessible(page, "a round's page with a countdown").await;
}

/// The countdown texts on the inbox, and the script keeping them current.
async fn countdowns_on_the_inbox(page: &Page, soon: &str, gone: &str) {
    let text = |round: &str| format!("{} .countdown", Page::line(round));
    let shown = eval(
        page,
        &format!(
            "var s = document.querySelector('{}'), g = document.querySelector('{}'); \
             return [s.textContent, s.getAttribute('data-passed'), g.textContent, g.getAttribute('data-passed')];",
            text(soon),
            text(gone)
        ),
    )
    .await;
    let left = shown[0].as_str().unwrap();
    assert!(["12 min left", "11 min left"].contains(&left), "{shown}");
    assert_eq!(shown[1], "false");
    assert_eq!(shown[2], "deadline passed");
    assert_eq!(shown[3], "true");
    // The script rewrites the text every second.
    eval(
        page,
        &format!(
            "document.querySelector('{}').textContent = 'stale'; return null;",
            text(soon)
        ),
    )
    .await;
    page.browser
        .wait_until(
            "the countdown to tick",
            &format!(
                "return / min left$/.test(document.querySelector('{}').textContent);",
                text(soon)
            ),
        )
        .await;
    page.step("countdowns on the inbox");
}

/// The summary: counts, then each ticked round with its outcome in the order ticked.
async fn summary_lists_each_round(
    page: &Page,
    rounds: &[m3_types::PendingElicitationRound],
    soon: &str,
) {
    let counts = eval(
        page,
        "var c = document.getElementById('bulk-counts'); \
         return [c.getAttribute('data-answered'), c.getAttribute('data-failed'), document.title];",
    )
    .await;
    assert_eq!(counts, json!(["3", "1", "Answered 3 of 4 rounds · m3"]));
    let lines = eval(
        page,
        "return Array.from(document.querySelectorAll('ol.bulk-results li')).map(function (l) { \
         var code = l.querySelector('[data-error-code]'); \
         return [l.getAttribute('data-round-id'), l.getAttribute('data-outcome'), \
                 code ? code.getAttribute('data-error-code') : null]; });",
    )
    .await;
    let lines: Vec<(String, String, Option<String>)> = serde_json::from_value(lines).unwrap();
    let by_round = |id: &str| lines.iter().find(|l| l.0 == id).unwrap().clone();
    assert_eq!(lines.len(), 4, "{lines:?}");
    for id in [&rounds[0].round_id, &rounds[1].round_id, &soon.to_owned()] {
        assert_eq!(by_round(id).1, "committed", "{lines:?}");
    }
    let refused = by_round(&rounds[2].round_id);
    assert_eq!(refused.1, "failed", "{lines:?}");
    assert!(
        matches!(
            refused.2.as_deref(),
            Some("managed_input_conflict" | "managed_input_state")
        ),
        "{lines:?}"
    );
    page.step("the summary lists each round");
}
