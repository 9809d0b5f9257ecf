//! `m3 tokens create|list|revoke`: the store's API tokens, the principals `m3 serve`
//! authenticates (`docs/identity.md`).

use std::path::Path;
use std::time::Duration;

use clap::Subcommand;
use m3_kit::tokens::{ApiToken, NewToken, TokenScope};
use serde_json::json;

use crate::commands::inspect::open_existing_kit;
use crate::failure::Failure;
use crate::output::Output;

/// `m3 tokens`.
#[derive(Debug, Subcommand)]
pub(crate) enum TokensCommand {
    /// Make a token and print its secret once (the store keeps only its digest).
    Create {
        /// The principal's name: answers with the token are recorded as it.
        name: String,
        /// What the token may do: read, answer (read and answer) or admin (also tokens and
        /// webhooks).
        #[arg(long, value_name = "SCOPE")]
        scope: TokenScope,
        /// Stop working after this long (30d, 12h, 90m); default: until revoked.
        #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
        expires: Option<Duration>,
    },
    /// List the tokens (never their secrets).
    List,
    /// Revoke a token by id or name: every server on the store refuses it at once.
    Revoke {
        /// The token's id (`tok_...`) or name.
        token: String,
    },
}

/// `m3 tokens ...`.
pub(crate) async fn run(out: Output, db: &Path, command: TokensCommand) -> Result<(), Failure> {
    let kit = open_existing_kit(db, false).await?;
    let outcome = async {
        let tokens = kit.store().token_store().await?;
        match command {
            TokensCommand::Create {
                name,
                scope,
                expires,
            } => {
                let mut new = NewToken::new(name, scope);
                if let Some(lifetime) = expires {
                    new = new.expires_after(lifetime);
                }
                let (token, secret) = tokens.create_token(new).await?;
                if out.is_json() {
                    let mut document = token_json(&token);
                    document["secret"] = json!(secret.expose());
                    return out.document(&document);
                }
                out.say(format!(
                    "token {} ({}, scope {}){}",
                    token.id,
                    token.name,
                    token.scope,
                    expiry(&token)
                ));
                out.say(format!("secret: {}", secret.expose()));
                out.say("the secret is shown only now: the store keeps its digest");
                Ok(())
            }
            TokensCommand::List => {
                let listed = tokens.list_tokens().await?;
                if out.is_json() {
                    let all: Vec<_> = listed.iter().map(token_json).collect();
                    return out.document(&all);
                }
                if listed.is_empty() {
                    out.say("no tokens");
                }
                for token in &listed {
                    out.say(format!(
                        "{}  {:<24} {:<6} created {}{}",
                        token.id,
                        token.name,
                        token.scope.as_str(),
                        m3_types::timestamp::format(token.created_at),
                        expiry(token)
                    ));
                }
                Ok(())
            }
            TokensCommand::Revoke { token } => {
                let revoked = tokens.revoke_token(&token).await?;
                if out.is_json() {
                    let mut document = token_json(&revoked);
                    document["revoked"] = json!(true);
                    return out.document(&document);
                }
                out.say(format!("revoked token {} ({})", revoked.id, revoked.name));
                Ok(())
            }
        }
    }
    .await;
    kit.close().await?;
    outcome
}

fn expiry(token: &ApiToken) -> String {
    token
        .expires_at
        .map(|at| format!(", expires {}", m3_types::timestamp::format(at)))
        .unwrap_or_default()
}

fn token_json(token: &ApiToken) -> serde_json::Value {
    json!({
        "id": token.id,
        "name": token.name,
        "scope": token.scope.as_str(),
        "created_at": m3_types::timestamp::format(token.created_at),
        "expires_at": token.expires_at.map(m3_types::timestamp::format),
    })
}
