//! Forms people can fill without guessing, in headless Chromium: the constraints show as
//! plain-word hints before anything is submitted, a secret-named field is a password input
//! with a working "Show" button, a refused value comes back as a sentence next to its field
//! (linked with `aria-describedby`), and what was typed into the secret is not sent back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod page_support;

use page_support::{Page, open, open_form, open_with, stored_content};
use serde_json::{Value, json};

const SECRET: &str = "sk-live-do-not-echo";

async fn attribute(page: &Page, css: &str, name: &str) -> Value {
    page.browser
        .eval(&format!(
            "var e = document.querySelector('{css}'); return e && e.getAttribute('{name}');"
        ))
        .await
}

async fn text_of(page: &Page, css: &str) -> Value {
    page.browser
        .eval(&format!(
            "var e = document.querySelector('{css}'); return e && e.textContent;"
        ))
        .await
}

/// axe-core's WCAG A/AA violations on the page, none expected.
async fn assert_accessible(page: &Page, what: &str) {
    let violations = page.browser.axe_violations().await;
    let summary: Vec<String> = violations
        .iter()
        .map(|v| {
            let nodes: Vec<String> = v["nodes"]
                .as_array()
                .map(|nodes| {
                    nodes
                        .iter()
                        .map(|n| format!("{} {}", n["target"], n["failureSummary"]))
                        .collect()
                })
                .unwrap_or_default();
            format!("{}: {}: {nodes:#?}", v["id"], v["help"])
        })
        .collect();
    assert!(violations.is_empty(), "axe-core on {what}: {summary:#?}");
    page.step(&format!("axe-core: no violations on {what}"));
}

