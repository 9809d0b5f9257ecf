//! A plain form post turned into responses: every value arrives as text and
//! unchecked boxes are missing, so each field is coerced by its schema
//! ([`coerce_posted`]) before the store's own validation runs; the validator's
//! errors are then placed next to the field they concern.

use std::collections::BTreeMap;

use axum::extract::{FromRequest, Request};

use m3_types::form::fields;
use m3_types::form_input::coerce_posted;
use m3_types::{
    ElicitationAction, ElicitationRequest, ElicitationResponse, Error, PendingElicitationRound,
    ResponseMap,
};
use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};
use crate::state::Shared;

/// The fields of a url-encoded post, by name, in order.
#[derive(Debug, Default, Clone)]
pub(crate) struct Submitted {
    values: BTreeMap<String, Vec<String>>,
}

impl Submitted {
    /// Parses an `application/x-www-form-urlencoded` body; `None` when a name
    /// or value is not UTF-8 once decoded (the lossy decoding of
    /// `form_urlencoded` would turn it into U+FFFD and commit that instead).
    pub(crate) fn parse(body: &[u8]) -> Option<Self> {
        let mut values: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for pair in body.split(|byte| *byte == b'&').filter(|p| !p.is_empty()) {
            let (name, value) = match pair.iter().position(|byte| *byte == b'=') {
                Some(at) => (&pair[..at], &pair[at + 1..]),
                None => (pair, &[][..]),
            };
            values
                .entry(decode_strict(name)?)
                .or_default()
                .push(decode_strict(value)?);
        }
        Some(Self { values })
    }

    /// Every value of `name`.
    pub(crate) fn all(&self, name: &str) -> &[String] {
        self.values.get(name).map_or(&[], Vec::as_slice)
    }

    /// The first value of `name`.
    pub(crate) fn first(&self, name: &str) -> Option<&str> {
        self.all(name).first().map(String::as_str)
    }
}

/// The body of a plain form post, whatever its `Content-Type`: 413 over the
/// body limit, 400 when a name or value is not UTF-8 once decoded. (axum's
/// `Form` would decode lossily, and the field names are the round's own.)
impl FromRequest<Shared> for Submitted {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &Shared) -> ApiResult<Self> {
        let body = crate::extract::body(request, state).await?;
        Self::parse(&body)
            .ok_or_else(|| ApiError::bad_request("the form is not valid UTF-8 once decoded"))
    }
}

/// One form-encoded name or value: `+` is a space, `%XX` a byte, and the
/// bytes must be UTF-8.
fn decode_strict(raw: &[u8]) -> Option<String> {
    let spaced: Vec<u8> = raw
        .iter()
        .map(|byte| if *byte == b'+' { b' ' } else { *byte })
        .collect();
    percent_encoding::percent_decode(&spaced)
        .decode_utf8()
        .ok()
        .map(std::borrow::Cow::into_owned)
}

/// Errors shown on the page: per field name (`KEY.PROPERTY`) and for the round.
#[derive(Debug, Default, Clone)]
pub(crate) struct PageErrors {
    pub(crate) fields: BTreeMap<String, String>,
    pub(crate) round: Option<String>,
}

/// The responses the post means, coerced by each request's schema.
pub(crate) fn responses(round: &PendingElicitationRound, submitted: &Submitted) -> ResponseMap {
    let mut out = ResponseMap::new();
    for (key, request) in &round.requests {
        let action = submitted
            .first(&format!("{key}.action"))
            .and_then(|a| a.parse::<ElicitationAction>().ok())
            .unwrap_or(ElicitationAction::Accept);
        let response = match (action, request) {
            (ElicitationAction::Accept, ElicitationRequest::Form(form)) => {
                ElicitationResponse::accept(content(key, &form.requested_schema, submitted))
            }
            (ElicitationAction::Accept, _) => ElicitationResponse::accept_url(),
            (ElicitationAction::Decline, _) => ElicitationResponse::decline(),
            (ElicitationAction::Cancel, _) => ElicitationResponse::cancel(),
        };
        out.insert(key.clone(), response);
    }
    out
}

fn content(key: &str, schema: &Map<String, Value>, submitted: &Submitted) -> Map<String, Value> {
    let mut content = Map::new();
    for field in fields(schema) {
        let values = submitted.all(&format!("{key}.{}", field.name));
        if let Some(value) = coerce_posted(&field, values) {
            content.insert(field.name.clone(), value);
        }
    }
    content
}

/// Places a refusal of `respond_elicitation`: schema errors of request `K`
/// next to the field they name, everything else for the whole round.
pub(crate) fn place(error: &Error, round: &PendingElicitationRound) -> PageErrors {
    let mut placed = PageErrors::default();
    let key = error.details().get("request_key").and_then(Value::as_str);
    let schema = key.and_then(|key| match round.requests.get(key) {
        Some(ElicitationRequest::Form(form)) => Some(&form.requested_schema),
        _ => None,
    });
    let items = error.details().get("errors").and_then(Value::as_array);
    if let (Some(key), Some(schema), Some(items)) = (key, schema, items) {
        let names: Vec<String> = fields(schema).into_iter().map(|f| f.name).collect();
        for item in items {
            let path = item.get("path").and_then(Value::as_str).unwrap_or_default();
            let message = item
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default();
            match field_of(path, &names) {
                Some(name) => {
                    placed
                        .fields
                        .entry(format!("{key}.{name}"))
                        .or_insert_with(|| message.to_owned());
                }
                None => placed.round = Some(message.to_owned()),
            }
        }
    }
    let summary = error.message().to_owned();
    placed.round = Some(match placed.round {
        Some(detail) => format!("{summary}: {detail}"),
        None => summary,
    });
    placed
}

/// The property an error is about: the first segment of its path (for a missing
/// required field, the path names that field).
fn field_of(path: &str, names: &[String]) -> Option<String> {
    let first = path.strip_prefix('/').and_then(|p| p.split('/').next())?;
    let name = first.replace("~1", "/").replace("~0", "~");
    names.contains(&name).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_find_their_field() {
        let names = vec!["street".to_owned(), "city".to_owned()];
        assert_eq!(field_of("/city", &names), Some("city".into()));
        assert_eq!(field_of("/street/0", &names), Some("street".into()));
        assert_eq!(field_of("", &names), None);
        assert_eq!(field_of("/zip", &names), None);
    }
}
