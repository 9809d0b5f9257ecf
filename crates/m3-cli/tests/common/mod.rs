//! Driving the built `m3` binary as a subprocess.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

/// How long any single step may take before the test fails (a hang guard, not a timing target).
pub const STEP: Duration = Duration::from_secs(30);

/// The built binary.
pub fn m3_bin() -> &'static str {
    env!("CARGO_BIN_EXE_m3")
}

/// A fresh store for one test: a SQLite file in its own temp dir (given with `--db`), or a
/// fresh schema on the test PostgreSQL server (given with `M3_DB`, as a user exports it).
pub struct Store {
    pub dir: TempDir,
    postgres: Option<String>,
}

impl Store {
    /// A SQLite store at `<temp dir>/m3.sqlite`.
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            postgres: None,
        }
    }

    /// A SQLite store at `<a new temp dir inside parent>/m3.sqlite` (a small filesystem
    /// mounted for the test, say).
    pub fn new_in(parent: &Path) -> Self {
        Self {
            dir: tempfile::tempdir_in(parent).unwrap(),
            postgres: None,
        }
    }

    /// A store in its own schema on the server `M3_TEST_POSTGRES_URL` names (scripts/test.sh
    /// starts one); without that variable the test fails, it is not skipped.
    #[cfg(feature = "postgres")]
    pub fn postgres() -> Self {
        let url = m3_store_postgres::testing::isolated_url().unwrap_or_else(|e| panic!("{e}"));
        Self {
            dir: tempfile::tempdir().unwrap(),
            postgres: Some(url),
        }
    }

    /// A store on the PostgreSQL server at `url` (a server the test started itself).
    pub fn postgres_at(url: &str) -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            postgres: Some(url.to_owned()),
        }
    }

    pub fn db(&self) -> PathBuf {
        self.dir.path().join("m3.sqlite")
    }

    /// `m3 ARGS...` on this store: `--db <file>` for SQLite, `M3_DB=<url>` for PostgreSQL
    /// (any other M3_DB is removed from the environment).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(m3_bin());
        match &self.postgres {
            Some(url) => command.env("M3_DB", url),
            None => command.arg("--db").arg(self.db()).env_remove("M3_DB"),
        };
        command
            .args(args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null());
        command
    }

    /// Runs `m3 ARGS...` to its end.
    pub fn m3(&self, args: &[&str]) -> Done {
        let output = self.command(args).output().unwrap();
        Done::from(output)
    }

    /// Starts `m3 --json run ARGS...` with stdout read line by line.
    pub fn spawn(&self, args: &[&str]) -> Running {
        let mut command = self.command(args);
        command.stderr(Stdio::piped());
        Running::start(command)
    }
}

impl Running {
    /// Starts `command` with stdout read line by line (stderr as `command` sets it).
    pub fn start(mut command: Command) -> Self {
        let mut child = command.stdout(Stdio::piped()).spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Running { child, lines: rx }
    }
}

