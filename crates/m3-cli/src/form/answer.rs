//! Parsing and checking one typed answer for one [`Field`].

use serde_json::{Value, json};
use time::format_description::well_known::Rfc3339;

use m3_types::form::{Choice, Field, FieldKind};

/// What one line typed at a field's prompt means.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Parsed {
    /// A value for the field.
    Value(Value),
    /// Leave the (optional) field out.
    Omit,
}

/// Interprets `line` (without its line ending) for `field`: an empty line takes the default,
/// else leaves an optional field out. `Err` is the message to show before asking again.
pub(crate) fn parse(field: &Field, line: &str) -> Result<Parsed, String> {
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
pub(crate) fn format_hint(format: &str) -> &'static str {
    match format {
        "email" => "email address (name@example.com)",
        "uri" => "URL (https://...)",
        "date" => "date (YYYY-MM-DD)",
        "date-time" => "date and time (YYYY-MM-DDTHH:MM:SSZ)",
        _ => "text",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use m3_types::form::fields;

    fn field(schema: Value, required: bool) -> Field {
        let schema = json!({"type": "object", "properties": {"f": schema},
                            "required": if required { json!(["f"]) } else { json!([]) }});
        fields(schema.as_object().unwrap()).remove(0)
    }

    #[test]
    fn empty_input_takes_the_default_or_omits_or_is_refused() {
        let with_default = field(json!({"type": "integer", "default": 30}), true);
        assert_eq!(parse(&with_default, ""), Ok(Parsed::Value(json!(30))));
        let optional = field(json!({"type": "string"}), false);
        assert_eq!(parse(&optional, "  "), Ok(Parsed::Omit));
        let required = field(json!({"type": "string"}), true);
        assert!(parse(&required, "").unwrap_err().contains("required"));
    }

    #[test]
    fn text_lengths_and_formats_are_checked() {
        let name = field(
            json!({"type": "string", "minLength": 2, "maxLength": 3}),
            true,
        );
        assert!(parse(&name, "a").is_err());
        assert!(parse(&name, "abcd").is_err());
        assert_eq!(parse(&name, "abc"), Ok(Parsed::Value(json!("abc"))));
        let cases = [
            ("email", "ada@example.com", "ada.example.com"),
            ("uri", "https://example.com/x", "not a url"),
            ("date", "2026-11-29", "29.11.2026"),
            ("date-time", "2026-11-29T10:00:00Z", "2026-11-29"),
        ];
        for (format, good, bad) in cases {
            let f = field(json!({"type": "string", "format": format}), true);
            assert_eq!(parse(&f, good), Ok(Parsed::Value(json!(good))), "{format}");
            assert!(parse(&f, bad).is_err(), "{format} {bad}");
        }
    }

    #[test]
    fn numbers_respect_type_and_bounds() {
        let guests = field(
            json!({"type": "integer", "minimum": 1, "maximum": 12}),
            true,
        );
        assert_eq!(parse(&guests, " 4 "), Ok(Parsed::Value(json!(4))));
        for bad in ["0", "13", "2.5", "four"] {
            assert!(parse(&guests, bad).is_err(), "{bad}");
        }
        let score = field(json!({"type": "number", "maximum": 100}), true);
        assert_eq!(parse(&score, "95.5"), Ok(Parsed::Value(json!(95.5))));
        assert!(parse(&score, "100.5").is_err());
        assert!(parse(&score, "NaN").is_err());
    }

    #[test]
    fn booleans_and_choices() {
        let agree = field(json!({"type": "boolean", "default": false}), true);
        assert_eq!(parse(&agree, "Y"), Ok(Parsed::Value(json!(true))));
        assert_eq!(parse(&agree, "no"), Ok(Parsed::Value(json!(false))));
        assert_eq!(parse(&agree, ""), Ok(Parsed::Value(json!(false))));
        assert!(parse(&agree, "maybe").is_err());

        let hero = field(
            json!({"type": "string", "oneOf": [{"const": "h1", "title": "Superman"}, {"const": "h2", "title": "Wonder Woman"}]}),
            true,
        );
        assert_eq!(parse(&hero, "2"), Ok(Parsed::Value(json!("h2"))));
        assert_eq!(parse(&hero, "h1"), Ok(Parsed::Value(json!("h1"))));
        assert_eq!(parse(&hero, "wonder woman"), Ok(Parsed::Value(json!("h2"))));
        assert!(parse(&hero, "3").is_err());

        let pet = field(
            json!({"type": "string", "enum": ["p1", "p2"], "enumNames": ["Cats", "Dogs"]}),
            true,
        );
        assert_eq!(parse(&pet, "Dogs"), Ok(Parsed::Value(json!("p2"))));

        let tools = field(
            json!({"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string", "enum": ["Guitar", "Piano", "Drums"]}}),
            true,
        );
        assert_eq!(
            parse(&tools, "1, piano"),
            Ok(Parsed::Value(json!(["Guitar", "Piano"])))
        );
        assert_eq!(parse(&tools, "1,1"), Ok(Parsed::Value(json!(["Guitar"]))));
        assert!(parse(&tools, "1,2,3").is_err());
        assert!(parse(&tools, "Flute").is_err());
        assert!(parse(&tools, "").is_err());
    }

    #[test]
    fn fields_outside_the_subset_take_json() {
        let nested = field(json!({"type": "object"}), true);
        assert_eq!(
            parse(&nested, r#"{"a": 1}"#),
            Ok(Parsed::Value(json!({"a": 1})))
        );
        assert!(parse(&nested, "{").is_err());
    }
}
