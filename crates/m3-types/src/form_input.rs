//! Text a person gives for a form field, turned into the JSON value the field's schema
//! means: one line typed at the terminal's prompt ([`parse_typed`], checked at once so the
//! prompt can ask again) or the values of a plain HTML form post ([`coerce_posted`],
//! lenient, so the store's validator explains what is wrong next to the field). Both start
//! from the [`Field`]s of [`crate::form::fields`]. [`fill_defaults`] gives answers given
//! whole (the CLI's and the API's) the defaults a form would.

use std::collections::BTreeMap;

use serde_json::{Map, Number, Value, json};
use time::format_description::well_known::Rfc3339;

use crate::elicitation::{ElicitationAction, ElicitationRequest, ResponseMap};
use crate::form::{Choice, Field, FieldKind, fields};

/// What one line typed at a field's prompt means.
#[derive(Debug, Clone, PartialEq)]
#[expect(
    clippy::exhaustive_enums,
    reason = "a typed line either gives a value or leaves the field out; callers match both"
)]
pub enum Parsed {
    /// A value for the field.
    Value(Value),
    /// Leave the (optional) field out.
    Omit,
}

/// Interprets `line` typed at a prompt (without its line ending) for `field`: an empty line
/// takes the default, else leaves an optional field out. The text is checked here (lengths,
/// formats, bounds, choices by number, value or title), so a person is asked again at once.
///
/// ```
/// use m3_types::form::fields;
/// use m3_types::form_input::{Parsed, parse_typed};
/// use serde_json::json;
///
/// let schema = json!({"type": "object", "properties": {"guests": {"type": "integer", "minimum": 1}}});
/// let field = &fields(schema.as_object().unwrap())[0];
/// assert_eq!(parse_typed(field, " 4 "), Ok(Parsed::Value(json!(4))));
/// assert!(parse_typed(field, "0").is_err());
/// ```
///
/// # Errors
/// The message to show before asking again.
pub fn parse_typed(field: &Field, line: &str) -> Result<Parsed, String> {
    if line.trim().is_empty() {
        return match (&field.default, field.required) {
            (Some(default), _) => Ok(Parsed::Value(default.clone())),
            (None, true) => Err(format!("{} is required", field.label())),
            (None, false) => Ok(Parsed::Omit),
        };
    }
    parse_value(&field.kind, line).map(Parsed::Value)
}

fn parse_value(kind: &FieldKind, line: &str) -> Result<Value, String> {
    match kind {
        FieldKind::Text {
            format,
            min_length,
            max_length,
        } => {
            let length = line.chars().count() as u64;
            if let Some(min) = min_length.filter(|min| length < *min) {
                return Err(format!("enter at least {min} characters"));
            }
            if let Some(max) = max_length.filter(|max| length > *max) {
                return Err(format!("enter at most {max} characters"));
            }
            if let Some(format) = format {
                check_format(format, line)?;
            }
            Ok(json!(line))
        }
        FieldKind::Number {
            integer,
            minimum,
            maximum,
        } => {
            let text = line.trim();
            let (value, number) = if *integer {
                let n: i64 = text
                    .parse()
                    .map_err(|_| format!("'{text}' is not a whole number"))?;
                (json!(n), n as f64)
            } else {
                let n: f64 = text
                    .parse()
                    .ok()
                    .filter(|n: &f64| n.is_finite())
                    .ok_or_else(|| format!("'{text}' is not a number"))?;
                let value = serde_json::Number::from_f64(n)
                    .map(Value::Number)
                    .ok_or_else(|| format!("'{text}' is not a number"))?;
                (value, n)
            };
            if let Some(min) = minimum.filter(|min| number < *min) {
                return Err(format!("enter a number of at least {min}"));
            }
            if let Some(max) = maximum.filter(|max| number > *max) {
                return Err(format!("enter a number of at most {max}"));
            }
            Ok(value)
        }
        FieldKind::Boolean => match line.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" => Ok(json!(true)),
            "n" | "no" | "false" => Ok(json!(false)),
            other => Err(format!("'{other}': answer y or n")),
        },
        FieldKind::Select { choices } => pick(choices, line.trim()).map(|c| json!(c.value)),
        FieldKind::MultiSelect {
            choices,
            min_items,
            max_items,
        } => {
            let mut picked: Vec<String> = Vec::new();
            for token in line.split(',').map(str::trim).filter(|t| !t.is_empty()) {
                let choice = pick(choices, token)?;
                if !picked.contains(&choice.value) {
                    picked.push(choice.value.clone());
                }
            }
            let n = picked.len() as u64;
            if let Some(min) = min_items.filter(|min| n < *min) {
                return Err(format!("choose at least {min}"));
            }
            if let Some(max) = max_items.filter(|max| n > *max) {
                return Err(format!("choose at most {max}"));
            }
            Ok(json!(picked))
        }
        // `Json` and kinds added later (the enum is non-exhaustive): a JSON value.
        _ => serde_json::from_str(line).map_err(|error| format!("not valid JSON: {error}")),
    }
}

