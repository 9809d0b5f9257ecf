//! The relay process body: spawn the real server, forward NDJSON both ways, observe it.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use m3_types::{Error, Result};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::Mutex;

use super::handoff::Handoff;
use super::policy::{ToolPolicy, Verdict};
use super::report::Reporter;
use super::{Direction, MAX_FRAME_BYTES};
use m3_mcp::ndjson::{Line, frame_of, pass_rest_of_line, read_line};

/// How long the server may take to exit after its stdout closed, before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// Runs one relay: reads the handoff at `handoff`, spawns `command` (program and
/// arguments) with exactly the handoff's environment and working directory (stderr
/// inherited), and forwards `stdin` to the server and the server's stdout to `stdout`
/// line by line, unchanged, reporting every frame to the observer.
///
/// Returns the server's exit code (128 + signal number when a signal ended it) once
/// its stdout closed and it was reaped. End of `stdin` closes the server's stdin; a
/// failed write to `stdout` (the client is gone) does too. A server that has not exited
/// 5 seconds after closing its stdout is killed; so is one whose relay future is
/// dropped. The handoff file is left in place (the observer's directory owns it), so a
/// harness that restarts the server gets a working relay again.
///
/// # Errors
/// - `invalid_argument`: `command` is empty, or the handoff file is malformed.
/// - `transport_error`: the handoff cannot be read safely (missing, a symlink, shared
///   with other users) or the server cannot be started.
pub async fn run_relay<R, W>(handoff: &Path, command: &[String], stdin: R, stdout: W) -> Result<i32>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let handoff = Handoff::read(handoff)?;
    let Some((program, args)) = command.split_first() else {
        return Err(Error::model_validation("mcp-relay needs a server command"));
    };
    let mut child = spawn(&handoff, program, args)?;
    let (Some(child_stdin), Some(child_stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(Error::transport("the MCP server has no stdio pipes")
            .with_detail("command", program.clone()));
    };
    let reporter = Reporter::connect(&handoff).await;
    let policy = ToolPolicy::new(handoff.allowed_tools.clone());
    let stdout = Mutex::new(stdout);
    {
        let to_server = async {
            client_to_server(stdin, child_stdin, &stdout, &reporter, &policy).await;
            // The server's stdin is closed now; the relay ends when its stdout does.
            std::future::pending::<()>().await;
        };
        tokio::select! {
            () = to_server => {}
            () = server_to_client(child_stdout, &stdout, &reporter) => {}
        }
    }
    let status = reap(&mut child).await;
    reporter.finish().await;
    Ok(exit_code(status))
}

