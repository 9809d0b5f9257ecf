//! `m3 doctor`: checks the set-up and says what to fix. Exit 0 when everything `m3 demo`
//! needs works (the store, the bundled example server). The store's change signal (probed
//! from a second process) and the optional peers (Codex, Python, Node) are reported with how
//! to fix them, and only warn: without them `m3 demo` still works.

mod check;
mod signal;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use m3_kit::StoreUrl;

use crate::commands::inspect::open_kit;
use crate::failure::Failure;
use crate::output::Output;
use check::{Check, PROBE, missing_local_store};

pub(crate) use signal::announce_change;

pub(crate) async fn run(out: Output, db: &Path) -> Result<(), Failure> {
    let checks = vec![
        store(db).await,
        webhooks(db).await,
        signal::check(db).await,
        example_server().await,
        peer(
            "codex",
            "codex",
            "install Codex (npm install -g @openai/codex) to run --agent '{\"harness\": \"codex\", ...}'; m3 demo does not need it",
        )
        .await,
        peer(
            "python",
            "python3",
            "install Python 3 to run the Python examples and peers; m3 demo does not need it",
        )
        .await,
        peer(
            "node",
            "node",
            "install Node.js to run the npm MCP servers of the examples; m3 demo does not need it",
        )
        .await,
    ];
    let demo_ready = checks.iter().all(|check| check.status != "fail");
    if out.is_json() {
        out.document(&serde_json::json!({"checks": checks, "demo_ready": demo_ready}))?;
    } else {
        for check in &checks {
            out.say(format!(
                "{:<5} {:<15} {}",
                check.status, check.name, check.detail
            ));
            if let Some(fix) = &check.fix {
                out.say(format!("      {:<15} fix: {fix}", ""));
            }
        }
        out.say(if demo_ready {
            "m3 demo will work"
        } else {
            "m3 demo will not work until the failed checks are fixed"
        });
    }
    if demo_ready {
        Ok(())
    } else {
        Err(Failure::other(
            "doctor_failed",
            "some checks failed (see the fixes above)",
        ))
    }
}

/// The store opens (without running recovery), or, absent, can be created where `--db` says.
async fn store(db: &Path) -> Check {
    let name = "store";
    if missing_local_store(db) {
        let parent = match db.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let writable = std::fs::metadata(&parent)
            .map(|meta| meta.is_dir() && !meta.permissions().readonly())
            .unwrap_or(false);
        return if writable {
            Check::ok(
                name,
                format!(
                    "no store at {} yet: m3 run and m3 demo create it",
                    crate::output::store_label(db)
                ),
            )
        } else {
            Check::not_ok(
                name,
                "fail",
                format!(
                    "no store at {} and {} is not a writable directory",
                    crate::output::store_label(db),
                    parent.display()
                ),
                "give a writable place with --db PATH or M3_DB",
            )
        };
    }
    match probe_store(db).await {
        Ok(count) => Check::ok(
            name,
            format!(
                "{} opens ({count} executions{})",
                crate::output::store_label(db),
                journal(db)
            ),
        ),
        Err(failure) => Check::not_ok(
            name,
            "fail",
            format!(
                "{} does not open: {}",
                crate::output::store_label(db),
                failure.message
            ),
            "check the path and its permissions, or give another store with --db PATH or M3_DB",
        ),
    }
}

/// `, SQLite journal: WAL` (or `rollback`, which makes readers wait for writers) for a store
/// in a SQLite file, read from its header (byte 18 is 2 in WAL mode); empty otherwise.
fn journal(db: &Path) -> &'static str {
    use std::io::Read;
    let Some(file) = StoreUrl::parse(&db.to_string_lossy())
        .ok()
        .and_then(|url| url.local_file().map(Path::to_path_buf))
    else {
        return "";
    };
    let mut header = [0u8; 20];
    let read = std::fs::File::open(file).and_then(|mut f| f.read_exact(&mut header));
    match (read, header.get(..16), header.get(18)) {
        (Ok(()), Some(b"SQLite format 3\0"), Some(2)) => ", SQLite journal: WAL",
        (Ok(()), Some(b"SQLite format 3\0"), Some(_)) => ", SQLite journal: rollback, not WAL",
        _ => "",
    }
}

