//! Elicitation values: actions, responses and the form / URL requests a server sends.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// Responses keyed by request key, as submitted for one round.
pub type ResponseMap = BTreeMap<String, ElicitationResponse>;

wire_enum! {
    /// What the person did with one elicitation request.
    #[expect(
        clippy::exhaustive_enums,
        reason = "frozen wire strings of the Python reference; callers match exhaustively (docs/decisions.md)"
    )]
    pub enum ElicitationAction {
        /// `"accept"`: answered (form content, or consent for a URL request).
        Accept => "accept",
        /// `"decline"`: refused to answer.
        Decline => "decline",
        /// `"cancel"`: dismissed the request.
        Cancel => "cancel",
    }
    unknown = |s: &str| {
        Error::managed_input_validation(format!(
            "elicitation action must be 'accept', 'decline' or 'cancel', got '{s}'"
        ))
    }
}

/// The answer to one elicitation request.
///
/// Content is only allowed with [`ElicitationAction::Accept`]; every constructor and
/// deserialization enforce that. JSON: `{"action": .., "content": .. | null, "meta": .. | null}`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(
    clippy::exhaustive_structs,
    reason = "frozen wire shape of the Python reference; other crates build it with struct literals (docs/decisions.md)"
)]
pub struct ElicitationResponse {
    /// What the person did.
    pub action: ElicitationAction,
    /// Form content (accept only).
    pub content: Option<Map<String, Value>>,
    /// Protocol `_meta` to pass along.
    pub meta: Option<Map<String, Value>>,
}

impl ElicitationResponse {
    /// Accepts a form request with `content`.
    pub fn accept(content: Map<String, Value>) -> Self {
        Self {
            action: ElicitationAction::Accept,
            content: Some(content),
            meta: None,
        }
    }

    /// Accepts a URL request (consent only; no content).
    pub fn accept_url() -> Self {
        Self {
            action: ElicitationAction::Accept,
            content: None,
            meta: None,
        }
    }

    /// Declines the request.
    pub fn decline() -> Self {
        Self {
            action: ElicitationAction::Decline,
            content: None,
            meta: None,
        }
    }

    /// Cancels the request.
    pub fn cancel() -> Self {
        Self {
            action: ElicitationAction::Cancel,
            content: None,
            meta: None,
        }
    }

    /// Sets `meta`.
    #[must_use]
    pub fn with_meta(mut self, meta: Map<String, Value>) -> Self {
        self.meta = Some(meta);
        self
    }

    /// Builds a response from its parts.
    ///
    /// # Errors
    /// `managed_input_invalid` when `content` is given with `decline` or `cancel`
    /// ("decline and cancel responses cannot contain content").
    pub fn try_new(
        action: ElicitationAction,
        content: Option<Map<String, Value>>,
        meta: Option<Map<String, Value>>,
    ) -> Result<Self> {
        let response = Self {
            action,
            content,
            meta,
        };
        response.validate()?;
        Ok(response)
    }

    /// Checks the model rule (content only with accept).
    ///
    /// # Errors
    /// `managed_input_invalid` when a decline or cancel carries content.
    pub fn validate(&self) -> Result<()> {
        if self.action != ElicitationAction::Accept && self.content.is_some() {
            return Err(
                Error::managed_input_validation(crate::messages::DECLINE_CONTENT)
                    .with_detail("action", self.action.as_str()),
            );
        }
        Ok(())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawResponse {
    action: ElicitationAction,
    #[serde(default)]
    content: Option<Map<String, Value>>,
    #[serde(default)]
    meta: Option<Map<String, Value>>,
}

impl<'de> Deserialize<'de> for ElicitationResponse {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let raw = RawResponse::deserialize(d)?;
        Self::try_new(raw.action, raw.content, raw.meta).map_err(serde::de::Error::custom)
    }
}

wire_enum! {
    /// The MCP operation category that raised an elicitation.
    #[expect(
        clippy::exhaustive_enums,
        reason = "frozen wire strings of the Python reference; callers match exhaustively (docs/decisions.md)"
    )]
    pub enum OperationKind {
        /// `"tool"`: a tool call.
        Tool => "tool",
        /// `"prompt"`: a prompt get.
        Prompt => "prompt",
        /// `"resource"`: a resource read.
        Resource => "resource",
    }
    unknown = |s: &str| {
        Error::managed_input_validation(format!(
            "operation_kind must be 'tool', 'prompt' or 'resource', got '{s}'"
        ))
    }
}

/// A form request: the server asks for content matching `requested_schema`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(
    clippy::exhaustive_structs,
    reason = "frozen wire shape of the Python reference; other crates build it with struct literals (docs/decisions.md)"
)]
pub struct FormElicitationRequest {
    /// Key of this request inside its round (non-empty).
    pub request_key: String,
    /// The question shown to the person.
    pub message: String,
    /// JSON Schema the accepted content must satisfy.
    pub requested_schema: Map<String, Value>,
    /// Protocol `_meta`.
    #[serde(default)]
    pub meta: Option<Map<String, Value>>,
    /// Task context, if the server sent one.
    #[serde(default)]
    pub task: Option<Map<String, Value>>,
    /// Server name context.
    #[serde(default)]
    pub server: Option<String>,
    /// Operation category context.
    #[serde(default)]
    pub operation_kind: Option<OperationKind>,
    /// Operation name context.
    #[serde(default)]
    pub operation_name: Option<String>,
}