fn spawn(handoff: &Handoff, program: &str, args: &[String]) -> Result<Child> {
    let resolved = resolve_program(program, handoff);
    let mut command = Command::new(&resolved);
    command
        .args(args)
        .env_clear()
        .envs(&handoff.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    if let Some(cwd) = &handoff.cwd {
        command.current_dir(cwd);
    }
    let child = command.spawn().map_err(|error| {
        Error::transport(format!("cannot start MCP server '{program}': {error}"))
            .with_detail("command", program.to_owned())
            .with_detail("connection_id", handoff.connection_id.clone())
            .with_source(error)
    })?;
    tracing::debug!(
        connection_id = %handoff.connection_id,
        pid = child.id().unwrap_or_default(),
        "relay spawned MCP server"
    );
    Ok(child)
}

/// A bare program name is looked up in the handoff's `PATH`, else in the relay's own
/// (the server's environment stays exactly the handoff's either way).
fn resolve_program(program: &str, handoff: &Handoff) -> PathBuf {
    if program.contains('/') {
        return PathBuf::from(program);
    }
    let path: Option<OsString> = handoff
        .env
        .get("PATH")
        .map(OsString::from)
        .or_else(|| std::env::var_os("PATH"));
    path.iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
        .unwrap_or_else(|| PathBuf::from(program))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

async fn client_to_server<R, W>(
    stdin: R,
    mut server: ChildStdin,
    stdout: &Mutex<W>,
    reporter: &Reporter,
    policy: &ToolPolicy,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut reader = BufReader::with_capacity(64 * 1024, stdin);
    let mut line = Vec::new();
    loop {
        match read_line(&mut reader, &mut line, MAX_FRAME_BYTES).await {
            Line::Complete => {
                let frame = frame_of(&line);
                let forward = match judge(frame, reporter, policy) {
                    Judged::Forward => true,
                    Judged::Refuse { reply } => {
                        if let Some(reply) = reply {
                            // A failed answer means the client is gone; the other pump ends.
                            let _ = write_flush(stdout, &reply).await;
                        }
                        false
                    }
                };
                if forward && server.write_all(&line).await.is_err() {
                    break;
                }
            }
            Line::Oversized => {
                let dropped = policy.is_active();
                reporter.incomplete(&format!(
                    "a client-to-server frame longer than {MAX_FRAME_BYTES} bytes was {}",
                    if dropped {
                        "dropped (the tool policy cannot inspect it)"
                    } else {
                        "forwarded unobserved"
                    }
                ));
                let passed = if dropped {
                    pass_rest_of_line(&mut reader, None::<&mut ChildStdin>).await
                } else {
                    match server.write_all(&line).await {
                        Ok(()) => pass_rest_of_line(&mut reader, Some(&mut server)).await,
                        Err(error) => Err(error),
                    }
                };
                if passed.is_err() {
                    break;
                }
            }
            Line::Eof => break,
            Line::Failed(error) => {
                tracing::debug!(%error, "relay cannot read its stdin");
                break;
            }
        }
    }
    let _ = server.shutdown().await;
}

enum Judged {
    Forward,
    Refuse { reply: Option<Vec<u8>> },
}

/// Observes one client-to-server frame and applies the tool policy to it.
fn judge(frame: &[u8], reporter: &Reporter, policy: &ToolPolicy) -> Judged {
    if frame.iter().all(u8::is_ascii_whitespace) {
        return Judged::Forward;
    }
    let Ok(parsed) = serde_json::from_slice::<serde_json::Value>(frame) else {
        reporter.incomplete("a client-to-server line is not JSON (forwarded unobserved)");
        return Judged::Forward;
    };
    match policy.judge(&parsed) {
        Verdict::Forward => {
            reporter.frame(Direction::ClientToServer, frame);
            Judged::Forward
        }
        Verdict::Deny { refused, reply } => {
            for refusal in &refused {
                tracing::info!(tool = %refusal.tool, "relay refused a tools/call by policy");
                reporter.policy_denied(&refusal.tool, refusal.id.as_ref());
            }
            Judged::Refuse { reply }
        }
    }
}

async fn server_to_client<W>(server: ChildStdout, stdout: &Mutex<W>, reporter: &Reporter)
where
    W: AsyncWrite + Unpin,
{
    let mut reader = BufReader::with_capacity(64 * 1024, server);
    let mut line = Vec::new();
    loop {
        match read_line(&mut reader, &mut line, MAX_FRAME_BYTES).await {
            Line::Complete => {
                let frame = frame_of(&line);
                if !frame.iter().all(u8::is_ascii_whitespace) {
                    if serde_json::from_slice::<serde::de::IgnoredAny>(frame).is_ok() {
                        reporter.frame(Direction::ServerToClient, frame);
                    } else {
                        reporter.incomplete(
                            "a server-to-client line is not JSON (forwarded unobserved)",
                        );
                    }
                }
                if write_flush(stdout, &line).await.is_err() {
                    return;
                }
            }
            Line::Oversized => {
                reporter.incomplete(&format!(
                    "a server-to-client frame longer than {MAX_FRAME_BYTES} bytes was forwarded unobserved"
                ));
                let mut out = stdout.lock().await;
                let passed = match out.write_all(&line).await {
                    Ok(()) => pass_rest_of_line(&mut reader, Some(&mut *out)).await,
                    Err(error) => Err(error),
                };
                if passed.is_err() || out.flush().await.is_err() {
                    return;
                }
            }
            Line::Eof => return,
            Line::Failed(error) => {
                tracing::debug!(%error, "relay cannot read the server's stdout");
                return;
            }
        }
    }
}

async fn write_flush<W: AsyncWrite + Unpin>(
    stdout: &Mutex<W>,
    bytes: &[u8],
) -> std::io::Result<()> {
    let mut out = stdout.lock().await;
    out.write_all(bytes).await?;
    out.flush().await
}

async fn reap(child: &mut Child) -> Option<ExitStatus> {
    match tokio::time::timeout(EXIT_GRACE, child.wait()).await {
        Ok(status) => status.ok(),
        Err(_) => {
            tracing::warn!("MCP server did not exit after closing its stdout; killing it");
            let _ = child.start_kill();
            child.wait().await.ok()
        }
    }
}

fn exit_code(status: Option<ExitStatus>) -> i32 {
    match status {
        Some(status) => status
            .code()
            .or_else(|| status.signal().map(|signal| 128 + signal))
            .unwrap_or(1),
        None => 1,
    }
}
