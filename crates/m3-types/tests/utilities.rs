//! Timestamps, canonical JSON, redaction, clocks and ids.
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers outside #[test] fns"
)]

use m3_types::{
    Clock, ManualClock, SystemClock, canonical_eq, canonical_json, ordered_json, redact,
    redact_with, timestamp,
};
use serde_json::{Value, json};
use time::Duration;
use time::macros::datetime;

#[test]
fn timestamps_are_fixed_width_utc_with_microseconds() {
    assert_eq!(
        timestamp::format(datetime!(2026-11-29 17:40:10.123456 UTC)),
        "2026-11-29T17:40:10.123456+00:00"
    );
    assert_eq!(
        timestamp::format(datetime!(2026-01-01 00:00:30 UTC)),
        "2026-01-01T00:00:30.000000+00:00"
    );
    // Other offsets are converted to UTC.
    assert_eq!(
        timestamp::format(datetime!(2026-01-01 05:30:00 +05:30)),
        "2026-01-01T00:00:00.000000+00:00"
    );
    // Nanoseconds are truncated.
    assert_eq!(
        timestamp::format(datetime!(2026-01-01 00:00:00.123456789 UTC)),
        "2026-01-01T00:00:00.123456+00:00"
    );
    for t in [
        datetime!(0001-01-01 0:00 UTC),
        datetime!(9999-12-31 23:59:59.999999 UTC),
    ] {
        let text = timestamp::format(t);
        assert_eq!(text.len(), 32);
        assert_eq!(timestamp::parse(&text).unwrap(), t);
    }
}

#[test]
fn lexical_order_is_time_order() {
    let a = timestamp::format(datetime!(2026-01-01 00:00:09.999999 UTC));
    let b = timestamp::format(datetime!(2026-01-01 00:00:10 UTC));
    assert!(a < b);
}

#[test]
fn parse_accepts_every_python_isoformat_of_aware_datetimes() {
    let base = datetime!(2026-01-01 00:00:30 UTC);
    let cases = [
        ("2026-01-01T00:00:30+00:00", base),
        ("2026-01-01T00:00:30.000000+00:00", base),
        ("2026-01-01 00:00:30+00:00", base),
        ("2026-01-01T00:00:30Z", base),
        (
            "2026-01-01T00:00:30.5+00:00",
            base + Duration::milliseconds(500),
        ),
        (
            "2026-01-01T00:00:30.123+00:00",
            base + Duration::milliseconds(123),
        ),
        (
            "2026-01-01T00:00:30.123456789+00:00",
            base + Duration::microseconds(123_456),
        ),
        ("2026-01-01T05:30:30+05:30", base),
        ("2025-12-31T19:00:30-05:00", base),
        ("2026-01-01T00:00+00:00", base - Duration::seconds(30)),
        ("2026-01-01T00+00:00", base - Duration::seconds(30)),
        ("2026-01-01T00:00:45+00:00:15", base),
        ("2026-01-01T00:00:45.000001+00:00:15.000001", base),
        ("2026-01-01T00:00:30+0000", base),
    ];
    for (text, expected) in cases {
        assert_eq!(timestamp::parse(text).unwrap(), expected, "{text}");
    }
}

#[test]
fn parse_rejects_naive_and_malformed_text() {
    let naive = timestamp::parse("2026-01-01T00:00:30").unwrap_err();
    assert_eq!(naive.code(), "managed_input_invalid");
    assert!(naive.message().contains("timezone-aware"));
    for text in [
        "",
        "2026-01-01",
        "2026-13-01T00:00:00+00:00",
        "2026-02-30T00:00:00+00:00",
        "2026-01-01T25:00:00+00:00",
        "2026-01-01T00:00:00+24:00",
        "2026-01-01T0:00:00+00:00",
        "2026-01-01T00:00:00.+00:00",
        "2026-01-01T00:00:00.1234567890+00:00",
        "2026-01-01T00:00:00+00:00garbage",
        "tomorrow",
        "２０２６-01-01T00:00:00+00:00",
    ] {
        assert!(timestamp::parse(text).is_err(), "{text}");
    }
}

#[test]
fn canonical_json_sorts_keys_compactly() {
    let v = json!({"b": 1, "a": {"d": [1, 2.5, "é\n"], "c": null}, "A": true});
    assert_eq!(
        canonical_json(&v).unwrap(),
        r#"{"A":true,"a":{"c":null,"d":[1,2.5,"é\n"]},"b":1}"#
    );
    assert!(canonical_eq(
        &json!({"x": 1, "y": 2}),
        &json!({"y": 2, "x": 1})
    ));
    assert!(!canonical_eq(&json!({"x": 1}), &json!({"x": 1.0})));
    assert!(!canonical_eq(
        &json!({"action": "decline"}),
        &json!({"action": "cancel"})
    ));
}

