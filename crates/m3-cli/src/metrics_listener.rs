//! `--metrics ADDR` of `m3 worker` and `m3 notify`: binds the address, says where the
//! exposition is (`metrics_listening` with `--json`) and serves `/metrics` (m3-server's
//! `serve_metrics`) until the command stops.

use std::net::SocketAddr;

use m3_kit::AsyncMcpTestKit;
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::failure::Failure;
use crate::output::Output;

/// Binds `addr` and serves `/metrics` over `kit` until `stop`.
pub(crate) async fn start(
    out: Output,
    addr: SocketAddr,
    kit: &AsyncMcpTestKit,
    stop: CancellationToken,
) -> Result<JoinHandle<m3_types::Result<()>>, Failure> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Failure::other("io_error", format!("cannot bind {addr}: {e}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| Failure::other("io_error", format!("cannot read the bound address: {e}")))?;
    let url = format!("http://{local}/metrics");
    if out.is_json() {
        out.event("metrics_listening", &json!({"url": url}))?;
    } else {
        out.say(format!("metrics_listening url={url}"));
    }
    Ok(tokio::spawn(m3_server::serve_metrics(
        listener,
        kit.clone(),
        stop.cancelled_owned(),
    )))
}
