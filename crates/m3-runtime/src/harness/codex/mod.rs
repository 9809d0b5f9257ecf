//! The `codex` harness: the Codex CLI's app-server is the agent and the MCP client.
//!
//! One session per turn:
//! 1. find `codex` (the selection's `executable`, else `PATH`), check its version
//!    against [`TESTED_CODEX_VERSIONS`];
//! 2. make a private temporary root with `HOME`, `CODEX_HOME` (its `config.toml`
//!    written from the submission, the user's `auth.json` copied when no provider
//!    is given) and a workspace;
//! 3. put M3's relay (`m3 mcp-relay`) in front of every server command, so that
//!    M3 sees the MCP wire Codex speaks (a native prompt carries no request key
//!    and no `requestState`);
//! 4. `initialize` (with `experimentalApi`), `initialized`, `thread/start` with a
//!    granular approval policy that surfaces MCP elicitations (servers are
//!    `required`, so the thread starts once they are ready), `turn/start`;
//! 5. run the turn (see `turn.rs`): approve Codex's tool-approval prompts from the
//!    tool selection, answer native prompts of managed rounds, answer native
//!    permission prompts from `permission_policy`, interrupt on cancel.
//!
//! See `docs/harnesses.md` for the trust boundary of the relay and what Codex does
//! not support.

mod app_server;
mod home;
mod observe;
mod prompts;
mod protocol;
mod turn;
mod version;

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use m3_types::{Error, Result, ServerBinding, ToolSelection};

use crate::relay::{HttpRelay, RelayObserver};
use crate::selection::CodexSelection;

use super::{AgentSession, Harness, InputPolicy};
use app_server::AppServer;
use home::{Launch, RelayedServer};
use observe::WireTracker;
use protocol::{
    ApprovalPolicy, ClientCapabilities, ClientInfo, GranularApproval, InitializeParams,
    SandboxMode, ThreadStartParams, ThreadStartResponse, method,
};
use turn::{Answers, Turn, TurnContext};

pub use version::{TESTED_CODEX_VERSIONS, detect_codex_version};

/// Drives `codex app-server` for one execution.
#[derive(Debug, Clone)]
pub struct CodexHarness {
    selection: CodexSelection,
}

impl CodexHarness {
    /// A harness for `selection`.
    pub fn new(selection: CodexSelection) -> Self {
        Self { selection }
    }

    fn executable(&self) -> Result<PathBuf> {
        match &self.selection.executable {
            Some(path) => Ok(PathBuf::from(path)),
            None => find_on_path("codex").ok_or_else(|| {
                Error::model_validation(
                    "the codex harness needs the Codex CLI: 'codex' is not on PATH; install @openai/codex or set \"executable\"",
                )
                .with_detail("reason", "codex_not_found")
            }),
        }
    }

    fn relay_prefix(&self) -> Result<Vec<String>> {
        if let Some(argv) = &self.selection.relay {
            return Ok(argv.clone());
        }
        default_relay().ok_or_else(|| {
            Error::model_validation(
                "the codex harness needs the m3 relay: no 'm3' executable next to this program or on PATH; set \"relay\"",
            )
            .with_detail("reason", "relay_not_found")
        })
    }
}

#[async_trait]
impl Harness for CodexHarness {
    fn name(&self) -> &'static str {
        "codex"
    }

    fn connects_servers(&self) -> bool {
        false
    }

    fn interrupts_gracefully(&self) -> bool {
        true
    }

    async fn run_turn(&self, prompt: &str, session: &mut AgentSession) -> Result<String> {
        let executable = self.executable()?;
        let version = detect_codex_version(&executable).await?;
        version::check_tested(&version, self.selection.allow_untested_version)?;
        let model = self
            .selection
            .models
            .first()
            .cloned()
            .ok_or_else(|| Error::model_validation("codex selection has no model"))?;
        let relay = self.relay_prefix()?;
        let root = tempfile::Builder::new()
            .prefix("m3-codex-")
            .tempdir()
            .map_err(|e| {
                Error::storage("cannot create the codex session directory").with_source(e)
            })?;
        let layout = Layout::create(root.path())?;
        let mut observer = RelayObserver::bind(&layout.relay).await?;
        let (servers, http_relays) = relay_servers(
            &self.selection,
            &relay,
            &observer,
            session.bindings(),
            session.tool_selection(),
        )
        .await?;
        for http_relay in &http_relays {
            session
                .operation_log()
                .add_secrets(http_relay.secret_values());
        }
        let config =
            home::config_toml(&self.selection, &model, &servers, session.tool_selection())?;
        home::write_private(&layout.codex_home.join("config.toml"), config.as_bytes())?;
        if self.selection.provider.is_none()
            && let Some(auth) = home::user_auth_file()
        {
            let bytes = std::fs::read(&auth).map_err(|e| {
                Error::storage(format!(
                    "cannot read the Codex sign-in '{}'",
                    auth.display()
                ))
                .with_source(e)
            })?;
            home::write_private(&layout.codex_home.join("auth.json"), &bytes)?;
        }
        let env = home::app_server_env(&layout.home, &layout.codex_home);
        let mut app = AppServer::spawn(&executable.display().to_string(), env, &layout.workspace)?;
        tracing::info!(version, model, "codex app-server started");
        let result = self
            .drive(&mut app, &mut observer, session, prompt, &model, &layout)
            .await;
        app.shutdown().await;
        drop(observer);
        drop(root);
        result
    }
}