/// The webhook subscriptions: a warning for each that dead-lettered records, is failing
/// now, or was disabled by its receiver (`410`).
async fn webhooks(db: &Path) -> Check {
    let name = "webhooks";
    if missing_local_store(db) {
        return Check::ok(name, "no store yet, so no subscriptions".into());
    }
    let listed = async {
        let kit = open_kit(db, false).await?;
        let all = kit
            .store()
            .subscription_store()
            .await?
            .list_subscriptions()
            .await;
        kit.close().await?;
        Ok::<_, Failure>(all?)
    };
    let all = match listed.await {
        Ok(all) => all,
        Err(failure) => return Check::not_ok(name, "warn", failure.message, "see the store check"),
    };
    let troubled: Vec<String> = all
        .iter()
        .filter_map(|s| {
            let mut trouble = Vec::new();
            if s.dead_lettered > 0 {
                trouble.push(format!("{} dead letters", s.dead_lettered));
            }
            if s.delivery.attempts > 0 {
                trouble.push(format!("failing ({} attempts)", s.delivery.attempts));
            }
            if s.disabled_reason.as_deref() == Some("gone") {
                trouble.push("disabled: the receiver answered 410".into());
            }
            (!trouble.is_empty()).then(|| format!("{}: {}", s.id, trouble.join(", ")))
        })
        .collect();
    if troubled.is_empty() {
        return Check::ok(name, format!("{} subscriptions, none failing", all.len()));
    }
    Check::not_ok(
        name,
        "warn",
        troubled.join("; "),
        "see m3 webhooks show ID (the failures and their status codes); m3 webhooks enable ID resumes a disabled one",
    )
}

async fn probe_store(db: &Path) -> Result<usize, Failure> {
    let kit = open_kit(db, false).await?;
    let count = kit.executions().await?.len();
    kit.close().await?;
    Ok(count)
}

/// The bundled shipping server (what `m3 demo` starts) answers an `initialize`.
async fn example_server() -> Check {
    let name = "example server";
    let fix = "reinstall m3 (cargo install --path crates/m3-cli): the demo starts this binary as `m3 example-server shipping`";
    match tokio::time::timeout(PROBE, initialize_example_server()).await {
        Ok(Ok(version)) => Check::ok(
            name,
            format!("m3 example-server shipping answers (protocol {version})"),
        ),
        Ok(Err(reason)) => Check::not_ok(name, "fail", reason, fix),
        Err(_) => Check::not_ok(
            name,
            "fail",
            format!("no answer within {} s", PROBE.as_secs()),
            fix,
        ),
    }
}

async fn initialize_example_server() -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let mut child = tokio::process::Command::new(exe)
        .args(["example-server", "shipping"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start it: {e}"))?;
    let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "m3-doctor", "version": env!("CARGO_PKG_VERSION")}}});
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    stdin
        .write_all(format!("{initialize}\n").as_bytes())
        .await
        .map_err(|e| format!("cannot write to it: {e}"))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .await
        .map_err(|e| format!("cannot read its answer: {e}"))?;
    drop(stdin);
    let _ = child.kill().await;
    let answer: serde_json::Value =
        serde_json::from_str(&line).map_err(|e| format!("answered no JSON-RPC ({e})"))?;
    answer["result"]["protocolVersion"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("answered without a result: {line}"))
}

/// An optional program on `PATH`: its `--version`, or a warning with how to get it.
async fn peer(name: &'static str, program: &str, fix: &str) -> Check {
    let Some(path) = on_path(program) else {
        return Check::not_ok(name, "warn", format!("{program} not found on PATH"), fix);
    };
    let version = tokio::time::timeout(
        PROBE,
        tokio::process::Command::new(&path)
            .arg("--version")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await;
    match version {
        Ok(Ok(output)) if output.status.success() => {
            let text = String::from_utf8_lossy(&output.stdout);
            let text = if text.trim().is_empty() {
                String::from_utf8_lossy(&output.stderr).into_owned()
            } else {
                text.into_owned()
            };
            Check::ok(name, format!("{} ({})", text.trim(), path.display()))
        }
        _ => Check::not_ok(
            name,
            "warn",
            format!("{} does not answer --version", path.display()),
            fix,
        ),
    }
}

fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}