#[test]
fn ordered_json_keeps_the_held_order_and_canonical_json_still_sorts() {
    // With serde_json's `preserve_order` (enabled workspace-wide) a parsed object keeps the
    // order it was written in; only the canonical form sorts.
    let v: serde_json::Value =
        serde_json::from_str(r#"{"street": "é", "city": {"z": 1, "a": [2.5]}, "apt": null}"#)
            .unwrap();
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["street", "city", "apt"]);
    assert_eq!(
        ordered_json(&v).unwrap(),
        r#"{"street":"é","city":{"z":1,"a":[2.5]},"apt":null}"#
    );
    assert_eq!(
        canonical_json(&v).unwrap(),
        r#"{"apt":null,"city":{"a":[2.5],"z":1},"street":"é"}"#
    );
    let reordered = json!({"apt": null, "city": {"a": [2.5], "z": 1}, "street": "é"});
    assert!(canonical_eq(&v, &reordered));
    assert_eq!(v, reordered, "equality of values ignores order");
    let mut deep = json!(1);
    for _ in 0..200 {
        deep = json!({"k": deep});
    }
    assert_eq!(
        ordered_json(&deep).unwrap_err().code(),
        "managed_input_invalid"
    );
}

#[test]
fn canonical_json_refuses_too_deep_values() {
    let mut v = json!(1);
    for _ in 0..200 {
        v = json!([v]);
    }
    let err = canonical_json(&v).unwrap_err();
    assert_eq!(err.code(), "managed_input_invalid");
    assert!(err.message().contains("invalid JSON"));
    // Non-finite floats cannot enter a serde_json value at all.
    assert!(serde_json::Number::from_f64(f64::NAN).is_none());
}

#[test]
fn redaction_matches_the_reference_projection() {
    let responses = json!({
        "address": {"action": "accept", "content": {"city": "Pune", "token": "super-secret"}, "meta": null},
        "payment": {"action": "accept", "content": null, "meta": null}
    });
    assert_eq!(
        redact(&responses),
        json!({
            "address": {"action": "accept", "content": {"city": "Pune", "token": "[REDACTED]"}, "meta": null},
            "payment": {"action": "accept", "content": null, "meta": null}
        })
    );
}

#[test]
fn sensitive_key_names_are_redacted_on_word_boundaries() {
    let sensitive = [
        "token",
        "password",
        "passwd",
        "secret",
        "api_key",
        "apiKey",
        "X-Api-Key",
        "authorization",
        "Authorization",
        "cookie",
        "Set-Cookie",
        "credential",
        "credentials",
        "private_key",
        "client_secret",
        "clientSecret",
        "session_key",
        "access_token",
        "refresh-token",
        "id_token",
        "auth_token",
        "bearer_token",
        "db_password",
        "AWS_SECRET_ACCESS_KEY",
    ];
    for key in sensitive.iter().chain(&WIDENED_SECRET_NAMES).copied() {
        let mut v = serde_json::Map::new();
        v.insert(key.to_owned(), json!({"nested": "value"}));
        assert_eq!(redact(&Value::Object(v))[key], json!("[REDACTED]"), "{key}");
        assert!(m3_types::redact::is_sensitive_key(key), "{key}");
    }
    for key in [
        "max_tokens",
        "tokenizer",
        "city",
        "secretary",
        "passwords_count_hint",
        "keyboard",
        "cookies_enabled_flag",
        "spin",
        "pinned",
        "shipping",
        "postcode",
        "opinion",
        "card_color",
        "sessions_count_hint",
    ] {
        assert!(!m3_types::redact::is_sensitive_key(key), "{key}");
    }
    // Nested and inside arrays.
    let v = json!({"items": [{"password": "p", "name": "n"}], "meta": {"deep": {"secret": 1}}});
    assert_eq!(
        redact(&v),
        json!({"items": [{"password": "[REDACTED]", "name": "n"}], "meta": {"deep": {"secret": "[REDACTED]"}}})
    );
    // Null stays null (nothing to hide), other scalars are replaced.
    assert_eq!(
        redact(&json!({"token": null, "secret": 5})),
        json!({"token": null, "secret": "[REDACTED]"})
    );
}

