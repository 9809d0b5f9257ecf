//! The `postgres-tls` build (rustls): `sslmode` in the store URL reaches the driver. The
//! test server speaks no TLS, so `sslmode=require` must be refused by the TLS handshake,
//! while `sslmode=disable` (plain TCP) and `sslmode=prefer` (TLS refused, plain TCP) open.

use m3_store_postgres::PgExecutionStore;
use m3_store_postgres::testing::isolated_url;

/// The test server's URL with a fresh schema and `sslmode=<mode>` instead of its own.
fn with_sslmode(mode: &str) -> Result<String, Box<dyn std::error::Error>> {
    let mut url = url::Url::parse(&isolated_url()?)?;
    let kept: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(key, _)| key != "sslmode")
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    url.query_pairs_mut()
        .clear()
        .extend_pairs(kept)
        .append_pair("sslmode", mode);
    Ok(url.into())
}

#[tokio::test]
async fn sslmode_disable_opens_a_plain_connection() {
    let store = PgExecutionStore::open(&with_sslmode("disable").unwrap())
        .await
        .unwrap();
    assert!(
        m3_store::ExecutionStore::list_expired_leases(&store)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn sslmode_prefer_falls_back_to_plain_when_the_server_has_no_tls() {
    PgExecutionStore::open(&with_sslmode("prefer").unwrap())
        .await
        .unwrap();
}

#[tokio::test]
async fn sslmode_require_is_refused_by_a_server_without_tls() {
    let refused = PgExecutionStore::open(&with_sslmode("require").unwrap())
        .await
        .unwrap_err();
    assert!(refused.is_storage(), "{refused}");
    let mut text = refused.to_string();
    let mut source = std::error::Error::source(&refused);
    while let Some(cause) = source {
        text.push_str(&format!(" / {cause}"));
        source = cause.source();
    }
    let lower = text.to_ascii_lowercase();
    assert!(
        lower.contains("tls") || lower.contains("ssl"),
        "the refusal names TLS: {text}"
    );
}
