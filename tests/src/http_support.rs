//! Peer processes that serve MCP over Streamable HTTP on a loopback port.

use std::process::Stdio;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use crate::runtime_support::TestResult;

/// How long a peer may take to start listening (the Node and Python SDK peers
/// import a lot on a loaded machine).
const LISTEN_WAIT: Duration = Duration::from_secs(60);

/// A free loopback port (the listener is dropped; the peer binds it next).
///
/// # Errors
/// When no loopback port can be bound.
pub fn free_port() -> TestResult<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A peer process serving `http://127.0.0.1:PORT/mcp`, killed on drop.
#[derive(Debug)]
pub struct HttpPeer {
    child: Child,
    url: String,
}

impl HttpPeer {
    /// Spawn `command` (which must listen on `port`) and wait until it accepts
    /// connections.
    ///
    /// # Errors
    /// When the process cannot start, exits, or does not listen in time.
    pub async fn start(mut command: Command, port: u16) -> TestResult<Self> {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let deadline = tokio::time::Instant::now() + LISTEN_WAIT;
        while TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            if let Some(status) = child.try_wait()? {
                return Err(
                    format!("the peer exited ({status}) before listening on {port}").into(),
                );
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!("the peer did not listen on {port}").into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        })
    }

    /// The peer's MCP endpoint.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}
