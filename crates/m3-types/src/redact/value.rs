//! Redaction of one JSON value: values under sensitive key names, URL credentials and
//! sensitive query parameters, and configured secret strings wherever they occur; and the
//! secret values a value holds itself (for [`redact_echoes`]).

use serde_json::{Map, Value};

use super::names::is_sensitive_key;

/// The replacement text.
pub const REDACTED: &str = "[REDACTED]";

/// Returns the diagnostic projection of `value`.
pub fn redact(value: &Value) -> Value {
    redact_with(value, &[])
}

/// Like [`redact`], also replacing every occurrence of each non-empty string in `secrets`.
pub fn redact_with(value: &Value, secrets: &[&str]) -> Value {
    walk(value, secrets, 0)
}

/// Shortest secret value that [`redact_echoes`] also looks for outside its own field (a
/// shorter one would garble unrelated text).
pub const MIN_ECHOED_SECRET_CHARS: usize = 4;

/// Like [`redact`], also replacing, in every string of `value`, each secret-named value that
/// `value` itself holds ([`secret_values`]): a server that echoes a password in its tool
/// result, or an agent that repeats it, does not carry it into a trace in the clear.
pub fn redact_echoes(value: &Value) -> Value {
    let secrets = secret_values(value);
    let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
    redact_with(value, &secrets)
}

/// The string (and number) values under secret-named keys anywhere in `value`, at least
/// [`MIN_ECHOED_SECRET_CHARS`] long, longest first (so a secret containing another is
/// replaced whole), without repeats: the `secrets` argument of [`redact_with`] for any
/// text derived from `value`.
pub fn secret_values(value: &Value) -> Vec<String> {
    let mut found = Vec::new();
    collect_secret_values(value, &mut found, 0);
    retain_echoable(&mut found);
    found.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    found.dedup();
    found
}

fn collect_secret_values(value: &Value, found: &mut Vec<String>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match value {
        Value::Object(map) => {
            for (key, item) in map {
                if is_sensitive_key(key) {
                    leaves(item, found, depth + 1);
                } else {
                    collect_secret_values(item, found, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                collect_secret_values(item, found, depth + 1);
            }
        }
        _ => {}
    }
}

/// Drops values too short to look for outside their own field.
pub(super) fn retain_echoable(found: &mut Vec<String>) {
    found.retain(|s| s.chars().count() >= MIN_ECHOED_SECRET_CHARS);
}

/// Every string and number leaf of a secret-named value.
pub(super) fn leaves(value: &Value, found: &mut Vec<String>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match value {
        Value::String(s) => found.push(s.clone()),
        Value::Number(n) => found.push(n.to_string()),
        Value::Object(map) => map.values().for_each(|v| leaves(v, found, depth + 1)),
        Value::Array(items) => items.iter().for_each(|v| leaves(v, found, depth + 1)),
        _ => {}
    }
}

/// Depth past which a value is replaced whole (keeps the walk bounded).
pub(super) const MAX_DEPTH: usize = 128;

fn walk(value: &Value, secrets: &[&str], depth: usize) -> Value {
    if depth > MAX_DEPTH {
        return Value::String(REDACTED.to_owned());
    }
    match value {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, item) in map {
                let projected = if is_sensitive_key(key) && !item.is_null() {
                    Value::String(REDACTED.to_owned())
                } else {
                    walk(item, secrets, depth + 1)
                };
                out.insert(key.clone(), projected);
            }
            Value::Object(out)
        }
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| walk(v, secrets, depth + 1)).collect())
        }
        Value::String(s) => Value::String(redact_text(s, secrets)),
        other => other.clone(),
    }
}

fn redact_text(text: &str, secrets: &[&str]) -> String {
    let mut out = redact_url(text).unwrap_or_else(|| text.to_owned());
    for secret in secrets {
        if !secret.is_empty() && out.contains(secret) {
            out = out.replace(secret, REDACTED);
        }
    }
    out
}

/// Redacts userinfo and sensitive query values of a `scheme://...` string; `None` when `text`
/// is not such a URL or nothing changed.
fn redact_url(text: &str) -> Option<String> {
    let scheme_end = text.find("://")?;
    let scheme = &text[..scheme_end];
    if scheme.is_empty()
        || !scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        || !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        || text.chars().any(char::is_whitespace)
    {
        return None;
    }
    let rest = &text[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let mut changed = false;
    let authority = match authority.rfind('@') {
        Some(at) => {
            changed = true;
            format!("{REDACTED}@{}", &authority[at + 1..])
        }
        None => authority.to_owned(),
    };
    let (before_fragment, fragment) = match tail.find('#') {
        Some(i) => tail.split_at(i),
        None => (tail, ""),
    };
    let tail = match before_fragment.split_once('?') {
        Some((path, query)) => {
            let pairs: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((name, _)) if is_sensitive_key(&percent_decode(name)) => {
                        changed = true;
                        format!("{name}={REDACTED}")
                    }
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}{fragment}", pairs.join("&"))
        }
        None => tail.to_owned(),
    };
    changed.then(|| format!("{scheme}://{authority}{tail}"))
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(high), Some(low)) => {
                    out.push(high * 16 + low);
                    i += 3;
                }
                _ => {
                    out.push(b'%');
                    i += 1;
                }
            },
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}
