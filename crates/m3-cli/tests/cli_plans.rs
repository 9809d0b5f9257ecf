//! `m3 run --plan FILE`: a plan file answers each elicitation request with the entry that
//! matches it (server, operation, request key), whatever order the agent asks in; a request
//! no entry matches fails the execution with reason `plan_no_match`, naming the closest
//! entry; a plan with managed input, or a file that is not a plan, is refused at submission.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};

use common::{Store, shipping_server};
use serde_json::{Value, json};

fn write(store: &Store, name: &str, value: &Value) -> PathBuf {
    let path = store.dir.path().join(name);
    std::fs::write(&path, serde_json::to_string_pretty(value).unwrap()).unwrap();
    path
}

/// A script calling the gift shipment (one round: `shipping_address` and `gift_message`),
/// then the verified shipment (`shipping_address`, then the `verification` URL).
fn script(store: &Store) -> PathBuf {
    write(
        store,
        "script.json",
        &json!({"steps": [
            {"call": "shipping:book_gift_shipment", "arguments": {"weight_kg": 1}},
            {"call": "shipping:book_verified_shipment", "arguments": {"weight_kg": 2}}
        ]}),
    )
}

/// Entries listed in another order than the agent asks, each scoped to its server.
fn plan() -> Value {
    json!({"version": 1, "entries": [
        {"server": "shipping", "operation_kind": "tool", "operation_name": "book_verified_shipment",
         "request_key": "verification", "response": {"action": "accept"}},
        {"server": "shipping", "request_key": "gift_message",
         "response": {"action": "accept", "content": {"message": "Happy birthday"}}},
        {"server": "shipping", "operation_kind": "tool", "request_key": "shipping_address",
         "response": {"action": "accept", "content": {"street": "1 Main Street", "city": "Pune"}},
         "uses": 2}
    ]})
}

