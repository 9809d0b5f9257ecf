//! A pending OAuth authorization on an execution's page: an HTTP server asked for a
//! person's authorization (the worker's `oauth.authorization_required` event) and the
//! worker still waits for the redirect. Shown like a URL-mode round: the address as a
//! link the person opens, with its full host beside it, until the wait ends
//! (`oauth.authorization_finished`) or the execution does.

use m3_kit::ExecutionEvent;
use m3_store::{EVENT_OAUTH_AUTHORIZATION_FINISHED, EVENT_OAUTH_AUTHORIZATION_REQUIRED};
use maud::{Markup, html};
use serde_json::Value;

use super::render::url_host;

/// An authorization the worker waits for.
#[derive(Debug, PartialEq, Eq)]
struct Pending<'a> {
    server: &'a str,
    url: &'a str,
}

fn text<'a>(event: &'a ExecutionEvent, field: &str) -> &'a str {
    event
        .payload
        .get(field)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The authorizations still waited for, oldest first: every `required` without a later
/// `finished` for the same URL.
fn pending(events: &[ExecutionEvent]) -> Vec<Pending<'_>> {
    let mut waiting: Vec<Pending<'_>> = Vec::new();
    for event in events {
        let url = text(event, "url");
        match event.kind.as_str() {
            EVENT_OAUTH_AUTHORIZATION_REQUIRED if url.starts_with("http") => {
                waiting.push(Pending {
                    server: text(event, "server"),
                    url,
                });
            }
            EVENT_OAUTH_AUTHORIZATION_FINISHED => waiting.retain(|p| p.url != url),
            _ => {}
        }
    }
    waiting
}

/// The section asking the person to authorize, when the execution (not `finished`)
/// waits for an authorization; nothing otherwise.
pub(super) fn section(events: &[ExecutionEvent], finished: bool) -> Markup {
    let waiting = if finished {
        Vec::new()
    } else {
        pending(events)
    };
    html! {
        @for authorization in &waiting {
            section class="authorization" aria-labelledby="authorization-heading" data-server=(authorization.server) {
                h2 id="authorization-heading" { "Authorization needed" }
                p {
                    "MCP server " strong { (authorization.server) }
                    " asks for your authorization. Open the authorization server's page and approve; "
                    "the execution goes on once it sends you back (on the machine running the execution)."
                }
                p {
                    a class="authorization-link" href=(authorization.url) target="_blank" rel="noopener noreferrer" {
                        "Open the authorization page"
                    }
                }
                (url_host(authorization.url))
            }
        }
    }
}
