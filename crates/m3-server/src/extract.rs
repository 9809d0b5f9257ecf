//! Extractors with the API's own refusals: a query string or a JSON body read
//! through serde, a body over the limit refused with 413, anything malformed
//! with 400, each as the error object of [`crate::error`].

use axum::Json;
use axum::extract::rejection::{BytesRejection, JsonRejection};
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use bytes::Bytes;
use serde::de::DeserializeOwned;

use crate::error::{ApiError, ApiResult};
use crate::state::Shared;

/// A query string read into `T` (unknown parameters are ignored); a query
/// that does not fit is 400 `bad_request`.
#[derive(Debug)]
pub(crate) struct ApiQuery<T>(pub(crate) T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> ApiResult<Self> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(value)) => Ok(Self(value)),
            Err(rejection) => Err(ApiError::bad_request(format!(
                "cannot read the query string: {}",
                rejection.body_text()
            ))),
        }
    }
}

/// A JSON body read into `T`, whatever its `Content-Type`: 413 over the body
/// limit, 400 when it is not JSON or not of `T`'s shape.
#[derive(Debug)]
pub(crate) struct ApiJson<T>(pub(crate) T);

impl<T: DeserializeOwned> FromRequest<Shared> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &Shared) -> ApiResult<Self> {
        let body = body(request, state).await?;
        match Json::<T>::from_bytes(&body) {
            Ok(Json(value)) => Ok(Self(value)),
            Err(JsonRejection::JsonSyntaxError(error)) => Err(ApiError::bad_request(format!(
                "the body is not JSON: {}",
                source_text(&error)
            ))),
            Err(rejection) => Err(ApiError::bad_request(format!(
                "the body is not of the expected shape: {}",
                source_text(&rejection)
            ))),
        }
    }
}

/// The innermost cause of a rejection (serde's own message with its path).
fn source_text(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

/// The whole body, or 413 when it is over the limit (400 for any other read
/// error).
pub(crate) async fn body(request: Request, state: &Shared) -> ApiResult<Bytes> {
    Bytes::from_request(request, state)
        .await
        .map_err(|rejection: BytesRejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::too_large(state.body_limit)
            } else {
                ApiError::bad_request(format!("cannot read the request body: {rejection}"))
            }
        })
}
