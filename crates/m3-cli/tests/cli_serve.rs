//! `m3 serve` as a process: the page URL first, the bind rule (exit 3), the
//! shell examples of docs/serve.md run against it while `m3 run` waits in
//! another process, and SIGTERM ends it with exit 0.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{STEP, Store, curl_json, managed_run, refs, shipping_server};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const GUIDE: &str = include_str!("../../../docs/serve.md");

/// Every ```sh block of the guide.
fn shell_blocks() -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in GUIDE.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```sh") => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), text) => {
                block.push_str(text);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

#[test]
fn binding_beyond_loopback_needs_a_token() {
    let store = Store::new();
    let refused = store.m3(&["serve", "--bind", "0.0.0.0:0"]).expect_code(3);
    assert!(refused.stderr.contains("--token"), "{}", refused.stderr);
    let refused = store
        .m3(&["--json", "serve", "--bind", "0.0.0.0:0"])
        .expect_code(3);
    assert_eq!(refused.error_code(), "invalid_argument");
}

#[test]
fn the_guide_runs_against_m3_serve_while_m3_run_waits() {
    let store = Store::new();
    let token = "guide-token-0123456789";
    let mut serve = store.spawn(&[
        "serve",
        "--create",
        "--bind",
        "127.0.0.1:0",
        "--token",
        token,
    ]);
    let page = serve.next_line();
    assert!(
        page.starts_with("http://127.0.0.1:") && page.ends_with(&format!("/?token={token}")),
        "{page}"
    );
    let url = page
        .trim_end_matches(&format!("/?token={token}"))
        .to_owned();

    let mut run = store.spawn(&refs(&managed_run(&shipping_server(""), "book_shipment")));
    let execution = run.next_json()["execution_id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + STEP;
    let round = loop {
        let inbox = curl_json(&format!("{url}/api/v1/rounds?status=pending"), token);
        if let Some(round) = inbox.as_array().and_then(|rounds| rounds.first()) {
            break round["round_id"].as_str().unwrap().to_owned();
        }
        assert!(Instant::now() < deadline, "no pending round");
        std::thread::sleep(Duration::from_millis(50));
    };

    let blocks = shell_blocks();
    assert!(blocks.len() >= 4, "the guide's shell examples");
    let (before, after): (Vec<&String>, Vec<&String>) = blocks
        .iter()
        .partition(|block| !block.contains("/cancel") && !block.contains("/events"));
    let sh = |block: &str| {
        let output = Command::new("bash")
            .args(["-euo", "pipefail", "-c", block])
            .env("URL", &url)
            .env("TOKEN", token)
            .env("AUTH", format!("Authorization: Bearer {token}"))
            .env("E", &execution)
            .env("R", &round)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{block}\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    };
    // Reads, the answer and its replay while the run waits; the run then finishes.
    before.iter().for_each(|block| sh(block));
    let done = run.finish().expect_code(0);
    assert!(done.stdout.contains("Shipment booked."), "{}", done.stdout);
    // Cancel (a no-op once finished) and the event stream.
    after.iter().for_each(|block| sh(block));
    let status = curl_json(&format!("{url}/api/v1/executions/{execution}"), token);
    assert_eq!(status["outcome"], "completed");

    kill(
        Pid::from_raw(i32::try_from(serve.child.id()).unwrap()),
        Signal::SIGTERM,
    )
    .unwrap();
    serve.finish().expect_code(0);
}
