//! OAuth to an HTTP MCP server with its own authorization server: the official MCP Python
//! SDK as both (`tests/peers/oauth_server.py`: dynamic client registration, an
//! authorization endpoint that approves at once, access tokens that expire after 2 s,
//! refresh tokens). `m3 run` shows the authorization URL (`authorization_required`), the
//! test opens it as a browser would, and the call completes; a second `m3 run` on the same
//! store, after the token expired, uses the sealed stored credentials and refreshes them
//! (no new authorization). No token ever appears in m3's output, its trace log, or the
//! store's file. On SQLite and PostgreSQL. The same with a confidential dynamically
//! registered client (its secret kept sealed with the tokens, so the restored client
//! can refresh), and the step-up of a `403 insufficient_scope` during a call.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{Running, Store, python, wait_until};
use serde_json::Value;

/// The key sealing tokens in the store (32 bytes, base64).
const KEY: &str = "b2F1dGgtdGVzdC1rZXktMzItYnl0ZXMtbG9uZy4uLi4=";
/// Seconds an access token lives.
const TTL: u64 = 2;

/// The peer on a free loopback port, killed on drop; its grant log in `dir`.
struct OAuthPeer {
    child: Child,
    url: String,
    log: PathBuf,
}

impl OAuthPeer {
    /// The peer with `flags` (`--confidential`, `--step-up`).
    fn start(dir: &Path, flags: &[&str]) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers/oauth_server.py");
        let log = dir.join("grants.log");
        let child = Command::new(python())
            .arg(script)
            .arg(port.to_string())
            .args(["--ttl", &TTL.to_string(), "--log"])
            .arg(&log)
            .args(flags)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the MCP Python SDK peer starts (set M3_TEST_PYTHON or run scripts/test.sh)");
        wait_until(Duration::from_secs(30), "the OAuth peer to listen", || {
            TcpStream::connect(("127.0.0.1", port)).ok()
        });
        Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
            log,
        }
    }

    /// The grants the authorization server answered, in order.
    fn grants(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for OAuthPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One `m3 --json run` calling `whoami`, trace-logging to `log`, opening any authorization
/// URL it prints: its events and its exit code.
fn call(store: &Store, peer: &OAuthPeer, log: &Path) -> (Vec<Value>, i32) {
    call_tool(store, peer, log, "whoami")
}

/// [`call`] calling `tool`.
fn call_tool(store: &Store, peer: &OAuthPeer, log: &Path, tool: &str) -> (Vec<Value>, i32) {
    let server = format!("peer={}", peer.url);
    let call = format!("peer:{tool}");
    let mut command = store.command(&[
        "--json",
        "run",
        "--server",
        &server,
        "--server-trust",
        "peer=loopback",
        "--call",
        &call,
    ]);
    command
        .env("M3_OAUTH_KEY", KEY)
        .env("M3_LOG", "trace")
        .stderr(std::fs::File::create(log).unwrap());
    let mut run = Running::start(command);
    let mut events = Vec::new();
    loop {
        let event = run.next_json();
        if event["type"] == "authorization_required" {
            // The browser: the authorization server redirects to m3's loopback listener.
            let url = event["url"].as_str().unwrap();
            let opened = Command::new("curl").args(["-sSfL", url]).output().unwrap();
            assert!(opened.status.success(), "{opened:?}");
        }
        let last = event["type"] == "result";
        events.push(event);
        if last {
            break;
        }
    }
    (events, run.finish().code)
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events.iter().filter_map(|e| e["type"].as_str()).collect()
}

/// No access or refresh token of the peer in any of `places`.
fn no_token_in(places: &[(&str, Vec<u8>)]) {
    for (place, bytes) in places {
        for prefix in [b"peer-at-".as_slice(), b"peer-rt-".as_slice()] {
            assert!(
                !bytes.windows(prefix.len()).any(|w| w == prefix),
                "a token ({}) is in {place}",
                String::from_utf8_lossy(prefix)
            );
        }
    }
}

fn authorizes_once_then_refreshes(store: &Store, flags: &[&str]) {
    let peer = OAuthPeer::start(store.dir.path(), flags);
    let first_log = store.dir.path().join("first.log");
    let (first, code) = call(store, &peer, &first_log);
    assert_eq!(code, 0, "{first:?}");
    assert_eq!(
        kinds(&first),
        ["execution", "authorization_required", "result"]
    );
    let result = first.last().unwrap();
    assert_eq!(result["snapshot"]["outcome"], "completed", "{result}");
    assert!(result.to_string().contains("authorized"), "{result}");
    assert_eq!(first[1]["server"], "peer");
    assert!(
        first[1]["redirect_uri"]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:")
    );
    assert_eq!(peer.grants(), ["authorization_code"]);

    // The token expires; another process on the store refreshes the stored one.
    std::thread::sleep(Duration::from_secs(TTL + 1));
    let second_log = store.dir.path().join("second.log");
    let (second, code) = call(store, &peer, &second_log);
    assert_eq!(code, 0, "{second:?}");
    assert_eq!(
        kinds(&second),
        ["execution", "result"],
        "no new authorization"
    );
    assert_eq!(peer.grants(), ["authorization_code", "refresh_token"]);

    let mut places = vec![
        (
            "the first run's events",
            serde_json::to_vec(&first).unwrap(),
        ),
        (
            "the second run's events",
            serde_json::to_vec(&second).unwrap(),
        ),
        ("the first run's log", std::fs::read(&first_log).unwrap()),
        ("the second run's log", std::fs::read(&second_log).unwrap()),
    ];
    places.extend(store_files(store));
    no_token_in(&places);
}

/// The store's files.
fn store_files(store: &Store) -> Vec<(&'static str, Vec<u8>)> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(store.dir.path()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_file() && name.starts_with("m3.sqlite") {
            files.push(("the store's file", std::fs::read(&path).unwrap()));
        }
    }
    files
}

