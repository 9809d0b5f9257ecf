//! [`McpConnection`]: one live stdio MCP server connection in a negotiated era.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use m3_types::{Error, HttpServer, Result, ServerBinding, StdioServer};
use rmcp::service::{ClientServiceExt, RoleClient, RunningService};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::{Semaphore, watch};

use super::driver;
use super::fault::{ConnectionFault, FaultSender};
use super::frames::{self, FrameReader};
use super::handler::{LegacyRouter, M3ClientHandler};
use super::http;
use super::negotiation::{
    Lifecycle, ServerIdentity, falls_back, handshake, lifecycle_mode, negotiated,
};
use super::oauth::{Authorizer, SharedAuthorizer, challenge_of};
use super::operation::OperationProgress;
use super::options::{ConnectOptions, ProtocolEra};
use super::process::{self, ServerProcess, SpawnSettings};
use super::raw::RawMessages;
use super::record::LogicalOperation;
use super::request::{OperationRequest, ResumeRequest};
use super::shared::Shared;
use super::transport::StdioTransport;

/// A tool the server advertises (and the selection allows).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolDescriptor {
    /// Tool name.
    pub name: String,
    /// Human title, if any.
    pub title: Option<String>,
    /// Description, if any.
    pub description: Option<String>,
    /// JSON Schema of the arguments.
    pub input_schema: Map<String, Value>,
}

/// One live connection to a stdio MCP server.
///
/// Created by [`McpConnection::connect`], which spawns the server exactly as
/// configured, in its own process group, and negotiates the era. Operations
/// ([`McpConnection::start`]) return either the final result or an
/// [`InputRound`](super::InputRound) to answer. End the connection with
/// [`McpConnection::close`]; dropping it also kills the server's process group
/// (the reaping then happens in the background).
#[derive(Debug)]
pub struct McpConnection {
    shared: Arc<Shared>,
    service: tokio::sync::Mutex<Option<RunningService<RoleClient, M3ClientHandler>>>,
}

/// What [`McpConnection::establish`] assembles a connection from.
struct Parts {
    server: String,
    options: ConnectOptions,
    faults: (FaultSender, watch::Receiver<Option<ConnectionFault>>),
    raw: Arc<RawMessages>,
    process: Option<ServerProcess>,
    secrets: Vec<String>,
}

impl McpConnection {
    /// Spawn `server` and connect, negotiating the era unless
    /// [`ConnectOptions::with_era`] fixes it.
    ///
    /// Negotiation: `server/discover` first (rmcp `Auto` mode, which falls back to
    /// `initialize` on the same process when the server answers the probe with an
    /// error it takes for "legacy"). A server that stays silent is given
    /// `discover_timeout`, and one that answers the probe with anything else than a
    /// discover result (an empty result, another error, no shared version) is taken
    /// at its word: either way the process is killed and a fresh one is started with
    /// `initialize` (rmcp's own silent-probe timeout is a fixed, private 10 s).
    ///
    /// # Errors
    /// `transport_error` when the server cannot be started or closes during the
    /// handshake, `protocol_error` when it breaks the protocol, `timeout` when the
    /// handshake does not finish within `connect_timeout`. The server's stderr
    /// tail is in the error's `stderr` detail. The process is reaped before
    /// returning.
    pub async fn connect(server: &StdioServer, options: ConnectOptions) -> Result<Self> {
        let options = options.for_binding(server.era);
        match options.era {
            Some(era) => Self::connect_once(server, &options, Lifecycle::Fixed(era)).await,
            None => match Self::connect_once(server, &options, Lifecycle::Auto).await {
                Err(error) if falls_back(&error) => {
                    tracing::info!(server = %server.name, "no server/discover result; falling back to initialize");
                    Self::connect_once(server, &options, Lifecycle::Fixed(ProtocolEra::Legacy))
                        .await
                }
                other => other,
            },
        }
    }

