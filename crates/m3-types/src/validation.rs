//! Response validation: the one rule set every backend applies before accepting responses.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use serde_json::{Map, Value};

use crate::elicitation::{ElicitationAction, ElicitationRequest, ResponseMap};
use crate::error::{Error, Result};
use crate::limits::{check_answer_bytes, check_map_depth};
use crate::plain_errors::{PlainError, plain_error};
use crate::round::PendingElicitationRound;

/// Deepest schema or content nesting accepted (deeper input is a validation error): the
/// one bound of [`limits::MAX_NESTING_DEPTH`](crate::limits::MAX_NESTING_DEPTH).
pub const MAX_SCHEMA_DEPTH: usize = crate::limits::MAX_NESTING_DEPTH;
/// Most JSON nodes a requested schema may have.
pub const MAX_SCHEMA_NODES: usize = 20_000;

/// Backtracking budget of one `pattern` match (guards against catastrophic regexes).
const REGEX_BACKTRACK_LIMIT: usize = 100_000;
/// Size budget, in bytes, of one compiled `pattern`.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

use crate::messages::{
    EXACT_KEYS, FORM_REQUIRES_CONTENT, SCHEMA_MISMATCH, UNEXPECTED_KEYS, URL_CONTENT,
};

/// Checks `responses` against the pending round, exactly as the store of sf-m3 (the Python implementation) does.
///
/// 1. The keys equal the pending request keys: extra keys → "responses contain unexpected
///    request keys"; missing keys (including an empty map) → "responses must contain exactly the
///    pending request keys".
/// 2. Each response obeys its own model rule (decline and cancel carry no content).
/// 3. Form + accept: content is required ("form acceptance requires content") and must validate
///    against `requested_schema` (JSON Schema Draft 2020-12 unless the schema names another
///    draft, formats asserted, no remote or file `$ref` resolution). Any schema problem —
///    not an object, invalid, unresolvable `$ref`, too deep — is "response content does not
///    match the request schema" too.
/// 4. URL: content is refused ("URL responses cannot contain form content"); accept records
///    consent only.
///
/// 5. Bounds ([`limits`](crate::limits)): each response's `content` and `meta` nest at most
///    [`MAX_NESTING_DEPTH`](crate::limits::MAX_NESTING_DEPTH) levels, and the whole answer's
///    compact JSON is at most [`MAX_ANSWER_BYTES`](crate::limits::MAX_ANSWER_BYTES); over
///    either, `details.reason` is `limit_exceeded` and `details.limit` names the bound. They
///    are checked first, before anything walks the values.
///
/// It never panics, whatever JSON it is given.
///
/// # Errors
/// `managed_input_invalid`, with details naming the request key.
pub fn validate_responses(
    pending: &PendingElicitationRound,
    responses: &ResponseMap,
) -> Result<()> {
    check_bounds(responses)?;
    let expected: BTreeSet<&str> = pending.requests.keys().map(String::as_str).collect();
    let given: BTreeSet<&str> = responses.keys().map(String::as_str).collect();
    let unexpected: Vec<&str> = given.difference(&expected).copied().collect();
    if !unexpected.is_empty() {
        return Err(Error::managed_input_validation(UNEXPECTED_KEYS)
            .with_detail("unexpected_keys", unexpected));
    }
    let missing: Vec<&str> = expected.difference(&given).copied().collect();
    if !missing.is_empty() {
        return Err(
            Error::managed_input_validation(EXACT_KEYS).with_detail("missing_keys", missing)
        );
    }
    for (key, request) in &pending.requests {
        let Some(response) = responses.get(key) else {
            continue;
        };
        response
            .validate()
            .map_err(|e| e.with_detail("request_key", key.as_str()))?;
        match request {
            ElicitationRequest::Form(form) => {
                if response.action != ElicitationAction::Accept {
                    continue;
                }
                let Some(content) = &response.content else {
                    return Err(Error::managed_input_validation(FORM_REQUIRES_CONTENT)
                        .with_detail("request_key", key.as_str()));
                };
                check_content(&form.requested_schema, content)
                    .map_err(|e| e.with_detail("request_key", key.as_str()))?;
            }
            ElicitationRequest::Url(_) => {
                if response.content.is_some() {
                    return Err(Error::managed_input_validation(URL_CONTENT)
                        .with_detail("request_key", key.as_str()));
                }
            }
        }
    }
    Ok(())
}

