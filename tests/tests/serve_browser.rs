//! The answer page in a real headless Chromium: managed executions run by the
//! kit's worker against the real shipping server pause, their rounds appear in
//! the already-open inbox without a reload, a person answers them (accept,
//! invalid value, decline, URL consent), and a round full of markup runs none
//! of it. Screenshots of the inbox and a form are written for the docs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod page_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use m3_kit::ExecutionTrace;
use m3_tests::browser_support::screenshot_dir;
use m3_tests::runtime_support::{WAIT, completes, pending};
use m3_types::{
    ElicitationRequest, FormElicitationRequest, ManagedInputStatus, UrlElicitationRequest,
};
use page_support::{Page, object, open, open_form, store_round, stored_content};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_answers_rounds_in_the_browser() {
    let page = open().await;

    // Accept, after an invalid value that stays pending.
    let handle = page.submit("book_shipment").await;
    let round = pending(&handle).await;
    page.wait_for_form(&round.round_id).await;
    page.step("round appeared without reload");
    let form = Page::form(&round.round_id);
    page.browser
        .fill(&form, "shipping_address.city", "Pune-browser")
        .await;
    page.browser
        .screenshot(&screenshot_dir().join("form.png"))
        .await;
    page.browser
        .click(&format!("{form} button[type=submit]"))
        .await;
    page.browser
        .wait_until("the error next to street", "return document.querySelector('[data-error-for=\"shipping_address.street\"]') !== null;")
        .await;
    let still = handle.round(&round.round_id).await.unwrap();
    assert_eq!(
        still.diagnostics.status,
        ManagedInputStatus::Pending,
        "an invalid answer changes nothing"
    );
    page.step("invalid value refused next to its field");
    page.browser
        .fill(&form, "shipping_address.street", "1 Browser Street")
        .await;
    page.browser
        .click(&format!("{form} button[type=submit]"))
        .await;
    page.wait_for_status(&round.round_id).await;
    // Recorded as the principal the server authenticated (its token), through the page.
    let shown = page
        .browser
        .eval("var e = document.querySelector('.answered-by'); return e && [e.getAttribute('data-principal'), e.getAttribute('data-surface')];")
        .await;
    assert_eq!(shown, json!(["token", "page"]));
    let stored = handle.round(&round.round_id).await.unwrap();
    let actor = stored.diagnostics.answered_by.unwrap();
    assert_eq!(
        (actor.principal.as_str(), actor.surface),
        ("token", m3_kit::ActorSurface::Page)
    );
    let trace = completes(&handle, WAIT).await.unwrap();
    assert!(
        trace
            .final_text
            .as_deref()
            .unwrap()
            .contains("Shipment booked.")
    );
    let operations = serde_json::to_string(&trace.operations).unwrap();
    assert!(
        operations.contains("Pune-browser"),
        "the server booked the typed city: {operations}"
    );
    page.step("accepted; execution completed with the typed values");

    // Decline.
    let handle = page.submit("book_shipment").await;
    let round = pending(&handle).await;
    page.wait_for_form(&round.round_id).await;
    let form = Page::form(&round.round_id);
    page.browser
        .click(&format!(
            "{form} input[name=\"shipping_address.action\"][value=\"decline\"]"
        ))
        .await;
    page.browser
        .click(&format!("{form} button[type=submit]"))
        .await;
    page.wait_for_status(&round.round_id).await;
    let result = handle.result(Some(WAIT)).await.unwrap();
    let trace = serde_json::to_string(&ExecutionTrace::of(&result).unwrap().operations).unwrap();
    assert!(trace.contains("the address was declined"), "{trace}");
    page.step("declined");

    url_consent(&page).await;
    every_widget(&page).await;
    markup_runs_nothing(&page).await;
    history_view(&page).await;

    page.shutdown.cancel();
    page.step("done");
    page.browser.close().await;
    page.kit.close().await.unwrap();
}

