//! The rmcp client handler: declares the elicitation capability and routes legacy
//! server-to-client `elicitation/create` requests to the operation in flight.
//!
//! Both typed requests (`create_elicitation`) and requests whose schema falls
//! outside rmcp's typed subset (`on_custom_request`, method `elicitation/create`)
//! take the same path as raw JSON, so a non-conforming schema never crashes the
//! client: it becomes an ordinary round with the schema passed through verbatim.
//! A typed request is replaced by the params exactly as the server wrote them
//! (kept by the frame reader, see `raw.rs`): rmcp's typed model drops keywords.

use std::sync::{Arc, Mutex};

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CustomRequest, CustomResult, ElicitRequestParams,
    ElicitResult, ElicitationCapability, ErrorCode, ErrorData, ExtensionCapabilities,
    FormElicitationCapability, Implementation, JsonObject, ProtocolVersion,
    UrlElicitationCapability,
};
use rmcp::service::{RequestContext, RoleClient};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::raw::RawMessages;
use super::tasks::TASKS_EXTENSION;

/// One legacy `elicitation/create` waiting for an answer.
#[derive(Debug)]
pub(crate) struct LegacyInput {
    /// The request params as JSON (`_meta` included).
    pub(crate) params: Value,
    /// Where the `ElicitResult` JSON goes.
    pub(crate) reply: oneshot::Sender<Value>,
    /// Fires when the server sends `notifications/cancelled` for the request.
    pub(crate) withdrawn: CancellationToken,
}

/// Routes legacy elicitation requests to the single operation in flight.
#[derive(Debug, Default)]
pub(crate) struct LegacyRouter {
    current: Mutex<Option<mpsc::Sender<LegacyInput>>>,
}

impl LegacyRouter {
    pub(crate) fn install(&self, sender: mpsc::Sender<LegacyInput>) {
        if let Ok(mut current) = self.current.lock() {
            *current = Some(sender);
        }
    }

    pub(crate) fn clear(&self) {
        if let Ok(mut current) = self.current.lock() {
            *current = None;
        }
    }

    async fn deliver(
        &self,
        params: Value,
        withdrawn: CancellationToken,
    ) -> Result<Value, ErrorData> {
        let sender = self.current.lock().ok().and_then(|current| current.clone());
        let Some(sender) = sender else {
            tracing::warn!("elicitation/create with no operation in flight; declining");
            return Ok(json!({"action": "decline"}));
        };
        let (reply, answer) = oneshot::channel();
        let input = LegacyInput {
            params,
            reply,
            withdrawn: withdrawn.clone(),
        };
        if sender.send(input).await.is_err() {
            return Ok(json!({"action": "decline"}));
        }
        tokio::select! {
            answer = answer => Ok(answer.unwrap_or_else(|_| json!({"action": "cancel"}))),
            () = withdrawn.cancelled() => Err(ErrorData::new(
                ErrorCode::INTERNAL_ERROR,
                "elicitation request cancelled by the server",
                None,
            )),
        }
    }
}

/// Our `ClientHandler`.
#[derive(Debug, Clone)]
pub(crate) struct M3ClientHandler {
    router: Arc<LegacyRouter>,
    raw: Arc<RawMessages>,
    /// The version `initialize` offers (2025-11-25 unless the binding pins 2025-06-18).
    handshake_version: ProtocolVersion,
}

impl M3ClientHandler {
    pub(crate) fn new(
        router: Arc<LegacyRouter>,
        raw: Arc<RawMessages>,
        handshake_version: ProtocolVersion,
    ) -> Self {
        Self {
            router,
            raw,
            handshake_version,
        }
    }
}

/// The typed request back as JSON, for when its raw params were not kept.
fn typed_params(
    request: &ElicitRequestParams,
    context: &RequestContext<RoleClient>,
) -> Result<Value, ErrorData> {
    let mut params = serde_json::to_value(request).map_err(internal)?;
    // rmcp moves params-level `_meta` into the context; put it back.
    if let (Some(object), Ok(Value::Object(mut meta))) =
        (params.as_object_mut(), serde_json::to_value(&context.meta))
    {
        meta.shift_remove("progressToken");
        if !meta.is_empty() {
            object.insert("_meta".to_owned(), Value::Object(meta));
        }
    }
    Ok(params)
}

/// The capabilities every request declares: elicitation, form and URL, and the tasks
/// extension (`io.modelcontextprotocol/tasks`): a 2026-07-28 server may then answer a
/// `tools/call` with a task, which the driver follows. Servers of the handshake eras never
/// answer with a task (the extension is defined for 2026-07-28 only).
pub(crate) fn client_capabilities() -> ClientCapabilities {
    let mut capabilities = ClientCapabilities::default();
    capabilities.elicitation = Some(
        ElicitationCapability::new()
            .with_form(FormElicitationCapability::new())
            .with_url(UrlElicitationCapability::new()),
    );
    let mut extensions = ExtensionCapabilities::new();
    extensions.insert(TASKS_EXTENSION.to_owned(), JsonObject::new());
    capabilities.extensions = Some(extensions);
    capabilities
}

fn internal(error: serde_json::Error) -> ErrorData {
    ErrorData::new(ErrorCode::INTERNAL_ERROR, error.to_string(), None)
}

impl ClientHandler for M3ClientHandler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            client_capabilities(),
            Implementation::new("m3-rs", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(self.handshake_version.clone())
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let params = match self.raw.take_request(&context.id) {
            Some(raw) => raw,
            None => typed_params(&request, &context)?,
        };
        let answer = self.router.deliver(params, context.ct.clone()).await?;
        serde_json::from_value(answer).map_err(internal)
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleClient>,
    ) -> Result<CustomResult, ErrorData> {
        if request.method != "elicitation/create" {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                request.method,
                None,
            ));
        }
        // The reader kept this one too; take it so it does not linger.
        let _ = self.raw.take_request(&context.id);
        let params = request.params.unwrap_or_else(|| json!({}));
        let answer = self.router.deliver(params, context.ct.clone()).await?;
        Ok(CustomResult::new(answer))
    }
}
