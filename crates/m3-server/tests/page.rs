//! The page over real HTTP: markup the tests rely on, escaping, the plain
//! form post (coerced, validated, errors next to the field), assets, a pending OAuth
//! authorization on an execution's page.

// Helpers outside #[test] fns fail the test on purpose.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use hyper::{Method, StatusCode};
use m3_store::{
    AppendEvent, EVENT_OAUTH_AUTHORIZATION_FINISHED, EVENT_OAUTH_AUTHORIZATION_REQUIRED,
    NewExecution,
};
use m3_types::{ElicitationRequest, FormElicitationRequest};
use serde_json::json;
use support::{address_form, object, serve, url_request};

const FORM: &str = "application/x-www-form-urlencoded";

#[tokio::test]
async fn the_inbox_renders_every_widget_of_the_subset() {
    let served = serve(|b| b).await;
    let schema = object(
        json!({"type": "object", "required": ["name"], "properties": {
            "name":  {"type": "string", "title": "Name", "minLength": 1, "maxLength": 80, "default": "Ada"},
            "email": {"type": "string", "format": "email"},
            "site":  {"type": "string", "format": "uri"},
            "born":  {"type": "string", "format": "date"},
            "when":  {"type": "string", "format": "date-time"},
            "age":   {"type": "integer", "minimum": 0, "maximum": 150, "default": 30},
            "score": {"type": "number", "minimum": 0, "maximum": 100},
            "agree": {"type": "boolean", "default": true},
            "color": {"type": "string", "enum": ["red", "green"], "default": "green"},
            "hero":  {"type": "string", "oneOf": [{"const": "h1", "title": "Superman"}, {"const": "h2", "title": "Wonder Woman"}]},
            "pet":   {"type": "string", "enum": ["p1", "p2"], "enumNames": ["Cats", "Dogs"]},
            "tools": {"type": "array", "items": {"type": "string", "enum": ["Guitar", "Piano"]}, "default": ["Piano"]},
            "fish":  {"type": "array", "items": {"anyOf": [{"const": "f1", "title": "Tuna"}]}},
            "extra": {"type": "object"}
        }}),
    );
    let round = served
        .round(vec![
            ElicitationRequest::Form(FormElicitationRequest::new(
                "profile",
                "Tell us about you.",
                schema,
            )),
            url_request("https://example.test/verify"),
        ])
        .await;
    let page = served.get("/").await;
    assert_eq!(page.status, StatusCode::OK);
    let csp = page.headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'"));
    // The inbox lists the round as one summary line (with the count in the tab title);
    // its form is on the round's own page (and opens in place on the inbox with the script).
    assert!(page.body.contains("<title>(1) Pending rounds · m3</title>"));
    assert!(page.body.contains(&format!(
        "data-inbox-round=\"{}\" data-execution-id=\"{}\"",
        round.round_id, round.execution_id
    )));
    assert!(
        !page.body.contains("<form class=\"round\""),
        "no form in the list"
    );
    let html = served
        .get(&format!(
            "/executions/{}/rounds/{}",
            round.execution_id, round.round_id
        ))
        .await
        .body;
    assert!(html.contains(&format!(
        "data-round-id=\"{}\" data-execution-id=\"{}\"",
        round.round_id, round.execution_id
    )));
    for needle in [
        "data-request-key=\"profile\" data-mode=\"form\"",
        "data-request-key=\"verification\" data-mode=\"url\"",
        "name=\"profile.name\" type=\"text\" value=\"Ada\" required minlength=\"1\" maxlength=\"80\"",
        "name=\"profile.email\" type=\"email\"",
        "name=\"profile.site\" type=\"url\"",
        "name=\"profile.born\" type=\"date\"",
        "name=\"profile.when\" type=\"datetime-local\"",
        "type=\"number\" inputmode=\"numeric\" step=\"1\" min=\"0\" max=\"150\" value=\"30\"",
        "name=\"profile.agree\" type=\"checkbox\" value=\"true\" checked",
        "<option value=\"green\" selected>green</option>",
        "<option value=\"h2\">Wonder Woman</option>",
        "<option value=\"p1\">Cats</option>",
        "name=\"profile.tools\" type=\"checkbox\" value=\"Piano\" checked",
        "name=\"profile.fish\" type=\"checkbox\" value=\"f1\"",
        "<textarea",
        "name=\"profile.action\" value=\"accept\" checked",
        "name=\"verification.action\" value=\"decline\"",
        "<code>https://example.test/verify</code>",
        "button type=\"submit\"",
    ] {
        assert!(html.contains(needle), "missing {needle}");
    }
    assert!(
        !html.contains("href=\"https://example.test"),
        "the URL is never a link"
    );
    for asset in ["/assets/app.js", "/assets/app.css"] {
        let answer = served.get(asset).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert!(!answer.body.is_empty());
    }
}

