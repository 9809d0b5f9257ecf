//! Our rmcp [`Transport`] over a stdio server's pipes.
//!
//! rmcp's own stdio transport (`AsyncRwTransport` over `(AsyncRead, AsyncWrite)`) would
//! read stdout a second time behind our [`FrameReader`] (through an in-memory pipe) and
//! keep a read buffer, a line buffer and an 8 KiB write frame per connection for its whole
//! life. This transport takes the reader's validated frames directly and writes each
//! message with one buffer that lives only while it is sent, so a connection that waits
//! holds no I/O buffer at all.
//!
//! What reaches the wire is what rmcp's transport sends, byte for byte: each message
//! serialized by `serde_json` in compact form with one `\n`, every message flushed on its
//! own, writers taking turns in the order they lock the pipe; a frame that is JSON but no
//! JSON-RPC message rmcp accepts is answered with its `Invalid Request` error (id `null`)
//! before the next frame is read, as rmcp does ([`super::compat`]).

use std::sync::Arc;

use rmcp::RoleClient;
use rmcp::model::ErrorData;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;

use super::compat::{Parsed, parse_message};
use super::frames::FrameReader;

/// The client's transport over a server's stdout (read through `frames`) and stdin.
pub(crate) struct StdioTransport<W> {
    frames: FrameReader,
    /// `None` once closed.
    stdin: Arc<Mutex<Option<W>>>,
    /// rmcp's `Invalid Request` reply is owed before the next frame is read.
    owes_invalid_request: bool,
}

impl<W> std::fmt::Debug for StdioTransport<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioTransport")
            .field("frames", &self.frames)
            .finish_non_exhaustive()
    }
}

impl<W: AsyncWrite + Send + Unpin + 'static> StdioTransport<W> {
    /// A transport reading `frames` and writing `stdin`.
    pub(crate) fn new(frames: FrameReader, stdin: W) -> Self {
        Self {
            frames,
            stdin: Arc::new(Mutex::new(Some(stdin))),
            owes_invalid_request: false,
        }
    }

    /// Writes rmcp's `Invalid Request` reply; `false` when it cannot be written.
    async fn reply_invalid_request(&self) -> bool {
        let reply = TxJsonRpcMessage::<RoleClient>::error(
            ErrorData::invalid_request("Invalid request", None),
            None,
        );
        let Ok(bytes) = encode(&reply) else {
            return false;
        };
        let mut stdin = self.stdin.lock().await;
        match stdin.as_mut() {
            Some(stdin) => write_frame(stdin, &bytes).await.is_ok(),
            None => false,
        }
    }
}

/// One message as rmcp's codec writes it: compact JSON and `\n`.
fn encode(message: &TxJsonRpcMessage<RoleClient>) -> std::io::Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec(message)?;
    bytes.push(b'\n');
    Ok(bytes)
}

async fn write_frame<W: AsyncWrite + Unpin>(stdin: &mut W, bytes: &[u8]) -> std::io::Result<()> {
    stdin.write_all(bytes).await?;
    stdin.flush().await
}

