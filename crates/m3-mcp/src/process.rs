//! The server child process: exact spawn, own process group, stderr capture, reaping.
//!
//! The command runs with exactly the configured program, arguments, environment and
//! working directory (`env_clear()` first; only variables named in
//! [`ConnectOptions::with_inherited_env`](super::ConnectOptions::with_inherited_env) are copied from
//! our own environment). It leads a new process group, so killing it takes its
//! grandchildren along (`killpg(SIGKILL)` through process-wrap's `ProcessGroup`).
//! A reaper task owns the child: it waits for the exit, or kills the group when
//! the [`ServerProcess`] is closed or dropped, and always reaps.

use std::collections::VecDeque;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use m3_types::{Error, Result, StdioServer};
use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop, ProcessGroup};
use tokio::io::AsyncReadExt;
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// SIGKILL; the same number on every Unix.
const SIGKILL: i32 = 9;

/// How the child ended, once reaped.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ExitInfo {
    /// The exit code (`None` when a signal ended the process).
    pub code: Option<i32>,
    /// How it ended, for messages (the exit status, or why waiting for it failed).
    pub description: String,
}

impl From<std::io::Result<ExitStatus>> for ExitInfo {
    fn from(status: std::io::Result<ExitStatus>) -> Self {
        match status {
            Ok(status) => Self {
                code: status.code(),
                description: status.to_string(),
            },
            Err(error) => Self {
                code: None,
                description: format!("wait failed: {error}"),
            },
        }
    }
}

/// Bounded tail of the server's stderr (the oldest bytes are dropped).
#[derive(Debug)]
pub struct StderrTail {
    bytes: Mutex<VecDeque<u8>>,
    limit: usize,
}

impl StderrTail {
    fn new(limit: usize) -> Self {
        Self {
            bytes: Mutex::new(VecDeque::new()),
            limit,
        }
    }

    fn push(&self, chunk: &[u8]) {
        if let Ok(mut bytes) = self.bytes.lock() {
            bytes.extend(chunk);
            let excess = bytes.len().saturating_sub(self.limit);
            bytes.drain(..excess);
        }
    }

    /// The captured text (lossy UTF-8).
    pub fn text(&self) -> String {
        match self.bytes.lock() {
            Ok(bytes) => {
                let (a, b) = bytes.as_slices();
                let mut all = Vec::with_capacity(a.len() + b.len());
                all.extend_from_slice(a);
                all.extend_from_slice(b);
                String::from_utf8_lossy(&all).into_owned()
            }
            Err(_) => String::new(),
        }
    }
}

/// What [`spawn`] needs besides the server binding.
#[derive(Debug, Clone)]
#[expect(
    clippy::exhaustive_structs,
    reason = "plumbing: the Codex harness of m3-runtime builds it with a struct literal"
)]
pub struct SpawnSettings {
    /// Variables copied from this process's environment (the binding's own env wins).
    pub inherit_env: Vec<String>,
    /// How many bytes of stderr the tail keeps.
    pub stderr_limit: usize,
}

/// A running (or reaped) server process. Dropping it kills the process group.
#[derive(Debug)]
pub struct ServerProcess {
    pid: u32,
    kill: CancellationToken,
    exited: watch::Receiver<Option<ExitInfo>>,
    stderr: Arc<StderrTail>,
}

/// The pipes of a freshly spawned server.
#[derive(Debug)]
#[non_exhaustive]
pub struct ServerPipes {
    /// The server's stdin.
    pub stdin: ChildStdin,
    /// The server's stdout.
    pub stdout: ChildStdout,
}