/// The verified shipment: an address form, then a URL round answered with
/// consent; the page never requests the URL.
async fn url_consent(page: &Page) {
    let handle = page.submit("book_verified_shipment").await;
    let first = pending(&handle).await;
    page.wait_for_form(&first.round_id).await;
    let form = Page::form(&first.round_id);
    page.browser
        .fill(&form, "shipping_address.street", "2 Url Road")
        .await;
    page.browser
        .fill(&form, "shipping_address.city", "Delhi")
        .await;
    page.browser
        .click(&format!("{form} button[type=submit]"))
        .await;
    let second = loop {
        let next = pending(&handle).await;
        if next.round_id != first.round_id {
            break next;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let ElicitationRequest::Url(url) = &second.requests["verification"] else {
        panic!("a URL request expected")
    };
    page.wait_for_form(&second.round_id).await;
    let form = Page::form(&second.round_id);
    let shown = page
        .browser
        .eval(&format!(
            "return document.querySelector('{form} [data-mode=\"url\"]').textContent;"
        ))
        .await;
    assert!(
        shown.as_str().unwrap().contains(&url.url),
        "the URL is shown as text"
    );
    page.browser
        .click(&format!("{form} button[type=submit]"))
        .await;
    page.wait_for_status(&second.round_id).await;
    completes(&handle, WAIT).await.unwrap();
    let requested = page
        .browser
        .eval(&format!(
            "var u = {}; return performance.getEntriesByType('resource').some(function (e) {{ return e.name.indexOf(u) === 0; }}) \
             || Array.prototype.some.call(document.querySelectorAll('[href],[src],[action],[data]'), function (e) {{ \
                return ['href','src','action','data'].some(function (a) {{ return (e.getAttribute(a) || '').indexOf(u) === 0; }}); }});",
            json!(url.url)
        ))
        .await;
    assert_eq!(
        requested,
        json!(false),
        "the page never requests or links the URL"
    );
    page.step("URL round answered with consent, URL never requested");
}

/// A round with every widget of the subset, answered with the keyboard and
/// the mouse; the store gets the typed values with their schema types.
async fn every_widget(page: &Page) {
    let schema = json!({"type": "object", "required": ["name", "email"], "properties": {
        "name":  {"type": "string", "title": "Name", "description": "As on your passport.", "minLength": 1, "default": "Ada Lovelace"},
        "email": {"type": "string", "title": "Email", "format": "email"},
        "born":  {"type": "string", "title": "Born", "format": "date"},
        "age":   {"type": "integer", "title": "Age", "minimum": 0, "maximum": 150},
        "agree": {"type": "boolean", "title": "I accept the terms", "default": true},
        "color": {"type": "string", "title": "Colour", "enum": ["red", "green"], "default": "green"},
        "hero":  {"type": "string", "title": "Hero", "oneOf": [{"const": "h1", "title": "Superman"}, {"const": "h2", "title": "Wonder Woman"}]},
        "tools": {"type": "array", "title": "Instruments", "items": {"type": "string", "enum": ["Guitar", "Piano"]}, "default": ["Piano"]}
    }});
    let round = open_form(
        page,
        ("travel", "book_trip"),
        "profile",
        "Tell us about the traveller.",
        schema,
    )
    .await;
    let form = Page::form(&round.round_id);
    page.browser
        .fill(&form, "profile.email", "ada@example.test")
        .await;
    page.browser.fill(&form, "profile.age", "36").await;
    page.browser
        .click(&format!(
            "{form} select[name=\"profile.hero\"] option[value=\"h2\"]"
        ))
        .await;
    page.browser
        .click(&format!(
            "{form} input[name=\"profile.tools\"][value=\"Guitar\"]"
        ))
        .await;
    page.browser
        .screenshot(&screenshot_dir().join("inbox.png"))
        .await;
    page.browser
        .click(&format!("{form} button[type=submit]"))
        .await;
    page.wait_for_status(&round.round_id).await;
    assert_eq!(
        stored_content(page, &round, "profile").await,
        json!({"name": "Ada Lovelace", "email": "ada@example.test", "age": 36, "agree": true,
               "color": "green", "hero": "h2", "tools": ["Guitar", "Piano"]})
    );
    page.step("every widget answered; the store got typed values");
}

/// A round whose message, titles and enum labels are markup (and whose URL
/// request points at a local listener that counts connections): none of it
/// runs, all of it shows as text, the listener is never reached.
async fn markup_runs_nothing(page: &Page) {
    let hits = Arc::new(AtomicUsize::new(0));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let trap = format!("http://{}/consent", listener.local_addr().unwrap());
    let counter = Arc::clone(&hits);
    tokio::spawn(async move {
        while listener.accept().await.is_ok() {
            counter.fetch_add(1, Ordering::SeqCst);
        }
    });
    let round = store_round(
        &page.kit,
        ("<script>window.__xss='server'</script>", "<img src=x onerror=\"window.__xss='op'\">"),
        vec![
            ElicitationRequest::Form(FormElicitationRequest::new(
                "review",
                "<script>window.__xss = 'message'</script><img src=x onerror=\"window.__xss='img'\"> Please review.",
                object(json!({"type": "object", "properties": {
                    "choice": {"type": "string", "title": "<b onmouseover=\"window.__xss='title'\">Choice</b>",
                        "enum": ["a", "b"], "enumNames": ["<script>window.__xss='label'</script>", "<i>b</i>"]},
                    "note": {"type": "string", "description": "<svg onload=\"window.__xss='svg'\"></svg>"}
                }})),
            )),
            ElicitationRequest::Url(UrlElicitationRequest::new("open", "<script>window.__xss='url'</script>", &trap)),
        ],
    )
    .await;
    page.wait_for_form(&round.round_id).await;
    let form = Page::form(&round.round_id);
    page.browser
        .screenshot(&screenshot_dir().join("markup.png"))
        .await;
    assert_eq!(
        page.browser.eval("return typeof window.__xss;").await,
        json!("undefined"),
        "no markup ran"
    );
    let text = page
        .browser
        .eval(&format!(
            "return document.querySelector('{form}').textContent;"
        ))
        .await;
    let text = text.as_str().unwrap();
    assert!(
        text.contains("<script>window.__xss = 'message'</script>"),
        "{text}"
    );
    assert!(text.contains("<b onmouseover="));
    let label = page
        .browser
        .eval(&format!(
            "return document.querySelector('{form} select option[value=\"a\"]').textContent;"
        ))
        .await;
    assert_eq!(label, json!("<script>window.__xss='label'</script>"));
    page.browser
        .click(&format!("{form} button[type=submit]"))
        .await;
    page.wait_for_status(&round.round_id).await;
    assert_eq!(
        page.browser.eval("return typeof window.__xss;").await,
        json!("undefined")
    );
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "the URL was never requested"
    );
    page.step("markup round shown as text, nothing ran, URL never reached");
}

/// The "Answered" view beside the inbox: the rounds answered above, newest first, each
/// with who answered; its filter form narrows the list.
async fn history_view(page: &Page) {
    page.browser
        .click("header.top a[href$=\"/answered\"]")
        .await;
    page.browser
        .wait_until(
            "the history view",
            "return document.querySelector('ol.history') !== null;",
        )
        .await;
    let listed = page
        .browser
        .eval(
            "return Array.from(document.querySelectorAll('li.history-entry')).map(function (e) { \
             var by = e.querySelector('.answered-by'); \
             return [e.getAttribute('data-round-status'), by && by.getAttribute('data-principal')]; });",
        )
        .await;
    let listed = listed.as_array().unwrap();
    assert!(listed.len() >= 2, "{listed:?}");
    assert!(
        listed.iter().all(|entry| entry[1] == json!("token")),
        "every answer here came through the page with the token: {listed:?}"
    );
    let cursors = page
        .browser
        .eval("return Array.from(document.querySelectorAll('li.history-entry')).map(function (e) { return Number(e.getAttribute('data-cursor')); });")
        .await;
    let cursors: Vec<u64> = serde_json::from_value(cursors).unwrap();
    assert!(
        cursors.windows(2).all(|w| w[0] > w[1]),
        "newest first: {cursors:?}"
    );
    page.browser
        .fill("form.filters", "principal", "somebody-else")
        .await;
    page.browser.click("form.filters button[type=submit]").await;
    page.browser
        .wait_until(
            "the filtered history",
            "return document.querySelector('p.empty') !== null;",
        )
        .await;
    page.step("history view lists who answered, newest first, and filters");
}