/// An option by its number (1-based), its value, or its title (case-insensitive).
fn pick<'a>(choices: &'a [Choice], token: &str) -> Result<&'a Choice, String> {
    if let Ok(n) = token.parse::<usize>()
        && let Some(choice) = n.checked_sub(1).and_then(|i| choices.get(i))
    {
        return Ok(choice);
    }
    choices
        .iter()
        .find(|c| c.value == token)
        .or_else(|| choices.iter().find(|c| c.title.eq_ignore_ascii_case(token)))
        .ok_or_else(|| format!("'{token}' is not one of the options"))
}

fn check_format(format: &str, line: &str) -> Result<(), String> {
    let ok = match format {
        "email" => {
            let mut parts = line.split('@');
            let (local, domain) = (parts.next(), parts.next());
            parts.next().is_none()
                && local.is_some_and(|l| !l.is_empty())
                && domain.is_some_and(|d| d.contains('.') && !d.starts_with('.'))
                && !line.chars().any(char::is_whitespace)
        }
        "uri" => url::Url::parse(line).is_ok(),
        "date" => time::Date::parse(
            line,
            &time::macros::format_description!("[year]-[month]-[day]"),
        )
        .is_ok(),
        "date-time" => time::OffsetDateTime::parse(line, &Rfc3339).is_ok(),
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("'{line}' is not a valid {}", format_hint(format)))
    }
}

/// How a `format` is described to a person.
pub fn format_hint(format: &str) -> &'static str {
    match format {
        "email" => "email address (name@example.com)",
        "uri" => "URL (https://...)",
        "date" => "date (YYYY-MM-DD)",
        "date-time" => "date and time (YYYY-MM-DDTHH:MM:SSZ)",
        _ => "text",
    }
}

/// The value of `field` in a plain form post, where every value arrives as text (all the
/// values posted under its name, in order) and an unchecked box is missing. `None` leaves
/// it out (empty text, no choice), so the schema's `required` speaks; text that is not of
/// the field's type is kept as text, so the store's validator explains it next to the field.
///
/// ```
/// use m3_types::form::fields;
/// use m3_types::form_input::coerce_posted;
/// use serde_json::json;
///
/// let schema = json!({"type": "object", "properties": {"guests": {"type": "integer"}}});
/// let field = &fields(schema.as_object().unwrap())[0];
/// assert_eq!(coerce_posted(field, &["4.0".into()]), Some(json!(4)));
/// assert_eq!(coerce_posted(field, &["four".into()]), Some(json!("four")));
/// assert_eq!(coerce_posted(field, &["".into()]), None);
/// ```
#[must_use]
pub fn coerce_posted(field: &Field, values: &[String]) -> Option<Value> {
    let first = values.first().map(|v| v.trim()).filter(|v| !v.is_empty());
    match &field.kind {
        FieldKind::Boolean => Some(Value::Bool(values.iter().any(|v| v == "true" || v == "on"))),
        FieldKind::MultiSelect { .. } => {
            let chosen: Vec<Value> = values.iter().map(|v| Value::String(v.clone())).collect();
            (!chosen.is_empty() || field.required).then_some(Value::Array(chosen))
        }
        FieldKind::Number { integer, .. } => first.map(|text| posted_number(text, *integer)),
        FieldKind::Text { format, .. } if format.as_deref() == Some("date-time") => {
            first.map(|text| Value::String(utc(text)))
        }
        FieldKind::Json => first.map(|text| {
            serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
        }),
        FieldKind::Text { .. } | FieldKind::Select { .. } => values
            .first()
            .filter(|v| !v.is_empty())
            .map(|v| Value::String(v.clone())),
    }
}

