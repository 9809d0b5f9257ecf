//! A served router on a real SQLite store, a plain HTTP/1 client, and rounds
//! created straight in the store.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use m3_kit::AsyncMcpTestKit;
use m3_store::{CreateRound, NewExecution};
use m3_types::{
    ElicitationRequest, FormElicitationRequest, HumanInput, OperationKind, PendingElicitationRound,
    UrlElicitationRequest,
};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

/// A server on 127.0.0.1 over a kit on a temporary SQLite file.
pub struct Served {
    pub kit: AsyncMcpTestKit,
    pub addr: SocketAddr,
    pub shutdown: CancellationToken,
    pub client: Client<HttpConnector, Full<Bytes>>,
    _dir: tempfile::TempDir,
}

/// One answer: status, headers, body text.
pub struct Answer {
    pub status: StatusCode,
    pub headers: hyper::HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// Serves the router of `configure(builder)`.
pub async fn serve(
    configure: impl FnOnce(m3_server::ServerBuilder) -> m3_server::ServerBuilder,
) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let kit = AsyncMcpTestKit::builder()
        .database(dir.path().join("m3.sqlite"))
        .build()
        .await
        .unwrap();
    let shutdown = CancellationToken::new();
    let builder = m3_server::ServerBuilder::new(kit.clone())
        .poll_interval(Duration::from_millis(20))
        .shutdown(shutdown.clone());
    let router = configure(builder).build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(m3_server::serve(
        listener,
        router,
        shutdown.clone().cancelled_owned(),
    ));
    let client = Client::builder(TokioExecutor::new()).build_http();
    Served {
        kit,
        addr,
        shutdown,
        client,
        _dir: dir,
    }
}

impl Served {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Sends one request and reads the whole answer.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Answer {
        let mut request = Request::builder().method(method).uri(self.url(path));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = self
            .client
            .request(request.body(Full::new(body.into())).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        Answer {
            status,
            headers,
            body: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.send(Method::GET, path, &[], Bytes::new()).await
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> Answer {
        self.send(
            Method::POST,
            path,
            &[("content-type", "application/json")],
            body.to_string(),
        )
        .await
    }

    /// A managed execution with one pending round of `requests`.
    pub async fn round(&self, requests: Vec<ElicitationRequest>) -> PendingElicitationRound {
        let store = self.kit.store();
        let execution = store
            .create_execution(
                NewExecution::new(json!({"test": true})).with_human_input(HumanInput::Managed),
            )
            .await
            .unwrap();
        let pending = PendingElicitationRound {
            round_id: m3_types::new_id(),
            execution_id: execution.execution_id.clone(),
            logical_operation_id: "op-1".into(),
            server: "shipping".into(),
            operation_kind: OperationKind::Tool,
            operation_name: "book_shipment".into(),
            request_state: None,
            requests: requests
                .into_iter()
                .map(|r| (r.request_key().to_owned(), r))
                .collect::<BTreeMap<_, _>>(),
            created_at: time::OffsetDateTime::now_utc(),
            deadline: None,
        };
        let managed = store.managed_input_store().await.unwrap();
        managed
            .create_round(CreateRound::new(
                pending.clone(),
                "test-worker",
                Duration::from_secs(600),
            ))
            .await
            .unwrap();
        pending
    }
}

pub fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The address form (`street`, `city` required; `api_key` optional and secret).
pub fn address_form() -> ElicitationRequest {
    ElicitationRequest::Form(FormElicitationRequest::new(
        "shipping_address",
        "Enter the delivery address.",
        object(json!({
            "type": "object",
            "properties": {
                "street": {"type": "string", "minLength": 3},
                "city": {"type": "string"},
                "api_key": {"type": "string"}
            },
            "required": ["street", "city"]
        })),
    ))
}

pub fn url_request(url: &str) -> ElicitationRequest {
    ElicitationRequest::Url(UrlElicitationRequest::new(
        "verification",
        "Verify in the browser.",
        url,
    ))
}

pub fn responses_path(round: &PendingElicitationRound) -> String {
    format!(
        "/api/v1/executions/{}/rounds/{}/responses",
        round.execution_id, round.round_id
    )
}
