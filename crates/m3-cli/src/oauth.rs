//! OAuth for `m3 run`'s HTTP servers: the authorization URL of the authorization code
//! grant is shown like a URL-mode round (an `authorization_required` event with `--json`,
//! lines on stderr otherwise), and a loopback listener in this process completes it.
//! Tokens are kept in the store, sealed, when a key is given (`M3_OAUTH_KEY` or
//! `M3_OAUTH_KEY_FILE`; `M3_OAUTH_PREVIOUS_KEY` during a rotation), else in memory.

use std::sync::Arc;

use m3_kit::CredentialKey;
use m3_kit::oauth::{AuthorizationNotice, AuthorizationPrompt, OAuthContext};
use serde_json::json;

use crate::failure::Failure;
use crate::output::Output;

/// Shows authorization URLs where `m3 run` shows rounds.
#[derive(Debug)]
struct CliPrompt {
    out: Output,
}

impl AuthorizationPrompt for CliPrompt {
    fn show(&self, notice: &AuthorizationNotice) {
        if self.out.is_json() {
            let event = json!({
                "server": notice.server,
                "server_url": notice.server_url,
                "url": notice.url,
                "redirect_uri": notice.redirect_uri,
            });
            // Printing to stdout cannot fail in a way the flow could act on; the
            // redirect wait then times out and says so.
            let _ = self.out.event("authorization_required", &event);
        } else {
            // Stderr: stdout is the execution's output; this is for the person at the
            // terminal, like the form of an interactive round.
            eprintln!(
                "MCP server '{}' asks for authorization. Open this URL in a browser:\n  {}\n\
                 (waiting for the redirect to {})",
                crate::terminal::escape_output(&notice.server),
                crate::terminal::escape_output(&notice.url),
                notice.redirect_uri
            );
        }
    }
}

/// The OAuth context of `m3 run`: authorization URLs shown on `out`.
pub(crate) fn context(out: Output) -> OAuthContext {
    OAuthContext::new().with_prompt(Arc::new(CliPrompt { out }))
}

/// The key sealing OAuth tokens in the store, and the previous one during a rotation:
/// `M3_OAUTH_KEY` (32 bytes in base64) or the file `M3_OAUTH_KEY_FILE` names, and
/// `M3_OAUTH_PREVIOUS_KEY`. `None` without a key: tokens then stay in this process.
///
/// # Errors
/// A usage failure naming the variable (never its value) when a key is malformed or the
/// file cannot be read.
pub(crate) fn keys() -> Result<Option<(CredentialKey, Option<CredentialKey>)>, Failure> {
    let parse = |name: &str, text: &str| {
        CredentialKey::from_base64(text)
            .map_err(|error| Failure::usage(format!("{name}: {}", error.message())))
    };
    let key = match (
        std::env::var("M3_OAUTH_KEY").ok().filter(|v| !v.is_empty()),
        std::env::var("M3_OAUTH_KEY_FILE")
            .ok()
            .filter(|v| !v.is_empty()),
    ) {
        (Some(text), _) => parse("M3_OAUTH_KEY", &text)?,
        (None, Some(path)) => {
            let text = std::fs::read_to_string(&path).map_err(|error| {
                Failure::usage(format!("M3_OAUTH_KEY_FILE: cannot read '{path}': {error}"))
            })?;
            parse("M3_OAUTH_KEY_FILE", &text)?
        }
        (None, None) => return Ok(None),
    };
    let previous = std::env::var("M3_OAUTH_PREVIOUS_KEY")
        .ok()
        .filter(|v| !v.is_empty())
        .map(|text| parse("M3_OAUTH_PREVIOUS_KEY", &text))
        .transpose()?;
    Ok(Some((key, previous)))
}