    async fn connect_once(
        server: &StdioServer,
        options: &ConnectOptions,
        lifecycle: Lifecycle,
    ) -> Result<Self> {
        let settings = SpawnSettings {
            inherit_env: options.inherit_env.clone(),
            stderr_limit: options.stderr_limit,
        };
        let (process, pipes) = process::spawn(server, &settings)?;
        let (fault_tx, faults) = FaultSender::new();
        let raw = Arc::new(RawMessages::default());
        let ends = frames::Ends {
            faults: fault_tx.clone(),
            kill: process.kill_token(),
            exited: process.exit_watch(),
            raw: Arc::clone(&raw),
        };
        let frames = match FrameReader::new(pipes.stdout, options.max_frame_bytes, ends) {
            Ok(frames) => frames,
            Err(error) => {
                process.shutdown(Duration::ZERO).await;
                return Err(Error::transport(format!(
                    "cannot read the stdout of MCP server '{}': {error}",
                    server.name
                ))
                .with_detail("server", server.name.clone())
                .with_source(error));
            }
        };
        let transport = StdioTransport::new(frames, pipes.stdin);
        let parts = Parts {
            server: server.name.clone(),
            options: options.clone(),
            faults: (fault_tx, faults),
            raw,
            process: Some(process),
            secrets: Vec::new(),
        };
        Self::establish(transport, parts, lifecycle).await
    }

    /// Connect to any binding: [`McpConnection::connect`] for a stdio server,
    /// [`McpConnection::connect_http`] for an HTTP endpoint.
    ///
    /// # Errors
    /// As those two.
    pub async fn connect_binding(server: &ServerBinding, options: ConnectOptions) -> Result<Self> {
        match server {
            ServerBinding::Http(server) => Self::connect_http(server, options).await,
            ServerBinding::Stdio(server) => Self::connect(server, options).await,
            other => Err(Error::model_validation(format!(
                "MCP server '{}': this kind of binding is not supported",
                other.name()
            ))),
        }
    }

    /// Connect to a Streamable HTTP endpoint, negotiating the era as
    /// [`McpConnection::connect`] does (`server/discover`, falling back to
    /// `initialize`).
    ///
    /// The host is resolved first and every address is checked against the
    /// binding's trust level; the connection then uses exactly those addresses.
    /// `${NAME}` header values are read from our environment now. Redirects are
    /// not followed, proxies are not used. Closing (or dropping) the
    /// connection ends its `Mcp-Session-Id` session with a `DELETE`.
    ///
    /// # Errors
    /// `invalid_argument` for a bad binding, an address the trust level refuses
    /// (naming host and trust level) or an unset header variable;
    /// `transport_error` (with `http_status` when the server answered one) when
    /// the endpoint cannot be reached; `protocol_error` for a malformed answer;
    /// `timeout` when the handshake does not finish within `connect_timeout`.
    pub async fn connect_http(server: &HttpServer, options: ConnectOptions) -> Result<Self> {
        let options = options.for_binding(server.era);
        let endpoint = http::resolve(server).await?;
        let mut authorizer = Authorizer::new(server, &endpoint.url, options.oauth.clone());
        if let Err(error) = authorizer.restore().await {
            // Stored credentials that cannot be used are as good as none.
            tracing::warn!(server = %server.name, error = %error.message(), "stored OAuth credentials not used");
        }
        let oauth: SharedAuthorizer = Arc::new(tokio::sync::Mutex::new(authorizer));
        let negotiated =
            || Self::connect_http_negotiated(server, &endpoint, &options, Some(Arc::clone(&oauth)));
        match negotiated().await {
            // A 401 to a request without a token: authorize, then connect again.
            Err(error) => match challenge_of(&error) {
                Some(challenge) => {
                    oauth.lock().await.authorize(&challenge).await?;
                    negotiated().await
                }
                None => Err(error),
            },
            connected => connected,
        }
    }

    /// [`McpConnection::connect_http`] with the era negotiated, its requests authorized by
    /// `oauth` when it has a token.
    async fn connect_http_negotiated(
        server: &HttpServer,
        endpoint: &http::Endpoint,
        options: &ConnectOptions,
        oauth: Option<SharedAuthorizer>,
    ) -> Result<Self> {
        let attempt = |lifecycle| {
            Self::connect_http_once(server, endpoint, options, lifecycle, oauth.clone())
        };
        match options.era {
            Some(era) => attempt(Lifecycle::Fixed(era)).await,
            None => match attempt(Lifecycle::Auto).await {
                Err(error) if falls_back(&error) => {
                    tracing::info!(server = %server.name, "no server/discover result; falling back to initialize");
                    attempt(Lifecycle::Fixed(ProtocolEra::Legacy)).await
                }
                other => other,
            },
        }
    }

