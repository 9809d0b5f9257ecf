//! The HTTP answer path of the respond benchmark: `m3 serve`'s router on a loopback port in
//! the responder process, answered by POSTs over one kept-alive connection.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use m3_kit::AsyncMcpTestKit;
use m3_types::ResponseMap;
use tokio_util::sync::CancellationToken;

use crate::Error;

/// A server on 127.0.0.1 and a client of it.
pub(crate) struct Server {
    base: String,
    client: Client<HttpConnector, Full<Bytes>>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<m3_types::Result<()>>,
}

impl Server {
    /// Serves `kit` through the JSON API on a free loopback port.
    pub(crate) async fn start(kit: AsyncMcpTestKit) -> Result<Self, Error> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let shutdown = CancellationToken::new();
        let router = m3_server::ServerBuilder::new(kit)
            .shutdown(shutdown.clone())
            .build();
        let stop = shutdown.clone();
        let task = tokio::spawn(async move {
            m3_server::serve(listener, router, async move { stop.cancelled().await }).await
        });
        let client = Client::builder(TokioExecutor::new()).build_http();
        Ok(Self {
            base,
            client,
            shutdown,
            task,
        })
    }

    /// POSTs `responses` to the round and waits for the committed round (200).
    pub(crate) async fn answer(
        &self,
        execution_id: &str,
        round_id: &str,
        responses: &ResponseMap,
        key: &str,
    ) -> Result<(), Error> {
        let body = serde_json::json!({"responses": responses, "idempotency_key": key});
        let request = hyper::Request::post(format!(
            "{}/api/v1/executions/{execution_id}/rounds/{round_id}/responses",
            self.base
        ))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(&body)?)))?;
        let response = self.client.request(request).await?;
        let status = response.status();
        let bytes = response.into_body().collect().await?.to_bytes();
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            return Err(format!("the server answered {status}: {text}").into());
        }
        Ok(())
    }

    /// Stops the server and waits for it.
    pub(crate) async fn stop(self) -> Result<(), Error> {
        self.shutdown.cancel();
        self.task.await??;
        Ok(())
    }
}
