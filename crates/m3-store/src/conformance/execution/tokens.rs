//! API tokens: made with a secret shown once and kept as a digest; found by that secret,
//! by every store object on the data; names unique; expiry on the store clock; revocation
//! at once for every store object.

use std::time::Duration;

use m3_types::Reason;

use super::ExecutionHarness;
use super::support::{INVALID_ARGUMENT, advance};
use crate::conformance::CaseResult;
use crate::conformance::check::{ensure, expect_error};
use crate::tokens::{NewToken, TokenCheck, TokenScope};

/// A token authenticates by its secret on both store objects, is listed without it, and a
/// revoked one is unknown to both at once.
pub async fn a_token_authenticates_until_it_is_revoked(h: &ExecutionHarness) -> CaseResult {
    let tokens = h.store.token_store().await?;
    let peer = h.peer.token_store().await?;
    let (made, secret) = tokens
        .create_token(NewToken::new("alice", TokenScope::Answer))
        .await?;
    ensure!(made.id.starts_with("tok_"), "id {}", made.id);
    ensure!(
        tokens.authenticate(secret.expose()).await? == TokenCheck::Valid(made.clone()),
        "the store does not know its token"
    );
    ensure!(
        peer.authenticate(secret.expose()).await? == TokenCheck::Valid(made.clone()),
        "the peer does not know the token"
    );
    let wrong = format!("{}x", secret.expose());
    ensure!(
        tokens.authenticate(&wrong).await? == TokenCheck::Unknown,
        "a wrong secret passed"
    );
    ensure!(
        tokens.authenticate("").await? == TokenCheck::Unknown,
        "an empty secret passed"
    );
    let listed = peer.list_tokens().await?;
    ensure!(listed == vec![made.clone()], "listed {listed:?}");
    let revoked = peer.revoke_token("alice").await?;
    ensure!(revoked == made, "revoked another token");
    ensure!(
        tokens.authenticate(secret.expose()).await? == TokenCheck::Unknown,
        "a revoked token still works"
    );
    ensure!(
        tokens.list_tokens().await?.is_empty(),
        "a revoked token is listed"
    );
    expect_error(tokens.revoke_token("alice").await, "not_found", None)?;
    Ok(())
}

/// Names are unique and checked; a token expires on the store's clock.
pub async fn names_are_unique_and_tokens_expire(h: &ExecutionHarness) -> CaseResult {
    let tokens = h.store.token_store().await?;
    let (first, _) = tokens
        .create_token(NewToken::new("ci", TokenScope::Read))
        .await?;
    expect_error(
        tokens
            .create_token(NewToken::new("ci", TokenScope::Admin))
            .await,
        INVALID_ARGUMENT,
        Some(Reason::TokenNameTaken),
    )?;
    expect_error(
        tokens
            .create_token(NewToken::new("has space", TokenScope::Read))
            .await,
        INVALID_ARGUMENT,
        Some(Reason::InvalidToken),
    )?;
    let listed = tokens.list_tokens().await?;
    ensure!(
        listed == vec![first],
        "a refused token was added: {listed:?}"
    );
    let (short, secret) = tokens
        .create_token(
            NewToken::new("short-lived", TokenScope::Admin).expires_after(Duration::from_secs(60)),
        )
        .await?;
    ensure!(
        matches!(
            tokens.authenticate(secret.expose()).await?,
            TokenCheck::Valid(_)
        ),
        "a fresh token is not valid"
    );
    advance(h, Duration::from_secs(61));
    ensure!(
        tokens.authenticate(secret.expose()).await? == TokenCheck::Expired(short),
        "an expired token is not reported expired"
    );
    Ok(())
}
