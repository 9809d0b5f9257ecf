//! OAuth credentials in the store (`m3_store::oauth`): sealed rows on memory, SQLite and
//! PostgreSQL, shared by every store opened on the same database, never in the clear, a
//! key rotation re-sealing them, and a row sealed with an unknown key treated as absent.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use m3_kit::CredentialKey;
use m3_kit::oauth::{OAuthKey, OAuthTokenStore};
use m3_store::oauth::{OAuthCredentialRows, SealedOAuthCredentials};
use m3_tests::store_support::TestDb;

const URL: &str = "https://mcp.example.com/mcp";
const CREDENTIALS: &str = r#"{"client_id":"c","token_response":{"access_token":"at-secret-1"}}"#;

fn key(byte: u8) -> CredentialKey {
    // 32 bytes of `byte`, base64 (the form M3_OAUTH_KEY takes).
    let text = match byte {
        1 => "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=",
        _ => "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=",
    };
    CredentialKey::from_base64(text).unwrap()
}

async fn rows(location: &str) -> Arc<dyn OAuthCredentialRows> {
    let store = m3_kit::open_store(location).await.unwrap();
    store.oauth_credential_rows().await.unwrap()
}

/// The whole contract on the rows of `first` and of a second store opened on `second`.
async fn check(first: Arc<dyn OAuthCredentialRows>, second: Arc<dyn OAuthCredentialRows>) {
    let sealed = SealedOAuthCredentials::new(Arc::clone(&first), key(1));
    assert_eq!(sealed.load(URL, "dynamic").await.unwrap(), None);
    sealed.save(URL, "dynamic", CREDENTIALS).await.unwrap();
    // What the backend keeps is sealed: no token, and bound to its row.
    let raw = second
        .sealed_credentials(URL, "dynamic")
        .await
        .unwrap()
        .unwrap();
    assert!(
        raw.starts_with("m3oauth1.") && !raw.contains("at-secret-1"),
        "{raw}"
    );
    second.put_credentials(URL, "moved", &raw).await.unwrap();
    let other = SealedOAuthCredentials::new(Arc::clone(&second), key(1));
    assert_eq!(
        other.load(URL, "moved").await.unwrap(),
        None,
        "a moved row must not open"
    );
    // Another store on the same database reads (and the token store trait serves) them.
    let tokens = m3_runtime::StoreOAuthTokens::new(other.clone());
    let key_of = OAuthKey::new(URL, "dynamic");
    assert_eq!(
        tokens.load(&key_of).await.unwrap().as_deref(),
        Some(CREDENTIALS)
    );
    // A key it does not hold: as good as none.
    let stranger = SealedOAuthCredentials::new(Arc::clone(&second), key(2));
    assert_eq!(stranger.load(URL, "dynamic").await.unwrap(), None);
    // A rotation: the new key with the old one as previous opens the row and re-seals it.
    let rotated =
        SealedOAuthCredentials::new(Arc::clone(&second), key(2)).with_previous_key(key(1));
    assert_eq!(
        rotated.load(URL, "dynamic").await.unwrap().as_deref(),
        Some(CREDENTIALS)
    );
    assert_eq!(
        stranger.load(URL, "dynamic").await.unwrap().as_deref(),
        Some(CREDENTIALS)
    );
    assert_eq!(
        sealed.load(URL, "dynamic").await.unwrap(),
        None,
        "the old key alone no longer opens it"
    );
    // Replacing and clearing.
    rotated.save(URL, "dynamic", "{\"v\":2}").await.unwrap();
    assert_eq!(
        stranger.load(URL, "dynamic").await.unwrap().as_deref(),
        Some("{\"v\":2}")
    );
    rotated.clear(URL, "dynamic").await.unwrap();
    assert_eq!(stranger.load(URL, "dynamic").await.unwrap(), None);
    assert!(!first.delete_credentials(URL, "dynamic").await.unwrap());
}

#[tokio::test]
async fn memory_keeps_sealed_credentials() {
    let store = m3_kit::open_store("memory:").await.unwrap();
    let rows = store.oauth_credential_rows().await.unwrap();
    check(Arc::clone(&rows), rows).await;
}

#[tokio::test]
async fn sqlite_keeps_sealed_credentials_for_every_store_on_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let location = TestDb::Sqlite.location(dir.path()).unwrap();
    check(rows(&location).await, rows(&location).await).await;
}

#[tokio::test]
async fn postgres_keeps_sealed_credentials_for_every_store_on_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    let location = TestDb::Postgres.location(dir.path()).unwrap();
    check(rows(&location).await, rows(&location).await).await;
}
