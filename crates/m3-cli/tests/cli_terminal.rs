//! A hostile server's text cannot drive the terminal: the message, property names,
//! descriptions, defaults and URL of its round reach `m3 run`, `m3 pending` and the
//! interactive form with every control character made visible (`\x1b`, `\r`, `\u{202e}`),
//! and a URL request names the host it really leads to.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::Command;

use common::{Store, m3_bin, raw_server};
use nix::sys::wait::WaitStatus;
use rexpect::session::{PtySession, spawn_command};
use serde_json::{Value, json};

/// An OSC window title, a line erase with a carriage return, a concealing SGR, a bell, a C1
/// CSI and a right-to-left override.
const HOSTILE_MESSAGE: &str =
    "Pay now\x1b]0;pwned\x07\x1b[2K\rAll good\x1b[8m hidden\u{9b}31m\u{202e}gnp.exe";
const HOSTILE_NAME: &str = "na\x1b]0;pwned\x07me";
const HOSTILE_DESCRIPTION: &str = "desc\x1b[1A\x1b[2Kription";
const HOSTILE_DEFAULT: &str = "x\x1b[31my";
/// The issue's spoofed URL: it displays as the second URL on a raw terminal.
const SPOOFED_URL: &str = "https://evil.example/steal\x1b[2K\rhttps://accounts.example/login";

/// What must never reach the output raw (m3's own colour codes are not among them).
const RAW_HOSTILE: [&str; 7] = [
    "\x1b]0;pwned",
    "\x1b[2K\r",
    "\x1b[8m",
    "\x1b[1A",
    "\u{9b}",
    "\u{202e}",
    "\x07",
];

fn form_params() -> Value {
    json!({
        "message": HOSTILE_MESSAGE,
        "requestedSchema": {
            "type": "object",
            "properties": {
                HOSTILE_NAME: {
                    "type": "string",
                    "description": HOSTILE_DESCRIPTION,
                    "default": HOSTILE_DEFAULT
                }
            },
            "required": [HOSTILE_NAME]
        }
    })
}

fn url_params() -> Value {
    json!({"mode": "url", "message": "Verify\x1b[2K\ryour account", "url": SPOOFED_URL})
}

fn run_args(server: &str) -> Vec<&str> {
    vec![
        "run",
        "--server",
        server,
        "--call",
        "raw:ask",
        "--arguments",
        "{}",
        "--human-input",
        "managed",
    ]
}

/// Asserts that `text` holds no raw control character at all (output to a pipe: no
/// colour), and none of the hostile sequences.
fn assert_no_raw_controls(what: &str, text: &str) {
    let raw: Vec<char> = text
        .chars()
        .filter(|c| (c.is_control() && *c != '\n') || *c == '\u{202e}')
        .collect();
    assert!(raw.is_empty(), "{what} has raw controls {raw:?}:\n{text}");
}

fn assert_no_hostile_sequences(what: &str, text: &str) {
    for sequence in RAW_HOSTILE {
        assert!(
            !text.contains(sequence),
            "{what} shows {sequence:?} raw:\n{text:?}"
        );
    }
}

/// Starts a text-mode `m3 run` that waits for an answer from another process; returns it
/// with the lines it printed up to its `m3 respond` hint.
fn waiting_run(store: &Store, server: &str) -> (common::Running, String) {
    let mut run = store.spawn(&run_args(server));
    let mut printed = String::new();
    loop {
        let line = run.next_line();
        printed.push_str(&line);
        printed.push('\n');
        if line.contains("answer from any terminal: m3 respond") {
            return (run, printed);
        }
    }
}

