//! A real Prometheus (Debian's `prometheus` package, installed by `scripts/test.sh`) scrapes
//! `m3 worker --metrics` and `m3 serve` (through its `--metrics-token`) every second on
//! loopback while a managed round is submitted, waits, is answered with `m3 respond` and
//! delivered; PromQL through Prometheus's HTTP API then shows the gauges, counters and
//! histograms moved. Both expositions pass `promtool check metrics`, and every metric the
//! Grafana dashboard in `docs/` uses exists in them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
#[path = "common/queue.rs"]
mod queue;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Running, Store};
use nix::sys::signal::Signal;
use queue::{book, file, logged_server, signal, submit, wait_for_event, wait_until, worker};
use serde_json::Value;

const API_TOKEN: &str = "an-api-token-prometheus-never-holds";
const METRICS_TOKEN: &str = "a-token-for-metrics-only";
/// How long Prometheus may take to show a change (1 s scrapes, slack for a loaded machine).
const SEEN: Duration = Duration::from_secs(40);

/// `program`'s path, or a failure that says how to get it: never a skip.
fn installed(program: &str) -> String {
    for dir in std::env::var("PATH").unwrap_or_default().split(':') {
        let path = Path::new(dir).join(program);
        if path.is_file() {
            return path.display().to_string();
        }
    }
    panic!(
        "`{program}` is not installed: scripts/test.sh installs Debian's `prometheus` package \
         (apt-get install -y prometheus), which brings prometheus and promtool"
    )
}