#[tokio::test]
async fn every_value_is_escaped() {
    let served = serve(|b| b).await;
    let schema = object(json!({"type": "object", "properties": {
        "choice": {"type": "string", "title": "<img src=x onerror=alert(1)>", "enum": ["a"], "enumNames": ["<script>alert(2)</script>"]}
    }}));
    let round = served
        .round(vec![ElicitationRequest::Form(FormElicitationRequest::new(
            "k\"><script>alert(3)</script>",
            "<script>alert(4)</script><b>bold</b>",
            schema,
        ))])
        .await;
    let round_page = format!(
        "/executions/{}/rounds/{}",
        round.execution_id, round.round_id
    );
    for path in ["/", round_page.as_str()] {
        let html = served.get(path).await.body;
        assert!(!html.contains("<script>alert"), "{html}");
        assert!(!html.contains("<img src=x"));
        assert!(!html.contains("<b>bold"));
        assert!(html.contains("&lt;script&gt;alert(4)&lt;/script&gt;&lt;b&gt;bold&lt;/b&gt;"));
    }
    let execution = served
        .get(&format!("/executions/{}", round.execution_id))
        .await;
    assert_eq!(execution.status, StatusCode::OK);
}

#[tokio::test]
async fn a_plain_post_is_coerced_validated_and_answered() {
    let served = serve(|b| b).await;
    let number = ElicitationRequest::Form(FormElicitationRequest::new(
        "parcel",
        "Parcel details.",
        object(
            json!({"type": "object", "required": ["weight"], "properties": {
                "weight": {"type": "integer", "minimum": 1}, "fragile": {"type": "boolean"}
            }}),
        ),
    ));
    let round = served.round(vec![address_form(), number]).await;
    let path = format!(
        "/executions/{}/rounds/{}",
        round.execution_id, round.round_id
    );
    let headers = [("content-type", FORM)];

    let invalid = "idempotency_key=page-1&shipping_address.action=accept&shipping_address.street=1+Main&shipping_address.city=&parcel.weight=2";
    let refused = served
        .send(Method::POST, &path, &headers, invalid.to_owned())
        .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        refused
            .body
            .contains("data-error-for=\"shipping_address.city\""),
        "{}",
        refused.body
    );
    assert!(refused.body.contains("role=\"alert\""));
    assert!(
        refused.body.contains("value=\"1 Main\""),
        "typed values come back"
    );
    let fragment = served
        .send(
            Method::POST,
            &path,
            &[("content-type", FORM), ("x-m3-fragment", "1")],
            invalid.to_owned(),
        )
        .await;
    assert!(fragment.body.starts_with("<form"), "{}", fragment.body);

    let valid = "idempotency_key=page-1&shipping_address.street=1+Main&shipping_address.city=Pune&parcel.weight=3";
    let done = served
        .send(Method::POST, &path, &headers, valid.to_owned())
        .await;
    assert_eq!(done.status, StatusCode::SEE_OTHER);
    let record = served
        .kit
        .attach(&round.execution_id)
        .await
        .unwrap()
        .round(&round.round_id)
        .await
        .unwrap();
    let responses = record.diagnostics.redacted_responses.unwrap();
    assert_eq!(
        responses["parcel"]["content"],
        json!({"weight": 3, "fragile": false})
    );
    assert_eq!(
        responses["shipping_address"]["content"],
        json!({"street": "1 Main", "city": "Pune"})
    );
    let shown = served.get(&path).await.body;
    assert!(shown.contains("data-round-status=\"response_validated\""));
}