async fn every_kind_of_field(page: &Page) -> m3_types::PendingElicitationRound {
    let schema = json!({"type": "object", "required": ["api_key", "count"], "properties": {
        "api_key": {"type": "string", "title": "API key"},
        "count": {"type": "integer", "title": "Parcels", "minimum": 1, "maximum": 9},
        "email": {"type": "string", "title": "Email", "format": "email"},
        "when": {"type": "string", "title": "Pick-up", "format": "date-time"},
        "extras": {"type": "array", "title": "Extras", "maxItems": 2,
                   "items": {"type": "string", "enum": ["cheese", "ham", "olives"]}}
    }});
    open_form(
        page,
        ("probe", "ask"),
        "probe",
        "Set up the pick-up.",
        schema,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hints_secrets_and_plain_errors() {
    let page = open().await;
    let round = every_kind_of_field(&page).await;
    assert_accessible(&page, "the inbox with a form of every kind (light)").await;
    page.browser.screenshots_at_widths("form-light").await;
    let form = Page::form(&round.round_id);
    let input = |name: &str| format!("{form} [name=\"probe.{name}\"]");

    // Constraints in plain words before submitting, each linked to its input.
    let count_rules = format!("f-{}-probe-count-rules", round.round_id);
    assert_eq!(
        text_of(&page, &format!("#{count_rules}")).await,
        json!("a whole number from 1 to 9")
    );
    let described = attribute(&page, &input("count"), "aria-describedby").await;
    assert!(
        described
            .as_str()
            .unwrap()
            .split(' ')
            .any(|id| id == count_rules),
        "{described}"
    );
    let when_rules = format!("#f-{}-probe-when-rules", round.round_id);
    assert_eq!(
        text_of(&page, &when_rules).await,
        json!("a date and time, in UTC")
    );
    let extras_rules = format!("#f-{}-probe-extras-rules", round.round_id);
    assert_eq!(
        text_of(&page, &extras_rules).await,
        json!("choose at most 2 options")
    );

    // The secret is typed hidden; "Show" reveals it and says so.
    assert_eq!(
        attribute(&page, &input("api_key"), "type").await,
        json!("password")
    );
    page.browser.fill(&form, "probe.api_key", SECRET).await;
    let reveal = format!("{form} button.reveal");
    page.browser.click(&reveal).await;
    assert_eq!(
        attribute(&page, &input("api_key"), "type").await,
        json!("text")
    );
    assert_eq!(
        attribute(&page, &reveal, "aria-pressed").await,
        json!("true")
    );
    page.browser.click(&reveal).await;
    assert_eq!(
        attribute(&page, &input("api_key"), "type").await,
        json!("password")
    );

    // A value the schema refuses (the browser's own checks off, as for any HTTP client):
    // the answer is a sentence next to the field, and the secret is not sent back.
    page.browser.fill(&form, "probe.count", "12").await;
    page.browser
        .eval(&format!(
            "document.querySelector('{form}').noValidate = true; return null;"
        ))
        .await;
    page.browser
        .click(&format!("{form} button[type=submit]"))
        .await;
    let error_css = format!("{form} p.error[data-error-for=\"probe.count\"]");
    page.browser
        .wait_until(
            "the error next to the field",
            &format!("return document.querySelector('{error_css}') !== null;"),
        )
        .await;
    assert_eq!(text_of(&page, &error_css).await, json!("must be at most 9"));
    let error_id = attribute(&page, &error_css, "id").await;
    let described = attribute(&page, &input("count"), "aria-describedby").await;
    assert!(
        described
            .as_str()
            .unwrap()
            .split(' ')
            .any(|id| Some(id) == error_id.as_str()),
        "{described} {error_id}"
    );
    assert_eq!(
        attribute(&page, &input("count"), "aria-invalid").await,
        json!("true")
    );
    let html = page
        .browser
        .eval("return document.documentElement.outerHTML;")
        .await;
    assert!(
        !html.as_str().unwrap().contains(SECRET),
        "the secret came back in the page"
    );
    assert_accessible(&page, "a form with an error (light)").await;
    page.browser.screenshots_at_widths("form-error-light").await;
    page.step("hints, secret input and plain errors checked");
    page.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_is_accessible_in_dark_mode() {
    let page = open_with(&["--blink-settings=preferredColorScheme=0"]).await;
    assert_eq!(
        page.browser
            .eval("return window.matchMedia('(prefers-color-scheme: dark)').matches;")
            .await,
        json!(true),
        "the browser runs in dark mode"
    );
    every_kind_of_field(&page).await;
    assert_accessible(&page, "the inbox with a form of every kind (dark)").await;
    page.browser.screenshots_at_widths("form-dark").await;
    // The answered view (its filter form, list and empty state) in dark mode too.
    page.browser
        .client
        .goto(&format!("{}/answered", page.base))
        .await
        .unwrap();
    assert_accessible(&page, "the answered rounds (dark)").await;
    page.shutdown.cancel();
}

/// Keyboard only: Tab to each field, type, Tab to Submit, press Enter; the round is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_is_answered_with_the_keyboard_alone() {
    let page = open().await;
    // Fields in alphabetical order, so the tab order is the same whether or not the
    // server's property order is kept.
    let schema = json!({"type": "object", "required": ["city", "street"], "properties": {
        "city": {"type": "string", "title": "City"},
        "street": {"type": "string", "title": "Street"}
    }});
    let round = open_form(
        &page,
        ("shipping", "book_shipment"),
        "address",
        "Enter the delivery address.",
        schema,
    )
    .await;
    let form = Page::form(&round.round_id);
    page.browser
        .eval("document.activeElement.blur(); return null;")
        .await;
    page.browser
        .tab_to(&format!("{form} [name=\"address.city\"]"), 40)
        .await;
    page.browser.type_keys("Pune").await;
    page.browser
        .tab_to(&format!("{form} [name=\"address.street\"]"), 5)
        .await;
    page.browser.type_keys("1 Main Street").await;
    page.browser
        .tab_to(&format!("{form} button[type=submit]"), 10)
        .await;
    page.browser
        .type_keys(&char::from(fantoccini::key::Key::Enter).to_string())
        .await;
    page.wait_for_status(&round.round_id).await;
    assert_eq!(
        stored_content(&page, &round, "address").await,
        json!({"street": "1 Main Street", "city": "Pune"})
    );
    page.step("answered with the keyboard alone");
    page.browser
        .client
        .goto(&format!("{}/answered", page.base))
        .await
        .unwrap();
    assert_accessible(&page, "the answered rounds (light)").await;
    page.shutdown.cancel();
}
