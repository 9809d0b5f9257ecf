//! The loopback redirect listener of the authorization code grant (RFC 8252, section
//! 7.3): `http://127.0.0.1:PORT/callback` answers the browser's redirect with a short
//! page and hands the redirect's query (`code`, `state`, `iss`) to the flow.

use std::time::Duration;

use m3_types::{Error, Reason, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The path the redirect URI names.
const CALLBACK_PATH: &str = "/callback";
/// Largest request head read from the browser.
const MAX_HEAD: usize = 16 * 1024;

/// A bound listener waiting for one redirect.
#[derive(Debug)]
pub(super) struct CallbackListener {
    listener: TcpListener,
    redirect_uri: String,
}

impl CallbackListener {
    /// Bind `127.0.0.1:port` (`0`: any free port).
    ///
    /// # Errors
    /// `transport_error` when the port cannot be bound.
    pub(super) async fn bind(server: &str, port: u16) -> Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .map_err(|error| {
                Error::transport(format!(
                    "MCP server '{server}': cannot listen for the OAuth redirect on 127.0.0.1:{port}: {error}"
                ))
                .with_reason(Reason::AuthorizationFailed)
            })?;
        let port = listener
            .local_addr()
            .map_err(|error| Error::transport(format!("OAuth redirect listener: {error}")))?
            .port();
        Ok(Self {
            listener,
            redirect_uri: format!("http://127.0.0.1:{port}{CALLBACK_PATH}"),
        })
    }

    /// The redirect URI to register and send.
    pub(super) fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    /// Wait up to `wait` for the redirect; its full URL (with the query).
    ///
    /// Requests for other paths (a browser's `/favicon.ico`) get a 404 and the wait
    /// goes on.
    ///
    /// # Errors
    /// `timeout` when no redirect comes within `wait`.
    pub(super) async fn wait(self, server: &str, wait: Duration) -> Result<String> {
        let waiting = async {
            loop {
                let Ok((stream, _)) = self.listener.accept().await else {
                    continue;
                };
                if let Some(target) = answer(stream).await {
                    return format!("http://127.0.0.1{target}");
                }
            }
        };
        tokio::time::timeout(wait, waiting).await.map_err(|_| {
            Error::timeout(format!(
                "MCP server '{server}': nobody completed the OAuth authorization within {} s",
                wait.as_secs()
            ))
            .with_detail("server", server.to_owned())
            .with_reason(Reason::AuthorizationFailed)
        })
    }
}

/// Read one request; the request target when it is the callback (answered with a page
/// saying the window may be closed), `None` for anything else (answered 404).
async fn answer(mut stream: TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut chunk = [0u8; 2048];
    let read = async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&chunk[..n]),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(10), read).await;
    let text = String::from_utf8_lossy(&head);
    let mut words = text.lines().next().unwrap_or_default().split_whitespace();
    let target = match (words.next(), words.next()) {
        (Some("GET"), Some(target))
            if target == CALLBACK_PATH || target.starts_with("/callback?") =>
        {
            Some(target.to_owned())
        }
        _ => None,
    };
    let (status, body) = match target {
        Some(_) => (
            "200 OK",
            "<!doctype html><html lang=\"en\"><title>m3: authorized</title>\
             <p>Authorization received. You can close this window.</p></html>",
        ),
        None => ("404 Not Found", "not found"),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\n\
         cache-control: no-store\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
    target
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_redirect_is_answered_and_returned() {
        let listener = CallbackListener::bind("s", 0).await.unwrap();
        let uri = listener.redirect_uri().to_owned();
        let port: u16 = uri
            .trim_start_matches("http://127.0.0.1:")
            .trim_end_matches(CALLBACK_PATH)
            .parse()
            .unwrap();
        let waiting = tokio::spawn(listener.wait("s", Duration::from_secs(10)));
        for target in ["/favicon.ico", "/callback?code=c&state=s"] {
            let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            let request = format!("GET {target} HTTP/1.1\r\nhost: x\r\n\r\n");
            stream.write_all(request.as_bytes()).await.unwrap();
            let mut reply = String::new();
            stream.read_to_string(&mut reply).await.unwrap();
            let expected = if target.starts_with("/callback") {
                "200"
            } else {
                "404"
            };
            assert!(
                reply.starts_with(&format!("HTTP/1.1 {expected}")),
                "{reply}"
            );
        }
        let url = waiting.await.unwrap().unwrap();
        assert_eq!(url, "http://127.0.0.1/callback?code=c&state=s");
    }

    #[tokio::test]
    async fn nobody_coming_is_a_timeout() {
        let listener = CallbackListener::bind("s", 0).await.unwrap();
        let error = listener
            .wait("s", Duration::from_millis(50))
            .await
            .unwrap_err();
        assert!(error.is_timeout());
        assert_eq!(error.reason(), Some(Reason::AuthorizationFailed));
    }
}