fn run(store: &Store, plan: &Path, extra: &[&str]) -> common::Done {
    let script = script(store);
    let mut args = vec![
        "--json".to_owned(),
        "run".to_owned(),
        "--server".to_owned(),
        shipping_server(""),
        "--script".to_owned(),
        script.display().to_string(),
        "--plan".to_owned(),
        plan.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    store.m3(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn a_plan_answers_each_request_by_what_asks_not_by_order() {
    let store = Store::new();
    let plan = write(&store, "plan.json", &plan());
    let done = run(&store, &plan, &[]).expect_code(0);
    assert!(
        done.stdout.contains("Gift shipment booked."),
        "{}",
        done.stdout
    );
    assert!(
        done.stdout.contains("Verified shipment booked."),
        "{}",
        done.stdout
    );
}

#[test]
fn a_request_no_entry_matches_fails_naming_the_closest_entry() {
    let store = Store::new();
    let mut plan = plan();
    // The address entry now answers only once: the second shipment's address is unanswered.
    plan["entries"][2]["uses"] = json!(1);
    let plan = write(&store, "plan.json", &plan);
    let done = run(&store, &plan, &[]).expect_code(9);
    let error: Value = serde_json::from_str(done.stderr.trim()).unwrap();
    let cause = &error["error"]["details"]["error"];
    assert_eq!(cause["details"]["reason"], "plan_no_match", "{error}");
    assert_eq!(cause["details"]["request_key"], "shipping_address");
    assert_eq!(cause["details"]["closest_entry"], 2);
    assert_eq!(cause["details"]["differs_in"], json!(["uses"]));
    let message = cause["message"].as_str().unwrap();
    assert!(message.contains("book_verified_shipment"), "{message}");
}

#[test]
fn a_plan_with_managed_input_or_a_bad_file_is_refused() {
    let store = Store::new();
    let file = write(&store, "plan.json", &plan());
    let done = run(&store, &file, &["--human-input", "managed"]).expect_code(3);
    assert!(done.stderr.contains("invalid_argument"), "{}", done.stderr);
    let bad = write(&store, "bad.json", &json!({"version": 2, "entries": []}));
    let done = run(&store, &bad, &[]).expect_code(3);
    assert!(done.stderr.contains("version 2"), "{}", done.stderr);
    let both = write(
        &store,
        "both.json",
        &json!({"entries": plan()["entries"], "rounds": [{}]}),
    );
    run(&store, &both, &[]).expect_code(3);
}

/// `(tool, answered, city)` of each call the shipping server logged: its side of the story.
fn calls(path: &Path) -> Vec<(Value, Value, Value)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| {
            let call: Value = serde_json::from_str(line).unwrap();
            (
                call["tool"].clone(),
                call["answered"].clone(),
                call["city"].clone(),
            )
        })
        .collect()
}

fn logged(log: &Path) -> String {
    format!(
        "shipping='{}' example-server shipping --era 2026-07-28 --call-log '{}'",
        common::m3_bin(),
        log.display()
    )
}

/// The next `round_pending` line of a running `m3 --json run`.
fn next_round(run: &mut common::Running) -> String {
    loop {
        let line = run.next_json();
        if line["type"] == "round_pending" {
            return line["round_id"].as_str().unwrap().to_owned();
        }
    }
}

#[test]
fn answers_given_by_hand_are_recorded_and_replayed_with_the_same_outcome() {
    record_and_replay(&Store::new());
}

#[test]
fn answers_given_by_hand_are_recorded_and_replayed_on_postgres() {
    record_and_replay(&Store::postgres());
}

fn record_and_replay(store: &Store) {
    let script = script(store);
    let by_hand = store.dir.path().join("by-hand.jsonl");
    let server = logged(&by_hand);
    let script_arg = script.display().to_string();
    let mut run = store.spawn(&[
        "--json",
        "run",
        "--server",
        &server,
        "--script",
        &script_arg,
        "--human-input",
        "managed",
    ]);
    let execution = run.next_json()["execution_id"].as_str().unwrap().to_owned();
    let answers: [&[&str]; 3] = [
        &[
            "--accept",
            r#"shipping_address={"street": "1 Main Street", "city": "Pune"}"#,
            "--accept",
            r#"gift_message={"message": "Happy birthday"}"#,
        ],
        &[
            "--accept",
            r#"shipping_address={"street": "2 Side Road", "city": "Goa"}"#,
        ],
        &["--accept-url", "verification"],
    ];
    for (index, answer) in answers.iter().enumerate() {
        let round = next_round(&mut run);
        let key = format!("hand-{index}");
        let mut args = vec!["respond", &execution, &round, "--idempotency-key", &key];
        args.extend_from_slice(answer);
        store.m3(&args).expect_code(0);
    }
    run.finish().expect_code(0);

    // Without --include-values nothing is written.
    let file = store.dir.path().join("recorded.json");
    let file_arg = file.display().to_string();
    let refused = store
        .m3(&[
            "plans",
            "record",
            "--execution",
            &execution,
            "--output",
            &file_arg,
        ])
        .expect_code(3);
    assert!(
        refused.stderr.contains("--include-values"),
        "{}",
        refused.stderr
    );
    assert!(!file.exists());
    let done = store
        .m3(&[
            "plans",
            "record",
            "--execution",
            &execution,
            "--output",
            &file_arg,
            "--include-values",
        ])
        .expect_code(0);
    assert!(done.stderr.starts_with("warning: "), "{}", done.stderr);
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(plan["entries"].as_array().unwrap().len(), 4, "{plan}");
    assert!(
        plan["entries"][0]["schema_digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    // `m3 rounds --export-plan` writes the same plan.
    let exported = store.dir.path().join("exported.json");
    let exported_arg = exported.display().to_string();
    store
        .m3(&[
            "rounds",
            &execution,
            "--export-plan",
            &exported_arg,
            "--include-values",
        ])
        .expect_code(0);
    assert_eq!(
        std::fs::read_to_string(&exported).unwrap(),
        std::fs::read_to_string(&file).unwrap()
    );

    // The replay: no person, the same calls and answers on the server's side.
    let replayed = store.dir.path().join("replayed.jsonl");
    let done = store
        .m3(&[
            "--json",
            "run",
            "--server",
            &logged(&replayed),
            "--script",
            &script_arg,
            "--plan",
            &file_arg,
        ])
        .expect_code(0);
    assert!(
        done.stdout.contains("Verified shipment booked."),
        "{}",
        done.stdout
    );
    assert_eq!(calls(&replayed), calls(&by_hand));
    assert!(calls(&by_hand).len() >= 5, "{:?}", calls(&by_hand));
}

const GUIDE: &str = include_str!("../../../docs/plans.md");

/// The fenced block after each `<!-- NAME -->` line of the guide, as `(NAME, block)`.
fn marked_blocks() -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut lines = GUIDE.lines();
    while let Some(line) = lines.next() {
        let Some(marker) = line
            .strip_prefix("<!-- ")
            .and_then(|rest| rest.strip_suffix(" -->"))
        else {
            continue;
        };
        assert!(lines.next().unwrap().starts_with("```"), "{marker}");
        let block: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
        blocks.push((marker.to_owned(), block.join("\n")));
    }
    blocks
}

/// One step of the guide's CI job: its name and shell text (`None` for `uses:` steps).
struct CiStep {
    name: String,
    run: Option<String>,
}

/// The guide's CI job, parsed as YAML: the job's environment and its steps.
fn ci_job(text: &str) -> (Vec<(String, String)>, Vec<CiStep>) {
    let docs = yaml_rust2::YamlLoader::load_from_str(text).unwrap();
    let job = &docs[0]["jobs"]["replay"];
    let env = job["env"]
        .as_hash()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().unwrap().to_owned(),
                v.as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let steps = job["steps"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|step| CiStep {
            name: step["name"]
                .as_str()
                .or(step["uses"].as_str())
                .unwrap()
                .to_owned(),
            run: step["run"].as_str().map(str::to_owned),
        })
        .collect();
    (env, steps)
}

/// Runs one step's shell text in `dir` as the CI runner would, `m3` on the `PATH`.
fn run_step(dir: &Path, env: &[(String, String)], step: &CiStep) -> std::process::Output {
    let bin_dir = Path::new(common::m3_bin()).parent().unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
    std::process::Command::new("bash")
        .args(["-eo", "pipefail", "-c", step.run.as_deref().unwrap()])
        .current_dir(dir)
        .env_remove("M3_DB")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("PATH", path)
        .output()
        .unwrap()
}

#[test]
fn the_ci_job_in_the_guide_replays_the_recorded_answers_and_catches_a_missing_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut job = None;
    for (marker, block) in marked_blocks() {
        if let Some(file) = marker.strip_prefix("ci-example-file: ") {
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, block).unwrap();
        } else if marker == "ci-example-job" {
            job = Some(ci_job(&block));
        }
    }
    let (env, steps) = job.expect("the guide has its CI job");
    assert_eq!(steps.len(), 4, "checkout, doctor, replay, executions");
    for step in &steps {
        match &step.run {
            Some(run) => assert!(run.trim_start().starts_with("m3 "), "{run}"),
            None => assert_eq!(step.name, "actions/checkout@v4"),
        }
        if step.run.is_none() {
            continue;
        }
        let output = run_step(dir.path(), &env, step);
        assert!(
            output.status.success(),
            "step {:?}: {}{}",
            step.name,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let listed = run_step(dir.path(), &env, &steps[3]);
    assert!(String::from_utf8_lossy(&listed.stdout).contains("completed"));

    // The server now asks a question the recording never answered: the replay fails.
    let answers = dir.path().join("tests/mcp/answers.json");
    let mut plan: Value =
        serde_json::from_str(&std::fs::read_to_string(&answers).unwrap()).unwrap();
    plan["entries"].as_array_mut().unwrap().remove(1);
    std::fs::write(&answers, plan.to_string()).unwrap();
    let failed = run_step(dir.path(), &env, &steps[2]);
    assert_eq!(failed.status.code(), Some(9));
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(
        stderr.contains("plan_no_match") && stderr.contains("gift_message"),
        "{stderr}"
    );
}
