//! Negotiating the era with a server: the rmcp lifecycle mode, the handshake with its
//! timeout and fault watch, the `Auto` fallback to `initialize`, and what was agreed.

use std::time::Duration;

use m3_types::{Error, Result};
use rmcp::model::ProtocolVersion;
use rmcp::service::{ClientInitializeError, ClientLifecycleMode, RoleClient, RunningService};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::fault::{ConnectionFault, wait_for_fault};
use super::handler::M3ClientHandler;
use super::options::{ConnectOptions, ProtocolEra};

/// The server's self-description, when it gave one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ServerIdentity {
    /// `serverInfo.name`.
    pub name: String,
    /// `serverInfo.version`.
    pub version: String,
}

/// Whether a connection attempt negotiates the era or is fixed to one.
#[derive(Clone, Copy)]
pub(crate) enum Lifecycle {
    Auto,
    Fixed(ProtocolEra),
}

/// The rmcp lifecycle mode and handshake timeout for `lifecycle`.
pub(super) fn lifecycle_mode(
    lifecycle: Lifecycle,
    options: &ConnectOptions,
) -> (ClientLifecycleMode, Duration) {
    match lifecycle {
        Lifecycle::Auto => (
            ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::V_2025_11_25),
            },
            options.discover_timeout,
        ),
        Lifecycle::Fixed(ProtocolEra::Modern) => (
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
            options.connect_timeout,
        ),
        Lifecycle::Fixed(ProtocolEra::Legacy) => {
            (ClientLifecycleMode::Initialize, options.connect_timeout)
        }
    }
}

/// Detail marking a `server/discover` refusal that lists only legacy versions.
const LEGACY_ONLY: &str = "offers_only_legacy_versions";

/// Whether the server refused `server/discover` (-32022) listing only versions of
/// the handshake era: then `initialize` is the mutual choice.
fn offers_only_legacy(error: &ClientInitializeError) -> bool {
    matches!(error, ClientInitializeError::NoCompatibleProtocolVersion { server_supported, .. }
        if !server_supported.is_empty()
            && server_supported.iter().all(|v| *v < ProtocolVersion::V_2026_07_28))
}

/// Detail marking a `server/discover` probe answered with something that is not a
/// discover result.
const NOT_A_DISCOVER_RESULT: &str = "discover_not_understood";

/// Whether the server answered the probe, but not with a discover result: a result of
/// another shape (`{}` from a server that answers every unknown method), an error rmcp
/// does not take for "legacy" (any code), or versions we do not share. Such a server may
/// still speak `initialize`; a closed or silent connection is not this.
fn answered_but_not_discover(error: &ClientInitializeError) -> bool {
    matches!(
        error,
        ClientInitializeError::ExpectedInitResult(Some(_))
            | ClientInitializeError::ExpectedInitResponse(Some(_))
            | ClientInitializeError::JsonRpcError(_)
            | ClientInitializeError::NoCompatibleProtocolVersion { .. }
    )
}

/// Whether an `Auto` connection attempt should be repeated with `initialize`: the
/// probe timed out, the server named only legacy versions, or it answered the probe
/// with something that is not a discover result.
pub(super) fn falls_back(error: &Error) -> bool {
    let marked = |detail| error.details().get(detail) == Some(&serde_json::Value::Bool(true));
    error.is_timeout() || marked(LEGACY_ONLY) || marked(NOT_A_DISCOVER_RESULT)
}

/// Runs the handshake within `timeout`, ending early on a connection fault.
pub(super) async fn handshake<F>(
    serving: F,
    timeout: Duration,
    server: &str,
    mut faults: watch::Receiver<Option<ConnectionFault>>,
) -> Result<RunningService<RoleClient, M3ClientHandler>>
where
    F: std::future::Future<
            Output = std::result::Result<
                RunningService<RoleClient, M3ClientHandler>,
                ClientInitializeError,
            >,
        >,
{
    tokio::select! {
        served = tokio::time::timeout(timeout, serving) => match served {
            Ok(Ok(service)) => Ok(service),
            Ok(Err(error)) if offers_only_legacy(&error) => Err(Error::protocol(format!(
                "MCP server '{server}' answered server/discover with legacy versions only: {error}"
            ))
            .with_detail("server", server.to_owned())
            .with_detail(LEGACY_ONLY, true)),
            Ok(Err(error)) if answered_but_not_discover(&error) => Err(Error::protocol(format!(
                "MCP handshake with '{server}' failed: {error}"
            ))
            .with_detail("server", server.to_owned())
            .with_detail(NOT_A_DISCOVER_RESULT, true)),
            Ok(Err(error)) => {
                // Prefer the reader's diagnosis (exit status, bad line) when it has one.
                let fault = tokio::time::timeout(Duration::from_millis(500), wait_for_fault(&mut faults)).await;
                Err(match fault {
                    Ok(fault) => fault.to_error(server).with_detail("handshake_error", error.to_string()),
                    Err(_) => Error::protocol(format!("MCP handshake with '{server}' failed: {error}"))
                        .with_detail("server", server.to_owned()),
                })
            }
            Err(_) => Err(Error::timeout(format!(
                "MCP server '{server}' did not finish the handshake within {} ms",
                timeout.as_millis()
            ))
            .with_detail("server", server.to_owned())),
        },
        fault = wait_for_fault(&mut faults) => Err(fault.to_error(server)),
    }
}

/// The era, protocol version and identity the server answered with.
pub(super) fn negotiated(
    service: &RunningService<RoleClient, M3ClientHandler>,
) -> (ProtocolEra, ProtocolVersion, Option<ServerIdentity>) {
    let info = service.peer_info();
    let version = info
        .as_ref()
        .map(|info| info.protocol_version.clone())
        .unwrap_or(ProtocolVersion::V_2025_11_25);
    let era = if version >= ProtocolVersion::V_2026_07_28 {
        ProtocolEra::Modern
    } else {
        ProtocolEra::Legacy
    };
    let identity = info
        .as_ref()
        .and_then(|info| info.server_info.as_ref())
        .map(|implementation| ServerIdentity {
            name: implementation.name.clone(),
            version: implementation.version.clone(),
        });
    (era, version, identity)
}
