//! `m3 pending` tells a person what each field wants before they answer: its kind,
//! whether it is required, its bounds in plain words, its default, the titles of its
//! choices, and the title and description the server gave it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Store, managed_raw_run, raw_server, refs};
use serde_json::json;

#[test]
fn pending_shows_titles_descriptions_bounds_defaults_and_choice_titles() {
    let params = json!({
        "mode": "form",
        "message": "Set up the pick-up.",
        "requestedSchema": {"type": "object", "required": ["count"], "properties": {
            "count": {"type": "integer", "title": "Parcels", "description": "How many boxes.",
                      "minimum": 1, "maximum": 9, "default": 1},
            "size": {"type": "string", "oneOf": [
                {"const": "s", "title": "Small parcel"}, {"const": "l", "title": "Large parcel"}]},
            "extras": {"type": "array", "maxItems": 2,
                       "items": {"type": "string", "enum": ["cheese", "ham", "olives"]}},
            "api_key": {"type": "string", "default": "sk-default-never-shown"}
        }}
    });
    let store = Store::new();
    let mut run = store.spawn(&refs(&managed_raw_run(&raw_server(&params))));
    let execution = run.next_json()["execution_id"].as_str().unwrap().to_owned();
    run.next_json();
    let pending = store.m3(&["pending", &execution]).expect_code(0).stdout;
    for expected in [
        "      count: integer, required; a whole number from 1 to 9; default 1",
        "        Parcels: How many boxes.",
        "      size: one of s (Small parcel)|l (Large parcel)",
        "      extras: any of cheese|ham|olives; choose at most 2 options",
        "      api_key: string; has a default",
    ] {
        assert!(
            pending.contains(expected),
            "missing {expected:?} in:\n{pending}"
        );
    }
    assert!(!pending.contains("sk-default-never-shown"), "{pending}");
    store.m3(&["cancel", &execution]).expect_code(0);
    run.finish();
}
