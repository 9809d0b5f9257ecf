//! A form keeps the server's property order end to end: a Python server asks for
//! `street, city, country, apt` (not alphabetical) and `m3 pending` (text and JSON), the
//! HTTP API of `m3 serve` and the stored round list them in that order; on SQLite and on
//! PostgreSQL. The shipping example's address (street before city) likewise.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{
    STEP, Store, curl_json, managed_raw_run, managed_run, raw_server, refs, shipping_server,
};
use serde_json::{Value, json};

const ORDER: [&str; 4] = ["street", "city", "country", "apt"];

fn params() -> Value {
    // `json!` keeps the order written (serde_json's `preserve_order`), and so does the
    // Python server, which sends these params as given.
    json!({
        "mode": "form",
        "message": "Where should the parcel go?",
        "requestedSchema": {"type": "object", "required": ["street", "city"], "properties": {
            "street": {"type": "string", "title": "Street"},
            "city": {"type": "string", "title": "City"},
            "country": {"type": "string", "default": "IN"},
            "apt": {"type": "string"}
        }}
    })
}

fn property_names(round: &Value, key: &str) -> Vec<String> {
    round["requests"][key]["requested_schema"]["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("no properties in {round}"))
        .keys()
        .cloned()
        .collect()
}

/// The byte offsets of `m3 pending`'s field lines for `names`, which must all be there.
fn field_positions(text: &str, names: &[&str]) -> Vec<usize> {
    names
        .iter()
        .map(|name| {
            text.find(&format!("\n      {name}: "))
                .unwrap_or_else(|| panic!("no field line for {name} in:\n{text}"))
        })
        .collect()
}

fn assert_in_order(positions: &[usize], text: &str) {
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "fields out of the server's order in:\n{text}"
    );
}

fn server_order_everywhere(store: &Store) {
    let mut run = store.spawn(&refs(&managed_raw_run(&raw_server(&params()))));
    let execution = run.next_json()["execution_id"].as_str().unwrap().to_owned();
    let round = run.next_json();
    assert_eq!(property_names(&round, "q"), ORDER, "m3 run's round line");
    let round_id = round["round_id"].as_str().unwrap().to_owned();

    let text = store.m3(&["pending", &execution]).expect_code(0).stdout;
    assert_in_order(&field_positions(&text, &ORDER), &text);
    let listed = store
        .m3(&["--json", "pending", &execution])
        .expect_code(0)
        .json();
    assert_eq!(property_names(&listed[0], "q"), ORDER, "m3 --json pending");

    let token = "order-token-0123456789";
    let mut serve = store.spawn(&["serve", "--bind", "127.0.0.1:0", "--token", token]);
    let page = serve.next_line();
    let url = page
        .trim_end_matches(&format!("/?token={token}"))
        .to_owned();
    let one = curl_json(
        &format!("{url}/api/v1/executions/{execution}/rounds/{round_id}"),
        token,
    );
    assert_eq!(property_names(&one, "q"), ORDER, "API round");
    let deadline = Instant::now() + STEP;
    let inbox = loop {
        let inbox = curl_json(&format!("{url}/api/v1/rounds?status=pending"), token);
        if inbox.as_array().is_some_and(|rounds| !rounds.is_empty()) {
            break inbox;
        }
        assert!(Instant::now() < deadline, "no pending round in the API");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(property_names(&inbox[0], "q"), ORDER, "API inbox");
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(serve.child.id()).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    );
    serve.finish();

    let answer = r#"q={"street": "1 Main Street", "city": "Pune"}"#;
    store
        .m3(&[
            "respond",
            "--idempotency-key",
            "order-1",
            "--accept",
            answer,
            &execution,
            &round_id,
        ])
        .expect_code(0);
    let done = run.finish().expect_code(0);
    // The server echoes the answer it received (its text is the answer's JSON).
    assert!(done.stdout.contains("1 Main Street"), "{}", done.stdout);
}

#[test]
fn a_form_keeps_the_servers_order_in_pending_and_the_api() {
    server_order_everywhere(&Store::new());
}

#[cfg(feature = "postgres")]
#[test]
fn a_form_keeps_the_servers_order_in_pending_and_the_api_on_postgres() {
    server_order_everywhere(&Store::postgres());
}

/// The shipping example's address asks the street before the city, in both protocol eras.
#[test]
fn the_shipping_address_asks_the_street_before_the_city() {
    for era in ["2026-07-28", "legacy"] {
        let store = Store::new();
        let server = shipping_server(&format!("--era {era}"));
        let mut run = store.spawn(&refs(&managed_run(&server, "book_shipment")));
        let execution = run.next_json()["execution_id"].as_str().unwrap().to_owned();
        let round = run.next_json();
        let key = round["requests"]
            .as_object()
            .and_then(|requests| requests.keys().next())
            .unwrap()
            .clone();
        assert_eq!(property_names(&round, &key), ["street", "city"], "{era}");
        let text = store.m3(&["pending", &execution]).expect_code(0).stdout;
        assert_in_order(&field_positions(&text, &["street", "city"]), &text);
        store.m3(&["cancel", &execution]).expect_code(0);
        run.finish();
    }
}
