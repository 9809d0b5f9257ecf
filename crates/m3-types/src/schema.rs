//! JSON Schemas of the public value types (for `m3 schema [NAME]`).

use schemars::{JsonSchema, Schema};

use crate::{
    Actor, ActorSurface, ChangeRecord, DeliveryState, ElicitationAction, ElicitationPlan,
    ElicitationRequest, ElicitationResponse, ErrorCode, ErrorInfo, ExecutionOutcome,
    ExecutionResult, ExecutionState, ExecutionStatus, FormElicitationRequest, HttpServer,
    HumanInput, ManagedInputLease, ManagedInputRecord, ManagedInputStatus, OperationKind,
    PendingElicitationRound, ServerBinding, ServerTrust, StdioServer, ToolSelection,
    UrlElicitationRequest,
};

fn entry<T: JsonSchema>(name: &'static str) -> (&'static str, Schema) {
    let mut schema = schemars::schema_for!(T);
    if let Some(map) = schema.as_object_mut() {
        map.values_mut().for_each(plain_descriptions);
        if let Some(serde_json::Value::String(text)) = map.get_mut("description") {
            *text = without_links(text);
        }
    }
    (name, schema)
}

/// Rewrites every `description` (taken from rustdoc) without rustdoc's link syntax, so
/// readers of a schema see `` `Error` `` where the source says ``[`Error`]``.
fn plain_descriptions(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                match item {
                    Value::String(text) if key == "description" => *text = without_links(text),
                    other => plain_descriptions(other),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(plain_descriptions),
        _ => {}
    }
}

/// `[text](target)`, `[text][target]` and `[text]` (an intra-doc link) become `text`.
fn without_links(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else {
            out.push_str(&rest[open..]);
            return out;
        };
        let label = &after[..close];
        let tail = &after[close + 1..];
        let skipped = match tail.chars().next() {
            Some('(') => tail.find(')').map(|end| &tail[end + 1..]),
            Some('[') => tail.find(']').map(|end| &tail[end + 1..]),
            _ => Some(tail),
        };
        out.push_str(label);
        rest = skipped.unwrap_or(tail);
    }
    out.push_str(rest);
    out
}

/// `(type name, JSON Schema)` for every public value type, sorted by name.
pub fn value_schemas() -> Vec<(&'static str, Schema)> {
    let mut all = vec![
        entry::<Actor>("Actor"),
        entry::<ActorSurface>("ActorSurface"),
        entry::<ChangeRecord>("ChangeRecord"),
        entry::<DeliveryState>("DeliveryState"),
        entry::<ElicitationAction>("ElicitationAction"),
        entry::<ElicitationPlan>("ElicitationPlan"),
        entry::<ElicitationRequest>("ElicitationRequest"),
        entry::<ElicitationResponse>("ElicitationResponse"),
        entry::<ErrorCode>("ErrorCode"),
        entry::<ErrorInfo>("ErrorInfo"),
        entry::<ExecutionOutcome>("ExecutionOutcome"),
        entry::<ExecutionResult>("ExecutionResult"),
        entry::<ExecutionState>("ExecutionState"),
        entry::<ExecutionStatus>("ExecutionStatus"),
        entry::<FormElicitationRequest>("FormElicitationRequest"),
        entry::<HttpServer>("HttpServer"),
        entry::<HumanInput>("HumanInput"),
        entry::<ManagedInputLease>("ManagedInputLease"),
        entry::<ManagedInputRecord>("ManagedInputRecord"),
        entry::<ManagedInputStatus>("ManagedInputStatus"),
        entry::<OperationKind>("OperationKind"),
        entry::<PendingElicitationRound>("PendingElicitationRound"),
        entry::<ServerBinding>("ServerBinding"),
        entry::<ServerTrust>("ServerTrust"),
        entry::<StdioServer>("StdioServer"),
        entry::<ToolSelection>("ToolSelection"),
        entry::<UrlElicitationRequest>("UrlElicitationRequest"),
    ];
    all.sort_by_key(|(name, _)| *name);
    all
}

/// The schema of the value type called `name`, if there is one: its exact type name
/// (`ChangeRecord`) or that name in kebab case (`change-record`).
pub fn value_schema(name: &str) -> Option<Schema> {
    value_schemas()
        .into_iter()
        .find(|(n, _)| *n == name || kebab_case(n) == name)
        .map(|(_, s)| s)
}

/// `ChangeRecord` as `change-record`.
fn kebab_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (index, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if index > 0 {
                out.push('-');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_carry_no_rustdoc_link_syntax() {
        assert_eq!(
            without_links("see [`Error`], [`env`](Self::env) and [the table][table]; [x"),
            "see `Error`, `env` and the table; [x"
        );
        for (name, schema) in value_schemas() {
            let text = schema.as_value().to_string();
            assert!(!text.contains("[`"), "{name}: {text}");
            assert!(!text.contains("the reference"), "{name}: {text}");
        }
    }
}