/// A GET over plain HTTP/1.0 on loopback: the status and the body.
fn get(url: &str, bearer: Option<&str>, accept: Option<&str>) -> (u16, String) {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_owned()), |(h, p)| (h, format!("/{p}")));
    let mut stream = TcpStream::connect(host).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut request = format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n");
    if let Some(token) = bearer {
        request.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    if let Some(accept) = accept {
        request.push_str(&format!("Accept: {accept}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, body.to_owned())
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A webhook receiver on loopback that answers every POST with `status`; its URL.
fn receiver(status: u16) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut request = Vec::new();
                let mut buffer = [0_u8; 4096];
                // The headers, then as many body bytes as Content-Length says.
                while let Ok(read) = stream.read(&mut buffer) {
                    if read == 0 {
                        break;
                    }
                    request.extend_from_slice(&buffer[..read]);
                    let text = String::from_utf8_lossy(&request).to_lowercase();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text
                            .lines()
                            .find_map(|line| line.strip_prefix("content-length:"))
                            .and_then(|value| value.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if request.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                let response = format!(
                    "HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
                let _ = stream.write_all(response.as_bytes());
            });
        }
    });
    url
}

/// `m3 webhooks add URL` of `round.pending` records (loopback allowed).
fn subscribe(store: &Store, url: &str) {
    store
        .m3(&[
            "--json",
            "webhooks",
            "add",
            url,
            "--allow-loopback",
            "--events",
            "round.pending",
        ])
        .expect_code(0);
}

/// A Prometheus server with its own config and data directory; killed on drop.
struct Prometheus {
    child: Child,
    base: String,
}

impl Prometheus {
    fn start(dir: &Path, worker: &str, serve: &str) -> Self {
        let binary = installed("prometheus");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
                 scrape_configs:\n\
                 - job_name: m3_worker\n  static_configs:\n  - targets: ['{worker}']\n\
                 - job_name: m3_serve\n  authorization:\n    credentials: {METRICS_TOKEN}\n  \
                 static_configs:\n  - targets: ['{serve}']\n"
            ),
        )
        .unwrap();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(dir.join("prometheus.log")).unwrap(),
            ))
            .spawn()
            .unwrap();
        let prometheus = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
        };
        wait_until(Duration::from_secs(30), "Prometheus ready", || {
            let ready = TcpStream::connect(prometheus.base.trim_start_matches("http://")).is_ok()
                && get(&format!("{}/-/ready", prometheus.base), None, None).0 == 200;
            ready.then_some(())
        });
        prometheus
    }

    /// The instant vector `promql` evaluates to now, as `(labels, value)` pairs.
    fn query(&self, promql: &str) -> Vec<(Value, f64)> {
        let url = format!(
            "{}/api/v1/query?query={}",
            self.base,
            percent_encode(promql)
        );
        let (status, body) = get(&url, None, None);
        assert_eq!(status, 200, "{promql}: {body}");
        let answer: Value = serde_json::from_str(&body).unwrap();
        answer["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|series| {
                let value = series["value"][1].as_str().unwrap().parse().unwrap();
                (series["metric"].clone(), value)
            })
            .collect()
    }

    /// Waits until `promql` has a series whose value satisfies `check`; returns the value.
    fn eventually(&self, promql: &str, check: impl Fn(f64) -> bool) -> f64 {
        let deadline = Instant::now() + SEEN;
        loop {
            let result = self.query(promql);
            if let Some((_, value)) = result.iter().find(|(_, value)| check(*value)) {
                return *value;
            }
            assert!(
                Instant::now() < deadline,
                "{promql} never matched within {SEEN:?}; last result: {result:?}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The address the first JSON line of `running` names under `key` (a URL or host:port).
fn address(running: &mut Running, kind: Option<&str>, key: &str) -> String {
    loop {
        let line = running.next_json();
        if kind.is_none_or(|kind| line["type"] == kind) {
            let text = line[key].as_str().unwrap();
            return text
                .trim_start_matches("http://")
                .trim_end_matches("/metrics")
                .to_owned();
        }
    }
}

/// Pipes `exposition` into `promtool check metrics`; panics with its report on a problem.
fn promtool_check(what: &str, exposition: &str) {
    let mut child = Command::new(installed("promtool"))
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(exposition.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "promtool check metrics refused the {what} exposition:\n{}{}\n{exposition}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Every sample name an exposition can have: its families, and a histogram's series.
fn names(exposition: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in exposition.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            names.insert(name.to_owned());
            if kind == "histogram" {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
        }
    }
    names
}

/// Every `m3_...` name the dashboard's queries use.
fn dashboard_metrics() -> BTreeSet<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/grafana-dashboard.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut used = BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap();
            for (start, _) in expr.match_indices("m3_") {
                let name: String = expr[start..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                used.insert(name);
            }
        }
    }
    assert!(!used.is_empty(), "the dashboard uses no m3 metric");
    used
}

#[test]
fn prometheus_sees_a_managed_round_move_the_metrics_of_a_worker_and_a_server() {
    managed_round_in_prometheus(&Store::new());
}

#[test]
fn prometheus_sees_a_managed_round_move_the_metrics_on_postgres() {
    managed_round_in_prometheus(&Store::postgres());
}

fn managed_round_in_prometheus(store: &Store) {
    // The worker's notifier delivers to one receiver that accepts and to one that fails
    // until the record is dead-lettered.
    let mut worker = worker(
        store,
        &["--metrics", "127.0.0.1:0", "--notify", "--retry-for", "2s"],
    );
    let worker_at = address(&mut worker, Some("metrics_listening"), "url");
    subscribe(store, &receiver(204));
    subscribe(store, &receiver(500));
    let mut serve = store.spawn(&[
        "--json",
        "serve",
        "--bind",
        "127.0.0.1:0",
        "--token",
        API_TOKEN,
        "--metrics-token",
        METRICS_TOKEN,
    ]);
    let serve_at = address(&mut serve, None, "bind");
    let metrics = format!("http://{serve_at}/metrics");
    // The metrics token reads /metrics and nothing else; no credential reads nothing.
    assert_eq!(get(&metrics, None, None).0, 401);
    assert_eq!(get(&metrics, Some(METRICS_TOKEN), None).0, 200);
    let rounds_url = format!("http://{serve_at}/api/v1/rounds");
    assert_eq!(get(&rounds_url, Some(METRICS_TOKEN), None).0, 401);
    // Any credential with the read scope reads it too.
    let reader = store
        .m3(&["--json", "tokens", "create", "reader", "--scope", "read"])
        .expect_code(0)
        .json();
    let reader = reader["secret"].as_str().unwrap();
    assert_eq!(get(&metrics, Some(reader), None).0, 200);

    let prometheus = Prometheus::start(store.dir.path(), &worker_at, &serve_at);
    prometheus.eventually("sum(up)", |up| up == 2.0);

    let server = logged_server(&file(store, "calls.jsonl"), "");
    let execution = submit(store, &server, &book());
    let waiting = wait_for_event(&mut worker, "round_pending", Some(&execution));
    let round = waiting["round_id"].as_str().unwrap().to_owned();
    // Both processes read the pending gauge from the one store, so they agree.
    for job in ["m3_worker", "m3_serve"] {
        prometheus.eventually(
            &format!("m3_rounds_pending{{job=\"{job}\",server=\"shipping\"}}"),
            |pending| pending == 1.0,
        );
    }
    prometheus.eventually("sum(m3_executions_waiting)", |waiting| waiting == 2.0);
    prometheus.eventually(
        "m3_rounds_oldest_pending_seconds{job=\"m3_serve\",server=\"shipping\"}",
        |age| age > 0.0,
    );
    // The live expositions while a round waits (the pending gauge has a series only then).
    let mut live = BTreeSet::new();
    live.extend(names(
        &get(&format!("http://{worker_at}/metrics"), None, None).1,
    ));
    live.extend(names(&get(&metrics, Some(METRICS_TOKEN), None).1));
    store
        .m3(&[
            "--json",
            "respond",
            &execution,
            &round,
            "--idempotency-key",
            "k",
            "--accept",
            r#"shipping_address={"street": "1 Main Street", "city": "Pune"}"#,
        ])
        .expect_code(0);
    let finished = wait_for_event(&mut worker, "finished", Some(&execution));
    assert_eq!(finished["outcome"], "completed");

    // The server derives the round's life from the change feed ...
    let waited = prometheus.eventually(
        "m3_round_wait_seconds_sum{job=\"m3_serve\",server=\"shipping\",surface=\"cli\"}",
        |seconds| seconds > 0.0,
    );
    assert!(waited < 600.0, "{waited}");
    prometheus.eventually(
        "m3_round_wait_seconds_count{job=\"m3_serve\",server=\"shipping\",surface=\"cli\"}",
        |count| count == 1.0,
    );
    prometheus.eventually(
        "histogram_quantile(0.5, sum by (le) (m3_round_wait_seconds_bucket{job=\"m3_serve\"}))",
        |median| median > 0.0,
    );
    prometheus.eventually(
        "m3_round_delivery_seconds_count{job=\"m3_serve\",server=\"shipping\"}",
        |count| count == 1.0,
    );
    prometheus.eventually(
        "sum(m3_rounds_finished_total{job=\"m3_serve\",status=\"resolved\",failure_code=\"\"})",
        |count| count == 1.0,
    );
    prometheus.eventually(
        "m3_executions_finished_total{job=\"m3_serve\",outcome=\"completed\"}",
        |count| count == 1.0,
    );
    // ... the worker counts what it ran and how its idle loop woke up ...
    prometheus.eventually(
        "m3_worker_executions_finished_total{job=\"m3_worker\",outcome=\"completed\"}",
        |count| count == 1.0,
    );
    prometheus.eventually("sum(m3_queue_wakeups_total{job=\"m3_worker\"})", |n| {
        n >= 1.0
    });
    // ... the server times its requests by route, and nothing waits any more.
    prometheus.eventually(
        "sum(m3_http_requests_total{job=\"m3_serve\",route=\"/metrics\",status=\"200\"})",
        |count| count >= 2.0,
    );
    prometheus.eventually("sum(m3_rounds_pending) or vector(0)", |n| n == 0.0);
    assert_eq!(
        prometheus.query("sum(m3_lease_renewal_failures_total)"),
        vec![(serde_json::json!({}), 0.0)]
    );
    // ... and the worker's notifier counts deliveries by result, and the dead letter.
    prometheus.eventually(
        "m3_webhook_deliveries_total{job=\"m3_worker\",result=\"delivered\"}",
        |n| n == 1.0,
    );
    prometheus.eventually(
        "m3_webhook_deliveries_total{job=\"m3_worker\",result=\"failed\"}",
        |n| n >= 1.0,
    );
    prometheus.eventually("m3_webhook_dead_letters_total{job=\"m3_worker\"}", |n| {
        n == 1.0
    });

    // promtool reads both expositions; the dashboard uses only metrics they have.
    let (status, from_worker) = get(&format!("http://{worker_at}/metrics"), None, None);
    assert_eq!(status, 200);
    promtool_check("worker", &from_worker);
    // A request's route is its template: an answer link's token never becomes a label.
    let link = format!("http://{serve_at}/answer/not-a-real-link-token-x9");
    assert_eq!(get(&link, None, None).0, 403);
    let (status, from_serve) = get(&metrics, Some(METRICS_TOKEN), None);
    assert_eq!(status, 200);
    assert!(
        from_serve.contains("route=\"/answer/{token}\",method=\"GET\",status=\"403\""),
        "{from_serve}"
    );
    assert!(!from_serve.contains("not-a-real-link-token-x9"));
    promtool_check("server", &from_serve);
    live.extend(names(&from_worker));
    live.extend(names(&from_serve));
    let missing: Vec<String> = dashboard_metrics().difference(&live).cloned().collect();
    assert!(
        missing.is_empty(),
        "the dashboard uses metrics no process exposes: {missing:?}"
    );
    // Prometheus itself scrapes OpenMetrics.
    let (_, openmetrics) = get(
        &metrics,
        Some(METRICS_TOKEN),
        Some("application/openmetrics-text;version=1.0.0"),
    );
    assert!(openmetrics.ends_with("# EOF\n"), "{openmetrics}");

    drop(prometheus);
    signal(&serve, Signal::SIGTERM);
    signal(&worker, Signal::SIGTERM);
    assert_eq!(serve.finish().code, 0);
    assert_eq!(worker.finish().code, 0);
}

#[test]
fn a_weak_metrics_token_is_refused_at_start() {
    let store = Store::new();
    let done = store.m3(&[
        "--json",
        "serve",
        "--bind",
        "127.0.0.1:0",
        "--metrics-token",
        "weak-Q7x",
    ]);
    assert_eq!(done.code, 3, "{}", done.stderr);
    assert_eq!(done.error_code(), "invalid_argument");
    assert!(
        !done.stderr.contains("weak-Q7x"),
        "the token is never echoed: {}",
        done.stderr
    );
}
