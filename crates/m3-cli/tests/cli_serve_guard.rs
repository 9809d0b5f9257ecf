//! `m3 serve` as a process under attack (issue 27): DNS-rebinding requests
//! naming a foreign host, an `https` origin, weak tokens, hundreds of silent
//! and half-sent connections under a low file limit, and SIGTERM with a
//! client stuck mid-headers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use common::{Done, STEP, Store, m3_bin, managed_run, refs, shipping_server, wait_until};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

/// `curl` with `args`: (HTTP status, body); `--max-time` is a hang guard.
fn curl(args: &[&str]) -> (u16, String) {
    let output = Command::new("curl")
        .args(["-sS", "--max-time", "60", "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (status.trim().parse().unwrap_or(0), body.to_owned())
}

/// A started `m3 serve`: the child and the base URL it printed.
struct Serving {
    child: Option<Child>,
    url: String,
}

impl Serving {
    /// Starts `command` (an `m3 serve`) and reads the page address it prints first.
    fn start(mut command: Command) -> Self {
        // stderr goes to the test's own output: a pipe nobody reads could fill up.
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(STEP).expect("m3 serve printed its address");
        let url = line.trim().trim_end_matches('/').to_owned();
        assert!(url.starts_with("http://127.0.0.1:"), "{line}");
        Self {
            child: Some(child),
            url,
        }
    }

    fn port(&self) -> u16 {
        self.url.rsplit(':').next().unwrap().parse().unwrap()
    }

    fn addr(&self) -> String {
        self.url.trim_start_matches("http://").to_owned()
    }

    fn terminate(&self) {
        let id = self.child.as_ref().unwrap().id();
        let pid = Pid::from_raw(i32::try_from(id).unwrap());
        kill(pid, Signal::SIGTERM).unwrap();
    }

    /// Waits for the exit (a hang guard of [`STEP`]).
    fn finish(mut self) -> Done {
        let mut child = self.child.take().unwrap();
        let deadline = Instant::now() + STEP;
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("m3 serve did not exit within {STEP:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Done::from(child.wait_with_output().unwrap())
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs `command` to its end; a command that keeps running (old behaviour:
/// serving with a weak token) fails the test instead of hanging it.
fn run_to_end(mut command: Command) -> Done {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + STEP;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the command kept running instead of refusing");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Done::from(child.wait_with_output().unwrap())
}

#[test]
fn dns_rebinding_requests_cannot_read_or_answer() {
    let store = Store::new();
    let serve = Serving::start(store.command(&[
        "serve",
        "--create",
        "--bind",
        "127.0.0.1:0",
        "--allowed-host",
        "m3.test",
    ]));
    let mut run = store.spawn(&refs(&managed_run(&shipping_server(""), "book_shipment")));
    let execution = run.next_json()["execution_id"].as_str().unwrap().to_owned();
    let inbox = format!("{}/api/v1/rounds?status=pending", serve.url);
    let round = wait_until(STEP, "a pending round", || {
        let (status, body) = curl(&[&inbox]);
        assert_eq!(status, 200, "{body}");
        let rounds: Value = serde_json::from_str(&body).unwrap();
        rounds[0]["round_id"].as_str().map(str::to_owned)
    });

    let evil = format!("Host: evil.example:{}", serve.port());
    let (status, body) = curl(&["-H", &evil, &inbox]);
    assert_eq!(status, 403, "{body}");
    assert!(!body.contains(&round), "the inbox leaked: {body}");
    let code: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(code["error"]["code"], "forbidden_host");
    let (status, body) = curl(&["-H", &evil, &format!("{}/", serve.url)]);
    assert_eq!(status, 403, "the page too: {body}");

    let responses = format!(
        "{}/api/v1/executions/{execution}/rounds/{round}/responses",
        serve.url
    );
    let answer = r#"{"responses": {"shipping_address": {"action": "accept", "content": {"street": "1 Evil Street", "city": "Evil"}}}, "idempotency_key": "evil"}"#;
    let json = "Content-Type: application/json";
    let evil_origin = format!("Origin: http://evil.example:{}", serve.port());
    let (status, body) = curl(&[
        "-H",
        &evil,
        "-H",
        &evil_origin,
        "-H",
        json,
        "-d",
        answer,
        &responses,
    ]);
    assert_eq!(status, 403, "{body}");
    let https_origin = format!("Origin: https://{}", serve.addr());
    let (status, body) = curl(&["-H", &https_origin, "-H", json, "-d", answer, &responses]);
    assert_eq!(status, 403, "an https origin is not this server: {body}");
    let round_url = format!("{}/api/v1/executions/{execution}/rounds/{round}", serve.url);
    let (_, body) = curl(&[&round_url]);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["status"],
        "pending"
    );

    for host in [
        format!("Host: localhost:{}", serve.port()),
        format!("Host: [::1]:{}", serve.port()),
        format!("Host: m3.test:{}", serve.port()),
    ] {
        let (status, body) = curl(&["-H", &host, &inbox]);
        assert_eq!(status, 200, "{host}: {body}");
    }
    let origin = format!("Origin: {}", serve.url);
    let good = answer.replace("Evil", "Pune").replace("evil", "good");
    let (status, body) = curl(&["-H", &origin, "-H", json, "-d", &good, &responses]);
    assert_eq!(status, 200, "{body}");
    let done = run.finish().expect_code(0);
    assert!(done.stdout.contains("Shipment booked."), "{}", done.stdout);
}

#[test]
fn weak_tokens_are_refused_at_startup() {
    let store = Store::new();
    for (bind, token) in [
        ("0.0.0.0:0", " "),
        ("0.0.0.0:0", "short-token"),
        ("127.0.0.1:0", "                 x"),
        ("127.0.0.1:0", "sixteen;chars;xx"),
    ] {
        let mut command = store.command(&["--json", "serve", "--bind", bind]);
        command.env("M3_SERVE_TOKEN", token);
        let refused = run_to_end(command).expect_code(3);
        assert_eq!(refused.error_code(), "invalid_argument", "{token:?}");
        let secret = token.trim();
        assert!(
            secret.is_empty() || !refused.stderr.contains(secret),
            "the token is not echoed"
        );
    }
    let refused =
        run_to_end(store.command(&["serve", "--bind", "0.0.0.0:0", "--token", " "])).expect_code(3);
    assert!(refused.stderr.contains("at least 16"), "{}", refused.stderr);
}

/// A connection that sent part of a request's headers and then stopped.
fn half_sent(addr: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        .unwrap();
    stream
}

/// Blocks until the server closes `stream` (EOF or reset); a hang guard of [`STEP`].
fn closed_by_server(stream: &mut TcpStream) -> bool {
    stream.set_read_timeout(Some(STEP)).unwrap();
    let mut buffer = [0_u8; 256];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(error) => return error.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

#[test]
fn silent_and_half_sent_connections_cannot_starve_healthz_under_a_low_file_limit() {
    let store = Store::new();
    let mut command = Command::new("bash");
    command
        .args([
            "-c",
            r#"ulimit -n 256 && exec "$@""#,
            "bash",
            m3_bin(),
            "--db",
        ])
        .arg(store.db())
        .args([
            "serve",
            "--create",
            "--bind",
            "127.0.0.1:0",
            "--header-timeout",
            "1",
        ])
        .env_remove("M3_DB")
        .stdin(Stdio::null());
    let serve = Serving::start(command);
    let addr = serve.addr();
    let mut crowd: Vec<TcpStream> = (0..300)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    crowd.extend((0..20).map(|_| half_sent(&addr)));

    let (status, body) = curl(&[&format!("{}/healthz", serve.url)]);
    assert_eq!(status, 200, "{body}");
    assert!(
        closed_by_server(&mut crowd[0]),
        "a silent connection is closed"
    );
    assert!(closed_by_server(&mut crowd[310]), "a half-sent one too");
    let (status, _) = curl(&[&format!("{}/healthz", serve.url)]);
    assert_eq!(status, 200);
    serve.terminate();
    serve.finish().expect_code(0);
}

#[test]
fn sigterm_ends_serve_while_a_client_is_stuck_mid_headers() {
    let store = Store::new();
    let serve = Serving::start(store.command(&[
        "serve",
        "--create",
        "--bind",
        "127.0.0.1:0",
        "--header-timeout",
        "3600",
        "--shutdown-grace",
        "1",
    ]));
    let mut stuck = half_sent(&serve.addr());
    // Accepted in order: once a later request is answered, the stuck one is open.
    let (status, _) = curl(&[&format!("{}/healthz", serve.url)]);
    assert_eq!(status, 200);
    serve.terminate();
    serve.finish().expect_code(0);
    assert!(closed_by_server(&mut stuck));
}
