//! The fields of a requested schema, classified the way MCP's restricted schema subset is
//! decoded (boolean, number/integer, single- and multi-select enums, strings), plus a JSON
//! fallback for anything outside the subset. Every form renderer (the terminal's, the answer
//! page's) starts from [`fields`].

use serde_json::{Map, Value};

use crate::redact::{is_secret_schema, is_sensitive_key};

/// One option of an enum field.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Choice {
    /// The value submitted (`enum` item or `const`).
    pub value: String,
    /// What the person sees (`title`, an `enumNames` entry, or the value).
    pub title: String,
}

/// What kind of answer a field takes.
#[derive(Debug, Clone, PartialEq)]
#[expect(
    clippy::exhaustive_enums,
    reason = "every renderer matches each kind: a new kind must fail to compile in each of them"
)]
pub enum FieldKind {
    /// `type: "string"`, with optional `format` (email, uri, date, date-time) and length bounds.
    Text {
        /// `format`.
        format: Option<String>,
        /// `minLength`.
        min_length: Option<u64>,
        /// `maxLength`.
        max_length: Option<u64>,
    },
    /// `type: "number"` or `"integer"`, with optional bounds.
    Number {
        /// Whether only integers are accepted.
        integer: bool,
        /// `minimum`.
        minimum: Option<f64>,
        /// `maximum`.
        maximum: Option<f64>,
    },
    /// `type: "boolean"`.
    Boolean,
    /// A single-select enum: `enum`, `enum` + `enumNames`, or `oneOf` of `const`/`title`.
    Select {
        /// The options, in schema order.
        choices: Vec<Choice>,
    },
    /// A multi-select enum: `type: "array"` with `items.enum` or `items.anyOf` of `const`/`title`.
    MultiSelect {
        /// The options, in schema order.
        choices: Vec<Choice>,
        /// `minItems`.
        min_items: Option<u64>,
        /// `maxItems`.
        max_items: Option<u64>,
    },
    /// Outside MCP's subset: the person types a JSON value.
    Json,
}

/// One property of the requested schema.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Field {
    /// The property name (the content key).
    pub name: String,
    /// `title`, if any.
    pub title: Option<String>,
    /// `description`, if any.
    pub description: Option<String>,
    /// Whether the property is listed in `required`.
    pub required: bool,
    /// `default`, if any.
    pub default: Option<Value>,
    /// The kind of answer.
    pub kind: FieldKind,
    /// Whether the answer is a secret (a secret-like name such as `api_key` or `password`,
    /// or a schema that marks it): forms hide what is typed.
    pub secret: bool,
}

impl Field {
    /// The label shown at the prompt: the title, else the name.
    pub fn label(&self) -> &str {
        self.title.as_deref().unwrap_or(&self.name)
    }

    /// The field's constraints in plain words, to show before anything is submitted
    /// (`a whole number from 1 to 9`, `at most 2 choices`, `an email address`), or `None`
    /// when the kind says it all.
    pub fn rules(&self) -> Option<String> {
        match &self.kind {
            FieldKind::Text {
                format,
                min_length,
                max_length,
            } => {
                let format = format.as_deref().and_then(format_words);
                let length = range_words(*min_length, *max_length, "character");
                match (format, length) {
                    (Some(f), Some(l)) => Some(format!("{f}, {l}")),
                    (f, l) => f.map(str::to_owned).or(l),
                }
            }
            FieldKind::Number {
                integer,
                minimum,
                maximum,
            } => {
                let what = if *integer {
                    "a whole number"
                } else {
                    "a number"
                };
                Some(match (minimum, maximum) {
                    (Some(lo), Some(hi)) => format!("{what} from {} to {}", plain(*lo), plain(*hi)),
                    (Some(lo), None) => format!("{what}, at least {}", plain(*lo)),
                    (None, Some(hi)) => format!("{what}, at most {}", plain(*hi)),
                    (None, None) => what.to_owned(),
                })
            }
            FieldKind::MultiSelect {
                min_items,
                max_items,
                ..
            } => match (min_items, max_items) {
                (None | Some(0), None) => None,
                (lo, hi) => Some(format!(
                    "choose {}",
                    range_words(*lo, *hi, "option").unwrap_or_default()
                )),
            },
            FieldKind::Boolean | FieldKind::Select { .. } | FieldKind::Json => None,
        }
    }
}

fn format_words(format: &str) -> Option<&'static str> {
    match format {
        "email" => Some("an email address"),
        "uri" => Some("a full URL (https://...)"),
        "date" => Some("a date"),
        "date-time" => Some("a date and time, in UTC"),
        _ => None,
    }
}

