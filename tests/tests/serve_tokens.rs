//! Principals in a running `m3 serve` router, on SQLite and on PostgreSQL: two API tokens
//! answer two real rounds and each answer is recorded as its token's name (the API, the
//! store, the history); a read token is refused an answer; revocation takes effect at once.

// Helpers outside #[test] fns fail the test on purpose (clippy.toml only relaxes
// these lints inside test functions).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use m3_kit::tokens::{NewToken, TokenScope};
use m3_kit::{AsyncMcpTestKit, SubmitOptions};
use m3_tests::runtime_support::{WAIT, call, completes, pending, shipping};
use m3_tests::store_support::TestDb;
use m3_types::HumanInput;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const SERVER: &str = env!("CARGO_BIN_EXE_m3-test-shipping-server");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_answer_as_their_principals_on_sqlite() {
    tokens_answer_as_their_principals(TestDb::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_answer_as_their_principals_on_postgres() {
    tokens_answer_as_their_principals(TestDb::Postgres).await;
}

async fn post(client: &reqwest::Client, url: &str, secret: &str, body: &Value) -> (u16, Value) {
    let response = client
        .post(url)
        .bearer_auth(secret)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn get(client: &reqwest::Client, url: &str, secret: &str) -> (u16, Value) {
    let response = client.get(url).bearer_auth(secret).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn tokens_answer_as_their_principals(db: TestDb) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let kit = AsyncMcpTestKit::builder()
        .database(db.location(dir.path()).unwrap())
        .build()
        .await
        .unwrap();
    let shutdown = CancellationToken::new();
    let router = m3_server::ServerBuilder::new(kit.clone())
        .token("the-shared-admin-token-0123")
        .shutdown(shutdown.clone())
        .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(m3_server::serve(
        listener,
        router,
        shutdown.clone().cancelled_owned(),
    ));
    let tokens = kit.store().token_store().await.unwrap();
    let mut secrets = Vec::new();
    for (name, scope) in [
        ("alice", TokenScope::Answer),
        ("bob", TokenScope::Answer),
        ("reader", TokenScope::Read),
    ] {
        let (_, secret) = tokens
            .create_token(NewToken::new(name, scope))
            .await
            .unwrap();
        secrets.push(secret.expose().to_owned());
    }
    let client = reqwest::Client::new();
    let agent = kit.agents([call("book_shipment")]).unwrap().remove(0);
    let body = json!({
        "responses": {"shipping_address": {"action": "accept", "content": {"street": "1 Token Road", "city": "Pune"}}},
        "idempotency_key": "k1"
    });
    for (secret, name) in [(&secrets[0], "alice"), (&secrets[1], "bob")] {
        let options = SubmitOptions::new()
            .server(shipping(SERVER, "modern"))
            .tools(["shipping:book_shipment"])
            .human_input(HumanInput::Managed);
        let handle = agent.submit("Book the shipment.", options).await.unwrap();
        let round = pending(&handle).await;
        let url = format!(
            "{base}/api/v1/executions/{}/rounds/{}/responses",
            round.execution_id, round.round_id
        );
        let (status, refused) = post(&client, &url, &secrets[2], &body).await;
        assert_eq!(status, 403, "{refused}");
        assert_eq!(refused["error"]["code"], "forbidden_scope");
        let (status, answered) = post(&client, &url, secret, &body).await;
        assert_eq!(status, 200, "{answered}");
        assert_eq!(answered["answered_by"]["principal"], name);
        completes(&handle, WAIT).await.unwrap();
        let stored = handle.round(&round.round_id).await.unwrap();
        assert_eq!(stored.diagnostics.answered_by.unwrap().principal, name);
    }
    let (status, history) = get(
        &client,
        &format!("{base}/api/v1/rounds?status=resolved&principal=bob"),
        &secrets[2],
    )
    .await;
    assert_eq!(status, 200, "{history}");
    assert_eq!(history["rounds"].as_array().unwrap().len(), 1);
    assert_eq!(history["rounds"][0]["answered_by"]["principal"], "bob");

    tokens.revoke_token("reader").await.unwrap();
    let (status, revoked) = get(&client, &format!("{base}/api/v1/rounds"), &secrets[2]).await;
    assert_eq!(status, 401, "{revoked}");
    shutdown.cancel();
    kit.close().await.unwrap();
}
