//! The conventions of a command line people use every day: completions, help that shows
//! examples and hides internals, `--json` lines tagged by kind, Ctrl-C, payload files,
//! answers by round id alone, and the worker lease said where it matters.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::Write;
use std::process::Stdio;

use common::{Store, managed_run, refs, shipping_server};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const ADDRESS: &str = r#"{"shipping_address": {"action": "accept", "content": {"street": "1 Main Street", "city": "Pune"}}}"#;

#[test]
fn completions_are_generated_for_bash_zsh_and_fish() {
    let store = Store::new();
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef m3"),
        ("fish", "complete -c m3"),
    ] {
        let done = store.m3(&["completions", shell]).expect_code(0);
        assert!(done.stdout.contains(marker), "{shell}: {}", done.stdout);
        assert!(done.stdout.contains("pending"), "{shell}");
    }
    store.m3(&["completions", "tcsh"]).expect_code(2);
}

#[test]
fn help_shows_examples_and_hides_internals() {
    let store = Store::new();
    let main = store.m3(&["--help"]).expect_code(0).stdout;
    assert!(!main.contains("mcp-relay"), "{main}");
    assert!(main.contains("completions"), "{main}");
    assert!(main.contains("-v, --verbose"), "{main}");
    assert!(!main.to_lowercase().contains("seed"), "{main}");
    for command in ["run", "respond", "pending"] {
        let help = store.m3(&[command, "--help"]).expect_code(0).stdout;
        assert!(help.contains("Examples:"), "{command}: {help}");
        assert!(help.contains("--db"), "{command}: {help}");
    }
    for command in ["schema", "completions", "example-server"] {
        let help = store.m3(&[command, "--help"]).expect_code(0).stdout;
        assert!(!help.contains("--db"), "{command}: {help}");
    }
}