impl<W: AsyncWrite + Send + Unpin + 'static> Transport<RoleClient> for StdioTransport<W> {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let stdin = Arc::clone(&self.stdin);
        // Serialized now, so the send future holds bytes, not the message.
        let encoded = encode(&item);
        drop(item);
        async move {
            let bytes = encoded?;
            let mut stdin = stdin.lock().await;
            match stdin.as_mut() {
                Some(stdin) => write_frame(stdin, &bytes).await,
                None => Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "Transport is closed",
                )),
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            if self.owes_invalid_request {
                if !self.reply_invalid_request().await {
                    return None;
                }
                self.owes_invalid_request = false;
            }
            let frame = self.frames.next().await?;
            match parse_message(frame) {
                Parsed::Message(message) => return Some(*message),
                Parsed::Ignored => {}
                Parsed::InvalidRequest => self.owes_invalid_request = true,
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        drop(self.stdin.lock().await.take());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ClientJsonRpcMessage, ClientRequest, PingRequest, RequestId};
    use rmcp::transport::async_rw::AsyncRwTransport;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
    use tokio::net::unix::pipe;
    use tokio::sync::watch;
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::fault::FaultSender;
    use crate::frames::Ends;
    use crate::raw::RawMessages;

    /// What a server writes: messages, an unknown and a foreign notification, JSON that is
    /// no message, CRLF, blank lines.
    const SERVER_OUTPUT: &str = concat!(
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[]}}\n",
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/unknown\",\"params\":{}}\n",
        "{\"jsonrpc\":\"2.0\",\"method\":\"window/logMessage\",\"params\":{\"m\":1}}\r\n",
        "\n",
        "{\"foo\":1}\n",
        "  \n",
        "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}\r\n",
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",",
        "\"params\":{\"progressToken\":1,\"progress\":0.5}}\n",
        "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"error\":{\"code\":-32601,\"message\":\"no\"}}\n",
    );

    fn ends() -> Ends {
        let (faults, _) = FaultSender::new();
        let (_, exited) = watch::channel(None);
        Ends {
            faults,
            kill: CancellationToken::new(),
            exited,
            raw: std::sync::Arc::new(RawMessages::default()),
        }
    }

    /// Drives `transport` over `SERVER_OUTPUT`: what it delivered, and what it wrote after
    /// sending one ping of its own.
    async fn exchange<T: Transport<RoleClient>>(
        mut transport: T,
        mut written: DuplexStream,
    ) -> (Vec<serde_json::Value>, Vec<u8>) {
        let ping = ClientJsonRpcMessage::request(
            ClientRequest::PingRequest(PingRequest::default()),
            RequestId::Number(3),
        );
        transport.send(ping).await.unwrap();
        let mut delivered = Vec::new();
        while let Some(message) = transport.receive().await {
            delivered.push(serde_json::to_value(&message).unwrap());
        }
        transport.close().await.unwrap();
        drop(transport);
        let mut bytes = Vec::new();
        written.read_to_end(&mut bytes).await.unwrap();
        (delivered, bytes)
    }

    #[tokio::test]
    async fn reads_and_writes_exactly_what_rmcps_own_transport_does() {
        // rmcp's transport over an in-memory pipe ...
        let (mut server_out, rmcp_in) = tokio::io::duplex(64 * 1024);
        let (rmcp_out, rmcp_written) = tokio::io::duplex(64 * 1024);
        server_out
            .write_all(SERVER_OUTPUT.as_bytes())
            .await
            .unwrap();
        drop(server_out);
        let theirs = AsyncRwTransport::<RoleClient, _, _>::new_client(rmcp_in, rmcp_out);
        let (their_messages, their_bytes) = exchange(theirs, rmcp_written).await;
        // ... and ours over an OS pipe.
        let (mut sender, receiver) = pipe::pipe().unwrap();
        sender.write_all(SERVER_OUTPUT.as_bytes()).await.unwrap();
        drop(sender);
        let (our_out, our_written) = tokio::io::duplex(64 * 1024);
        let ours = StdioTransport::new(FrameReader::over(receiver, 1 << 20, ends()), our_out);
        let (our_messages, our_bytes) = exchange(ours, our_written).await;
        assert_eq!(our_messages, their_messages);
        assert_eq!(our_messages.len(), 6, "{our_messages:?}");
        assert_eq!(
            String::from_utf8(our_bytes).unwrap(),
            String::from_utf8(their_bytes).unwrap()
        );
    }

    #[tokio::test]
    async fn a_last_line_without_its_newline_is_still_a_message() {
        // As our reader always did (it passed the line on to rmcp with a newline added).
        let (mut sender, receiver) = pipe::pipe().unwrap();
        sender
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}")
            .await
            .unwrap();
        drop(sender);
        let (out, _written) = tokio::io::duplex(1024);
        let mut transport = StdioTransport::new(FrameReader::over(receiver, 1024, ends()), out);
        assert!(transport.receive().await.is_some());
        assert!(transport.receive().await.is_none());
    }

    #[tokio::test]
    async fn a_closed_transport_refuses_to_send() {
        let (_sender, receiver) = pipe::pipe().unwrap();
        let (out, _written) = tokio::io::duplex(1024);
        let mut transport = StdioTransport::new(FrameReader::over(receiver, 1024, ends()), out);
        transport.close().await.unwrap();
        let ping = ClientJsonRpcMessage::request(
            ClientRequest::PingRequest(PingRequest::default()),
            RequestId::Number(1),
        );
        let error = transport.send(ping).await.unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::NotConnected);
    }
}
