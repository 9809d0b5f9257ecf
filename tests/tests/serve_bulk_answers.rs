//! `POST /api/v1/rounds/responses` in a running `m3 serve` router, on SQLite and on
//! PostgreSQL: 50 pending rounds answered in one request, 3 of which ask for a field the
//! answer lacks (47 answered, 3 with their typed error and still pending); the same list
//! again replays each round; a list over the limit is refused and changes nothing; an item
//! that does not read fails alone; a read token is refused; answers are recorded as the
//! token's principal through the API and only the redacted projection comes back.

// Helpers outside #[test] fns fail the test on purpose (clippy.toml only relaxes
// these lints inside test functions).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod page_support;

use m3_kit::tokens::{NewToken, TokenScope};
use m3_kit::{ANSWER_EACH_MAX, AsyncMcpTestKit};
use m3_tests::store_support::TestDb;
use m3_types::{ElicitationRequest, FormElicitationRequest, ManagedInputStatus};
use page_support::{object, store_round};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const ADMIN: &str = "the-shared-admin-token-0123";
const ROUNDS: usize = 50;
/// Rounds whose form also requires `zip`, which the bulk answer does not give.
const STRICT: [usize; 3] = [4, 21, 38];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_rounds_answered_in_one_request_on_sqlite() {
    bulk_answers(TestDb::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_rounds_answered_in_one_request_on_postgres() {
    bulk_answers(TestDb::Postgres).await;
}

/// The address form, requiring `zip` as well when `strict`.
fn address(strict: bool) -> ElicitationRequest {
    let required = if strict {
        json!(["street", "city", "zip"])
    } else {
        json!(["street", "city"])
    };
    let schema = json!({"type": "object", "required": required, "properties": {
        "street": {"type": "string"}, "city": {"type": "string"},
        "zip": {"type": "string"}, "api_key": {"type": "string"}}});
    ElicitationRequest::Form(FormElicitationRequest::new(
        "shipping_address",
        "Where to?",
        object(schema),
    ))
}

/// One item of the bulk body: the address (with a secret) under `PREFIX-ROUND`.
fn item(execution_id: &str, round_id: &str, prefix: &str) -> Value {
    json!({
        "execution_id": execution_id,
        "round_id": round_id,
        "responses": {"shipping_address": {"action": "accept",
            "content": {"street": "1 Bulk Road", "city": "Pune", "api_key": "sk-bulk-secret"}}},
        "idempotency_key": format!("{prefix}-{round_id}"),
    })
}

struct Api {
    client: reqwest::Client,
    url: String,
}

impl Api {
    async fn post(&self, secret: &str, body: &Value) -> (u16, Value, String) {
        let response = self
            .client
            .post(&self.url)
            .bearer_auth(secret)
            .json(body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::Null),
            text,
        )
    }
}

async fn statuses(kit: &AsyncMcpTestKit, rounds: &[(String, String)]) -> Vec<ManagedInputStatus> {
    let mut out = Vec::new();
    for (execution_id, round_id) in rounds {
        let handle = kit.attach(execution_id).await.unwrap();
        out.push(handle.round(round_id).await.unwrap().diagnostics.status);
    }
    out
}

fn outcomes(report: &Value) -> Vec<&str> {
    report["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect()
}

async fn bulk_answers(db: TestDb) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let kit = AsyncMcpTestKit::builder()
        .database(db.location(dir.path()).unwrap())
        .build()
        .await
        .unwrap();
    let shutdown = CancellationToken::new();
    let router = m3_server::ServerBuilder::new(kit.clone())
        .token(ADMIN)
        .shutdown(shutdown.clone())
        .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api = Api {
        client: reqwest::Client::new(),
        url: format!(
            "http://{}/api/v1/rounds/responses",
            listener.local_addr().unwrap()
        ),
    };
    tokio::spawn(m3_server::serve(
        listener,
        router,
        shutdown.clone().cancelled_owned(),
    ));
    let tokens = kit.store().token_store().await.unwrap();
    let (_, alice) = tokens
        .create_token(NewToken::new("alice", TokenScope::Answer))
        .await
        .unwrap();
    let (_, reader) = tokens
        .create_token(NewToken::new("reader", TokenScope::Read))
        .await
        .unwrap();

    let mut rounds = Vec::new();
    for index in 0..ROUNDS {
        let request = address(STRICT.contains(&index));
        let round = store_round(&kit, ("shipping", "book_shipment"), vec![request]).await;
        rounds.push((round.execution_id, round.round_id));
    }
    let body =
        json!({"answers": rounds.iter().map(|(e, r)| item(e, r, "bulk")).collect::<Vec<_>>()});

    let (status, refused, _) = api.post(reader.expose(), &body).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["error"]["code"], "forbidden_scope");

    let (status, report, text) = api.post(alice.expose(), &body).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(
        (&report["answered"], &report["replayed"], &report["failed"]),
        (&json!(47), &json!(0), &json!(3)),
        "{report}"
    );
    assert!(
        !text.contains("sk-bulk-secret"),
        "response values never leave the store"
    );
    for (index, result) in report["rounds"].as_array().unwrap().iter().enumerate() {
        assert_eq!(result["round_id"], json!(rounds[index].1), "in order");
        if STRICT.contains(&index) {
            assert_eq!(result["outcome"], "failed", "{result}");
            assert_eq!(result["status"], 422, "{result}");
            assert_eq!(result["error"]["code"], "managed_input_invalid", "{result}");
            assert_eq!(
                result["error"]["details"]["request_key"],
                "shipping_address"
            );
        } else {
            assert_eq!(result["outcome"], "committed", "{result}");
            let round = &result["round"];
            assert_eq!(round["status"], "response_validated", "{result}");
            assert_eq!(
                round["answered_by"],
                json!({"principal": "alice", "surface": "api"})
            );
            let content = &round["redacted_responses"]["shipping_address"]["content"];
            assert_eq!(content["api_key"], "[REDACTED]", "{result}");
        }
    }
    let stored = statuses(&kit, &rounds).await;
    for (index, status) in stored.iter().enumerate() {
        let expected = if STRICT.contains(&index) {
            ManagedInputStatus::Pending
        } else {
            ManagedInputStatus::ResponseValidated
        };
        assert_eq!(*status, expected, "round {index}");
    }

    // The same list again: every answered round replays, the three fail the same way.
    let (status, again, _) = api.post(alice.expose(), &body).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(
        (&again["answered"], &again["replayed"], &again["failed"]),
        (&json!(47), &json!(47), &json!(3)),
        "{again}"
    );
    let expected: Vec<&str> = outcomes(&report)
        .iter()
        .map(|o| if *o == "committed" { "replayed" } else { o })
        .collect();
    assert_eq!(outcomes(&again), expected);
    assert_eq!(statuses(&kit, &rounds).await, stored, "nothing changed");

    over_the_limit_changes_nothing(&api, &kit, &rounds).await;
    items_fail_alone(&api, &kit, &rounds).await;
    shutdown.cancel();
}