#[test]
fn sqlite_authorizes_once_then_refreshes_from_the_sealed_store() {
    authorizes_once_then_refreshes(&Store::new(), &[]);
}

#[test]
fn postgres_authorizes_once_then_refreshes_from_the_sealed_store() {
    authorizes_once_then_refreshes(&Store::postgres(), &[]);
}

/// A client the authorization server made confidential: restored from the store, it
/// still has its secret, so the second process refreshes instead of authorizing again.
#[test]
fn sqlite_a_confidential_registered_client_refreshes_after_a_restore() {
    authorizes_once_then_refreshes(&Store::new(), &["--confidential"]);
}

/// A call the server refuses with `403 insufficient_scope` is authorized again with the
/// union of the granted and the required scopes, then retried; a scope the authorization
/// server never grants fails the call after one step-up, typed.
#[test]
fn sqlite_steps_up_to_a_larger_scope_once_per_call() {
    let store = Store::new();
    let peer = OAuthPeer::start(store.dir.path(), &["--step-up"]);
    let write_log = store.dir.path().join("write.log");
    let (write, code) = call_tool(&store, &peer, &write_log, "write_note");
    assert_eq!(code, 0, "{write:?}");
    assert_eq!(
        kinds(&write),
        [
            "execution",
            "authorization_required",
            "authorization_required",
            "result"
        ]
    );
    let result = write.last().unwrap();
    assert_eq!(result["snapshot"]["outcome"], "completed", "{result}");
    assert!(result.to_string().contains("written"), "{result}");
    assert_eq!(
        peer.grants(),
        [
            "authorization_code notes:read",
            "authorization_code notes:read notes:write"
        ]
    );

    // notes:admin is never granted: one step-up (keeping the scopes granted before),
    // then the second 403 fails the call.
    let erase_log = store.dir.path().join("erase.log");
    let (erase, code) = call_tool(&store, &peer, &erase_log, "erase_notes");
    assert_ne!(code, 0, "{erase:?}");
    assert_eq!(
        kinds(&erase),
        ["execution", "authorization_required", "result"]
    );
    let result = erase.last().unwrap();
    assert_eq!(result["snapshot"]["outcome"], "failed", "{result}");
    let failure = result.to_string();
    assert!(failure.contains("insufficient_scope"), "{result}");
    assert!(failure.contains("\"http_status\":403"), "{result}");
    assert_eq!(
        peer.grants()[2..],
        ["authorization_code notes:read notes:write"]
    );

    let mut places = vec![
        (
            "the write run's events",
            serde_json::to_vec(&write).unwrap(),
        ),
        (
            "the erase run's events",
            serde_json::to_vec(&erase).unwrap(),
        ),
        ("the write run's log", std::fs::read(&write_log).unwrap()),
        ("the erase run's log", std::fs::read(&erase_log).unwrap()),
    ];
    places.extend(store_files(&store));
    no_token_in(&places);
}

/// The page of `m3 serve`'s execution, as text.
fn execution_page(base: &str, execution_id: &str) -> String {
    let page = Command::new("curl")
        .args(["-sSf", &format!("{base}/executions/{execution_id}")])
        .output()
        .unwrap();
    assert!(page.status.success(), "{page:?}");
    String::from_utf8(page.stdout).unwrap()
}

/// While `m3 run` waits for the person's authorization, the answer page of an `m3 serve`
/// on the same store links the authorization URL on the execution's page; once the
/// redirect came, it no longer does.
#[test]
fn sqlite_the_answer_page_links_an_authorization_while_it_is_pending() {
    let store = Store::new();
    let peer = OAuthPeer::start(store.dir.path(), &[]);
    let server = format!("peer={}", peer.url);
    let mut command = store.command(&[
        "--json",
        "run",
        "--server",
        &server,
        "--server-trust",
        "peer=loopback",
        "--call",
        "peer:whoami",
    ]);
    command.env("M3_OAUTH_KEY", KEY).stderr(Stdio::null());
    let mut run = Running::start(command);
    let execution = run.next_json();
    let execution_id = execution["execution_id"].as_str().unwrap().to_owned();
    let notice = run.next_json();
    assert_eq!(notice["type"], "authorization_required", "{notice}");
    let url = notice["url"].as_str().unwrap();

    let mut serve = store.spawn(&["serve", "--bind", "127.0.0.1:0"]);
    let base = serve.next_line().trim_end_matches('/').to_owned();
    let link = format!(
        "<a class=\"authorization-link\" href=\"{}\"",
        url.replace('&', "&amp;")
    );
    // The worker appends the event right after printing the URL.
    let page = wait_until(Duration::from_secs(10), "the page to link it", || {
        let page = execution_page(&base, &execution_id);
        page.contains(&link).then_some(page)
    });
    assert!(page.contains("data-server=\"peer\""), "{page}");

    let opened = Command::new("curl").args(["-sSfL", url]).output().unwrap();
    assert!(opened.status.success(), "{opened:?}");
    let result = run.next_json();
    assert_eq!(result["snapshot"]["outcome"], "completed", "{result}");
    assert_eq!(run.finish().code, 0);
    let page = execution_page(&base, &execution_id);
    assert!(!page.contains("authorization-link"), "{page}");
    assert!(page.contains("oauth.authorization_finished"), "{page}");
    drop(serve);
}
