//! The two-terminal flow with the `codex` harness: `m3 run --agent '{"harness":
//! "codex", ...}'` in one process (real Codex 0.169.0 against `m3
//! example-provider`; Codex starts the server through `m3 mcp-relay`, this very
//! binary), and `m3 respond` from another.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::{Store, m3_bin, refs, shipping_server};
use serde_json::json;

fn codex() -> String {
    let root = std::env::var("M3_TEST_CODEX_DIR").unwrap_or_else(|_| {
        format!(
            "{}/.cache/m3-rs/tools",
            std::env::var("HOME").unwrap_or_default()
        )
    });
    let path = format!("{root}/codex-0.169.0/node_modules/.bin/codex");
    assert!(
        std::path::Path::new(&path).exists(),
        "codex missing at {path}: run scripts/test.sh to install it"
    );
    path
}

#[test]
fn a_codex_round_is_answered_from_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        json!({"steps": [
            {"call": "shipping:book_shipment", "arguments": {"weight_kg": 2}},
            {"text": "Shipment booked."}
        ]})
        .to_string(),
    )
    .unwrap();
    let mut provider = Command::new(m3_bin())
        .args(["example-provider", "--script", script.to_str().unwrap()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut url = String::new();
    BufReader::new(provider.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let agent = json!({
        "harness": "codex",
        "models": ["m3-example-model"],
        "executable": codex(),
        "provider": {"base_url": url.trim()},
    })
    .to_string();

    let store = Store::new();
    let args = vec![
        "--json".to_owned(),
        "run".into(),
        "--server".into(),
        shipping_server(""),
        "--agent".into(),
        agent,
        "--tools".into(),
        "shipping:book_shipment".into(),
        "--human-input".into(),
        "managed".into(),
        "--prompt".into(),
        "Ask for the delivery address, then book the shipment.".into(),
    ];
    let mut run = store.spawn(&refs(&args));
    let execution = run.next_json()["execution_id"].as_str().unwrap().to_owned();
    let round = run.next_json();
    assert_eq!(round["operation_name"], "book_shipment");
    let round_id = round["round_id"].as_str().unwrap().to_owned();
    store
        .m3(&[
            "respond",
            &execution,
            &round_id,
            "--idempotency-key",
            "k1",
            "--accept",
            r#"shipping_address={"street": "1 Main Street", "city": "Pune"}"#,
        ])
        .expect_code(0);
    let done = run.finish().expect_code(0);
    assert!(done.stdout.contains("Shipment booked."), "{}", done.stdout);
    let status = store
        .m3(&["--json", "status", &execution])
        .expect_code(0)
        .json();
    assert_eq!(status["outcome"], "completed", "{status}");
    let _ = provider.kill();
    let _ = provider.wait();
}