/// The nesting of every response's `content` and `meta`, then the answer's size.
fn check_bounds(responses: &ResponseMap) -> Result<()> {
    for (key, response) in responses {
        for (what, map) in [
            ("response content", &response.content),
            ("response meta", &response.meta),
        ] {
            if let Some(map) = map {
                check_map_depth(map, what).map_err(|e| {
                    e.into_validation_error()
                        .with_detail("request_key", key.as_str())
                })?;
            }
        }
    }
    let bytes = serde_json::to_vec(responses).map_or(0, |bytes| bytes.len());
    check_answer_bytes(bytes).map_err(crate::LimitExceeded::into_validation_error)
}

/// Validates form `content` against `schema`.
///
/// # Errors
/// `managed_input_invalid` ("response content does not match the request schema"), with the
/// first ten violations in the details: `errors`, each `{path, keyword, message}`, where
/// `path` is the field concerned (for a missing required field, that field), `keyword` the
/// JSON Schema keyword and `message` a plain sentence that never quotes the value.
pub fn check_content(schema: &Map<String, Value>, content: &Map<String, Value>) -> Result<()> {
    let mismatch = |reason: &str| {
        Error::managed_input_validation(SCHEMA_MISMATCH).with_detail("reason", reason.to_owned())
    };
    // Measure before cloning: clone and drop of serde_json values recurse.
    let (depth, nodes) = measure_map(schema);
    if depth > MAX_SCHEMA_DEPTH || nodes > MAX_SCHEMA_NODES {
        return Err(mismatch("request schema is too large or too deeply nested"));
    }
    if measure_map(content).0 > MAX_SCHEMA_DEPTH {
        return Err(mismatch("response content is too deeply nested"));
    }
    let validator =
        compiled(schema).map_err(|e| mismatch(&format!("invalid request schema: {e}")))?;
    let content = Value::Object(content.clone());
    // Plain words from the keyword and the schema's limits, never the submitted value.
    let errors: Vec<Value> = validator
        .iter_errors(&content)
        .take(10)
        .map(|e| {
            let PlainError {
                path,
                keyword,
                message,
            } = plain_error(&e);
            let mut item = Map::new();
            item.insert("path".into(), Value::String(path));
            item.insert("keyword".into(), Value::String(keyword));
            item.insert("message".into(), Value::String(message));
            Value::Object(item)
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Error::managed_input_validation(SCHEMA_MISMATCH).with_detail("errors", errors))
    }
}

/// Most compiled schemas kept (past it the cache starts over).
const COMPILED_CAPACITY: usize = 256;

/// Compiled request schemas, process-wide, by their JSON text: compiling (meta-validation,
/// `$ref` resolution, regexes) costs far more than checking content, and one schema is
/// checked at every submission to its round. Compilation errors are not kept.
static COMPILED: LazyLock<Mutex<HashMap<String, Arc<jsonschema::Validator>>>> =
    LazyLock::new(Mutex::default);

/// The compiled validator of `schema` (Draft 2020-12 unless it names another draft, formats
/// asserted, offline, bounded regexes), from the cache when this schema was compiled before.
fn compiled(
    schema: &Map<String, Value>,
) -> std::result::Result<Arc<jsonschema::Validator>, String> {
    let key = serde_json::to_string(schema).map_err(|e| e.to_string())?;
    // The map holds no invariant a panicking holder could break half-way.
    let cache = || COMPILED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(validator) = cache().get(&key) {
        return Ok(Arc::clone(validator));
    }
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .offline()
        .with_pattern_options(
            jsonschema::PatternOptions::fancy_regex()
                .backtrack_limit(REGEX_BACKTRACK_LIMIT)
                .size_limit(REGEX_SIZE_LIMIT)
                .dfa_size_limit(REGEX_SIZE_LIMIT),
        )
        .build(&Value::Object(schema.clone()))
        .map_err(|e| e.to_string())?;
    let validator = Arc::new(validator);
    let mut compiled = cache();
    if compiled.len() >= COMPILED_CAPACITY {
        compiled.clear();
    }
    compiled.insert(key, Arc::clone(&validator));
    Ok(validator)
}

/// Nesting depth and node count of a JSON object, computed without recursion.
fn measure_map(map: &Map<String, Value>) -> (usize, usize) {
    let mut stack: Vec<(&Value, usize)> = map.values().map(|v| (v, 2usize)).collect();
    let mut max_depth = 1;
    let mut nodes = 1;
    while let Some((v, depth)) = stack.pop() {
        nodes += 1;
        max_depth = max_depth.max(depth);
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|i| (i, depth + 1))),
            Value::Object(map) => stack.extend(map.values().map(|i| (i, depth + 1))),
            _ => {}
        }
    }
    (max_depth, nodes)
}
