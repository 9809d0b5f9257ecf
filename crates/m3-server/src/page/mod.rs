//! The answer page: the inbox (`/`, a summary list; `POST /inbox/answer` answers the rounds
//! selected on it), the executions (`/executions`), one round (`/executions/{e}/rounds/{r}`,
//! also the target of its form's plain post), the execution page, and the
//! assets. A request with `X-M3-Fragment: 1` gets only the round's element
//! (the script's live inbox and in-place submit use it).

mod authorization;
mod bulk;
mod coerce;
mod context;
mod execution;
mod executions;
mod history;
mod inbox;
mod link;
mod render;
mod widgets;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Extension, Router};
use m3_types::ActorSurface;
use maud::html;

use crate::error::{ApiError, status_of};
use crate::principal::Principal;
use crate::state::Shared;
use coerce::Submitted;
use render::{RoundView, error_page, html_response, wants_fragment};

const STYLE: &str = include_str!("../../assets/app.css");
const SCRIPT: &str = include_str!("../../assets/app.js");

/// Everything a page may load comes from this server; nothing inline runs.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// The page routes.
pub(crate) fn routes(state: Shared) -> Router {
    Router::new()
        .route("/", get(inbox::page))
        .route("/executions", get(executions::page))
        .route("/answered", get(history::page))
        .route("/executions/{execution_id}", get(execution::page))
        .route(
            "/executions/{execution_id}/rounds/{round_id}",
            get(round_page).post(answer),
        )
        .route("/inbox/answer", axum::routing::post(bulk::answer))
        .route("/answer/{token}", get(link::page).post(link::answer))
        .route(
            "/assets/app.css",
            get(|| asset(STYLE, "text/css; charset=utf-8")),
        )
        .route(
            "/assets/app.js",
            get(|| asset(SCRIPT, "text/javascript; charset=utf-8")),
        )
        .layer(axum::middleware::map_response(secure))
        .with_state(state)
}

async fn secure(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        ("content-security-policy", CONTENT_SECURITY_POLICY),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
        ("x-frame-options", "DENY"),
        ("cache-control", "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

async fn asset(body: &'static str, kind: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

async fn round_page(
    State(state): State<Shared>,
    Path((execution_id, round_id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let base = &state.base_path;
    let details = match state.kit.attach(&execution_id).await {
        Ok(handle) => handle.round(&round_id).await,
        Err(error) => Err(error),
    };
    let details = match details {
        Ok(details) => details,
        Err(error) => return error_page(base, &ApiError::from(error)),
    };
    if headers.get("x-m3-fragment").is_some_and(|v| v == "item") {
        // The inbox's summary line of a round that just became pending (the live list).
        if details.diagnostics.status != m3_types::ManagedInputStatus::Pending {
            return html_response(StatusCode::NO_CONTENT, html! {});
        }
        return html_response(StatusCode::OK, inbox::item(base, &details.round));
    }
    let element = render::round(base, &details, &RoundView::default());
    if wants_fragment(&headers) {
        return html_response(StatusCode::OK, element);
    }
    let main = html! { section id="inbox" { (element) } };
    html_response(StatusCode::OK, render::layout(base, "m3 round", None, main))
}

/// The plain form post: coerced by the schema, then exactly
/// `respond_elicitation`; errors come back in the form, the round stays pending.
async fn answer(
    State(state): State<Shared>,
    Extension(principal): Extension<Principal>,
    Path((execution_id, round_id)): Path<(String, String)>,
    headers: HeaderMap,
    submitted: Result<Submitted, ApiError>,
) -> Response {
    let base = state.base_path.clone();
    let submitted = match submitted {
        Ok(submitted) => submitted,
        Err(error) => return error_page(&base, &error),
    };
    let key = submitted
        .first("idempotency_key")
        .unwrap_or_default()
        .to_owned();
    let handle = match state.kit.attach(&execution_id).await {
        Ok(handle) => handle,
        Err(error) => return error_page(&base, &ApiError::from(error)),
    };
    let details = match handle.round(&round_id).await {
        Ok(details) => details,
        Err(error) => return error_page(&base, &ApiError::from(error)),
    };
    let responses = coerce::responses(&details.round, &submitted);
    let actor = principal.actor(ActorSurface::Page);
    let outcome = handle
        .respond_elicitation_as(&round_id, responses, &key, actor)
        .await;
    let fragment = wants_fragment(&headers);
    match outcome {
        Ok(()) if !fragment => Redirect::to(&format!(
            "{base}/executions/{}/rounds/{}",
            render::encode(&execution_id),
            render::encode(&round_id)
        ))
        .into_response(),
        Ok(()) => match handle.round(&round_id).await {
            Ok(details) => html_response(StatusCode::OK, render::answered(&base, &details)),
            Err(error) => error_page(&base, &ApiError::from(error)),
        },
        Err(error) => {
            let placed = coerce::place(&error, &details.round);
            let view = RoundView {
                submitted: Some(&submitted),
                errors: Some(&placed),
                idempotency_key: Some(&key),
                action: None,
                context: Some(&details.diagnostics.context),
                transferable: Some(details.diagnostics.transferable),
            };
            let element = if details.diagnostics.status == m3_types::ManagedInputStatus::Pending {
                render::round_form(&base, &details.round, &view)
            } else {
                render::answered(&base, &details)
            };
            let status = status_of(&error);
            if fragment {
                return html_response(status, element);
            }
            let main = html! { section id="inbox" { (element) } };
            html_response(status, render::layout(&base, "m3 round", None, main))
        }
    }
}
