//! Canonical JSON: the one text form used for every payload equality.

use std::fmt::Write as _;

use serde_json::Value;

use crate::error::{Error, Result};

/// Deepest nesting [`canonical_json`] accepts (deeper values are refused, never overflow).
pub const MAX_JSON_DEPTH: usize = 128;

/// Writes `value` as canonical JSON: object keys sorted by code point, no whitespace
/// (`,` and `:` separators), non-ASCII kept as-is, like Python's
/// `json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)`.
///
/// # Errors
/// `managed_input_invalid` ("managed input contains invalid JSON") for a non-finite number or
/// nesting deeper than [`MAX_JSON_DEPTH`].
pub fn canonical_json(value: &Value) -> Result<String> {
    let mut out = String::new();
    write_value(value, &mut out, 0, KeyOrder::Sorted)?;
    Ok(out)
}

/// Writes `value` as [`canonical_json`] does (compact, non-ASCII kept, same limits) but with
/// object keys in the order the value holds them: the stored form of what a server sent (a
/// form's properties in the server's order), which equality still compares canonically.
///
/// # Errors
/// As [`canonical_json`].
pub fn ordered_json(value: &Value) -> Result<String> {
    let mut out = String::new();
    write_value(value, &mut out, 0, KeyOrder::AsHeld)?;
    Ok(out)
}

/// How [`write_value`] orders an object's keys.
#[derive(Clone, Copy)]
enum KeyOrder {
    /// By code point (canonical).
    Sorted,
    /// As the map holds them (insertion order, `serde_json`'s `preserve_order`).
    AsHeld,
}

/// Whether `a` and `b` have the same canonical JSON (false when either cannot be encoded).
pub fn canonical_eq(a: &Value, b: &Value) -> bool {
    match (canonical_json(a), canonical_json(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

fn invalid() -> Error {
    Error::managed_input_validation(crate::messages::INVALID_JSON)
}

fn write_value(value: &Value, out: &mut String, depth: usize, order: KeyOrder) -> Result<()> {
    if depth > MAX_JSON_DEPTH {
        return Err(invalid().with_detail("reason", "nesting too deep"));
    }
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if n.as_f64().is_some_and(|f| !f.is_finite()) {
                return Err(invalid().with_detail("reason", "non-finite number"));
            }
            write!(out, "{n}").map_err(|_| invalid())?;
        }
        Value::String(s) => write_string(s, out)?,
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(item, out, depth + 1, order)?;
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            if matches!(order, KeyOrder::Sorted) {
                entries.sort_by(|a, b| a.0.cmp(b.0));
            }
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(key, out)?;
                out.push(':');
                write_value(item, out, depth + 1, order)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

fn write_string(s: &str, out: &mut String) -> Result<()> {
    let encoded = serde_json::to_string(s).map_err(|e| invalid().with_source(e))?;
    out.push_str(&encoded);
    Ok(())
}