/// Spawn `server` in its own process group with piped stdio.
///
/// # Errors
/// `transport_error` when the program cannot be started.
pub fn spawn(
    server: &StdioServer,
    settings: &SpawnSettings,
) -> Result<(ServerProcess, ServerPipes)> {
    let mut command = tokio::process::Command::new(&server.command);
    command.args(&server.args).env_clear();
    for name in &settings.inherit_env {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    for (key, value) in &server.env {
        command.env(key, value);
    }
    if let Some(cwd) = &server.cwd {
        command.current_dir(cwd);
    }
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut wrapped = CommandWrap::from(command);
    wrapped.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
    let mut child = wrapped.spawn().map_err(|error| {
        Error::transport(format!(
            "cannot start MCP server '{}': {error}",
            server.name
        ))
        .with_detail("server", server.name.clone())
        .with_detail("command", server.command.clone())
        .with_source(error)
    })?;
    let pid = child.id().unwrap_or_default();
    let pipes = take_pipes(child.as_mut(), &server.name)?;
    let stderr = Arc::new(StderrTail::new(settings.stderr_limit));
    if let Some(pipe) = child.stderr().take() {
        tokio::spawn(drain_stderr(pipe, Arc::clone(&stderr)));
    }
    let kill = CancellationToken::new();
    let (exited_tx, exited) = watch::channel(None);
    tokio::spawn(reap(child, kill.clone(), exited_tx));
    tracing::debug!(server = %server.name, pid, "spawned MCP server");
    Ok((
        ServerProcess {
            pid,
            kill,
            exited,
            stderr,
        },
        pipes,
    ))
}

fn take_pipes(child: &mut dyn ChildWrapper, server: &str) -> Result<ServerPipes> {
    let stdin = child.stdin().take();
    let stdout = child.stdout().take();
    match (stdin, stdout) {
        (Some(stdin), Some(stdout)) => Ok(ServerPipes { stdin, stdout }),
        _ => {
            let _ = child.start_kill();
            Err(
                Error::transport(format!("MCP server '{server}' has no stdio pipes"))
                    .with_detail("server", server.to_owned()),
            )
        }
    }
}

async fn drain_stderr(mut pipe: ChildStderr, tail: Arc<StderrTail>) {
    // Held for the server's whole life by every execution, so small: stderr is not a hot path.
    let mut buf = vec![0_u8; 1024];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => tail.push(&buf[..n]),
        }
    }
}

async fn reap(
    mut child: Box<dyn ChildWrapper>,
    kill: CancellationToken,
    exited: watch::Sender<Option<ExitInfo>>,
) {
    let natural = tokio::select! {
        status = child.wait() => Some(status),
        () = kill.cancelled() => None,
    };
    let status = match natural {
        Some(status) => status,
        None => {
            if let Err(error) = child.start_kill() {
                tracing::debug!(%error, "killpg on MCP server group failed");
            }
            child.wait().await
        }
    };
    // The leader is gone; take any remaining member of its group with it.
    let _ = child.signal(SIGKILL);
    let info = ExitInfo::from(status);
    tracing::debug!(status = %info.description, "MCP server reaped");
    let _ = exited.send(Some(info));
}

impl ServerProcess {
    /// The server's pid (also its process group id).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The captured stderr tail.
    pub fn stderr(&self) -> &Arc<StderrTail> {
        &self.stderr
    }

    /// A token that kills the process group when cancelled.
    pub fn kill_token(&self) -> CancellationToken {
        self.kill.clone()
    }

    /// A receiver that turns `Some` once the process is reaped.
    pub fn exit_watch(&self) -> watch::Receiver<Option<ExitInfo>> {
        self.exited.clone()
    }

    /// Wait up to `grace` for the server to exit by itself, then kill its group;
    /// returns once the process is reaped (bounded by `grace` + 5 s).
    pub async fn shutdown(&self, grace: Duration) -> Option<ExitInfo> {
        let mut exited = self.exited.clone();
        if tokio::time::timeout(grace, exited.wait_for(Option::is_some))
            .await
            .is_err()
        {
            tracing::debug!(
                pid = self.pid,
                "MCP server did not exit in time; killing its group"
            );
        }
        self.kill.cancel();
        match tokio::time::timeout(Duration::from_secs(5), exited.wait_for(Option::is_some)).await {
            Ok(Ok(info)) => info.clone(),
            _ => None,
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_tail_keeps_only_the_newest_bytes() {
        let tail = StderrTail::new(8);
        tail.push(b"hello ");
        tail.push(b"world!");
        assert_eq!(tail.text(), "o world!");
        tail.push(&[b'x'; 100]);
        assert_eq!(tail.text(), "xxxxxxxx");
    }
}
