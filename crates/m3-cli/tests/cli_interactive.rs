//! `m3 run --interactive` and `m3 demo --interactive` driven through a pseudo-terminal.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::Command;

use common::{Store, m3_bin, shipping_server};
use nix::sys::wait::WaitStatus;
use rexpect::session::{PtySession, spawn_command};

fn interactive_run(store: &Store) -> PtySession {
    let mut command = Command::new(m3_bin());
    command
        .arg("--db")
        .arg(store.db())
        .args([
            "run",
            "--server",
            &shipping_server(""),
            "--call",
            "shipping:book_shipment",
        ])
        .args([
            "--arguments",
            r#"{"weight_kg": 2}"#,
            "--human-input",
            "managed",
            "--interactive",
        ])
        .env_remove("M3_DB");
    spawn_command(command, Some(30_000)).unwrap()
}

fn exit_code(session: &PtySession) -> i32 {
    match session.process().wait().unwrap() {
        WaitStatus::Exited(_, code) => code,
        other => panic!("m3 did not exit normally: {other:?}"),
    }
}

#[test]
fn a_person_fills_in_the_form_after_invalid_input() {
    let store = Store::new();
    let mut p = interactive_run(&store);
    p.exp_string("[shipping_address] Enter the delivery address.")
        .unwrap();
    p.exp_string("[d]ecline / [c]ancel [a]: ").unwrap();
    p.send_line("maybe").unwrap();
    p.exp_string("'maybe': answer a, d or c").unwrap();
    p.send_line("a").unwrap();
    // The server's order: street, then city.
    p.exp_string("street (required, text): ").unwrap();
    p.send_line("").unwrap();
    p.exp_string("! street is required").unwrap();
    p.exp_string("street (required, text): ").unwrap();
    p.send_line("1 Main Street").unwrap();
    p.exp_string("city (required, text): ").unwrap();
    p.send_line("Pune").unwrap();
    p.exp_string("[shipping_address] accept: street = \"1 Main Street\", city = \"Pune\"")
        .unwrap();
    p.exp_string("Commit these responses? [y]es").unwrap();
    p.send_line("y").unwrap();
    p.exp_string("responses committed").unwrap();
    // On a terminal the status word is coloured.
    p.exp_string("finished: \u{1b}[32mcompleted\u{1b}[0m")
        .unwrap();
    p.exp_eof().unwrap();
    assert_eq!(exit_code(&p), 0);
}

#[test]
fn no_color_keeps_a_terminal_s_output_plain() {
    let store = Store::new();
    let mut command = Command::new(m3_bin());
    command
        .arg("--db")
        .arg(store.db())
        .args([
            "run",
            "--server",
            &shipping_server(""),
            "--call",
            "shipping:quote",
        ])
        .args(["--arguments", r#"{"weight_kg": 2}"#])
        .env_remove("M3_DB")
        .env("NO_COLOR", "1");
    let mut p = spawn_command(command, Some(30_000)).unwrap();
    let rest = p.exp_eof().unwrap();
    assert!(rest.contains("finished: completed"), "{rest:?}");
    assert!(!rest.contains("\u{1b}[3"), "{rest:?}");
    assert_eq!(exit_code(&p), 0);
}

#[test]
fn a_person_declines_the_form() {
    let store = Store::new();
    let mut p = interactive_run(&store);
    p.exp_string("[d]ecline / [c]ancel [a]: ").unwrap();
    p.send_line("d").unwrap();
    p.exp_string("[shipping_address] decline").unwrap();
    p.exp_string("Commit these responses?").unwrap();
    p.send_line("").unwrap();
    p.exp_string("responses committed").unwrap();
    let rest = p.exp_eof().unwrap();
    assert!(rest.contains("declined"), "{rest}");
    assert!(!rest.contains("\"booked\""), "{rest}");
    let code = exit_code(&p);
    let rounds = store
        .m3(&["--json", "rounds", &execution_of(&store)])
        .expect_code(0)
        .json();
    assert_eq!(rounds[0]["status"], "resolved", "exit {code}");
}

#[test]
fn the_demo_asks_the_person_when_interactive() {
    let store = Store::new();
    let mut command = Command::new(m3_bin());
    command
        .arg("--db")
        .arg(store.db())
        .args(["demo", "--interactive"])
        .env_remove("M3_DB");
    let mut p = spawn_command(command, Some(30_000)).unwrap();
    p.exp_string("[d]ecline / [c]ancel [a]: ").unwrap();
    p.send_line("").unwrap();
    p.exp_string("street (required, text): ").unwrap();
    p.send_line("1 Main Street").unwrap();
    p.exp_string("city (required, text): ").unwrap();
    p.send_line("Pune").unwrap();
    p.exp_string("Commit these responses?").unwrap();
    p.send_line("").unwrap();
    p.exp_string("shipment booked.").unwrap();
    p.exp_eof().unwrap();
    assert_eq!(exit_code(&p), 0);
}

/// Ctrl-C (`control`: 'c') or Ctrl-D ('d') at a form prompt gives up the form: nothing is
/// committed, the round stays pending, and another terminal answers it.
fn giving_up_leaves_the_round_pending(control: char) {
    let store = Store::new();
    let mut p = interactive_run(&store);
    p.exp_string("[d]ecline / [c]ancel [a]: ").unwrap();
    p.send_line("a").unwrap();
    p.exp_string("street (required, text): ").unwrap();
    p.send_control(control).unwrap();
    p.exp_string("left pending; answer from any terminal: m3 respond")
        .unwrap();
    let execution = execution_of(&store);
    let rounds = store
        .m3(&["--json", "rounds", &execution])
        .expect_code(0)
        .json();
    assert_eq!(rounds[0]["status"], "pending");
    let round_id = rounds[0]["round_id"].as_str().unwrap();
    store
        .m3(&[
            "respond",
            &execution,
            round_id,
            "--idempotency-key",
            "from-elsewhere",
            "--accept",
            r#"shipping_address={"street": "1 Main Street", "city": "Pune"}"#,
        ])
        .expect_code(0);
    p.exp_string("completed").unwrap();
    p.exp_eof().unwrap();
    assert_eq!(exit_code(&p), 0);
}

#[test]
fn ctrl_c_in_the_form_leaves_the_round_pending() {
    giving_up_leaves_the_round_pending('c');
}

#[test]
fn ctrl_d_in_the_form_leaves_the_round_pending() {
    giving_up_leaves_the_round_pending('d');
}

fn execution_of(store: &Store) -> String {
    let executions = store.m3(&["--json", "executions"]).expect_code(0).json();
    executions[0]["execution_id"].as_str().unwrap().to_owned()
}
