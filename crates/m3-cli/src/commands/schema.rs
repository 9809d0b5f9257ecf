//! `m3 schema [NAME]`: the JSON Schemas of the public value types (from m3-types).

use serde_json::{Map, Value};

use crate::failure::Failure;
use crate::output::Output;

pub(crate) fn run(out: Output, name: Option<&str>) -> Result<(), Failure> {
    match name {
        Some(name) => {
            let schema = m3_types::value_schema(name).ok_or_else(|| {
                let known: Vec<&str> = m3_types::value_schemas().iter().map(|(n, _)| *n).collect();
                Failure::invalid(format!(
                    "unknown schema '{name}'; known: {}",
                    known.join(", ")
                ))
            })?;
            out.document(&schema)
        }
        None if out.is_json() => {
            let all: Map<String, Value> = m3_types::value_schemas()
                .into_iter()
                .map(|(name, schema)| (name.to_owned(), schema.to_value()))
                .collect();
            out.document(&all)
        }
        None => {
            for (name, schema) in m3_types::value_schemas() {
                let description = schema
                    .get("description")
                    .and_then(Value::as_str)
                    .and_then(|d| d.lines().next())
                    .unwrap_or("");
                out.say(format!("{name:<26}  {description}"));
            }
            out.say("\n`m3 schema NAME` prints one schema; `m3 --json schema` prints all.");
            Ok(())
        }
    }
}