/// `3 to 40 characters`, `at least 3 characters`, `at most 1 option`.
fn range_words(min: Option<u64>, max: Option<u64>, noun: &str) -> Option<String> {
    let nouns = |n: u64| {
        if n == 1 {
            noun.to_owned()
        } else {
            format!("{noun}s")
        }
    };
    match (min.filter(|m| *m > 0), max) {
        (Some(lo), Some(hi)) if lo == hi => Some(format!("exactly {lo} {}", nouns(hi))),
        (Some(lo), Some(hi)) => Some(format!("{lo} to {hi} {}", nouns(hi))),
        (Some(lo), None) => Some(format!("at least {lo} {}", nouns(lo))),
        (None, Some(hi)) => Some(format!("at most {hi} {}", nouns(hi))),
        (None, None) => None,
    }
}

/// A bound as a person writes it: `2`, not `2.0`.
fn plain(bound: f64) -> String {
    if bound.fract() == 0.0 && bound.abs() < 1e15 {
        format!("{bound:.0}")
    } else {
        bound.to_string()
    }
}

/// The fields of a form's `requestedSchema`, in the schema's property order.
pub fn fields(schema: &Map<String, Value>) -> Vec<Field> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, property)| {
            let secret = is_sensitive_key(name) || is_secret_schema(property);
            let empty = Map::new();
            let property = property.as_object().unwrap_or(&empty);
            Field {
                name: name.clone(),
                title: text(property, "title"),
                description: text(property, "description"),
                required: required.contains(&name.as_str()),
                default: property.get("default").cloned(),
                kind: classify(property),
                secret,
            }
        })
        .collect()
}