#[tokio::test]
async fn decline_and_url_consent_need_no_content() {
    let served = serve(|b| b).await;
    let round = served
        .round(vec![
            address_form(),
            url_request("https://example.test/verify"),
        ])
        .await;
    let path = format!(
        "/executions/{}/rounds/{}",
        round.execution_id, round.round_id
    );
    let body = "idempotency_key=page-2&shipping_address.action=decline&verification.action=accept";
    let done = served
        .send(
            Method::POST,
            &path,
            &[("content-type", FORM), ("x-m3-fragment", "1")],
            body.to_owned(),
        )
        .await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.body);
    assert!(
        done.body
            .contains("data-round-status=\"response_validated\"")
    );
    let record = served
        .kit
        .attach(&round.execution_id)
        .await
        .unwrap()
        .round(&round.round_id)
        .await
        .unwrap();
    let responses = record.diagnostics.redacted_responses.unwrap();
    assert_eq!(responses["shipping_address"]["action"], "decline");
    assert_eq!(responses["verification"]["action"], "accept");
}

#[tokio::test]
async fn a_url_request_shows_its_full_host_in_punycode_before_consent() {
    let served = serve(|b| b).await;
    // "аpple" with a Cyrillic "а": looks like the Latin name, is another host.
    let lookalike = served
        .round(vec![url_request("https://\u{430}pple.example/verify?x=1")])
        .await;
    let plain = served
        .round(vec![url_request("https://plain.example:8443/verify")])
        .await;
    let mut body = String::new();
    for round in [lookalike, plain] {
        let page = served
            .get(&format!(
                "/executions/{}/rounds/{}",
                round.execution_id, round.round_id
            ))
            .await;
        assert_eq!(page.status, StatusCode::OK);
        body.push_str(&page.body);
    }
    assert!(
        body.contains("data-host=\"xn--pple-43d.example\""),
        "{body}"
    );
    assert!(
        body.contains("(displayed as \u{430}pple.example)"),
        "{body}"
    );
    assert!(body.contains("data-host=\"plain.example\""), "{body}");
}

#[tokio::test]
async fn a_pending_oauth_authorization_is_a_link_on_the_execution_page_until_it_ends() {
    let served = serve(|b| b).await;
    let store = served.kit.store();
    let execution = store
        .create_execution(NewExecution::new(json!({"test": true})))
        .await
        .unwrap();
    let id = execution.execution_id;
    let url = "https://auth.example/authorize?client_id=m3&state=s1&code_challenge=c";
    let required = json!({"server": "crm", "server_url": "https://crm.example/mcp", "url": url});
    store
        .append_event(AppendEvent::new(
            &id,
            EVENT_OAUTH_AUTHORIZATION_REQUIRED,
            required,
        ))
        .await
        .unwrap();
    let page = served.get(&format!("/executions/{id}")).await;
    assert_eq!(page.status, StatusCode::OK);
    let escaped = url.replace('&', "&amp;");
    assert!(
        page.body.contains(&format!(
            "<a class=\"authorization-link\" href=\"{escaped}\" target=\"_blank\" rel=\"noopener noreferrer\">"
        )),
        "{}",
        page.body
    );
    assert!(page.body.contains("data-server=\"crm\""), "{}", page.body);
    assert!(
        page.body.contains("data-host=\"auth.example\""),
        "{}",
        page.body
    );

    let finished = json!({"server": "crm", "url": url, "completed": true});
    store
        .append_event(AppendEvent::new(
            &id,
            EVENT_OAUTH_AUTHORIZATION_FINISHED,
            finished,
        ))
        .await
        .unwrap();
    let page = served.get(&format!("/executions/{id}")).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(!page.body.contains("authorization-link"), "{}", page.body);
    // The timeline still tells both.
    assert!(page.body.contains(EVENT_OAUTH_AUTHORIZATION_FINISHED));
}