/// Fills each accepted form answer's missing fields with the defaults its requested schema
/// gives (`m3 respond --accept-defaults`, the API's `accept_defaults`): what the
/// interactive form does when a person leaves a field empty. Answers that decline, cancel
/// or accept a URL request are left as they are; fields given are never replaced. Returns
/// how many values were filled in. The answers are validated afterwards, as always.
///
/// ```
/// use std::collections::BTreeMap;
/// use m3_types::form_input::fill_defaults;
/// use m3_types::{ElicitationRequest, ElicitationResponse, FormElicitationRequest, ResponseMap};
/// use serde_json::{Map, json};
///
/// let schema = json!({"type": "object", "properties": {
///     "guests": {"type": "integer", "default": 2}, "name": {"type": "string"}}});
/// let request = FormElicitationRequest::new("booking", "Book a table.",
///     schema.as_object().unwrap().clone());
/// let requests = BTreeMap::from([("booking".to_owned(), ElicitationRequest::Form(request))]);
/// let mut content = Map::new();
/// content.insert("name".into(), json!("Ada"));
/// let mut answers = ResponseMap::from([("booking".to_owned(), ElicitationResponse::accept(content))]);
/// assert_eq!(fill_defaults(&requests, &mut answers), 1);
/// assert_eq!(answers["booking"].content.as_ref().unwrap()["guests"], json!(2));
/// ```
pub fn fill_defaults(
    requests: &BTreeMap<String, ElicitationRequest>,
    responses: &mut ResponseMap,
) -> usize {
    let mut filled = 0;
    for (key, response) in responses.iter_mut() {
        let Some(ElicitationRequest::Form(request)) = requests.get(key) else {
            continue;
        };
        if response.action != ElicitationAction::Accept {
            continue;
        }
        let content = response.content.get_or_insert_with(Map::new);
        for field in fields(&request.requested_schema) {
            if let (Some(default), false) = (field.default, content.contains_key(&field.name)) {
                content.insert(field.name, default);
                filled += 1;
            }
        }
    }
    filled
}

/// Posted text as a number of the field's type, else the text itself.
fn posted_number(text: &str, integer: bool) -> Value {
    if let Ok(n) = text.parse::<i64>() {
        return n.into();
    }
    match text.parse::<f64>() {
        // "3.0" for an integer field is the integer 3.
        Ok(f) if integer && f.fract() == 0.0 && f.abs() < 9e15 => Value::from(f as i64),
        Ok(f) => Number::from_f64(f).map_or_else(|| Value::String(text.to_owned()), Value::Number),
        Err(_) => Value::String(text.to_owned()),
    }
}

/// A `datetime-local` value (`2026-12-01T10:00` or with seconds) as UTC
/// RFC 3339; text with an offset already is kept.
fn utc(text: &str) -> String {
    let has_offset =
        text.ends_with('Z') || text.get(19..).is_some_and(|rest| rest.contains(['+', '-']));
    if has_offset {
        return text.to_owned();
    }
    if text.len() == 16 {
        format!("{text}:00Z")
    } else {
        format!("{text}Z")
    }
}

#[cfg(test)]
mod typed_tests {
    use serde_json::json;

    use super::*;
    use crate::form::fields;

    fn field(schema: Value, required: bool) -> Field {
        let schema = json!({"type": "object", "properties": {"f": schema},
                            "required": if required { json!(["f"]) } else { json!([]) }});
        fields(schema.as_object().unwrap()).remove(0)
    }

    #[test]
    fn empty_input_takes_the_default_or_omits_or_is_refused() {
        let with_default = field(json!({"type": "integer", "default": 30}), true);
        assert_eq!(parse_typed(&with_default, ""), Ok(Parsed::Value(json!(30))));
        let optional = field(json!({"type": "string"}), false);
        assert_eq!(parse_typed(&optional, "  "), Ok(Parsed::Omit));
        let required = field(json!({"type": "string"}), true);
        assert!(parse_typed(&required, "").unwrap_err().contains("required"));
    }

    #[test]
    fn text_lengths_and_formats_are_checked() {
        let name = field(
            json!({"type": "string", "minLength": 2, "maxLength": 3}),
            true,
        );
        assert!(parse_typed(&name, "a").is_err());
        assert!(parse_typed(&name, "abcd").is_err());
        assert_eq!(parse_typed(&name, "abc"), Ok(Parsed::Value(json!("abc"))));
        let cases = [
            ("email", "ada@example.com", "ada.example.com"),
            ("uri", "https://example.com/x", "not a url"),
            ("date", "2026-11-29", "29.11.2026"),
            ("date-time", "2026-11-29T10:00:00Z", "2026-11-29"),
        ];
        for (format, good, bad) in cases {
            let f = field(json!({"type": "string", "format": format}), true);
            assert_eq!(
                parse_typed(&f, good),
                Ok(Parsed::Value(json!(good))),
                "{format}"
            );
            assert!(parse_typed(&f, bad).is_err(), "{format} {bad}");
        }
    }

    #[test]
    fn numbers_respect_type_and_bounds() {
        let guests = field(
            json!({"type": "integer", "minimum": 1, "maximum": 12}),
            true,
        );
        assert_eq!(parse_typed(&guests, " 4 "), Ok(Parsed::Value(json!(4))));
        for bad in ["0", "13", "2.5", "four"] {
            assert!(parse_typed(&guests, bad).is_err(), "{bad}");
        }
        let score = field(json!({"type": "number", "maximum": 100}), true);
        assert_eq!(parse_typed(&score, "95.5"), Ok(Parsed::Value(json!(95.5))));
        assert!(parse_typed(&score, "100.5").is_err());
        assert!(parse_typed(&score, "NaN").is_err());
    }

