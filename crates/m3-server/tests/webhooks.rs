//! The webhook subscriptions in the JSON API over real HTTP against a real SQLite store:
//! add (with its secret, once), list, show, disable, enable, rotate, remove; refusals with
//! their reasons; the token guards them like the rest of the API.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use bytes::Bytes;
use hyper::{Method, StatusCode};
use serde_json::json;
use support::serve;

#[tokio::test]
async fn subscriptions_are_managed_over_the_api() {
    let served = serve(|b| b).await;
    let added = served
        .post_json(
            "/api/v1/webhooks",
            &json!({"url": "https://hooks.example.com/m3", "events": ["round.pending"], "format": "slack", "description": "on call"}),
        )
        .await;
    assert_eq!(added.status, StatusCode::CREATED);
    let body = added.json();
    let secret = body["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"));
    let id = body["subscription"]["id"].as_str().unwrap().to_owned();
    assert_eq!(body["subscription"]["format"], "slack");

    let listed = served.get("/api/v1/webhooks").await.json();
    assert_eq!(listed["subscriptions"][0]["id"], id.as_str());
    let shown = served.get(&format!("/api/v1/webhooks/{id}")).await;
    assert_eq!(shown.status, StatusCode::OK);
    let text = shown.json().to_string();
    assert!(
        !text.contains(&secret["whsec_".len()..]),
        "the secret was shown again"
    );

    let path = format!("/api/v1/webhooks/{id}/disable");
    let disabled = served.post_json(&path, &json!({})).await.json();
    assert_eq!(disabled["enabled"], false);
    let path = format!("/api/v1/webhooks/{id}/enable");
    assert_eq!(
        served.post_json(&path, &json!({})).await.json()["enabled"],
        true
    );
    let path = format!("/api/v1/webhooks/{id}/rotate-secret");
    let rotated = served
        .post_json(&path, &json!({"keep_previous_seconds": 60}))
        .await
        .json();
    assert_ne!(rotated["secret"].as_str().unwrap(), secret);

    let removed = served
        .send(
            Method::DELETE,
            &format!("/api/v1/webhooks/{id}"),
            &[],
            Bytes::new(),
        )
        .await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT);
    let again = served.get(&format!("/api/v1/webhooks/{id}")).await;
    assert_eq!(again.status, StatusCode::NOT_FOUND);
    assert_eq!(again.json()["error"]["code"], "not_found");
}

#[tokio::test]
async fn bad_subscriptions_are_refused_with_their_reason_and_add_nothing() {
    let served = serve(|b| b).await;
    for (url, reason) in [
        ("ftp://hooks.example.com/x", "webhook_url_scheme"),
        (
            "https://me:pw@hooks.example.com/x",
            "webhook_url_credentials",
        ),
        ("http://169.254.169.254/latest", "webhook_url_loopback"),
    ] {
        let refused = served
            .post_json("/api/v1/webhooks", &json!({"url": url}))
            .await;
        assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{url}");
        let error = &refused.json()["error"];
        assert_eq!(error["code"], "invalid_argument", "{url}");
        assert_eq!(error["details"]["reason"], reason, "{url}");
    }
    let unknown = served
        .post_json(
            "/api/v1/webhooks",
            &json!({"url": "https://h.example.com", "events": ["round.nope"]}),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
    let listed = served.get("/api/v1/webhooks").await.json();
    assert_eq!(listed["subscriptions"], json!([]));
}

#[tokio::test]
async fn the_token_guards_the_webhooks() {
    let served = serve(|b| b.token("s3cret")).await;
    assert_eq!(
        served.get("/api/v1/webhooks").await.status,
        StatusCode::UNAUTHORIZED
    );
    let right = served
        .send(
            Method::GET,
            "/api/v1/webhooks",
            &[("authorization", "Bearer s3cret")],
            Bytes::new(),
        )
        .await;
    assert_eq!(right.status, StatusCode::OK);
}