/// The context setters both request kinds share (`with_operation`, `with_meta`,
/// `with_task`), written once.
macro_rules! context_setters {
    ($request:ident) => {
        impl $request {
            /// Sets the server / operation context.
            #[must_use]
            pub fn with_operation(
                mut self,
                server: impl Into<String>,
                kind: OperationKind,
                name: impl Into<String>,
            ) -> Self {
                self.server = Some(server.into());
                self.operation_kind = Some(kind);
                self.operation_name = Some(name.into());
                self
            }

            /// Sets `meta`.
            #[must_use]
            pub fn with_meta(mut self, meta: Map<String, Value>) -> Self {
                self.meta = Some(meta);
                self
            }

            /// Sets `task`.
            #[must_use]
            pub fn with_task(mut self, task: Map<String, Value>) -> Self {
                self.task = Some(task);
                self
            }
        }
    };
}

context_setters!(FormElicitationRequest);
context_setters!(UrlElicitationRequest);

impl FormElicitationRequest {
    /// A form request with no optional context.
    pub fn new(
        request_key: impl Into<String>,
        message: impl Into<String>,
        requested_schema: Map<String, Value>,
    ) -> Self {
        Self {
            request_key: request_key.into(),
            message: message.into(),
            requested_schema,
            meta: None,
            task: None,
            server: None,
            operation_kind: None,
            operation_name: None,
        }
    }
}

/// A URL request: the server asks the person to visit `url` (M3 never opens it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(
    clippy::exhaustive_structs,
    reason = "frozen wire shape of the Python reference; other crates build it with struct literals (docs/decisions.md)"
)]
pub struct UrlElicitationRequest {
    /// Key of this request inside its round (non-empty).
    pub request_key: String,
    /// The explanation shown to the person.
    pub message: String,
    /// The URL to visit.
    pub url: String,
    /// Legacy `elicitationId` (removed in MCP 2026-07-28; `None` there).
    #[serde(default)]
    pub elicitation_id: Option<String>,
    /// Protocol `_meta`.
    #[serde(default)]
    pub meta: Option<Map<String, Value>>,
    /// Task context.
    #[serde(default)]
    pub task: Option<Map<String, Value>>,
    /// Server name context.
    #[serde(default)]
    pub server: Option<String>,
    /// Operation category context.
    #[serde(default)]
    pub operation_kind: Option<OperationKind>,
    /// Operation name context.
    #[serde(default)]
    pub operation_name: Option<String>,
}

impl UrlElicitationRequest {
    /// A URL request with no optional context.
    pub fn new(
        request_key: impl Into<String>,
        message: impl Into<String>,
        url: impl Into<String>,
    ) -> Self {
        Self {
            request_key: request_key.into(),
            message: message.into(),
            url: url.into(),
            elicitation_id: None,
            meta: None,
            task: None,
            server: None,
            operation_kind: None,
            operation_name: None,
        }
    }

    /// Sets the legacy elicitation id.
    #[must_use]
    pub fn with_elicitation_id(mut self, id: impl Into<String>) -> Self {
        self.elicitation_id = Some(id.into());
        self
    }
}

wire_enum! {
    /// The mode of an elicitation request.
    #[expect(
        clippy::exhaustive_enums,
        reason = "frozen wire strings of the Python reference; callers match exhaustively (docs/decisions.md)"
    )]
    pub enum ElicitationMode {
        /// `"form"`
        Form => "form",
        /// `"url"`
        Url => "url",
    }
    unknown = |s: &str| {
        Error::managed_input_validation(format!(
            "elicitation mode must be 'form' or 'url', got '{s}'"
        ))
    }
}

/// One request of a round, tagged by `mode` (`"form"` or `"url"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "mode", rename_all = "snake_case")]
#[expect(
    clippy::exhaustive_enums,
    reason = "frozen wire strings of the Python reference; callers match exhaustively (docs/decisions.md)"
)]
pub enum ElicitationRequest {
    /// A form request.
    Form(FormElicitationRequest),
    /// A URL request.
    Url(UrlElicitationRequest),
}

impl ElicitationRequest {
    /// The request key.
    pub fn request_key(&self) -> &str {
        match self {
            Self::Form(r) => &r.request_key,
            Self::Url(r) => &r.request_key,
        }
    }

    /// The message shown to the person.
    pub fn message(&self) -> &str {
        match self {
            Self::Form(r) => &r.message,
            Self::Url(r) => &r.message,
        }
    }

    /// The mode.
    pub fn mode(&self) -> ElicitationMode {
        match self {
            Self::Form(_) => ElicitationMode::Form,
            Self::Url(_) => ElicitationMode::Url,
        }
    }
}

impl From<FormElicitationRequest> for ElicitationRequest {
    fn from(r: FormElicitationRequest) -> Self {
        Self::Form(r)
    }
}

impl From<UrlElicitationRequest> for ElicitationRequest {
    fn from(r: UrlElicitationRequest) -> Self {
        Self::Url(r)
    }
}