#[test]
fn urls_lose_userinfo_and_sensitive_query_values() {
    let v = json!({
        "a": "https://user:pass@example.com/path?x=1&token=abc&api_key=k#frag",
        "b": "postgres://admin@db.internal:5432/app",
        "c": "https://example.com/?q=search&access%5Ftoken=zz",
        "d": "https://example.com/plain?page=2",
        "e": "not a url: token=abc",
        "f": "ftp://example.com/@notuserinfo"
    });
    assert_eq!(
        redact(&v),
        json!({
            "a": "https://[REDACTED]@example.com/path?x=1&token=[REDACTED]&api_key=[REDACTED]#frag",
            "b": "postgres://[REDACTED]@db.internal:5432/app",
            "c": "https://example.com/?q=search&access%5Ftoken=[REDACTED]",
            "d": "https://example.com/plain?page=2",
            "e": "not a url: token=abc",
            "f": "ftp://example.com/@notuserinfo"
        })
    );
}

#[test]
fn configured_secret_values_are_redacted_everywhere() {
    let v = json!({"note": "the key is s3cr3t-value, keep it", "list": ["s3cr3t-value"]});
    assert_eq!(
        redact_with(&v, &["s3cr3t-value", ""]),
        json!({"note": "the key is [REDACTED], keep it", "list": ["[REDACTED]"]})
    );
}

#[test]
fn manual_clock_is_shared_settable_and_truncated() {
    let clock = ManualClock::new(datetime!(2026-01-01 00:00:00.000000999 UTC));
    let other = clock.clone();
    assert_eq!(clock.now(), datetime!(2026-01-01 00:00:00 UTC));
    other.advance(Duration::seconds(31));
    assert_eq!(clock.now(), datetime!(2026-01-01 00:00:31 UTC));
    clock.set(datetime!(2026-01-01 01:00:00 +01:00));
    assert_eq!(other.now(), datetime!(2026-01-01 00:00:00 UTC));
    assert_eq!(other.now().offset(), time::UtcOffset::UTC);
    clock.advance_std(std::time::Duration::from_millis(1500));
    assert_eq!(other.now(), datetime!(2026-01-01 00:00:01.5 UTC));
    let shared: std::sync::Arc<dyn Clock> = std::sync::Arc::new(clock);
    std::thread::spawn(move || shared.now()).join().unwrap();
}

#[test]
fn system_clock_is_utc_with_microsecond_precision() {
    let now = SystemClock.now();
    assert_eq!(now.offset(), time::UtcOffset::UTC);
    assert_eq!(now.nanosecond() % 1000, 0);
    assert_eq!(timestamp::parse(&timestamp::format(now)).unwrap(), now);
}

#[test]
fn ids_are_ulids() {
    let a = m3_types::new_id();
    let b = m3_types::new_id();
    assert_eq!(a.len(), 26);
    assert_ne!(a, b);
    assert!(ulid::Ulid::from_string(&a).is_ok());
}

mod properties {
    use m3_types::{canonical_json, redact};
    use proptest::prelude::*;
    use serde_json::Value;

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
            ".{0,16}".prop_map(Value::String),
            "[a-z]{1,5}://[a-z:@]{0,10}[/?#&=a-z_]{0,20}".prop_map(Value::String),
        ];
        leaf.prop_recursive(5, 64, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop_oneof![
                        Just("token".to_owned()),
                        Just("api_key".to_owned()),
                        ".{0,8}".prop_map(|s| s)
                    ],
                    inner,
                    0..5
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn canonical_json_parses_back_to_the_same_value(v in arb_json()) {
            let text = canonical_json(&v).unwrap();
            let back: Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(canonical_json(&back).unwrap(), text);
        }

        #[test]
        fn redaction_is_idempotent_and_keeps_the_shape(v in arb_json()) {
            let once = redact(&v);
            prop_assert_eq!(redact(&once), once.clone());
            prop_assert_eq!(std::mem::discriminant(&once), std::mem::discriminant(&v));
            if let (Value::Object(a), Value::Object(b)) = (&v, &once) {
                prop_assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
            }
        }
    }
}

#[test]
fn echoes_of_secret_named_values_are_redacted_everywhere() {
    let trace = json!({
        "input_responses": {"login": {"action": "accept", "content": {"user": "ada", "password": "hunter2-secret", "pwd": "12"}}},
        "result": {"content": [{"type": "text", "text": "logged in with hunter2-secret as ada"}]},
        "short": "a pin 12 stays"
    });
    let redacted = m3_types::redact_echoes(&trace);
    assert_eq!(
        redacted["input_responses"]["login"]["content"],
        json!({"user": "ada", "password": "[REDACTED]", "pwd": "[REDACTED]"})
    );
    assert_eq!(
        redacted["result"]["content"][0]["text"],
        json!("logged in with [REDACTED] as ada")
    );
    assert_eq!(
        redacted["short"],
        json!("a pin 12 stays"),
        "too short to search for"
    );
    assert_eq!(
        m3_types::secret_values(&trace),
        vec!["hunter2-secret".to_owned()]
    );
}