/// 501 answers (which would fit the three pending rounds) are refused as a whole.
async fn over_the_limit_changes_nothing(
    api: &Api,
    kit: &AsyncMcpTestKit,
    rounds: &[(String, String)],
) {
    let pending: Vec<&(String, String)> = STRICT.iter().map(|i| &rounds[*i]).collect();
    let mut items = Vec::new();
    for index in 0..=ANSWER_EACH_MAX {
        let (execution_id, round_id) = pending[index % pending.len()];
        let mut full = item(execution_id, round_id, "over");
        full["responses"]["shipping_address"]["content"]["zip"] = json!("411001");
        items.push(full);
    }
    let before = statuses(kit, rounds).await;
    let (status, refused, _) = api.post(ADMIN, &json!({"answers": items})).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"]["code"], "invalid_argument");
    assert_eq!(refused["error"]["details"]["limit"], json!(ANSWER_EACH_MAX));
    assert_eq!(
        refused["error"]["details"]["given"],
        json!(ANSWER_EACH_MAX + 1)
    );
    assert_eq!(statuses(kit, rounds).await, before, "nothing answered");
}

/// An unknown round and a response that does not read fail alone; a full answer to one of
/// the pending rounds, between them, is committed (as the shared token).
async fn items_fail_alone(api: &Api, kit: &AsyncMcpTestKit, rounds: &[(String, String)]) {
    let (execution_id, round_id) = &rounds[STRICT[0]];
    let mut full = item(execution_id, round_id, "fix");
    full["responses"]["shipping_address"]["content"]["zip"] = json!("411001");
    let mut unreadable = item(&rounds[STRICT[1]].0, &rounds[STRICT[1]].1, "fix");
    unreadable["responses"]["shipping_address"] = json!({"action": "maybe"});
    let answers =
        json!({"answers": [item(execution_id, "no-such-round", "fix"), full, unreadable]});
    let (status, report, _) = api.post(ADMIN, &answers).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(outcomes(&report), ["failed", "committed", "failed"]);
    assert_eq!(report["rounds"][0]["status"], 404);
    assert_eq!(report["rounds"][2]["status"], 422);
    assert_eq!(
        report["rounds"][2]["error"]["code"],
        "managed_input_invalid"
    );
    assert_eq!(
        report["rounds"][1]["round"]["answered_by"]["principal"],
        "token"
    );
    let left = statuses(kit, &[rounds[STRICT[1]].clone()]).await;
    assert_eq!(left, [ManagedInputStatus::Pending]);
    // A body of another shape is refused whole.
    let (status, malformed, _) = api
        .post(ADMIN, &json!({"answers": [{"round_id": "x"}]}))
        .await;
    assert_eq!(status, 400, "{malformed}");
}
