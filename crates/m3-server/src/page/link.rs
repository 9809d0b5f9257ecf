//! Answer links (`/answer/{token}`): the round a signed link names, shown and answered
//! without any other login ([`m3_kit::notify::links`]). Every refusal is `403` with a code
//! (`link_invalid`, `link_expired`, `link_used`); a token that does not verify is refused
//! before any round is read, so a forged one learns nothing about which rounds exist. The
//! token is never logged or echoed into the page beyond its own form's action.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use m3_kit::notify::links;
use m3_kit::{AsyncExecutionHandle, RoundDetails};
use m3_types::{Actor, ManagedInputStatus};
use maud::html;

use super::coerce::{self, Submitted};
use super::render::{self, RoundView, html_response};
use crate::error::{ApiError, status_of};
use crate::state::Shared;

/// The round `token` answers and who answers through it, if it verifies, has not expired
/// and the round waits.
async fn open(
    state: &Shared,
    token: &str,
) -> Result<(AsyncExecutionHandle, RoundDetails, Actor), Response> {
    let base = &state.base_path;
    let verified = links::round_of(state.kit.store().as_ref(), token).await;
    let verified = verified.map_err(|error| render::error_page(base, &ApiError::from(error)))?;
    let grant = verified.map_err(|refusal| refused(state, refusal.code()))?;
    let (round, actor) = (grant.round.clone(), grant.actor());
    let found = async {
        let handle = state.kit.attach(&round.execution_id).await?;
        let details = handle.round(&round.round_id).await?;
        Ok::<_, m3_types::Error>((handle, details))
    };
    match found.await {
        Ok((handle, details)) if details.diagnostics.status == ManagedInputStatus::Pending => {
            Ok((handle, details, actor))
        }
        _ => Err(refused(state, "link_used")),
    }
}

/// The refusal page: `403` and the code, nothing about the round.
fn refused(state: &Shared, code: &'static str) -> Response {
    let message = match code {
        "link_expired" => "This answer link has expired.",
        "link_used" => "This question no longer waits for an answer.",
        _ => "This answer link is not valid.",
    };
    let main = html! {
        h1 { "Cannot answer" }
        p role="alert" data-error-code=(code) { (message) " (" code { (code) } ")" }
    };
    html_response(
        StatusCode::FORBIDDEN,
        render::layout(&state.base_path, "m3: refused", None, main),
    )
}

fn action(state: &Shared, token: &str) -> String {
    format!("{}/answer/{}", state.base_path, render::encode(token))
}

/// `GET /answer/{token}`: the round's form, posting back to the link.
pub(super) async fn page(State(state): State<Shared>, Path(token): Path<String>) -> Response {
    let (_, details, _) = match open(&state, &token).await {
        Ok(opened) => opened,
        Err(refusal) => return refusal,
    };
    let action = action(&state, &token);
    let view = RoundView {
        action: Some(&action),
        context: Some(&details.diagnostics.context),
        ..RoundView::default()
    };
    let main = html! { section id="inbox" { (render::round_form(&state.base_path, &details.round, &view)) } };
    html_response(
        StatusCode::OK,
        render::layout(&state.base_path, "m3 round", None, main),
    )
}

/// `POST /answer/{token}`: the answer, validated and committed exactly as the page's own
/// form is; the link stops working once it is accepted.
pub(super) async fn answer(
    State(state): State<Shared>,
    Path(token): Path<String>,
    headers: HeaderMap,
    submitted: Result<Submitted, ApiError>,
) -> Response {
    let fragment = render::wants_fragment(&headers);
    let base = state.base_path.clone();
    let submitted = match submitted {
        Ok(submitted) => submitted,
        Err(error) => return render::error_page(&base, &error),
    };
    let (handle, details, actor) = match open(&state, &token).await {
        Ok(opened) => opened,
        Err(refusal) => return refusal,
    };
    let key = submitted
        .first("idempotency_key")
        .unwrap_or_default()
        .to_owned();
    let responses = coerce::responses(&details.round, &submitted);
    let round_id = details.round.round_id.clone();
    let answered = handle
        .respond_elicitation_as(&round_id, responses, &key, actor)
        .await;
    let element = match answered {
        Ok(()) => match handle.round(&round_id).await {
            Ok(details) => (StatusCode::OK, render::answered(&base, &details)),
            Err(error) => return render::error_page(&base, &ApiError::from(error)),
        },
        Err(error) => {
            let placed = coerce::place(&error, &details.round);
            let action = action(&state, &token);
            let view = RoundView {
                submitted: Some(&submitted),
                errors: Some(&placed),
                idempotency_key: Some(&key),
                action: Some(&action),
                context: Some(&details.diagnostics.context),
                transferable: Some(details.diagnostics.transferable),
            };
            let form = render::round_form(&base, &details.round, &view);
            (status_of(&error), form)
        }
    };
    let (status, element) = element;
    if fragment {
        return html_response(status, element);
    }
    let main = html! { section id="inbox" { (element) } };
    html_response(status, render::layout(&base, "m3 round", None, main))
}