#[test]
fn every_json_line_of_run_carries_its_type() {
    let store = Store::new();
    let mut run = store.spawn(&refs(&managed_run(&shipping_server(""), "book_shipment")));
    let first = run.next_json();
    assert_eq!(first["type"], "execution");
    let execution = first["execution_id"].as_str().unwrap().to_owned();
    let round = run.next_json();
    assert_eq!(round["type"], "round_pending");
    let round_id = round["round_id"].as_str().unwrap().to_owned();

    // Answered by the round id alone, the responses read from a file.
    let file = store.dir.path().join("answers.json");
    std::fs::write(&file, ADDRESS).unwrap();
    let answered = store
        .m3(&[
            "respond",
            &round_id,
            "--idempotency-key",
            "from-file",
            "--responses",
            &format!("@{}", file.display()),
        ])
        .expect_code(0);
    let line = answered
        .stdout
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    assert!(
        line.starts_with(&format!(
            "responses committed to round {round_id} of execution {execution} (answered by "
        )) && line.ends_with(" (cli))"),
        "{line}"
    );
    let done = run.finish();
    assert_eq!(done.code, 0, "{}{}", done.stdout, done.stderr);
    let last: serde_json::Value =
        serde_json::from_str(done.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "result");
    assert_eq!(last["snapshot"]["outcome"], "completed");

    // The same responses from standard input replay idempotently.
    let mut again = store
        .command(&[
            "--json",
            "respond",
            &execution,
            &round_id,
            "--idempotency-key",
            "from-file",
            "--responses",
            "-",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    again
        .stdin
        .take()
        .unwrap()
        .write_all(ADDRESS.as_bytes())
        .unwrap();
    let again = common::Done::from(again.wait_with_output().unwrap()).expect_code(0);
    assert_eq!(again.json()["committed"], true);
    store
        .m3(&[
            "respond",
            "01JNOSUCHROUND000000000000",
            "--idempotency-key",
            "k",
            "--decline",
            "a",
        ])
        .expect_code(8);

    // Cancelling a finished execution says so.
    let cancel = store.m3(&["cancel", &execution]).expect_code(0);
    assert_eq!(
        cancel.stdout.trim_end(),
        format!("execution {execution} already finished (completed): nothing to cancel")
    );
}

#[test]
fn ctrl_c_cancels_the_execution_and_exits_130() {
    let store = Store::new();
    let mut run = store.spawn(&refs(&managed_run(&shipping_server(""), "book_shipment")));
    let execution = run.next_json()["execution_id"].as_str().unwrap().to_owned();
    run.next_json();
    let pid = Pid::from_raw(i32::try_from(run.child.id()).unwrap());
    kill(pid, Signal::SIGINT).unwrap();
    let done = run.finish();
    assert_eq!(done.code, 130, "{}{}", done.stdout, done.stderr);
    assert!(done.stderr.contains("\"interrupted\""), "{}", done.stderr);
    let status = store
        .m3(&["--json", "status", &execution])
        .expect_code(0)
        .json();
    assert_eq!(status["outcome"], "cancelled", "{status}");
}

#[test]
fn a_dead_worker_s_lease_is_said_by_status_respond_and_recover() {
    let store = Store::new();
    let mut args = managed_run(&shipping_server(""), "book_shipment");
    args.extend(["--lease".to_owned(), "60".to_owned()]);
    let mut run = store.spawn(&refs(&args));
    let execution = run.next_json()["execution_id"].as_str().unwrap().to_owned();
    let round_id = run.next_json()["round_id"].as_str().unwrap().to_owned();
    let status = store.m3(&["status", &execution]).expect_code(0).stdout;
    assert!(
        status.contains("worker       worker lease held by "),
        "{status}"
    );
    run.child.kill().unwrap();
    run.child.wait().unwrap();
    drop(run);

    let recover = store.m3(&["recover"]).expect_code(0).stdout;
    assert!(
        recover.starts_with("nothing to recover (store "),
        "{recover}"
    );
    assert!(
        recover.contains(&format!("execution {execution}: worker lease held by ")),
        "{recover}"
    );
    let respond = store
        .m3(&[
            "respond",
            &execution,
            &round_id,
            "--idempotency-key",
            "late",
            "--responses",
            ADDRESS,
        ])
        .expect_code(0)
        .stdout;
    assert!(
        respond.contains("not picked up yet by the worker: worker lease held by "),
        "{respond}"
    );
}

#[test]
fn serve_refuses_a_db_that_does_not_exist_unless_told_to_create_it() {
    let store = Store::new();
    let refused = store
        .m3(&["--json", "serve", "--bind", "127.0.0.1:0"])
        .expect_code(8);
    assert_eq!(refused.error_code(), "not_found");
    assert!(refused.stderr.contains("no store at"), "{}", refused.stderr);
    assert!(!store.db().exists(), "nothing was created");
    let mut serve = store.spawn(&["serve", "--create", "--bind", "127.0.0.1:0"]);
    let url = serve.next_line();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert!(store.db().exists());
    drop(serve);
    // Now that it exists, `m3 serve` serves it without --create.
    let mut serve = store.spawn(&["serve", "--bind", "127.0.0.1:0"]);
    assert!(serve.next_line().starts_with("http://127.0.0.1:"));
}

#[test]
fn completions_offer_only_what_the_help_shows_and_db_names_postgres() {
    let store = Store::new();
    for shell in ["bash", "zsh", "fish"] {
        let script = store.m3(&["completions", shell]).expect_code(0).stdout;
        assert!(!script.contains("mcp-relay"), "{shell}");
        assert!(!script.contains("announce-change"), "{shell}");
        assert!(script.contains("doctor"), "{shell}");
        assert!(script.contains("idempotency-key"), "{shell}");
    }
    let help = store.m3(&["--help"]).expect_code(0).stdout;
    assert!(help.contains("postgres://"), "{help}");
}

#[test]
fn stale_signal_sockets_are_removed_when_a_process_listens() {
    use std::os::unix::net::UnixDatagram;
    let store = Store::new();
    let mut submit = managed_run(&shipping_server(""), "book_shipment");
    submit[1] = "submit".to_owned();
    let execution = store.m3(&refs(&submit)).expect_code(0).json()["execution_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut dir = store.db().into_os_string();
    dir.push("-signals");
    let dir = std::path::PathBuf::from(dir);
    std::fs::create_dir_all(&dir).unwrap();
    // A process killed before it unbound leaves its socket file: nobody listens on it.
    let stale = dir.join("999999-deadbeef.sock");
    drop(UnixDatagram::bind(&stale).unwrap());
    assert!(stale.exists());
    // Waiting for a result listens for changes: the directory is swept first.
    store
        .m3(&["result", &execution, "--timeout", "0.3"])
        .expect_code(7);
    assert!(!stale.exists(), "the stale socket is still there");
}
