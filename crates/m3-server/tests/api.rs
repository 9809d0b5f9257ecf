//! The JSON API over real HTTP against a real SQLite store: every route and
//! status code, replay and conflict, auth on and off, foreign origins, the
//! body limit, the redacted projection.

// Helpers outside #[test] fns fail the test on purpose.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use bytes::Bytes;
use hyper::{Method, StatusCode};
use serde_json::{Value, json};
use support::{address_form, responses_path, serve, url_request};

fn answer(street: &str, key: &str) -> Value {
    json!({
        "responses": {"shipping_address": {"action": "accept", "content": {"street": street, "city": "Pune", "api_key": "sk-live-123"}}},
        "idempotency_key": key
    })
}

#[tokio::test]
async fn reads_list_executions_rounds_and_the_inbox() {
    let served = serve(|b| b).await;
    assert_eq!(served.get("/healthz").await.json(), json!({"status": "ok"}));
    let first = served.round(vec![address_form()]).await;
    let second = served
        .round(vec![url_request("https://example.test/verify")])
        .await;

    let executions = served.get("/api/v1/executions").await;
    assert_eq!(executions.status, StatusCode::OK);
    assert_eq!(executions.json().as_array().unwrap().len(), 2);
    let limited = served
        .get("/api/v1/executions?lifecycle=created&limit=1")
        .await;
    assert_eq!(limited.json().as_array().unwrap().len(), 1);
    assert_eq!(
        served
            .get("/api/v1/executions?lifecycle=sleeping")
            .await
            .status,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        served.get("/api/v1/executions?limit=many").await.status,
        StatusCode::BAD_REQUEST
    );

    let one = served
        .get(&format!("/api/v1/executions/{}", first.execution_id))
        .await;
    assert_eq!(one.json()["execution_id"], json!(first.execution_id));
    let missing = served.get("/api/v1/executions/nope").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(missing.json()["error"]["code"].is_string());

    let inbox = served.get("/api/v1/rounds?status=pending").await.json();
    let ids: Vec<&str> = inbox
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["round_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [first.round_id.as_str(), second.round_id.as_str()],
        "oldest first"
    );
    // A page of the inbox: filtered, searched, sorted and limited, with the total and
    // the offset of the next page.
    let page = served
        .get("/api/v1/rounds?status=pending&sort=newest&limit=1")
        .await
        .json();
    assert_eq!(page["total"], json!(2));
    assert_eq!(page["next_offset"], json!(1));
    assert_eq!(page["rounds"][0]["round_id"], json!(second.round_id));
    let last = served.get("/api/v1/rounds?offset=1&limit=1").await.json();
    assert_eq!(last["rounds"][0]["round_id"], json!(first.round_id));
    assert_eq!(last["next_offset"], Value::Null);
    let searched = served.get("/api/v1/rounds?q=BOOK_ship").await.json();
    assert_eq!(searched["total"], json!(2));
    let none = served.get("/api/v1/rounds?operation=nothing").await.json();
    assert_eq!(none, json!({"rounds": [], "total": 0, "next_offset": null}));
    for bad in ["sort=sideways", "limit=0", "limit=501"] {
        let refused = served.get(&format!("/api/v1/rounds?{bad}")).await;
        assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
    }
    assert_eq!(
        served.get("/api/v1/rounds?offset=-1").await.status,
        StatusCode::BAD_REQUEST
    );
    // Another status pages through the answer history instead (none resolved yet).
    let resolved = served.get("/api/v1/rounds?status=resolved").await;
    assert_eq!(resolved.status, StatusCode::OK);
    assert_eq!(resolved.json(), json!({"rounds": [], "next": null}));

    let rounds = served
        .get(&format!("/api/v1/executions/{}/rounds", first.execution_id))
        .await
        .json();
    assert_eq!(rounds[0]["status"], "pending");
    let round = served
        .get(&format!(
            "/api/v1/executions/{}/rounds/{}",
            first.execution_id, first.round_id
        ))
        .await
        .json();
    assert_eq!(round["status"], "pending");
    assert_eq!(round["requests"]["shipping_address"]["mode"], "form");
    let unknown = served
        .get(&format!(
            "/api/v1/executions/{}/rounds/nope",
            first.execution_id
        ))
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(
        served.get("/api/v1/no-such-route").await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn answering_is_respond_elicitation_replay_conflict_invalid_and_redacted() {
    let served = serve(|b| b).await;
    let round = served.round(vec![address_form()]).await;
    let path = responses_path(&round);

    let invalid = served
        .post_json(&path, &json!({"responses": {"shipping_address": {"action": "accept", "content": {"street": "x"}}}, "idempotency_key": "k0"}))
        .await;
    assert_eq!(invalid.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(invalid.json()["error"]["code"], "managed_input_invalid");
    assert!(
        invalid.json()["error"]["details"]["errors"]
            .as_array()
            .is_some_and(|e| !e.is_empty())
    );
    let bad_action = served
        .post_json(&path, &json!({"responses": {"shipping_address": {"action": "reject"}}, "idempotency_key": "k0"}))
        .await;
    assert_eq!(bad_action.status, StatusCode::UNPROCESSABLE_ENTITY);
    let extra_key = served
        .post_json(
            &path,
            &json!({"responses": {"other": {"action": "decline"}}, "idempotency_key": "k0"}),
        )
        .await;
    assert_eq!(extra_key.status, StatusCode::UNPROCESSABLE_ENTITY);

    let accepted = served
        .post_json(&path, &answer("1 Main Street", "k1"))
        .await;
    assert_eq!(accepted.status, StatusCode::OK, "{}", accepted.body);
    let body = accepted.json();
    assert_eq!(body["status"], "response_validated");
    assert_eq!(body["replayed"], false, "the first answer commits");
    // A server without a token authenticates nobody, and the record says so.
    assert_eq!(
        body["answered_by"],
        json!({"principal": "anonymous", "surface": "api"})
    );
    assert_eq!(
        body["redacted_responses"]["shipping_address"]["content"]["api_key"],
        "[REDACTED]"
    );
    assert!(
        !accepted.body.contains("sk-live-123"),
        "the raw secret never leaves the store"
    );

    let replay = served
        .post_json(&path, &answer("1 Main Street", "k1"))
        .await;
    assert_eq!(replay.status, StatusCode::OK, "a replay is 200");
    assert_eq!(replay.json()["replayed"], true, "and says it is one");
    let conflict = served
        .post_json(&path, &answer("2 Other Street", "k1"))
        .await;
    assert_eq!(conflict.status, StatusCode::CONFLICT);
    assert_eq!(conflict.json()["error"]["code"], "managed_input_conflict");

    for listing in [
        served
            .get(&format!("/api/v1/executions/{}/rounds", round.execution_id))
            .await,
        served
            .get(&format!(
                "/api/v1/executions/{}/rounds/{}",
                round.execution_id, round.round_id
            ))
            .await,
    ] {
        assert!(listing.body.contains("[REDACTED]"));
        assert!(!listing.body.contains("sk-live-123"));
    }
}

#[tokio::test]
async fn a_failed_round_is_a_state_conflict() {
    let served = serve(|b| b).await;
    let round = served.round(vec![address_form()]).await;
    let managed = served.kit.store().managed_input_store().await.unwrap();
    let record = managed
        .get_round(&m3_store::RoundRef::new(
            round.execution_id.clone(),
            round.round_id.clone(),
        ))
        .await
        .unwrap()
        .unwrap();
    managed
        .fail(
            &m3_store::RoundRef::of(&record),
            &m3_store::LeaseRef::of(&record.lease),
            m3_store::RoundFailure::new("timeout", "nobody answered"),
        )
        .await
        .unwrap();
    let refused = served
        .post_json(&responses_path(&round), &answer("1 Main Street", "k"))
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    assert_eq!(refused.json()["error"]["code"], "managed_input_state");
}

#[tokio::test]
async fn bodies_are_checked_for_shape_and_size() {
    let served = serve(|b| b.body_limit(1024)).await;
    let round = served.round(vec![address_form()]).await;
    let path = responses_path(&round);
    let headers = [("content-type", "application/json")];
    for body in [
        "{not json",
        "[]",
        r#"{"responses": {}}"#,
        r#"{"responses": [], "idempotency_key": "k"}"#,
        r#"{"responses": {}, "idempotency_key": "k", "x": 1}"#,
    ] {
        let answer = served
            .send(Method::POST, &path, &headers, body.to_owned())
            .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(answer.json()["error"]["code"], "bad_request");
    }
    let big = answer(&"x".repeat(2048), "k");
    let too_large = served.post_json(&path, &big).await;
    assert_eq!(too_large.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(too_large.json()["error"]["code"], "payload_too_large");
    let unknown = served
        .post_json(
            "/api/v1/executions/nope/rounds/r/responses",
            &answer("1 Main Street", "k"),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    let still = served
        .get(&format!(
            "/api/v1/executions/{}/rounds/{}",
            round.execution_id, round.round_id
        ))
        .await;
    assert_eq!(still.json()["status"], "pending", "nothing changed");
}

#[tokio::test]
async fn cancel_is_accepted_and_recorded() {
    let served = serve(|b| b).await;
    let round = served.round(vec![address_form()]).await;
    let cancelled = served
        .send(
            Method::POST,
            &format!("/api/v1/executions/{}/cancel", round.execution_id),
            &[],
            Bytes::new(),
        )
        .await;
    assert_eq!(cancelled.status, StatusCode::ACCEPTED);
    assert_eq!(cancelled.json()["cancel_requested"], true);
    let record = served
        .kit
        .store()
        .get_execution(&round.execution_id)
        .await
        .unwrap()
        .unwrap();
    assert!(record.is_cancel_requested());
    let unknown = served
        .send(
            Method::POST,
            "/api/v1/executions/nope/cancel",
            &[],
            Bytes::new(),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_token_guards_the_api_and_the_page() {
    let served = serve(|b| b.token("s3cret")).await;
    let round = served.round(vec![address_form()]).await;
    assert_eq!(
        served.get("/healthz").await.status,
        StatusCode::OK,
        "health needs no token"
    );
    let none = served.get("/api/v1/rounds").await;
    assert_eq!(none.status, StatusCode::UNAUTHORIZED);
    assert_eq!(none.json()["error"]["code"], "unauthorized");
    let wrong = served
        .send(
            Method::GET,
            "/api/v1/rounds",
            &[("authorization", "Bearer nope")],
            Bytes::new(),
        )
        .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    let right = served
        .send(
            Method::GET,
            "/api/v1/rounds",
            &[("authorization", "Bearer s3cret")],
            Bytes::new(),
        )
        .await;
    assert_eq!(right.status, StatusCode::OK);
    let refused = served
        .post_json(&responses_path(&round), &answer("1 Main Street", "k"))
        .await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);

    assert_eq!(served.get("/").await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        served.get("/?token=nope").await.status,
        StatusCode::UNAUTHORIZED
    );
    let login = served.get("/?token=s3cret").await;
    assert_eq!(login.status, StatusCode::SEE_OTHER);
    assert_eq!(login.headers["location"], "/");
    let cookie = login.headers["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap();
    let page = served
        .send(Method::GET, "/", &[("cookie", pair)], Bytes::new())
        .await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body
            .contains(&format!("data-inbox-round=\"{}\"", round.round_id))
    );
    // An answer with the token is recorded as its principal, whatever the body claims.
    let mut claimed = answer("1 Main Street", "k");
    claimed["answered_by"] = json!({"principal": "mallory", "surface": "api"});
    let claims = served
        .send(
            Method::POST,
            &responses_path(&round),
            &[
                ("authorization", "Bearer s3cret"),
                ("content-type", "application/json"),
            ],
            Bytes::from(claimed.to_string()),
        )
        .await;
    assert_eq!(claims.status, StatusCode::BAD_REQUEST, "{}", claims.body);
    let answered = served
        .send(
            Method::POST,
            &responses_path(&round),
            &[
                ("authorization", "Bearer s3cret"),
                ("content-type", "application/json"),
            ],
            Bytes::from(answer("1 Main Street", "k").to_string()),
        )
        .await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.body);
    assert_eq!(
        answered.json()["answered_by"],
        json!({"principal": "token", "surface": "api"})
    );
}

#[tokio::test]
async fn a_foreign_origin_never_changes_state() {
    let served = serve(|b| b).await;
    let round = served.round(vec![address_form()]).await;
    let path = responses_path(&round);
    let body = answer("1 Main Street", "k").to_string();
    for headers in [
        vec![
            ("origin", "http://evil.test"),
            ("content-type", "application/json"),
        ],
        vec![("origin", "null")],
        vec![("sec-fetch-site", "cross-site")],
    ] {
        let refused = served
            .send(Method::POST, &path, &headers, body.clone())
            .await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN);
        assert_eq!(refused.json()["error"]["code"], "forbidden_origin");
    }
    let form = served
        .send(
            Method::POST,
            &format!(
                "/executions/{}/rounds/{}",
                round.execution_id, round.round_id
            ),
            &[
                ("origin", "http://evil.test"),
                ("content-type", "application/x-www-form-urlencoded"),
            ],
            "idempotency_key=k&shipping_address.street=1+Main&shipping_address.city=Pune"
                .to_owned(),
        )
        .await;
    assert_eq!(form.status, StatusCode::FORBIDDEN);
    let still = served
        .get(&format!(
            "/api/v1/executions/{}/rounds/{}",
            round.execution_id, round.round_id
        ))
        .await;
    assert_eq!(still.json()["status"], "pending");
    let origin = format!("http://{}", served.addr);
    let same = served
        .send(Method::POST, &path, &[("origin", origin.as_str())], body)
        .await;
    assert_eq!(same.status, StatusCode::OK, "{}", same.body);
}

#[tokio::test]
async fn accept_defaults_fills_the_fields_an_answer_leaves_out() {
    let served = serve(|b| b).await;
    let form = m3_types::ElicitationRequest::Form(m3_types::FormElicitationRequest::new(
        "booking",
        "Book a table.",
        json!({
            "type": "object",
            "properties": {"name": {"type": "string"}, "guests": {"type": "integer", "default": 2}},
            "required": ["name", "guests"]
        })
        .as_object()
        .unwrap()
        .clone(),
    ));
    let round = served.round(vec![form]).await;
    let path = responses_path(&round);
    let body = |key: &str, defaults: Option<bool>| {
        let mut body = json!({
            "responses": {"booking": {"action": "accept", "content": {"name": "Ada"}}},
            "idempotency_key": key
        });
        if let Some(defaults) = defaults {
            body["accept_defaults"] = json!(defaults);
        }
        body
    };
    for verbatim in [None, Some(false)] {
        let refused = served.post_json(&path, &body("k1", verbatim)).await;
        assert_eq!(
            refused.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{verbatim:?}"
        );
    }
    let accepted = served.post_json(&path, &body("k2", Some(true))).await;
    assert_eq!(accepted.status, StatusCode::OK, "{}", accepted.body);
    assert_eq!(
        accepted.json()["redacted_responses"]["booking"]["content"],
        json!({"name": "Ada", "guests": 2})
    );
}

#[tokio::test]
async fn the_history_pages_answered_and_failed_rounds_newest_first_with_who_answered() {
    let served = serve(|b| b).await;
    let mut answered = Vec::new();
    for principal in ["alice", "bob", "alice"] {
        let round = served.round(vec![address_form()]).await;
        let answer = m3_kit::RoundAnswer::new(
            round.execution_id.clone(),
            round.round_id.clone(),
            serde_json::from_value(answer("1 Main Street", "k")["responses"].clone()).unwrap(),
            format!("key-{}", round.round_id),
        )
        .actor(m3_types::Actor::new(principal, m3_types::ActorSurface::Api).unwrap());
        served.kit.answer(answer).await.unwrap();
        answered.push(round.round_id);
    }
    let failed = served.round(vec![address_form()]).await;
    let managed = served.kit.store().managed_input_store().await.unwrap();
    let record = managed
        .get_round(&m3_store::RoundRef::new(
            failed.execution_id.clone(),
            failed.round_id.clone(),
        ))
        .await
        .unwrap()
        .unwrap();
    managed
        .fail(
            &m3_store::RoundRef::of(&record),
            &m3_store::LeaseRef::of(&record.lease),
            m3_store::RoundFailure::new("timeout", "nobody answered"),
        )
        .await
        .unwrap();
    let pending = served.round(vec![address_form()]).await;

    let ids = |body: &Value| -> Vec<String> {
        body["rounds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["round_id"].as_str().unwrap().to_owned())
            .collect()
    };
    let all = served.get("/api/v1/rounds?status=answered").await.json();
    assert_eq!(
        ids(&all),
        vec![
            answered[2].clone(),
            answered[1].clone(),
            answered[0].clone()
        ]
    );
    assert_eq!(all["rounds"][0]["answered_by"]["principal"], "alice");
    assert_eq!(all["rounds"][0]["decision"], "round.answered");
    assert_eq!(
        all["rounds"][0]["redacted_responses"]["shipping_address"]["content"]["api_key"],
        "[REDACTED]"
    );
    assert!(!all.to_string().contains(&pending.round_id));
    let failures = served.get("/api/v1/rounds?status=failed").await.json();
    assert_eq!(ids(&failures), vec![failed.round_id.clone()]);
    assert_eq!(failures["rounds"][0]["failure_code"], "timeout");

    // Alice's answers, one per page, followed by cursor.
    let first = served
        .get("/api/v1/rounds?status=answered&principal=alice&limit=1")
        .await
        .json();
    assert_eq!(ids(&first), vec![answered[2].clone()]);
    let next = first["next"].as_u64().unwrap();
    let second = served
        .get(&format!(
            "/api/v1/rounds?status=answered&principal=alice&limit=1&before={next}"
        ))
        .await
        .json();
    assert_eq!(ids(&second), vec![answered[0].clone()]);
    let other_server = served
        .get("/api/v1/rounds?status=answered&server=nope")
        .await
        .json();
    assert!(ids(&other_server).is_empty());
    let weird = served.get("/api/v1/rounds?status=weird").await;
    assert_eq!(weird.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(weird.json()["error"]["code"], "invalid_argument");

    // The page's history view lists the same rounds with who answered.
    let page = served.get("/answered?principal=bob").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains(&answered[1]), "{}", page.body);
    assert!(!page.body.contains(&answered[0]), "{}", page.body);
    assert!(
        page.body.contains("data-principal=\"bob\""),
        "{}",
        page.body
    );
}