fn text(property: &Map<String, Value>, key: &str) -> Option<String> {
    property.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn count(property: &Map<String, Value>, key: &str) -> Option<u64> {
    property.get(key).and_then(Value::as_u64)
}

fn classify(property: &Map<String, Value>) -> FieldKind {
    match property.get("type").and_then(Value::as_str) {
        Some("boolean") => FieldKind::Boolean,
        Some(kind @ ("number" | "integer")) => FieldKind::Number {
            integer: kind == "integer",
            minimum: property.get("minimum").and_then(Value::as_f64),
            maximum: property.get("maximum").and_then(Value::as_f64),
        },
        Some("array") => {
            let items = property.get("items").and_then(Value::as_object);
            let choices = items.and_then(|items| {
                titled(items.get("anyOf")).or_else(|| untitled(items.get("enum"), None))
            });
            match choices {
                Some(choices) => FieldKind::MultiSelect {
                    choices,
                    min_items: count(property, "minItems"),
                    max_items: count(property, "maxItems"),
                },
                None => FieldKind::Json,
            }
        }
        Some("string") => {
            if let Some(choices) = titled(property.get("oneOf")) {
                FieldKind::Select { choices }
            } else if let Some(choices) = untitled(property.get("enum"), property.get("enumNames"))
            {
                FieldKind::Select { choices }
            } else {
                FieldKind::Text {
                    format: text(property, "format"),
                    min_length: count(property, "minLength"),
                    max_length: count(property, "maxLength"),
                }
            }
        }
        _ => FieldKind::Json,
    }
}

/// `[{"const": v, "title": t}, ...]`.
fn titled(options: Option<&Value>) -> Option<Vec<Choice>> {
    let options = options?.as_array()?;
    let choices: Option<Vec<Choice>> = options
        .iter()
        .map(|option| {
            let value = option.get("const")?.as_str()?.to_owned();
            let title = option
                .get("title")
                .and_then(Value::as_str)
                .map_or_else(|| value.clone(), str::to_owned);
            Some(Choice { value, title })
        })
        .collect();
    choices.filter(|choices| !choices.is_empty())
}

/// `enum: [...]` with optional legacy `enumNames: [...]`.
fn untitled(values: Option<&Value>, names: Option<&Value>) -> Option<Vec<Choice>> {
    let values = values?.as_array()?;
    let names = names.and_then(Value::as_array);
    let choices: Option<Vec<Choice>> = values
        .iter()
        .enumerate()
        .map(|(index, value)| {
            let value = value.as_str()?.to_owned();
            let title = names
                .and_then(|names| names.get(index))
                .and_then(Value::as_str)
                .map_or_else(|| value.clone(), str::to_owned);
            Some(Choice { value, title })
        })
        .collect();
    choices.filter(|choices| !choices.is_empty())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn choice(value: &str, title: &str) -> Choice {
        Choice {
            value: value.into(),
            title: title.into(),
        }
    }

    #[test]
    fn every_kind_of_the_restricted_subset_is_recognised() {
        let schema = json!({"type": "object", "required": ["name", "age"], "properties": {
            "name":   {"type": "string", "title": "Name", "minLength": 1, "maxLength": 80, "default": "Ada"},
            "email":  {"type": "string", "format": "email"},
            "age":    {"type": "integer", "minimum": 0, "maximum": 150},
            "score":  {"type": "number", "maximum": 100},
            "agree":  {"type": "boolean", "default": false},
            "color":  {"type": "string", "enum": ["red", "green"]},
            "hero":   {"type": "string", "oneOf": [{"const": "h1", "title": "Superman"}, {"const": "h2", "title": "Wonder Woman"}]},
            "tools":  {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string", "enum": ["Guitar", "Piano"]}},
            "fish":   {"type": "array", "items": {"anyOf": [{"const": "f1", "title": "Tuna"}]}},
            "pet":    {"type": "string", "enum": ["p1", "p2"], "enumNames": ["Cats", "Dogs"]},
            "nested": {"type": "object"}
        }});
        let fields = fields(schema.as_object().unwrap());
        let by_name = |name: &str| fields.iter().find(|f| f.name == name).unwrap().clone();
        let name = by_name("name");
        assert!(name.required);
        assert_eq!(name.label(), "Name");
        assert_eq!(name.default, Some(json!("Ada")));
        assert_eq!(
            name.kind,
            FieldKind::Text {
                format: None,
                min_length: Some(1),
                max_length: Some(80)
            }
        );
        assert!(
            matches!(by_name("email").kind, FieldKind::Text { format: Some(ref f), .. } if f == "email")
        );
        assert_eq!(
            by_name("age").kind,
            FieldKind::Number {
                integer: true,
                minimum: Some(0.0),
                maximum: Some(150.0)
            }
        );
        assert!(!by_name("score").required);
        assert_eq!(by_name("agree").kind, FieldKind::Boolean);
        assert_eq!(
            by_name("color").kind,
            FieldKind::Select {
                choices: vec![choice("red", "red"), choice("green", "green")]
            }
        );
        assert_eq!(
            by_name("hero").kind,
            FieldKind::Select {
                choices: vec![choice("h1", "Superman"), choice("h2", "Wonder Woman")]
            }
        );
        assert_eq!(
            by_name("tools").kind,
            FieldKind::MultiSelect {
                choices: vec![choice("Guitar", "Guitar"), choice("Piano", "Piano")],
                min_items: Some(1),
                max_items: Some(2)
            }
        );
        assert!(
            matches!(by_name("fish").kind, FieldKind::MultiSelect { ref choices, .. } if choices[0] == choice("f1", "Tuna"))
        );
        assert_eq!(
            by_name("pet").kind,
            FieldKind::Select {
                choices: vec![choice("p1", "Cats"), choice("p2", "Dogs")]
            }
        );
        assert_eq!(by_name("nested").kind, FieldKind::Json);
    }

    #[test]
    fn a_schema_without_properties_has_no_fields() {
        assert!(fields(json!({"type": "object"}).as_object().unwrap()).is_empty());
    }

    #[test]
    fn rules_say_the_bounds_in_plain_words_and_secrets_are_known() {
        let schema = json!({
            "type": "object",
            "properties": {
                "count": {"type": "integer", "minimum": 1, "maximum": 9},
                "weight": {"type": "number", "minimum": 0.5, "maximum": 30},
                "toppings": {"type": "array", "maxItems": 2, "items": {"enum": ["cheese", "ham", "olives"]}},
                "email": {"type": "string", "format": "email"},
                "when": {"type": "string", "format": "date-time"},
                "nick": {"type": "string", "minLength": 3, "maxLength": 40},
                "api_key": {"type": "string"},
                "pin_code": {"type": "string", "writeOnly": true},
                "ok": {"type": "boolean"},
            }
        });
        let fields = fields(schema.as_object().unwrap());
        let rules = |name: &str| fields.iter().find(|f| f.name == name).unwrap().rules();
        assert_eq!(
            rules("count").as_deref(),
            Some("a whole number from 1 to 9")
        );
        assert_eq!(rules("weight").as_deref(), Some("a number from 0.5 to 30"));
        assert_eq!(
            rules("toppings").as_deref(),
            Some("choose at most 2 options")
        );
        assert_eq!(rules("email").as_deref(), Some("an email address"));
        assert_eq!(rules("when").as_deref(), Some("a date and time, in UTC"));
        assert_eq!(rules("nick").as_deref(), Some("3 to 40 characters"));
        assert_eq!(rules("ok"), None);
        let secret = |name: &str| fields.iter().find(|f| f.name == name).unwrap().secret;
        assert!(secret("api_key") && secret("pin_code"));
        assert!(!secret("nick") && !secret("email"));
    }
}
