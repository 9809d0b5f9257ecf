//! Webhooks end to end, as processes: `m3 webhooks` manages subscriptions, `m3 notify`
//! delivers, and a real receiver (`tests/peers/webhook_receiver.py`) verifies every
//! signature with the Standard Webhooks reference library for Python.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{Running, Store, managed_run, python, refs, shipping_server, wait_until};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(30);

/// A receiver process: its URL, where it records deliveries, where it reads the secret.
struct Receiver {
    child: Child,
    url: String,
    record: PathBuf,
    secret: PathBuf,
}

impl Receiver {
    fn start(store: &Store, name: &str, args: &[&str]) -> Self {
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers/webhook_receiver.py");
        let record = store.dir.path().join(format!("{name}.jsonl"));
        let secret = store.dir.path().join(format!("{name}.secret"));
        let mut child = Command::new(python())
            .arg(script)
            .arg("--record")
            .arg(&record)
            .arg("--secret-file")
            .arg(&secret)
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        Self {
            child,
            url: line.trim().to_owned(),
            record,
            secret,
        }
    }

    fn deliveries(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    fn wait_for(&self, count: usize) -> Vec<Value> {
        wait_until(WAIT, &format!("{count} deliveries"), || {
            let all = self.deliveries();
            (all.len() >= count).then_some(all)
        })
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A store with one finished demo in it (`m3 webhooks` needs an existing store).
fn demo_store(postgres: bool) -> Store {
    let store = if postgres {
        Store::postgres()
    } else {
        Store::new()
    };
    store.m3(&["demo"]).expect_code(0);
    store
}

/// `m3 webhooks add` for `receiver` (loopback allowed); the subscription id. The receiver
/// learns the secret.
fn subscribe(store: &Store, receiver: &Receiver, extra: &[&str]) -> String {
    let mut args = vec![
        "--json",
        "webhooks",
        "add",
        &receiver.url,
        "--allow-loopback",
    ];
    args.extend_from_slice(extra);
    let added = store.m3(&args).expect_code(0).json();
    let secret = added["secret"].as_str().unwrap();
    assert!(secret.starts_with("whsec_"));
    std::fs::write(&receiver.secret, secret).unwrap();
    added["subscription"]["id"].as_str().unwrap().to_owned()
}

fn notifier(store: &Store, extra: &[&str]) -> Running {
    let mut args = vec!["notify", "--lease", "2s"];
    args.extend_from_slice(extra);
    store.spawn(&args)
}

fn stop(running: &Running, signal: Signal) {
    kill(
        Pid::from_raw(i32::try_from(running.child.id()).unwrap()),
        signal,
    )
    .unwrap();
}

fn show(store: &Store, id: &str) -> Value {
    store
        .m3(&["--json", "webhooks", "show", id])
        .expect_code(0)
        .json()
}

fn ids(deliveries: &[Value]) -> Vec<&str> {
    deliveries
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect()
}

#[test]
fn a_waiting_round_is_delivered_signed_with_its_question_and_answer_link() {
    check_waiting_round(&Store::new());
}

#[test]
fn a_waiting_round_is_delivered_signed_with_its_question_and_answer_link_on_postgres() {
    check_waiting_round(&Store::postgres());
}

fn check_waiting_round(store: &Store) {
    store.m3(&["demo"]).expect_code(0);
    let receiver = Receiver::start(store, "receiver", &[]);
    subscribe(store, &receiver, &["--events", "round.pending"]);
    let running = notifier(store, &["--public-url", "https://m3.example.test/base/"]);
    store.m3(&["demo"]).expect_code(0);
    let delivered = receiver.wait_for(1);
    std::thread::sleep(Duration::from_millis(500));
    let delivered_now = receiver.deliveries();
    assert_eq!(
        delivered_now.len(),
        1,
        "only the new round, once: {delivered_now:?}"
    );
    let event = &delivered[0];
    assert_eq!(event["verified"], true, "{event}");
    assert_eq!(event["body"]["type"], "round.pending");
    let data = &event["body"]["data"];
    assert_eq!(data["kind"], "round.pending");
    assert_eq!(data["question"]["server"], "shipping");
    assert!(
        data["question"]["requests"]["shipping_address"]["message"].is_string(),
        "{data}"
    );
    let link = data["answer_url"].as_str().unwrap();
    assert!(
        link.starts_with("https://m3.example.test/base/answer/"),
        "{link}"
    );
    let text = event["body"].to_string();
    assert!(
        !text.contains("Main Street") && !text.contains("Pune"),
        "an answer was delivered"
    );
    stop(&running, Signal::SIGTERM);
    running.finish().expect_code(0);
}

#[test]
fn a_deadline_reminder_is_delivered_with_the_question_and_answer_link() {
    let store = Store::new();
    store.m3(&["demo"]).expect_code(0);
    let receiver = Receiver::start(&store, "receiver", &[]);
    subscribe(
        &store,
        &receiver,
        &["--events", "round.deadline_approaching"],
    );
    let running = notifier(&store, &["--public-url", "https://m3.example.test/"]);
    let mut run = managed_run(&shipping_server(""), "book_shipment");
    run.extend(["--input-deadline", "6s", "--remind-at", "0.2"].map(String::from));
    let waiting = store.spawn(&refs(&run));
    let delivered = receiver.wait_for(1);
    let data = &delivered[0]["body"]["data"];
    assert_eq!(data["kind"], "round.deadline_approaching", "{data}");
    assert_eq!(data["reminder"]["fraction"], 0.2, "{data}");
    assert_eq!(data["question"]["server"], "shipping");
    let link = data["answer_url"].as_str().unwrap();
    assert!(
        link.starts_with("https://m3.example.test/answer/"),
        "{link}"
    );
    // Nobody answers: the deadline fails the round, as it would without the reminder.
    assert_eq!(waiting.finish().code, 9);
    stop(&running, Signal::SIGTERM);
    running.finish().expect_code(0);
}

#[test]
fn retries_reuse_the_webhook_id_until_the_receiver_answers() {
    retries_reuse_the_webhook_id_until_the_receiver_answers_on(false);
}

#[test]
fn retries_reuse_the_webhook_id_until_the_receiver_answers_on_postgres() {
    retries_reuse_the_webhook_id_until_the_receiver_answers_on(true);
}

fn retries_reuse_the_webhook_id_until_the_receiver_answers_on(postgres: bool) {
    let store = demo_store(postgres);
    // A redirect is not followed: it is a failure like any other.
    let receiver = Receiver::start(&store, "receiver", &["--statuses", "500,302,204"]);
    let id = subscribe(&store, &receiver, &["--events", "round.pending"]);
    let running = notifier(&store, &[]);
    store.m3(&["demo"]).expect_code(0);
    let delivered = receiver.wait_for(3);
    assert!(
        delivered.iter().all(|d| d["verified"] == true),
        "{delivered:?}"
    );
    let all = ids(&delivered);
    assert!(
        all.iter().all(|i| *i == all[0]),
        "retries changed the id: {all:?}"
    );
    let shown = wait_until(WAIT, "the cursor to move", || {
        let shown = show(&store, &id);
        (shown["delivery"]["delivered"] == 1).then_some(shown)
    });
    assert_eq!(shown["delivery"]["attempts"], 0, "{shown}");
    stop(&running, Signal::SIGTERM);
    running.finish().expect_code(0);
}

#[test]
fn a_receiver_answering_410_disables_its_subscription() {
    a_receiver_answering_410_disables_its_subscription_on(false);
}

#[test]
fn a_receiver_answering_410_disables_its_subscription_on_postgres() {
    a_receiver_answering_410_disables_its_subscription_on(true);
}

fn a_receiver_answering_410_disables_its_subscription_on(postgres: bool) {
    let store = demo_store(postgres);
    let receiver = Receiver::start(&store, "receiver", &["--statuses", "410"]);
    let id = subscribe(&store, &receiver, &[]);
    let running = notifier(&store, &[]);
    store.m3(&["demo"]).expect_code(0);
    receiver.wait_for(1);
    let shown = wait_until(WAIT, "the subscription to be disabled", || {
        let shown = show(&store, &id);
        (shown["enabled"] == false).then_some(shown)
    });
    assert_eq!(shown["disabled_reason"], "gone");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(receiver.deliveries().len(), 1, "delivered after 410");
    stop(&running, Signal::SIGTERM);
    running.finish().expect_code(0);
}

#[test]
fn failures_past_the_retry_budget_are_dead_lettered_and_listed() {
    failures_past_the_retry_budget_are_dead_lettered_and_listed_on(false);
}

#[test]
fn failures_past_the_retry_budget_are_dead_lettered_and_listed_on_postgres() {
    failures_past_the_retry_budget_are_dead_lettered_and_listed_on(true);
}

fn failures_past_the_retry_budget_are_dead_lettered_and_listed_on(postgres: bool) {
    let store = demo_store(postgres);
    let receiver = Receiver::start(&store, "receiver", &["--statuses", "500"]);
    let id = subscribe(&store, &receiver, &["--events", "round.pending"]);
    let running = notifier(&store, &["--retry-for", "2s"]);
    store.m3(&["demo"]).expect_code(0);
    let shown = wait_until(WAIT, "a dead letter", || {
        let shown = show(&store, &id);
        (shown["dead_lettered"] == 1).then_some(shown)
    });
    let letter = &shown["dead_letters"][0];
    assert_eq!(letter["kind"], "round.pending");
    assert_eq!(letter["last_status"], 500);
    assert!(letter["attempts"].as_u64().unwrap() >= 2, "{letter}");
    assert_eq!(
        letter["webhook_id"].as_str().unwrap(),
        receiver.deliveries()[0]["id"].as_str().unwrap()
    );
    let text = store.m3(&["webhooks", "show", &id]).expect_code(0).stdout;
    assert!(text.contains("status 500"), "{text}");
    let doctor = store.m3(&["--json", "doctor"]).expect_code(0).json();
    let check = doctor["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "webhooks")
        .unwrap()
        .clone();
    assert_eq!(check["status"], "warn", "{check}");
    assert!(
        check["detail"].as_str().unwrap().contains("1 dead letters"),
        "{check}"
    );
    stop(&running, Signal::SIGTERM);
    running.finish().expect_code(0);
}

#[test]
fn a_receiver_that_never_answers_times_out_and_holds_up_no_other() {
    a_receiver_that_never_answers_times_out_and_holds_up_no_other_on(false);
}

#[test]
fn a_receiver_that_never_answers_times_out_and_holds_up_no_other_on_postgres() {
    a_receiver_that_never_answers_times_out_and_holds_up_no_other_on(true);
}

fn a_receiver_that_never_answers_times_out_and_holds_up_no_other_on(postgres: bool) {
    let store = demo_store(postgres);
    let stuck = Receiver::start(&store, "stuck", &["--hang"]);
    let healthy = Receiver::start(&store, "healthy", &[]);
    let stuck_id = subscribe(&store, &stuck, &["--events", "round.pending"]);
    subscribe(&store, &healthy, &["--events", "round.pending"]);
    let running = notifier(&store, &["--delivery-timeout", "1s"]);
    store.m3(&["demo"]).expect_code(0);
    healthy.wait_for(1);
    let shown = wait_until(WAIT, "the timeout", || {
        let shown = show(&store, &stuck_id);
        (shown["delivery"]["attempts"].as_u64().unwrap() >= 1).then_some(shown)
    });
    assert_eq!(shown["delivery"]["last_status"], Value::Null);
    assert!(
        shown["delivery"]["last_error"]
            .as_str()
            .unwrap()
            .contains("in time"),
        "{shown}"
    );
    stop(&running, Signal::SIGTERM);
    running.finish().expect_code(0);
}

#[test]
fn two_notifiers_deliver_each_record_once() {
    check_two_notifiers(&demo_store(false));
}

#[test]
fn two_notifiers_deliver_each_record_once_on_postgres() {
    check_two_notifiers(&demo_store(true));
}

fn check_two_notifiers(store: &Store) {
    let receivers: Vec<Receiver> = (0..3)
        .map(|n| Receiver::start(store, &format!("r{n}"), &[]))
        .collect();
    let before = store.m3(&["events"]).expect_code(0).stdout.lines().count();
    for receiver in &receivers {
        subscribe(store, receiver, &[]);
    }
    let first = notifier(store, &[]);
    let second = notifier(store, &[]);
    for _ in 0..2 {
        store.m3(&["demo"]).expect_code(0);
    }
    let records = store.m3(&["events"]).expect_code(0).stdout.lines().count() - before;
    for receiver in &receivers {
        receiver.wait_for(records);
        std::thread::sleep(Duration::from_millis(700));
        let delivered = receiver.deliveries();
        let mut seen = ids(&delivered);
        assert_eq!(seen.len(), records, "delivered {} of {records}", seen.len());
        let cursors: Vec<u64> = delivered
            .iter()
            .map(|d| d["body"]["data"]["cursor"].as_u64().unwrap())
            .collect();
        assert!(
            cursors.windows(2).all(|w| w[0] < w[1]),
            "out of order: {cursors:?}"
        );
        seen.dedup();
        assert_eq!(seen.len(), records, "a record was delivered twice");
    }
    for running in [&first, &second] {
        stop(running, Signal::SIGTERM);
    }
    first.finish().expect_code(0);
    second.finish().expect_code(0);
}

#[test]
fn a_notifier_killed_before_its_report_leaves_the_record_to_another_with_the_same_id() {
    a_notifier_killed_before_its_report_leaves_the_record_to_another_with_the_same_id_on(false);
}

#[test]
fn a_notifier_killed_before_its_report_leaves_the_record_to_another_with_the_same_id_on_postgres() {
    a_notifier_killed_before_its_report_leaves_the_record_to_another_with_the_same_id_on(true);
}

fn a_notifier_killed_before_its_report_leaves_the_record_to_another_with_the_same_id_on(
    postgres: bool,
) {
    let store = demo_store(postgres);
    let receiver = Receiver::start(&store, "receiver", &["--delay-first", "3"]);
    subscribe(&store, &receiver, &["--events", "round.pending"]);
    let doomed = notifier(&store, &[]);
    store.m3(&["demo"]).expect_code(0);
    receiver.wait_for(1);
    stop(&doomed, Signal::SIGKILL);
    let _ = doomed.finish();
    let survivor = notifier(&store, &[]);
    let delivered = receiver.wait_for(2);
    assert_eq!(
        delivered[0]["id"], delivered[1]["id"],
        "the redelivery has another id"
    );
    assert!(delivered.iter().all(|d| d["verified"] == true));
    stop(&survivor, Signal::SIGTERM);
    survivor.finish().expect_code(0);
}

#[test]
fn bad_urls_are_refused_with_their_reason_and_add_nothing() {
    let store = Store::new();
    store.m3(&["demo"]).expect_code(0);
    for (url, reason) in [
        ("ftp://hooks.example.com/x", "webhook_url_scheme"),
        (
            "https://me:pw@hooks.example.com/x",
            "webhook_url_credentials",
        ),
        ("http://127.0.0.1:9/x", "webhook_url_loopback"),
    ] {
        let done = store.m3(&["--json", "webhooks", "add", url]).expect_code(3);
        assert_eq!(done.error_code(), "invalid_argument");
        let failure: Value = serde_json::from_str(done.stderr.trim()).unwrap();
        assert_eq!(
            failure["error"]["details"]["reason"], reason,
            "{url}: {failure}"
        );
    }
    let listed = store
        .m3(&["--json", "webhooks", "list"])
        .expect_code(0)
        .json();
    assert_eq!(listed["subscriptions"], Value::Array(Vec::new()));
}

#[test]
fn a_receiver_down_for_twenty_seconds_gets_every_record_in_order_afterwards() {
    a_receiver_down_for_twenty_seconds_gets_every_record_in_order_afterwards_on(false);
}

#[test]
fn a_receiver_down_for_twenty_seconds_gets_every_record_in_order_afterwards_on_postgres() {
    a_receiver_down_for_twenty_seconds_gets_every_record_in_order_afterwards_on(true);
}

fn a_receiver_down_for_twenty_seconds_gets_every_record_in_order_afterwards_on(postgres: bool) {
    let store = demo_store(postgres);
    // A port nobody listens on until the receiver starts on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/hook");
    let added = store
        .m3(&[
            "--json",
            "webhooks",
            "add",
            &url,
            "--allow-loopback",
            "--events",
            "round.pending,round.resolved",
        ])
        .expect_code(0)
        .json();
    let id = added["subscription"]["id"].as_str().unwrap().to_owned();
    let running = notifier(&store, &[]);
    store.m3(&["demo"]).expect_code(0);
    store.m3(&["demo"]).expect_code(0);
    wait_until(WAIT, "failed attempts", || {
        (show(&store, &id)["delivery"]["attempts"].as_u64().unwrap() >= 2).then_some(())
    });
    std::thread::sleep(Duration::from_secs(20));
    let receiver = Receiver::start(&store, "late", &["--port", &port.to_string()]);
    std::fs::write(&receiver.secret, added["secret"].as_str().unwrap()).unwrap();
    receiver.wait_for(4);
    std::thread::sleep(Duration::from_millis(700));
    let delivered = receiver.deliveries();
    assert_eq!(delivered.len(), 4, "{delivered:?}");
    assert!(delivered.iter().all(|d| d["verified"] == true));
    let kinds: Vec<&str> = delivered
        .iter()
        .map(|d| d["body"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "round.pending",
            "round.resolved",
            "round.pending",
            "round.resolved"
        ]
    );
    let cursors: Vec<u64> = delivered
        .iter()
        .map(|d| d["body"]["data"]["cursor"].as_u64().unwrap())
        .collect();
    assert!(cursors.windows(2).all(|w| w[0] < w[1]), "{cursors:?}");
    let shown = show(&store, &id);
    assert_eq!(shown["dead_lettered"], 0, "{shown}");
    stop(&running, Signal::SIGTERM);
    running.finish().expect_code(0);
}

#[test]
fn m3_serve_and_m3_worker_deliver_with_notify() {
    let store = demo_store(false);
    let receiver = Receiver::start(&store, "receiver", &[]);
    subscribe(&store, &receiver, &["--events", "round.pending"]);
    let mut serve = store.spawn(&[
        "serve",
        "--create",
        "--bind",
        "127.0.0.1:0",
        "--notify",
        "--public-url",
        "http://m3.example.test",
    ]);
    serve.next_line();
    store.m3(&["demo"]).expect_code(0);
    let delivered = receiver.wait_for(1);
    let link = delivered[0]["body"]["data"]["answer_url"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(link.starts_with("http://m3.example.test/answer/"), "{link}");
    stop(&serve, Signal::SIGTERM);
    serve.finish().expect_code(0);

    let worker = store.spawn(&["--json", "worker", "--notify"]);
    store.m3(&["demo"]).expect_code(0);
    receiver.wait_for(2);
    stop(&worker, Signal::SIGTERM);
    worker.finish().expect_code(0);
}
