//! Scoped API tokens over real HTTP against a real SQLite store: each scope allows what it
//! says and no more, answers are recorded as the token's name, revocation and expiry take
//! effect at once in the running server, and no secret is ever stored in the clear.

// Helpers outside #[test] fns fail the test on purpose.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use bytes::Bytes;
use hyper::{Method, StatusCode};
use m3_kit::tokens::{NewToken, TokenScope};
use serde_json::{Value, json};
use support::{Answer, Served, address_form, responses_path, serve};

fn answer(key: &str) -> Value {
    json!({
        "responses": {"shipping_address": {"action": "accept", "content": {"street": "1 Main Street", "city": "Pune", "api_key": "sk-live-123"}}},
        "idempotency_key": key
    })
}

async fn as_bearer(
    served: &Served,
    method: Method,
    path: &str,
    secret: &str,
    body: Option<&Value>,
) -> Answer {
    let auth = format!("Bearer {secret}");
    let mut headers = vec![("authorization", auth.as_str())];
    let body = match body {
        Some(body) => {
            headers.push(("content-type", "application/json"));
            Bytes::from(body.to_string())
        }
        None => Bytes::new(),
    };
    served.send(method, path, &headers, body).await
}

async fn make(served: &Served, new: NewToken) -> String {
    let tokens = served.kit.store().token_store().await.unwrap();
    let (_, secret) = tokens.create_token(new).await.unwrap();
    secret.expose().to_owned()
}

#[tokio::test]
async fn each_scope_allows_what_it_says_and_answers_are_recorded_as_the_token() {
    let served = serve(|b| b.token("s3cret-shared-token")).await;
    let reader = make(&served, NewToken::new("reader", TokenScope::Read)).await;
    let alice = make(&served, NewToken::new("alice", TokenScope::Answer)).await;
    let bob = make(&served, NewToken::new("bob", TokenScope::Answer)).await;
    let admin = make(&served, NewToken::new("ops", TokenScope::Admin)).await;

    // read: reads, never answers or administers.
    let round = served.round(vec![address_form()]).await;
    let path = responses_path(&round);
    let listed = as_bearer(&served, Method::GET, "/api/v1/rounds", &reader, None).await;
    assert_eq!(listed.status, StatusCode::OK);
    let refused = as_bearer(&served, Method::POST, &path, &reader, Some(&answer("k1"))).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(refused.json()["error"]["code"], "forbidden_scope");
    let hooks = as_bearer(&served, Method::GET, "/api/v1/webhooks", &alice, None).await;
    assert_eq!(hooks.status, StatusCode::FORBIDDEN);
    assert_eq!(hooks.json()["error"]["code"], "forbidden_scope");
    let hooks = as_bearer(&served, Method::GET, "/api/v1/webhooks", &admin, None).await;
    assert_eq!(hooks.status, StatusCode::OK, "{}", hooks.body);

    // answer: two principals, each recorded as itself.
    let answered = as_bearer(&served, Method::POST, &path, &alice, Some(&answer("k1"))).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.body);
    assert_eq!(
        answered.json()["answered_by"],
        json!({"principal": "alice", "surface": "api"})
    );
    let second = served.round(vec![address_form()]).await;
    let answered = as_bearer(
        &served,
        Method::POST,
        &responses_path(&second),
        &bob,
        Some(&answer("k2")),
    )
    .await;
    assert_eq!(answered.json()["answered_by"]["principal"], "bob");
    let history = as_bearer(
        &served,
        Method::GET,
        "/api/v1/rounds?status=answered&principal=bob",
        &reader,
        None,
    )
    .await
    .json();
    assert_eq!(history["rounds"].as_array().unwrap().len(), 1);
    assert_eq!(history["rounds"][0]["round_id"], second.round_id.as_str());

    // Revocation takes effect at once in the running server.
    let tokens = served.kit.store().token_store().await.unwrap();
    tokens.revoke_token("reader").await.unwrap();
    let revoked = as_bearer(&served, Method::GET, "/api/v1/rounds", &reader, None).await;
    assert_eq!(revoked.status, StatusCode::UNAUTHORIZED);
    assert_eq!(revoked.json()["error"]["code"], "unauthorized");
    let forged = format!("{}x", &alice[..alice.len() - 1]);
    let forged = as_bearer(&served, Method::GET, "/api/v1/rounds", &forged, None).await;
    assert_eq!(forged.status, StatusCode::UNAUTHORIZED);

    // Expiry: on the store's clock, refused with its own code.
    let brief = make(
        &served,
        NewToken::new("brief", TokenScope::Read).expires_after(Duration::from_millis(1)),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let expired = as_bearer(&served, Method::GET, "/api/v1/rounds", &brief, None).await;
    assert_eq!(expired.status, StatusCode::UNAUTHORIZED);
    assert_eq!(expired.json()["error"]["code"], "token_expired");

    // The page logs in with an API token too, and answers as it.
    let login = served.get(&format!("/?token={alice}")).await;
    assert_eq!(login.status, StatusCode::SEE_OTHER);
    let bad_login = served.get("/?token=m3t_nope").await;
    assert_eq!(bad_login.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn failed_authentications_are_limited_per_address() {
    let served = serve(|b| b.token("s3cret-shared-token")).await;
    for attempt in 0..20 {
        let wrong = as_bearer(
            &served,
            Method::GET,
            "/api/v1/rounds",
            &format!("m3t_guess{attempt}"),
            None,
        )
        .await;
        assert_eq!(wrong.status, StatusCode::UNAUTHORIZED, "attempt {attempt}");
    }
    // Past the limit even the right token waits for the window to end.
    let blocked = as_bearer(
        &served,
        Method::GET,
        "/api/v1/rounds",
        "s3cret-shared-token",
        None,
    )
    .await;
    assert_eq!(blocked.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(blocked.json()["error"]["code"], "too_many_failures");
    assert_eq!(served.get("/healthz").await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_trusted_proxy_names_the_user_only_from_its_addresses() {
    let proxy = m3_server::TrustedProxy::new("X-Forwarded-User", ["127.0.0.0/8"]).unwrap();
    let served = serve(|b| b.token("s3cret-shared-token").trust_proxy(proxy)).await;
    let round = served.round(vec![address_form()]).await;
    let body = answer("k1").to_string();
    let answered = served
        .send(
            Method::POST,
            &responses_path(&round),
            &[
                ("x-forwarded-user", "carol@example.com"),
                ("content-type", "application/json"),
            ],
            Bytes::from(body),
        )
        .await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.body);
    assert_eq!(
        answered.json()["answered_by"],
        json!({"principal": "carol@example.com", "surface": "api"})
    );
    // The proxy's users answer; administering needs an admin token.
    let hooks = served
        .send(
            Method::GET,
            "/api/v1/webhooks",
            &[("x-forwarded-user", "carol@example.com")],
            Bytes::new(),
        )
        .await;
    assert_eq!(hooks.status, StatusCode::FORBIDDEN);

    // From an address outside its ranges the header is ignored.
    let elsewhere = m3_server::TrustedProxy::new("X-Forwarded-User", ["10.0.0.0/8"]).unwrap();
    let served = serve(|b| b.token("s3cret-shared-token").trust_proxy(elsewhere)).await;
    let ignored = served
        .send(
            Method::GET,
            "/api/v1/rounds",
            &[("x-forwarded-user", "mallory")],
            Bytes::new(),
        )
        .await;
    assert_eq!(ignored.status, StatusCode::UNAUTHORIZED);
}