/// The names issue 27 found missing, in the spellings servers use (case, `-`/`_`/`.`,
/// camelCase, run together).
const WIDENED_SECRET_NAMES: [&str; 32] = [
    "pin",
    "PIN",
    "user_pin",
    "pinCode",
    "pincode",
    "otp",
    "OTP",
    "totp_code",
    "ssn",
    "SSN",
    "social_security_number",
    "credit_card",
    "creditCard",
    "credit-card",
    "CREDITCARD",
    "card_number",
    "cardNumber",
    "cc_number",
    "cvv",
    "CVC",
    "security_code",
    "securityCode",
    "session",
    "Session-Id",
    "sessionId",
    "HTTPSessionId",
    "api-key",
    "passcode",
    "verification_code",
    "one_time_password",
    "jwt",
    "account.number",
];

#[test]
fn fields_the_schema_marks_secret_are_redacted_whatever_their_name() {
    use m3_types::redact::{marked_secret_values, redact_content};
    use m3_types::{ElicitationRequest, ElicitationResponse, FormElicitationRequest};

    let schema = json!({
        "type": "object",
        "properties": {
            "code": {"type": "string", "format": "password"},
            "memo": {"type": "string", "writeOnly": true},
            "note": {"type": "string", "writeOnly": false},
            "city": {"type": "string"},
            "token": {"type": "string"},
            "empty": {"type": "string", "format": "password"},
            "nested": {"type": "object", "properties": {"hint": {"type": "string", "writeOnly": true}}},
            "list": {"type": "array", "items": {"type": "string", "format": "password"}}
        }
    });
    let schema = schema.as_object().unwrap().clone();
    let content = json!({
        "code": "1234-abcd", "memo": "remember me", "note": "visible", "city": "Pune",
        "token": "by-name", "empty": null, "nested": {"hint": "deep secret", "other": "kept"},
        "list": ["one-secret", "two-secret"], "unknown": "kept too"
    });
    let content = content.as_object().unwrap().clone();
    assert_eq!(
        redact_content(&schema, &content),
        json!({
            "code": "[REDACTED]", "memo": "[REDACTED]", "note": "visible", "city": "Pune",
            "token": "[REDACTED]", "empty": null,
            "nested": {"hint": "[REDACTED]", "other": "kept"},
            "list": ["[REDACTED]", "[REDACTED]"], "unknown": "kept too"
        })
    );

    // A round's projection: per request key, with that request's schema.
    let form = FormElicitationRequest::new("login", "Log in.", schema.clone());
    let url = m3_types::UrlElicitationRequest::new("verify", "Verify.", "https://x.example/");
    let requests = std::collections::BTreeMap::from([
        ("login".to_owned(), ElicitationRequest::Form(form)),
        ("verify".to_owned(), ElicitationRequest::Url(url)),
    ]);
    let responses = m3_types::ResponseMap::from([
        (
            "login".to_owned(),
            ElicitationResponse::accept(content.clone()),
        ),
        ("verify".to_owned(), ElicitationResponse::accept_url()),
    ]);
    let payload = serde_json::to_value(&responses).unwrap();
    let projected = m3_types::redact_responses(&requests, &payload);
    assert_eq!(projected["login"]["content"]["code"], "[REDACTED]");
    assert_eq!(projected["login"]["content"]["memo"], "[REDACTED]");
    assert_eq!(projected["login"]["content"]["token"], "[REDACTED]");
    assert_eq!(projected["login"]["content"]["city"], "Pune");
    assert_eq!(projected["verify"], payload["verify"]);
    // Without the schema, only the name rules apply.
    assert_eq!(redact(&payload)["login"]["content"]["code"], "1234-abcd");

    // The values to look for in echoes: every marked value, longest first.
    assert_eq!(
        marked_secret_values(&requests, &responses),
        [
            "deep secret",
            "remember me",
            "one-secret",
            "two-secret",
            "1234-abcd"
        ]
    );
}

#[test]
fn a_validation_error_at_a_schema_marked_field_does_not_echo_its_value() {
    let schema = json!({
        "type": "object",
        "properties": {"code": {"type": "string", "writeOnly": true, "maxLength": 3}}
    });
    let content = json!({"code": "far-too-long-secret"});
    let error = m3_types::validation::check_content(
        schema.as_object().unwrap(),
        content.as_object().unwrap(),
    )
    .unwrap_err();
    let shown = serde_json::to_string(&error.details()).unwrap();
    assert!(!shown.contains("far-too-long-secret"), "{shown}");
}