/// The pending round of the store, as `m3 --json pending` shows it.
fn pending_round(store: &Store) -> (String, String) {
    let pending = store.m3(&["--json", "pending"]).expect_code(0).json();
    (
        pending[0]["execution_id"].as_str().unwrap().to_owned(),
        pending[0]["round_id"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn run_and_pending_show_a_hostile_form_escaped() {
    let store = Store::new();
    let server = raw_server(&form_params());
    let (run, printed) = waiting_run(&store, &server);
    let pending = store.m3(&["pending"]).expect_code(0);
    for (what, text) in [("m3 run", &printed), ("m3 pending", &pending.stdout)] {
        assert_no_raw_controls(what, text);
        assert!(
            text.contains(
                "Pay now\\x1b]0;pwned\\x07\\x1b[2K\\rAll good\\x1b[8m hidden\\u{9b}31m\\u{202e}gnp.exe"
            ),
            "{what}: the message, escaped:\n{text}"
        );
        assert!(
            text.contains("na\\x1b]0;pwned\\x07me: string, required"),
            "{what}: the property name, escaped:\n{text}"
        );
    }
    let (execution, round) = pending_round(&store);
    let answer = format!(
        r#"q={{"{}": "ok"}}"#,
        HOSTILE_NAME
            .replace('\x1b', "\\u001b")
            .replace('\x07', "\\u0007")
    );
    store
        .m3(&[
            "respond",
            &execution,
            &round,
            "--idempotency-key",
            "k1",
            "--accept",
            &answer,
        ])
        .expect_code(0);
    let done = run.finish().expect_code(0);
    assert_no_raw_controls("m3 run (end)", &done.stdout);
    assert_no_raw_controls("m3 run (stderr)", &done.stderr);
    for command in [
        vec!["rounds", execution.as_str()],
        vec!["result", execution.as_str()],
    ] {
        let shown = store.m3(&command).expect_code(0);
        assert_no_raw_controls(&command.join(" "), &shown.stdout);
    }
}

#[test]
fn run_and_pending_name_the_real_host_of_a_spoofed_url() {
    let store = Store::new();
    let server = raw_server(&url_params());
    let (run, printed) = waiting_run(&store, &server);
    let pending = store.m3(&["pending"]).expect_code(0);
    for (what, text) in [("m3 run", &printed), ("m3 pending", &pending.stdout)] {
        assert_no_raw_controls(what, text);
        assert!(
            text.contains("https://evil.example/steal\\x1b[2K\\rhttps://accounts.example/login"),
            "{what}: the URL, escaped:\n{text}"
        );
        assert!(
            text.contains("host: evil.example"),
            "{what}: the host:\n{text}"
        );
        assert!(
            text.contains("Verify\\x1b[2K\\ryour account"),
            "{what}: the message:\n{text}"
        );
    }
    let (execution, round) = pending_round(&store);
    store
        .m3(&[
            "respond",
            &execution,
            &round,
            "--idempotency-key",
            "k1",
            "--accept-url",
            "q",
        ])
        .expect_code(0);
    let done = run.finish().expect_code(0);
    assert_no_raw_controls("m3 run (end)", &done.stdout);
}

fn interactive_run(store: &Store, server: &str) -> PtySession {
    let mut command = Command::new(m3_bin());
    command
        .arg("--db")
        .arg(store.db())
        .args(run_args(server))
        .arg("--interactive")
        .env_remove("M3_DB");
    spawn_command(command, Some(30_000)).unwrap()
}

/// Expects `needle` and returns everything read up to and including it.
fn expect(p: &mut PtySession, needle: &str, seen: &mut String) {
    let before = p
        .exp_string(needle)
        .unwrap_or_else(|e| panic!("{needle:?} not shown ({e}); so far:\n{seen:?}"));
    seen.push_str(&before);
    seen.push_str(needle);
}

fn exit_code(session: &PtySession) -> i32 {
    match session.process().wait().unwrap() {
        WaitStatus::Exited(_, code) => code,
        other => panic!("m3 did not exit normally: {other:?}"),
    }
}

#[test]
fn the_interactive_form_shows_a_hostile_form_escaped() {
    let store = Store::new();
    let mut p = interactive_run(&store, &raw_server(&form_params()));
    let mut seen = String::new();
    expect(
        &mut p,
        "[q] Pay now\\x1b]0;pwned\\x07\\x1b[2K\\rAll good\\x1b[8m hidden\\u{9b}31m\\u{202e}gnp.exe",
        &mut seen,
    );
    expect(&mut p, "[d]ecline / [c]ancel [a]: ", &mut seen);
    p.send_line("a").unwrap();
    expect(&mut p, "desc\\x1b[1A\\x1b[2Kription", &mut seen);
    expect(
        &mut p,
        "na\\x1b]0;pwned\\x07me (required, text) [default: x\\x1b[31my]: ",
        &mut seen,
    );
    p.send_line("ok").unwrap();
    expect(
        &mut p,
        "[q] accept: na\\x1b]0;pwned\\x07me = \"ok\"",
        &mut seen,
    );
    expect(&mut p, "Commit these responses?", &mut seen);
    p.send_line("y").unwrap();
    expect(&mut p, "responses committed", &mut seen);
    seen.push_str(&p.exp_eof().unwrap());
    assert_eq!(exit_code(&p), 0, "{seen:?}");
    // The pseudo-terminal adds `\r` to every line end, and the line editor draws with its
    // own sequences: what must not appear are the server's.
    assert_no_hostile_sequences("the interactive form", &seen);
    assert!(!seen.contains(HOSTILE_DEFAULT), "{seen:?}");
}

#[test]
fn the_interactive_form_names_the_real_host_of_a_spoofed_url() {
    let store = Store::new();
    let mut p = interactive_run(&store, &raw_server(&url_params()));
    let mut seen = String::new();
    expect(&mut p, "[q] Verify\\x1b[2K\\ryour account", &mut seen);
    expect(
        &mut p,
        "URL: https://evil.example/steal\\x1b[2K\\rhttps://accounts.example/login",
        &mut seen,
    );
    expect(&mut p, "host: evil.example", &mut seen);
    expect(&mut p, "[d]ecline / [c]ancel [a]: ", &mut seen);
    p.send_line("a").unwrap();
    expect(&mut p, "Commit these responses?", &mut seen);
    p.send_line("y").unwrap();
    expect(&mut p, "responses committed", &mut seen);
    seen.push_str(&p.exp_eof().unwrap());
    assert_eq!(exit_code(&p), 0, "{seen:?}");
    assert_no_hostile_sequences("the interactive URL consent", &seen);
}
