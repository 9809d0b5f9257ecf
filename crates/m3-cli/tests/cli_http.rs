//! `m3 run` against a Streamable HTTP server: `m3 example-server shipping --http` in both
//! eras, a managed round answered by `m3 respond` from another process, and the trust
//! refusal of an `untrusted` loopback binding.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use common::{Store, m3_bin, refs};

/// `m3 example-server shipping --http 127.0.0.1:0 --era ERA`, killed on drop.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start(era: &str) -> Self {
        let mut child = Command::new(m3_bin())
            .args([
                "example-server",
                "shipping",
                "--http",
                "127.0.0.1:0",
                "--era",
                era,
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut url = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut url)
            .unwrap();
        let url = url.trim().to_owned();
        assert!(
            url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
            "{url}"
        );
        Self { child, url }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn managed_http_run(url: &str, trust: Option<&str>) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "--json".into(),
        "run".into(),
        "--server".into(),
        format!("shipping={url}"),
        "--call".into(),
        "shipping:book_shipment".into(),
        "--arguments".into(),
        r#"{"weight_kg": 2}"#.into(),
        "--human-input".into(),
        "managed".into(),
    ];
    if let Some(trust) = trust {
        args.extend(["--server-trust".into(), format!("shipping={trust}")]);
    }
    args
}

fn managed_round_over_http(era: &str) {
    let server = HttpServer::start(era);
    let store = Store::new();
    let mut run = store.spawn(&refs(&managed_http_run(&server.url, Some("loopback"))));
    let execution = run.next_json()["execution_id"].as_str().unwrap().to_owned();
    let round = run.next_json();
    assert_eq!(round["server"], "shipping", "{round}");
    assert_eq!(round["operation_name"], "book_shipment");
    let round_id = round["round_id"].as_str().unwrap().to_owned();
    let pending = store
        .m3(&["--json", "pending", &execution])
        .expect_code(0)
        .json();
    assert_eq!(pending[0]["round_id"], round_id.as_str());
    // The legacy era keys its one request by the elicitation's id, the 2026 era by name.
    let key = round["requests"]
        .as_object()
        .and_then(|requests| requests.keys().next())
        .unwrap()
        .clone();
    let answer = format!(r#"{key}={{"street": "1 Main Street", "city": "Pune"}}"#);
    let ok = store
        .m3(&[
            "--json",
            "respond",
            &execution,
            &round_id,
            "--idempotency-key",
            "http-1",
            "--accept",
            &answer,
        ])
        .expect_code(0)
        .json();
    assert_eq!(ok["committed"], true);
    let done = run.finish();
    assert_eq!(
        done.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        done.stdout, done.stderr
    );
    let result: serde_json::Value =
        serde_json::from_str(done.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(result["snapshot"]["outcome"], "completed", "{result}");
    assert!(result.to_string().contains("booked"), "{result}");
}

#[test]
fn a_managed_round_over_http_in_the_2026_era_is_answered_from_another_process() {
    managed_round_over_http("2026-07-28");
}

#[test]
fn a_managed_round_over_http_in_the_legacy_era_is_answered_from_another_process() {
    managed_round_over_http("legacy");
}

#[test]
fn an_untrusted_loopback_binding_is_refused_at_submission() {
    let server = HttpServer::start("auto");
    let store = Store::new();
    let refused = store
        .m3(&refs(&managed_http_run(&server.url, None)))
        .expect_code(3);
    assert_eq!(
        refused.error_code(),
        "invalid_argument",
        "{}",
        refused.stderr
    );
    assert!(refused.stderr.contains("127.0.0.1"), "{}", refused.stderr);
    assert!(refused.stderr.contains("untrusted"), "{}", refused.stderr);
    let unknown = store
        .m3(&refs(&managed_http_run(&server.url, Some("everything"))))
        .expect_code(2);
    assert!(unknown.stderr.contains("trust"), "{}", unknown.stderr);
}
