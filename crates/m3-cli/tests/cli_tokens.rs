//! `m3 tokens create|list|revoke` on SQLite and PostgreSQL: the secret is printed once, the
//! list never shows it, names are unique, revocation works by id or name, and the secret is
//! nowhere in the store in the clear (the database files, every PostgreSQL table).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::Store;
use serde_json::Value;

fn tokens_on(store: &Store) -> String {
    store.m3(&["demo"]).expect_code(0);
    let made = store
        .m3(&[
            "--json",
            "tokens",
            "create",
            "alice",
            "--scope",
            "answer",
            "--expires",
            "30d",
        ])
        .expect_code(0)
        .json();
    let secret = made["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("m3t_"), "{made}");
    assert_eq!(made["scope"], "answer");
    assert!(made["expires_at"].is_string(), "{made}");
    let text = store
        .m3(&["tokens", "create", "ops", "--scope", "admin"])
        .expect_code(0)
        .stdout;
    assert!(text.contains("secret: m3t_"), "{text}");
    assert!(text.contains("shown only now"), "{text}");

    let taken = store
        .m3(&["tokens", "create", "alice", "--scope", "read"])
        .expect_code(3);
    assert!(
        taken.stderr.contains("token_name_taken") || taken.stderr.contains("exists"),
        "{}",
        taken.stderr
    );
    let bad_scope = store.m3(&["tokens", "create", "x", "--scope", "root"]);
    assert_ne!(bad_scope.code, 0);

    let listed = store.m3(&["--json", "tokens", "list"]).expect_code(0);
    assert!(!listed.stdout.contains(&secret), "the list shows a secret");
    let listed: Value = listed.json();
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["alice", "ops"]);
    let ops_id = listed[1]["id"].as_str().unwrap().to_owned();
    store.m3(&["tokens", "revoke", &ops_id]).expect_code(0);
    let missing = store
        .m3(&["--json", "tokens", "revoke", "ops"])
        .expect_code(8);
    assert_eq!(missing.error_code(), "not_found");
    let listed = store
        .m3(&["--json", "tokens", "list"])
        .expect_code(0)
        .json();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    secret
}

#[test]
fn tokens_are_made_listed_and_revoked_and_never_stored_in_the_clear() {
    let store = Store::new();
    let secret = tokens_on(&store);
    let dir = store.db().parent().unwrap().to_owned();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            let found = bytes
                .windows(secret.len())
                .any(|window| window == secret.as_bytes());
            assert!(!found, "the secret is in {} in the clear", path.display());
        }
    }
}

#[test]
fn tokens_are_made_listed_and_revoked_and_never_stored_in_the_clear_on_postgres() {
    let url = m3_store_postgres::testing::isolated_url().unwrap();
    let store = Store::postgres_at(&url);
    let secret = tokens_on(&store);
    let schema = url.rsplit("schema=").next().unwrap().to_owned();
    let server = m3_store_postgres::testing::test_server_url().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let all_rows: String = runtime.block_on(async {
        let pool = sqlx::PgPool::connect(&server).await.unwrap();
        let tables: Vec<String> = sqlx::query_scalar(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1",
        )
        .bind(&schema)
        .fetch_all(&pool)
        .await
        .unwrap();
        assert!(tables.iter().any(|t| t == "m3rs_tokens"), "{tables:?}");
        let mut text = String::new();
        for table in tables {
            let statement = format!(
                "SELECT coalesce(string_agg(t::text, ''), '') FROM \"{schema}\".\"{table}\" t"
            );
            let rows: String = sqlx::query_scalar(sqlx::AssertSqlSafe(statement))
                .fetch_one(&pool)
                .await
                .unwrap();
            text.push_str(&rows);
        }
        text
    });
    assert!(all_rows.contains("alice"), "the token's row is missing");
    assert!(
        !all_rows.contains(&secret),
        "the secret is stored in the clear"
    );
}
