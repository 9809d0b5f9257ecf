//! Log lines: `--log-format json` (or `M3_LOG_FORMAT=json`) writes one JSON object per
//! line with the fields of the enclosing spans, `text` writes timestamped lines, `M3_LOG`
//! filters them; and a whole managed flow logged at `trace` (a worker that notifies a
//! webhook, `m3 serve`, an answer posted with a bearer token) puts no response value, no
//! token and no signing secret in any line.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
#[path = "common/queue.rs"]
#[allow(unused_imports)] // the shared helpers re-export more than this test needs
mod queue;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::{Running, Store};
use queue::{book, file, logged_server, submit, wait_for_event};
use serde_json::{Value, json};

const API_TOKEN: &str = "tok-never-in-a-log-line-7f3a";
const STREET: &str = "17 Unloggable Lane";

/// `m3 ARGS...` on `store` with every log line at `trace` as `format`, stderr into `log`.
fn traced(store: &Store, args: &[&str], format: &str, log: &Path) -> Running {
    let mut command = store.command(args);
    command
        .env("M3_LOG", "trace")
        .env("M3_LOG_FORMAT", format)
        .stderr(Stdio::from(std::fs::File::create(log).unwrap()));
    Running::start(command)
}

/// POSTs `body` as JSON to `http://{address}{path}` with the API token; status and body.
fn post(address: &str, path: &str, body: &Value) -> (u16, String) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let body = body.to_string();
    let request = format!(
        "POST {path} HTTP/1.0\r\nHost: {address}\r\nAuthorization: Bearer {API_TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (
        head.split(' ').nth(1).unwrap().parse().unwrap(),
        body.to_owned(),
    )
}

/// A loopback receiver that accepts every webhook delivery with 204.
fn receiver() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
            let mut buffer = [0_u8; 65536];
            let _ = stream.read(&mut buffer);
            let _ = stream.write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
        }
    });
    url
}

fn assert_no_secret(what: &str, log: &str, secrets: &[&str]) {
    for secret in secrets {
        assert!(
            !log.contains(secret),
            "the {what} log shows a secret ({secret}):\n{}",
            log.lines()
                .filter(|line| line.contains(secret))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

#[test]
fn a_traced_managed_flow_logs_no_answer_token_or_signing_secret() {
    let store = Store::new();
    let worker_log = file(&store, "worker.log");
    let serve_log = file(&store, "serve.log");
    let mut worker = traced(
        &store,
        &["--json", "worker", "--notify"],
        "json",
        &worker_log,
    );
    wait_for_event(&mut worker, "started", None);
    let added = store
        .m3(&[
            "--json",
            "webhooks",
            "add",
            &receiver(),
            "--allow-loopback",
            "--events",
            "round.pending",
        ])
        .expect_code(0)
        .json();
    let signing_secret = added["secret"].as_str().unwrap().to_owned();
    let signing_key = signing_secret.trim_start_matches("whsec_").to_owned();
    let mut serve = traced(
        &store,
        &[
            "--json",
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--token",
            API_TOKEN,
        ],
        "text",
        &serve_log,
    );
    let address = serve.next_json()["bind"].as_str().unwrap().to_owned();

    let execution = submit(
        &store,
        &logged_server(&file(&store, "calls.jsonl"), ""),
        &book(),
    );
    let waiting = wait_for_event(&mut worker, "round_pending", Some(&execution));
    let round = waiting["round_id"].as_str().unwrap();
    let answer = json!({
        "idempotency_key": "answer-1",
        "responses": {"shipping_address": {"action": "accept",
            "content": {"street": STREET, "city": "Pune"}}}
    });
    let (status, body) = post(
        &address,
        &format!("/api/v1/executions/{execution}/rounds/{round}/responses"),
        &answer,
    );
    assert_eq!(status, 200, "{body}");
    let finished = wait_for_event(&mut worker, "finished", Some(&execution));
    assert_eq!(finished["outcome"], "completed");
    drop(worker);
    drop(serve);

    let worker_lines = std::fs::read_to_string(&worker_log).unwrap();
    let serve_lines = std::fs::read_to_string(&serve_log).unwrap();
    let secrets = [STREET, API_TOKEN, &signing_secret, &signing_key];
    assert_no_secret("worker", &worker_lines, &secrets);
    assert_no_secret("serve", &serve_lines, &secrets);

    // JSON lines, each an object; those inside the execution's span carry its id.
    let objects: Vec<Value> = worker_lines
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    assert!(objects.len() > 10, "{worker_lines}");
    assert!(objects.iter().all(|line| line["timestamp"].is_string()));
    assert!(
        objects.iter().any(|line| {
            line["spans"].as_array().is_some_and(|spans| {
                spans
                    .iter()
                    .any(|span| span["execution.id"] == execution.as_str())
            })
        }),
        "no worker line carries the execution's span fields"
    );
    // Text lines start with a UTC timestamp.
    assert!(!serve_lines.is_empty());
    for line in serve_lines.lines().filter(|line| !line.starts_with(' ')) {
        let stamp = line.split(' ').next().unwrap();
        assert!(
            stamp.len() > 20 && stamp.ends_with('Z') && stamp.as_bytes()[10] == b'T',
            "{line}"
        );
    }
}

#[test]
fn m3_log_filters_lines_and_rust_log_is_the_fallback() {
    let store = Store::new();
    store.m3(&["demo"]).expect_code(0);
    let run = |env: &[(&str, &str)]| {
        let mut command = store.command(&["--log-format", "json", "executions"]);
        command.env_remove("RUST_LOG").env_remove("M3_LOG");
        for (name, value) in env {
            command.env(name, value);
        }
        let output = command.output().unwrap();
        assert!(output.status.success());
        String::from_utf8(output.stderr).unwrap()
    };
    // Quiet by default: the store commands keep stderr for their one error line.
    assert_eq!(run(&[]), "");
    let sqlx_only = run(&[("M3_LOG", "sqlx=debug")]);
    assert!(!sqlx_only.is_empty());
    for line in sqlx_only.lines() {
        let line: Value = serde_json::from_str(line).unwrap();
        assert!(
            line["target"].as_str().unwrap().starts_with("sqlx"),
            "{line}"
        );
    }
    assert_eq!(run(&[("M3_LOG", "off"), ("RUST_LOG", "sqlx=debug")]), "");
    // Without M3_LOG, RUST_LOG filters.
    let fallback = run(&[("RUST_LOG", "sqlx=debug")]);
    assert!(!fallback.is_empty());
    assert!(
        fallback
            .lines()
            .all(|line| line.contains("\"target\":\"sqlx"))
    );
}

#[test]
fn an_unknown_log_format_is_a_usage_error() {
    let store = Store::new();
    let done = store.m3(&["--log-format", "xml", "executions"]);
    done.expect_code(2);
    let mut command = store.command(&["executions"]);
    command.env("M3_LOG_FORMAT", "xml");
    assert_eq!(command.output().unwrap().status.code(), Some(2));
}
