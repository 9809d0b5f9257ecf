//! `m3 respond`'s response arguments: `--responses JSON` or `--accept KEY=JSON`,
//! `--accept-url KEY`, `--decline KEY`, `--cancel KEY`.
//!
//! Parsing only builds the [`ResponseMap`]; whether it fits the round (exact keys, schema) is
//! decided by `respond_elicitation`, never here.

use m3_types::{ElicitationResponse, Error, ResponseMap, Result};
use serde_json::{Map, Value};

/// The response flags of `m3 respond`, as given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ResponseArgs {
    /// `--responses JSON`.
    pub(crate) responses: Option<String>,
    /// `--accept KEY=JSON`, each.
    pub(crate) accept: Vec<String>,
    /// `--accept-url KEY`, each.
    pub(crate) accept_url: Vec<String>,
    /// `--decline KEY`, each.
    pub(crate) decline: Vec<String>,
    /// `--cancel KEY`, each.
    pub(crate) cancel: Vec<String>,
}

impl ResponseArgs {
    fn has_per_key(&self) -> bool {
        !(self.accept.is_empty()
            && self.accept_url.is_empty()
            && self.decline.is_empty()
            && self.cancel.is_empty())
    }
}

/// Builds the response map.
///
/// # Errors
/// `invalid_argument` for malformed JSON, a response that is not a valid
/// `ElicitationResponse`, a key given twice, or no response at all.
pub(crate) fn parse_responses(args: &ResponseArgs) -> Result<ResponseMap> {
    if let Some(text) = &args.responses {
        if args.has_per_key() {
            return Err(Error::model_validation(
                "--responses cannot be combined with --accept, --accept-url, --decline or --cancel",
            ));
        }
        return parse_response_map(text);
    }
    let mut map = ResponseMap::new();
    let mut put = |key: &str, response: ElicitationResponse| -> Result<()> {
        if key.is_empty() {
            return Err(Error::model_validation("a request key must not be empty"));
        }
        if map.insert(key.to_owned(), response).is_some() {
            return Err(Error::model_validation(format!(
                "request key '{key}' is given more than once"
            )));
        }
        Ok(())
    };
    for item in &args.accept {
        let (key, content) = item.split_once('=').ok_or_else(|| {
            Error::model_validation(format!("--accept expects KEY=JSON, got '{item}'"))
        })?;
        put(
            key,
            ElicitationResponse::accept(parse_content(key, content)?),
        )?;
    }
    for key in &args.accept_url {
        put(key, ElicitationResponse::accept_url())?;
    }
    for key in &args.decline {
        put(key, ElicitationResponse::decline())?;
    }
    for key in &args.cancel {
        put(key, ElicitationResponse::cancel())?;
    }
    if map.is_empty() {
        return Err(Error::model_validation(
            "no responses given: use --responses JSON or --accept/--accept-url/--decline/--cancel",
        ));
    }
    Ok(map)
}

/// Parses `{"key": {"action": ..., "content": ..., "meta": ...}, ...}`.
fn parse_response_map(text: &str) -> Result<ResponseMap> {
    let value: Value = serde_json::from_str(text).map_err(|error| {
        Error::model_validation(format!("--responses is not valid JSON: {error}"))
    })?;
    if !value.is_object() {
        return Err(Error::model_validation(
            "--responses must be a JSON object mapping request keys to responses",
        ));
    }
    serde_json::from_value(value).map_err(|error| {
        Error::model_validation(format!("--responses is not a valid response map: {error}"))
    })
}

fn parse_content(key: &str, text: &str) -> Result<Map<String, Value>> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(content)) => Ok(content),
        Ok(_) => Err(Error::model_validation(format!(
            "--accept {key}=JSON: the content must be a JSON object"
        ))),
        Err(error) => Err(Error::model_validation(format!(
            "--accept {key}=JSON: not valid JSON: {error}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use m3_types::ElicitationAction;
    use serde_json::json;

    use super::*;

    fn args() -> ResponseArgs {
        ResponseArgs::default()
    }

    #[test]
    fn per_key_flags_build_one_response_each() {
        let map = parse_responses(&ResponseArgs {
            accept: vec![r#"shipping_address={"street": "1 Main Street", "city": "Pune"}"#.into()],
            accept_url: vec!["verify".into()],
            decline: vec!["gift".into()],
            cancel: vec!["note".into()],
            ..args()
        })
        .unwrap();
        assert_eq!(map.len(), 4);
        assert_eq!(map["shipping_address"].action, ElicitationAction::Accept);
        assert_eq!(
            Value::Object(map["shipping_address"].content.clone().unwrap()),
            json!({"street": "1 Main Street", "city": "Pune"})
        );
        assert_eq!(map["verify"], ElicitationResponse::accept_url());
        assert_eq!(map["gift"], ElicitationResponse::decline());
        assert_eq!(map["note"], ElicitationResponse::cancel());
    }

    #[test]
    fn responses_json_is_a_map_of_responses() {
        let map = parse_responses(&ResponseArgs {
            responses: Some(
                r#"{"a": {"action": "accept", "content": {"x": 1}}, "b": {"action": "decline"}}"#
                    .into(),
            ),
            ..args()
        })
        .unwrap();
        assert_eq!(map["b"].action, ElicitationAction::Decline);
        assert_eq!(map["a"].content.as_ref().unwrap()["x"], json!(1));
    }

    #[test]
    fn malformed_input_is_invalid_argument() {
        let bad = [
            ResponseArgs {
                responses: Some("{".into()),
                ..args()
            },
            ResponseArgs {
                responses: Some("[]".into()),
                ..args()
            },
            ResponseArgs {
                responses: Some(r#"{"a": {"action": "maybe"}}"#.into()),
                ..args()
            },
            ResponseArgs {
                responses: Some(r#"{"a": {"action": "decline", "content": {"x": 1}}}"#.into()),
                ..args()
            },
            ResponseArgs {
                responses: Some("{}".into()),
                decline: vec!["a".into()],
                ..args()
            },
            ResponseArgs {
                accept: vec!["a".into()],
                ..args()
            },
            ResponseArgs {
                accept: vec!["a=[1]".into()],
                ..args()
            },
            ResponseArgs {
                accept: vec!["a={".into()],
                ..args()
            },
            ResponseArgs {
                decline: vec!["a".into()],
                cancel: vec!["a".into()],
                ..args()
            },
            args(),
        ];
        for case in bad {
            let error = parse_responses(&case).unwrap_err();
            assert_eq!(error.code(), "invalid_argument", "{case:?}: {error}");
        }
    }
}