impl CodexHarness {
    async fn drive(
        &self,
        app: &mut AppServer,
        observer: &mut RelayObserver,
        session: &mut AgentSession,
        prompt: &str,
        model: &str,
        layout: &Layout,
    ) -> Result<String> {
        let initialize = InitializeParams {
            client_info: ClientInfo {
                name: "m3",
                title: "m3-rs",
                version: env!("CARGO_PKG_VERSION"),
            },
            capabilities: ClientCapabilities {
                experimental_api: true,
            },
        };
        app.call(method::INITIALIZE, &initialize).await?;
        app.notify(method::INITIALIZED, None).await?;
        let thread = ThreadStartParams {
            cwd: layout.workspace.display().to_string(),
            model: model.to_owned(),
            approval_policy: ApprovalPolicy {
                granular: GranularApproval {
                    mcp_elicitations: true,
                    rules: true,
                    sandbox_approval: true,
                },
            },
            sandbox: SandboxMode::ReadOnly,
            ephemeral: true,
        };
        let started = app.call(method::THREAD_START, &thread).await?;
        let thread_id = protocol::decode::<ThreadStartResponse>(started)
            .ok_or_else(|| Error::protocol("codex thread/start answered without thread.id"))?
            .thread
            .id;
        let log = session.operation_log();
        let tracker = WireTracker::new(session.clock()).with_secrets(&log.secrets());
        let publish = move |tracker: &WireTracker, usage: Option<&serde_json::Value>| {
            log.set_external(tracker.operations.clone(), usage.cloned());
        };
        let execution_id = session.execution_id().to_owned();
        let tools = session.tool_selection().cloned();
        let permission_policy = session.permission_policy();
        let interrupt = session.interrupt_token();
        let answers = match session.input_policy_mut() {
            InputPolicy::Fail => Answers::Fail,
            InputPolicy::Plan(plan) => Answers::Plan(plan),
            InputPolicy::Managed(coordinator) => {
                Answers::Managed(std::sync::Arc::clone(coordinator))
            }
        };
        let context = TurnContext {
            execution_id,
            tools,
            permission_policy,
            interrupt,
            publish: &publish,
            answers,
        };
        let end = Turn::new(app, observer, context, thread_id, tracker)
            .run(prompt, model)
            .await?;
        Ok(end.text)
    }
}

/// Puts one of M3's relays in front of every binding: `m3 mcp-relay` for a stdio
/// server, an in-process [`HttpRelay`] for a Streamable HTTP one (kept running as
/// long as the returned relays live).
async fn relay_servers(
    selection: &CodexSelection,
    relay: &[String],
    observer: &RelayObserver,
    bindings: &[ServerBinding],
    tools: Option<&ToolSelection>,
) -> Result<(Vec<RelayedServer>, Vec<HttpRelay>)> {
    let mut servers = Vec::new();
    let mut http_relays = Vec::new();
    for binding in bindings {
        let allowed = tools.map(|tools| {
            tools
                .iter()
                .filter(|t| t.server == binding.name())
                .map(|t| t.tool.clone())
                .collect::<Vec<_>>()
        });
        let (era, launch) = match binding {
            ServerBinding::Stdio(stdio) => {
                let handoff = observer.handoff(&stdio.name, stdio, allowed)?;
                let mut argv = relay.to_vec();
                argv.extend([
                    "--handoff".to_owned(),
                    handoff.display().to_string(),
                    "--".to_owned(),
                ]);
                argv.push(stdio.command.clone());
                argv.extend(stdio.args.iter().cloned());
                (home::binding_era(stdio, selection), Launch::Command(argv))
            }
            ServerBinding::Http(http) => {
                let relayed = observer.http_relay(&http.name, http, allowed).await?;
                let url = relayed.url().to_owned();
                http_relays.push(relayed);
                (selection.mcp_protocol, Launch::Url(url))
            }
            other => {
                return Err(Error::model_validation(format!(
                    "MCP server '{}': the codex harness cannot relay this kind of binding",
                    other.name()
                )));
            }
        };
        servers.push(RelayedServer {
            name: binding.name().to_owned(),
            era,
            launch,
        });
    }
    Ok((servers, http_relays))
}

/// The directories of one session, all inside a private temporary root.
#[derive(Debug)]
struct Layout {
    home: PathBuf,
    codex_home: PathBuf,
    workspace: PathBuf,
    relay: PathBuf,
}

impl Layout {
    fn create(root: &Path) -> Result<Self> {
        let layout = Self {
            home: root.join("home"),
            codex_home: root.join("codex-home"),
            workspace: root.join("workspace"),
            relay: root.join("relay"),
        };
        for dir in [
            &layout.home,
            &layout.codex_home,
            &layout.workspace,
            &layout.relay,
        ] {
            home::private_dir(dir)?;
        }
        home::private_dir(&layout.home.join("tmp"))?;
        Ok(layout)
    }
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `m3 mcp-relay`: the `m3` next to the running program (or one directory up, as
/// for cargo's examples and tests), else on `PATH`.
fn default_relay() -> Option<Vec<String>> {
    let exe = std::env::current_exe().ok();
    let beside = exe
        .as_deref()
        .and_then(Path::parent)
        .map(|dir| dir.join("m3"));
    let above = exe
        .as_deref()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .map(|dir| dir.join("m3"));
    let m3 = [beside, above]
        .into_iter()
        .flatten()
        .find(|p| is_executable(p))
        .or_else(|| find_on_path("m3"))?;
    Some(vec![m3.display().to_string(), "mcp-relay".to_owned()])
}
