//! The guard in front of every route, over real HTTP against a real SQLite
//! store: the `Host` rule against DNS rebinding, origins compared with their
//! scheme, the bearer scheme in any case, the login link returning to its own
//! address, and a form post that is not UTF-8 (issue 27).

// Helpers outside #[test] fns fail the test on purpose.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use bytes::Bytes;
use hyper::{Method, StatusCode};
use serde_json::json;
use support::{Served, address_form, responses_path, serve};

const TOKEN: &str = "guard-test-token-0123";

fn answer() -> String {
    json!({
        "responses": {"shipping_address": {"action": "accept", "content": {"street": "1 Main Street", "city": "Pune"}}},
        "idempotency_key": "guard-1"
    })
    .to_string()
}

async fn status_of_round(
    served: &Served,
    execution: &str,
    round: &str,
    auth: &[(&str, &str)],
) -> String {
    let path = format!("/api/v1/executions/{execution}/rounds/{round}");
    let answer = served.send(Method::GET, &path, auth, Bytes::new()).await;
    answer.json()["status"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn without_a_token_only_loopback_and_allowed_hosts_are_served() {
    let served = serve(|b| b.allowed_host("m3.test".parse().unwrap())).await;
    let round = served.round(vec![address_form()]).await;
    let port = served.addr.port();
    let evil = format!("evil.example:{port}");
    let evil_origin = format!("http://{evil}");

    for path in ["/api/v1/rounds?status=pending", "/", "/healthz"] {
        let refused = served
            .send(Method::GET, path, &[("host", evil.as_str())], Bytes::new())
            .await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{path}");
        assert!(
            refused.body.contains("forbidden_host"),
            "{path}: {}",
            refused.body
        );
        assert!(
            !refused.body.contains(&round.round_id),
            "{path} leaks the round"
        );
    }
    let api = served
        .send(
            Method::GET,
            "/api/v1/rounds",
            &[("host", evil.as_str())],
            Bytes::new(),
        )
        .await;
    assert_eq!(api.json()["error"]["code"], "forbidden_host");

    let posted = served
        .send(
            Method::POST,
            &responses_path(&round),
            &[
                ("host", evil.as_str()),
                ("origin", evil_origin.as_str()),
                ("content-type", "application/json"),
            ],
            answer(),
        )
        .await;
    assert_eq!(posted.status, StatusCode::FORBIDDEN, "{}", posted.body);
    assert_eq!(
        status_of_round(&served, &round.execution_id, &round.round_id, &[]).await,
        "pending",
        "a rebinding page commits nothing"
    );

    for host in [
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        format!("m3.test:{port}"),
        "m3.test".to_owned(),
    ] {
        let served_ok = served
            .send(
                Method::GET,
                "/api/v1/rounds",
                &[("host", host.as_str())],
                Bytes::new(),
            )
            .await;
        assert_eq!(served_ok.status, StatusCode::OK, "{host}");
    }
}

#[tokio::test]
async fn an_origin_must_match_in_scheme_too() {
    let served = serve(|b| b).await;
    let round = served.round(vec![address_form()]).await;
    let https = format!("https://{}", served.addr);
    let refused = served
        .send(
            Method::POST,
            &responses_path(&round),
            &[
                ("origin", https.as_str()),
                ("content-type", "application/json"),
            ],
            answer(),
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(refused.json()["error"]["code"], "forbidden_origin");
    assert_eq!(
        status_of_round(&served, &round.execution_id, &round.round_id, &[]).await,
        "pending"
    );
}

#[tokio::test]
async fn with_a_token_any_host_may_ask_and_the_bearer_scheme_has_no_case() {
    let served = serve(|b| b.token(TOKEN)).await;
    let round = served.round(vec![address_form()]).await;
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let auth = format!("{scheme} {TOKEN}");
        let answer = served
            .send(
                Method::GET,
                "/api/v1/rounds",
                &[("authorization", auth.as_str()), ("host", "m3.example.com")],
                Bytes::new(),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{scheme}: {}", answer.body);
    }
    let auth = format!("bearer {TOKEN}");
    let posted = served
        .send(
            Method::POST,
            &responses_path(&round),
            &[
                ("authorization", auth.as_str()),
                ("content-type", "application/json"),
            ],
            answer(),
        )
        .await;
    assert_eq!(posted.status, StatusCode::OK, "{}", posted.body);
}

#[tokio::test]
async fn a_login_link_returns_to_its_own_address() {
    let served = serve(|b| b.token(TOKEN)).await;
    let round = served.round(vec![address_form()]).await;
    let page = format!("/executions/{}", round.execution_id);
    let login = served
        .get(&format!("{page}?view=rounds&token={TOKEN}&x=1%202"))
        .await;
    assert_eq!(login.status, StatusCode::SEE_OTHER);
    assert_eq!(
        login.headers["location"],
        format!("{page}?view=rounds&x=1%202")
    );
    assert!(login.headers.contains_key("set-cookie"));
    let bare = served.get(&format!("{page}?token={TOKEN}")).await;
    assert_eq!(bare.headers["location"], page.as_str());
    let sneaky = served.get(&format!("//evil.example/?token={TOKEN}")).await;
    assert_eq!(sneaky.headers["location"], "/evil.example/");
}

#[tokio::test]
async fn a_form_post_that_is_not_utf8_is_refused_and_commits_nothing() {
    let served = serve(|b| b).await;
    let round = served.round(vec![address_form()]).await;
    let path = format!(
        "/executions/{}/rounds/{}",
        round.execution_id, round.round_id
    );
    let headers = [("content-type", "application/x-www-form-urlencoded")];
    for body in [
        &b"idempotency_key=k&shipping_address.street=1+Main+%FF&shipping_address.city=Pune"[..],
        &b"idempotency_key=k&shipping_address.street=1 Main \xff&shipping_address.city=Pune"[..],
        &b"idempotency_key=k&shipping_address.street=1+Main&shipping_address.city%C3=Pune"[..],
    ] {
        let refused = served
            .send(Method::POST, &path, &headers, Bytes::copy_from_slice(body))
            .await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
        assert!(refused.body.contains("bad_request"), "{}", refused.body);
        assert_eq!(
            status_of_round(&served, &round.execution_id, &round.round_id, &[]).await,
            "pending"
        );
    }
    let accepted = served
        .send(
            Method::POST,
            &path,
            &headers,
            "idempotency_key=k&shipping_address.street=1+Main+%E2%82%AC&shipping_address.city=Pune"
                .to_owned(),
        )
        .await;
    assert_eq!(accepted.status, StatusCode::SEE_OTHER, "{}", accepted.body);
}