    async fn connect_http_once(
        server: &HttpServer,
        endpoint: &http::Endpoint,
        options: &ConnectOptions,
        lifecycle: Lifecycle,
        oauth: Option<SharedAuthorizer>,
    ) -> Result<Self> {
        let (fault_tx, faults) = FaultSender::new();
        let raw = Arc::new(RawMessages::default());
        let transport = http::transport(
            &server.name,
            endpoint,
            options,
            Arc::clone(&raw),
            fault_tx.clone(),
            oauth,
        )?;
        let parts = Parts {
            server: server.name.clone(),
            options: options.clone(),
            faults: (fault_tx, faults),
            raw,
            process: None,
            secrets: endpoint.secrets.clone(),
        };
        Self::establish(transport, parts, lifecycle).await
    }

    /// Run the handshake over `transport` and assemble the connection.
    async fn establish<T, E, A>(transport: T, parts: Parts, lifecycle: Lifecycle) -> Result<Self>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let Parts {
            server,
            options,
            faults: (fault_tx, faults),
            raw,
            process,
            secrets,
        } = parts;
        let router = Arc::new(LegacyRouter::default());
        let handler = M3ClientHandler::new(
            Arc::clone(&router),
            Arc::clone(&raw),
            options.handshake_version.clone(),
        );
        let (mode, timeout) = lifecycle_mode(lifecycle, &options);
        let serving = handler.serve_with_lifecycle(transport, mode);
        let service = match handshake(serving, timeout, &server, faults.clone()).await {
            Ok(service) => service,
            Err(error) => {
                fault_tx.raise(ConnectionFault::transport("connection closed"));
                return Err(match process {
                    Some(process) => {
                        process.shutdown(Duration::ZERO).await;
                        error.with_detail("stderr", process.stderr().text())
                    }
                    None => error,
                });
            }
        };
        let (era, version, identity) = negotiated(&service);
        tracing::info!(server = %server, %era, protocol_version = %version, pid = ?process.as_ref().map(ServerProcess::pid), "MCP server connected");
        let shared = Shared {
            server,
            era,
            protocol_version: version.to_string(),
            identity,
            peer: service.peer().clone(),
            faults,
            fault_tx,
            process,
            secrets,
            router,
            raw,
            legacy_slot: Arc::new(Semaphore::new(1)),
            options,
            log: Mutex::new(Vec::new()),
            task_cancels: tokio_util::task::TaskTracker::new(),
        };
        Ok(Self {
            shared: Arc::new(shared),
            service: tokio::sync::Mutex::new(Some(service)),
        })
    }

    /// The server binding's name.
    pub fn server_name(&self) -> &str {
        &self.shared.server
    }

    /// The negotiated era.
    pub fn era(&self) -> ProtocolEra {
        self.shared.era
    }

    /// The negotiated protocol version (`"2026-07-28"`, `"2025-11-25"`, ...).
    pub fn protocol_version(&self) -> &str {
        &self.shared.protocol_version
    }

    /// The server's `serverInfo`, when it sent one.
    pub fn server_identity(&self) -> Option<&ServerIdentity> {
        self.shared.identity.as_ref()
    }

    /// The server's pid, which is also its process group id (`None` for an
    /// HTTP endpoint).
    pub fn pid(&self) -> Option<u32> {
        self.shared.process.as_ref().map(ServerProcess::pid)
    }

    /// The retained tail of the server's stderr (lossy UTF-8; empty for an HTTP
    /// endpoint).
    pub fn stderr_tail(&self) -> String {
        self.shared
            .process
            .as_ref()
            .map(|process| process.stderr().text())
            .unwrap_or_default()
    }

    /// Values to redact in anything derived from this connection: the resolved
    /// `${NAME}` header values of an HTTP binding (none for stdio).
    pub fn secret_values(&self) -> &[String] {
        &self.shared.secrets
    }

    /// The connection's fault, if it has become unusable.
    pub fn fault(&self) -> Option<Error> {
        self.shared.fault_error()
    }

    /// Records of the operations started on this connection (the last 256), in
    /// start order; in-progress operations show their attempts so far.
    pub fn operation_log(&self) -> Vec<LogicalOperation> {
        self.shared
            .log
            .lock()
            .map(|log| log.clone())
            .unwrap_or_default()
    }

    /// The record of one logical operation, if still in the log.
    pub fn operation_record(&self, logical_operation_id: &str) -> Option<LogicalOperation> {
        self.shared.log.lock().ok().and_then(|log| {
            log.iter()
                .find(|r| r.logical_operation_id == logical_operation_id)
                .cloned()
        })
    }

    /// The tools the server advertises, restricted to the tool selection.
    ///
    /// # Errors
    /// `timeout`, `protocol_error` or `transport_error` as for any request.
    pub async fn list_tools(&self) -> Result<Vec<ToolDescriptor>> {
        let tools = self
            .shared
            .bounded("tools/list", self.shared.peer.list_all_tools())
            .await?;
        let selection = self.shared.options.tool_selection.as_ref();
        Ok(tools
            .into_iter()
            .filter(|tool| selection.is_none_or(|s| s.allows(&self.shared.server, &tool.name)))
            .map(|tool| ToolDescriptor {
                name: tool.name.into_owned(),
                title: tool.title,
                description: tool.description.map(|d| d.into_owned()),
                input_schema: tool.input_schema.as_ref().clone(),
            })
            .collect())
    }

    /// Start a logical operation: send its first wire attempt and return the final
    /// result or the first input round.
    ///
    /// # Errors
    /// - `invalid_argument` for a tool outside the selection (nothing is sent);
    /// - `protocol_error` for a JSON-RPC error answer or a malformed reply;
    /// - `transport_error` when the server exits or the pipe breaks;
    /// - `timeout` when the server does not answer within the request timeout;
    /// - `elicitation_round_limit` past the round limit.
    ///
    /// Errors of an operation carry `logical_operation_id` and `attempt` details;
    /// the full record is in [`McpConnection::operation_record`].
    ///
    /// # Cancel safety
    /// Dropping the future abandons the operation; an in-flight request is then
    /// cancelled with `notifications/cancelled`.
    pub async fn start(&self, request: OperationRequest) -> Result<OperationProgress> {
        driver::start(Arc::clone(&self.shared), request)
            .await
            .map(OperationProgress::from)
    }

    /// Continue a 2026-07-28 operation from a stored round: a wire attempt with
    /// the stored `requestState` and the answers (see [`ResumeRequest`]).
    ///
    /// # Errors
    /// `managed_input_state` on a legacy-era connection (its rounds cannot outlive
    /// their request); a rejected state is the server's `protocol_error` (the
    /// Python SDK and the shipping fixture answer -32602); otherwise as
    /// [`McpConnection::start`].
    pub async fn resume(&self, request: ResumeRequest) -> Result<OperationProgress> {
        driver::resume(Arc::clone(&self.shared), request)
            .await
            .map(OperationProgress::from)
    }

    /// Close the connection: end the MCP session (stdin EOF), give the server the
    /// close grace to exit, kill its process group, and reap it. Operations still
    /// holding an input round fail with `transport_error` when continued.
    ///
    /// # Errors
    /// None today; the `Result` leaves room for reporting cleanup failures.
    pub async fn close(self) -> Result<()> {
        let grace = self.shared.options.close_grace;
        // A task abandoned just before (a cancelled execution) is cancelled on the server
        // before the connection goes.
        self.shared.task_cancels.close();
        let _ = tokio::time::timeout(grace, self.shared.task_cancels.wait()).await;
        self.shared
            .fault_tx
            .raise(ConnectionFault::transport("connection closed"));
        if let Some(mut service) = self.service.lock().await.take() {
            let _ = service.close_with_timeout(grace).await;
        }
        if let Some(process) = &self.shared.process {
            process.shutdown(grace).await;
        }
        Ok(())
    }
}

impl Drop for McpConnection {
    fn drop(&mut self) {
        self.shared
            .fault_tx
            .raise(ConnectionFault::transport("connection closed"));
        if let Some(process) = &self.shared.process {
            process.kill_token().cancel();
        }
    }
}
