//! Errors as HTTP answers: the status of HTTP.md's table and the CLI's error
//! object `{"error": {"code", "message", "details"}}`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use m3_types::Error;
use serde_json::{Map, Value, json};

/// An error answer of the JSON API.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) code: String,
    pub(crate) message: String,
    /// Boxed: with serde_json's `preserve_order` a `Map` is an `IndexMap`, and the error
    /// stays small enough to return by value.
    pub(crate) details: Box<Map<String, Value>>,
}

impl ApiError {
    /// An error the HTTP layer finds itself (bad body, no token, ...).
    pub(crate) fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            code: code.to_owned(),
            message: message.into(),
            details: Box::default(),
        }
    }

    /// 400: the body is not JSON or not of the expected shape.
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 413: the body is over the limit.
    pub(crate) fn too_large(limit: usize) -> Self {
        let mut error = Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("the request body is over the limit of {limit} bytes"),
        );
        error.details.insert("limit".into(), json!(limit));
        error
    }
}

/// Whether a kit error means "unknown execution or round".
pub(crate) fn is_not_found(error: &Error) -> bool {
    error.is_not_found()
}

/// The status of HTTP.md's table for a kit error.
pub(crate) fn status_of(error: &Error) -> StatusCode {
    if is_not_found(error) {
        return StatusCode::NOT_FOUND;
    }
    match error.code() {
        "invalid_argument" | "managed_input_invalid" => StatusCode::UNPROCESSABLE_ENTITY,
        "managed_input_conflict" | "managed_input_state" | "managed_input_recovery_unavailable" => {
            StatusCode::CONFLICT
        }
        "cursor_expired" => StatusCode::GONE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<Error> for ApiError {
    fn from(error: Error) -> Self {
        let status = status_of(&error);
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::warn!(code = error.code(), %error, "request failed");
        }
        Self {
            status,
            code: error.code().to_owned(),
            message: error.message().to_owned(),
            details: Box::new(error.details().clone()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body =
            json!({"error": {"code": self.code, "message": self.message, "details": self.details}});
        (self.status, Json(body)).into_response()
    }
}

/// The result of an API handler.
pub(crate) type ApiResult<T> = std::result::Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kit_error_has_the_status_of_the_table() {
        let cases = [
            (Error::model_validation("x"), 422),
            (Error::managed_input_validation("x"), 422),
            (Error::managed_input_conflict("x"), 409),
            (Error::managed_input_state("x"), 409),
            (Error::managed_input_recovery("x"), 409),
            (Error::not_found("gone"), 404),
            (Error::storage("x"), 500),
            (Error::timeout("x"), 500),
        ];
        for (error, status) in cases {
            assert_eq!(status_of(&error).as_u16(), status, "{}", error.code());
        }
    }
}