/// A finished `m3` invocation.
#[derive(Debug)]
pub struct Done {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Done {
    fn from(output: Output) -> Self {
        Self {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

impl Done {
    /// Asserts the exit code, printing both streams when it differs.
    pub fn expect_code(self, code: i32) -> Self {
        assert_eq!(
            self.code, code,
            "exit code\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    /// stdout as one JSON document.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", self.stdout))
    }

    /// stderr as the JSON error object; returns its code.
    pub fn error_code(&self) -> String {
        let value: Value = serde_json::from_str(self.stderr.trim())
            .unwrap_or_else(|e| panic!("stderr is not one JSON object ({e}):\n{}", self.stderr));
        value["error"]["code"].as_str().unwrap().to_owned()
    }
}

/// A running `m3` (usually `m3 --json run ...`).
pub struct Running {
    pub child: Child,
    lines: Receiver<String>,
}

impl Running {
    /// The next stdout line, parsed as JSON.
    pub fn next_json(&mut self) -> Value {
        let line = self.next_line();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// The next stdout line as JSON, if one arrives within `wait`.
    pub fn try_next_json(&mut self, wait: Duration) -> Option<Value> {
        let line = self.lines.recv_timeout(wait).ok()?;
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
    }

    pub fn next_line(&mut self) -> String {
        match self.lines.recv_timeout(STEP) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => panic!("no output from m3 within {STEP:?}"),
            Err(RecvTimeoutError::Disconnected) => {
                let status = self.child.wait().unwrap();
                let mut stderr = String::new();
                if let Some(mut err) = self.child.stderr.take() {
                    std::io::Read::read_to_string(&mut err, &mut stderr).unwrap();
                }
                panic!("m3 ended ({status}) before printing a line; stderr:\n{stderr}")
            }
        }
    }

    /// Waits for the end; returns the exit code, the remaining stdout lines and stderr.
    pub fn finish(mut self) -> Done {
        let deadline = Instant::now() + STEP;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let mut stdout = String::new();
                while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
                    stdout.push_str(&line);
                    stdout.push('\n');
                }
                let mut stderr = String::new();
                if let Some(mut err) = self.child.stderr.take() {
                    std::io::Read::read_to_string(&mut err, &mut stderr).unwrap();
                }
                return Done {
                    code: status.code().unwrap_or(-1),
                    stdout,
                    stderr,
                };
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("m3 did not finish within {STEP:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `--server shipping=<m3> example-server shipping [EXTRA...]`.
pub fn shipping_server(extra: &str) -> String {
    format!(
        "shipping={} example-server shipping {extra}",
        shell_quote(m3_bin())
    )
}

/// `path` quoted for a `--server NAME=COMMAND` flag (split like a shell splits words).
pub fn shell_quote(path: &str) -> String {
    format!("'{}'", path.replace('\'', r"'\''"))
}

/// The args of `m3 --json run` calling `shipping:TOOL` with managed input.
pub fn managed_run(server: &str, tool: &str) -> Vec<String> {
    vec![
        "--json".into(),
        "run".into(),
        "--server".into(),
        server.into(),
        "--call".into(),
        format!("shipping:{tool}"),
        "--arguments".into(),
        r#"{"weight_kg": 2}"#.into(),
        "--human-input".into(),
        "managed".into(),
    ]
}

/// The args of `m3 --json run` calling `raw:ask` (see [`raw_server`]) with managed input.
pub fn managed_raw_run(server: &str) -> Vec<String> {
    [
        "--json",
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
    .map(str::to_owned)
    .to_vec()
}

pub fn refs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

pub fn exists(path: &Path) -> bool {
    path.exists()
}

/// Polls `check` until it returns `Some` or `within` passed (then panics with `what`).
pub fn wait_until<T>(within: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The Python interpreter of the test peers (`M3_TEST_PYTHON`, else the one
/// `scripts/test.sh` installs under `~/.cache/m3-rs/tools`).
pub fn python() -> String {
    std::env::var("M3_TEST_PYTHON").unwrap_or_else(|_| {
        format!(
            "{}/.cache/m3-rs/tools/venv/bin/python",
            std::env::var("HOME").unwrap_or_default()
        )
    })
}

/// `--server raw=...`: `tests/peers/raw_elicitation_server.py` (one tool, `ask`) asking
/// exactly the `elicitation/create` params `params` under request key `q` (2026-07-28 era).
/// Its result's text is the JSON of the answer it received.
pub fn raw_server(params: &Value) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/peers/raw_elicitation_server.py");
    format!(
        "raw={} {} --era modern --params {}",
        shell_quote(&python()),
        shell_quote(&script.display().to_string()),
        shell_quote(&params.to_string())
    )
}

/// Every text cell of every table of the SQLite store at `db`, as `(table, column, text)`,
/// except the round's own response column (where the answer itself lives).
pub async fn cells_outside_responses(db: &Path) -> Vec<(String, String, String)> {
    let url = format!("sqlite://{}?mode=ro", db.display());
    let mut connection = <sqlx::SqliteConnection as sqlx::Connection>::connect(&url)
        .await
        .unwrap();
    let tables: Vec<String> =
        sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table'")
            .fetch_all(&mut connection)
            .await
            .unwrap();
    let mut cells = Vec::new();
    for table in tables {
        let columns: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT name FROM pragma_table_info('{table}')"
        )))
        .fetch_all(&mut connection)
        .await
        .unwrap();
        for column in columns {
            if table == "m3_managed_input_rounds" && column == "responses_json" {
                continue;
            }
            // Names come from the database's own catalogue.
            let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT CAST(\"{column}\" AS TEXT) FROM \"{table}\""
            )))
            .fetch_all(&mut connection)
            .await
            .unwrap();
            for row in rows {
                if let Some(text) = sqlx::Row::get::<Option<String>, _>(&row, 0) {
                    cells.push((table.clone(), column.clone(), text));
                }
            }
        }
    }
    cells
}

/// `GET url` with a bearer token through `curl` (as the docs show it): the JSON body.
pub fn curl_json(url: &str, token: &str) -> Value {
    let output = Command::new("curl")
        .args(["-fsS", "-H", &format!("Authorization: Bearer {token}"), url])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}