    #[test]
    fn booleans_and_choices() {
        let agree = field(json!({"type": "boolean", "default": false}), true);
        assert_eq!(parse_typed(&agree, "Y"), Ok(Parsed::Value(json!(true))));
        assert_eq!(parse_typed(&agree, "no"), Ok(Parsed::Value(json!(false))));
        assert_eq!(parse_typed(&agree, ""), Ok(Parsed::Value(json!(false))));
        assert!(parse_typed(&agree, "maybe").is_err());

        let hero = field(
            json!({"type": "string", "oneOf": [{"const": "h1", "title": "Superman"}, {"const": "h2", "title": "Wonder Woman"}]}),
            true,
        );
        assert_eq!(parse_typed(&hero, "2"), Ok(Parsed::Value(json!("h2"))));
        assert_eq!(parse_typed(&hero, "h1"), Ok(Parsed::Value(json!("h1"))));
        assert_eq!(
            parse_typed(&hero, "wonder woman"),
            Ok(Parsed::Value(json!("h2")))
        );
        assert!(parse_typed(&hero, "3").is_err());

        let pet = field(
            json!({"type": "string", "enum": ["p1", "p2"], "enumNames": ["Cats", "Dogs"]}),
            true,
        );
        assert_eq!(parse_typed(&pet, "Dogs"), Ok(Parsed::Value(json!("p2"))));

        let tools = field(
            json!({"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string", "enum": ["Guitar", "Piano", "Drums"]}}),
            true,
        );
        assert_eq!(
            parse_typed(&tools, "1, piano"),
            Ok(Parsed::Value(json!(["Guitar", "Piano"])))
        );
        assert_eq!(
            parse_typed(&tools, "1,1"),
            Ok(Parsed::Value(json!(["Guitar"])))
        );
        assert!(parse_typed(&tools, "1,2,3").is_err());
        assert!(parse_typed(&tools, "Flute").is_err());
        assert!(parse_typed(&tools, "").is_err());
    }

    #[test]
    fn fields_outside_the_subset_take_json() {
        let nested = field(json!({"type": "object"}), true);
        assert_eq!(
            parse_typed(&nested, r#"{"a": 1}"#),
            Ok(Parsed::Value(json!({"a": 1})))
        );
        assert!(parse_typed(&nested, "{").is_err());
    }
}

#[cfg(test)]
mod posted_tests {
    use super::*;
    use crate::form::fields;
    use serde_json::json;

    fn field(kind: FieldKind, required: bool) -> Field {
        let mut field = fields(
            json!({"type": "object", "properties": {"p": {"type": "string"}}})
                .as_object()
                .unwrap(),
        )
        .remove(0);
        field.kind = kind;
        field.required = required;
        field
    }

    #[test]
    fn text_is_coerced_by_the_schema() {
        let int = field(
            FieldKind::Number {
                integer: true,
                minimum: None,
                maximum: None,
            },
            false,
        );
        assert_eq!(coerce_posted(&int, &["42".into()]), Some(json!(42)));
        assert_eq!(coerce_posted(&int, &["4.0".into()]), Some(json!(4)));
        assert_eq!(coerce_posted(&int, &["4.5".into()]), Some(json!(4.5)));
        assert_eq!(coerce_posted(&int, &["four".into()]), Some(json!("four")));
        assert_eq!(coerce_posted(&int, &["".into()]), None);
        let boolean = field(FieldKind::Boolean, false);
        assert_eq!(coerce_posted(&boolean, &[]), Some(json!(false)));
        assert_eq!(coerce_posted(&boolean, &["true".into()]), Some(json!(true)));
        let multi = field(
            FieldKind::MultiSelect {
                choices: vec![],
                min_items: None,
                max_items: None,
            },
            false,
        );
        assert_eq!(coerce_posted(&multi, &[]), None);
        assert_eq!(
            coerce_posted(&multi, &["a".into(), "b".into()]),
            Some(json!(["a", "b"]))
        );
        let when = field(
            FieldKind::Text {
                format: Some("date-time".into()),
                min_length: None,
                max_length: None,
            },
            false,
        );
        assert_eq!(
            coerce_posted(&when, &["2026-12-01T10:00".into()]),
            Some(json!("2026-12-01T10:00:00Z"))
        );
        assert_eq!(
            coerce_posted(&when, &["2026-12-01T10:00:05".into()]),
            Some(json!("2026-12-01T10:00:05Z"))
        );
    }
}
