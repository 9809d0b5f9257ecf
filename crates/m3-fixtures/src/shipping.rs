//! The `shipping` example server: tools, a prompt and a resource that ask for input.

use std::{
    borrow::Cow,
    collections::HashSet,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CacheScope, CallToolRequestMethod, CallToolRequestParams, CallToolResponse, CallToolResult,
        ContentBlock, DiscoverRequestMethod, DiscoverResult, GetPromptRequestParams,
        GetPromptResponse, Implementation, InputResponses, ListPromptsResult, ListResourcesResult,
        ListToolsResult, PaginatedRequestParams, Prompt, ProtocolVersion,
        ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
        ResourceContents, ServerCapabilities, ServerConfig,
    },
    service::RequestContext,
};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::{
    error::FixtureError,
    flow::{Answer, Outcome, RetryInput, Round, RoundAnswers, Step, answer, drive},
    options::{Era, Fault, GARBAGE_LINE, OVERSIZED_TEXT_BYTES, ShippingOptions},
    scripts::{
        CONFIRMATION_KEY, LABEL_PROMPT, QUOTE_RESOURCE_URI, RATES_RESOURCE_URI, address_round,
        book_gift_shipment, book_shipment, book_verified_shipment, booked, confirmation_params,
        quote_json, quote_price, rates_json, shipping_label, tools, weight,
    },
    state::{OperationKey, StateSealer},
};

/// Name the server reports in `serverInfo`.
pub const SHIPPING_SERVER_NAME: &str = "m3-shipping";

/// Where a fault writes raw output and signals a crash.
#[derive(Debug, Clone)]
pub(crate) struct Wire {
    pub(crate) raw: UnboundedSender<Vec<u8>>,
    pub(crate) crash: CancellationToken,
    /// Cancelled when the client's input ends.
    pub(crate) closed: CancellationToken,
    /// JSON-RPC ids (as JSON text) whose responses the output drops: calls a fault never
    /// answers, ended only because the connection closed.
    pub(crate) silenced: Arc<Mutex<HashSet<String>>>,
}

/// The server handler (one per connection).
#[derive(Debug, Clone)]
pub(crate) struct ShippingHandler {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    options: ShippingOptions,
    sealer: StateSealer,
    wire: Wire,
    prefix: String,
    counter: AtomicU64,
    latest_quote: Mutex<Option<f64>>,
}

impl ShippingHandler {
    pub(crate) fn new(options: ShippingOptions, wire: Wire) -> Result<Self, FixtureError> {
        let sealer = StateSealer::new(options.state_key.as_deref())?;
        let mut random = [0_u8; 4];
        getrandom::fill(&mut random)
            .map_err(|error| FixtureError::InvalidArgument(format!("no randomness: {error}")))?;
        let prefix = random.iter().map(|byte| format!("{byte:02x}")).collect();
        Ok(Self {
            inner: Arc::new(Inner {
                options,
                sealer,
                wire,
                prefix,
                counter: AtomicU64::new(0),
                latest_quote: Mutex::new(None),
            }),
        })
    }

    pub(crate) fn options(&self) -> &ShippingOptions {
        &self.inner.options
    }

    fn new_operation_id(&self) -> String {
        let n = self.inner.counter.fetch_add(1, Ordering::Relaxed) + 1;
        format!("{}-{n}", self.inner.prefix)
    }

    async fn run<T, S>(
        &self,
        context: &RequestContext<RoleServer>,
        operation: OperationKey,
        input: RetryInput,
        script: S,
    ) -> Result<Outcome<T>, ErrorData>
    where
        S: Fn(&str, &[RoundAnswers]) -> Result<Step<T>, ErrorData>,
    {
        drive(
            context,
            &self.inner.sealer,
            &operation,
            || self.new_operation_id(),
            input,
            script,
        )
        .await
    }

    /// Waits until the request is cancelled or the connection's input ends; the response the
    /// caller then returns is never written.
    async fn stopped(&self, context: &RequestContext<RoleServer>) {
        tokio::select! {
            () = context.ct.cancelled() => {}
            () = self.inner.wire.closed.cancelled() => {}
        }
        if let (Ok(id), Ok(mut silenced)) = (
            serde_json::to_string(&context.id),
            self.inner.wire.silenced.lock(),
        ) {
            silenced.insert(id);
        }
    }

    async fn faulty_call(
        &self,
        fault: Fault,
        operation: OperationKey,
        input: RetryInput,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        match fault {
            Fault::CrashMidCall => {
                tracing::warn!("fault crash-mid-call: ending the server");
                self.inner.wire.crash.cancel();
                self.stopped(&context).await;
                Err(ErrorData::internal_error("crashed", None))
            }
            Fault::Garbage => {
                let mut line = GARBAGE_LINE.as_bytes().to_vec();
                line.push(b'\n');
                if self.inner.wire.raw.send(line).is_err() {
                    tracing::warn!("fault garbage: the output is closed");
                }
                self.stopped(&context).await;
                Err(ErrorData::internal_error("cancelled", None))
            }
            Fault::Oversized => Ok(CallToolResult::success(vec![ContentBlock::text(
                "x".repeat(OVERSIZED_TEXT_BYTES),
            )])
            .into()),
            Fault::Hang => {
                self.stopped(&context).await;
                Err(ErrorData::internal_error("cancelled", None))
            }
            Fault::EndlessRounds => {
                let outcome = self
                    .run(&context, operation, input, |_, _| {
                        Ok(Step::<CallToolResult>::Ask(address_round()))
                    })
                    .await?;
                Ok(tool_response(outcome))
            }
        }
    }
}

/// Appends one line about a `tools/call` to the call log (best effort: a test fixture).
fn log_call(path: &std::path::Path, tool: &str, responses: Option<&InputResponses>) {
    use std::io::Write as _;
    let city = responses
        .and_then(|r| serde_json::to_value(r).ok())
        .and_then(|v| v.pointer("/shipping_address/content/city").cloned());
    let line = json!({
        "pid": std::process::id(),
        "ppid": std::os::unix::process::parent_id(),
        "tool": tool,
        "answered": responses.is_some(),
        "city": city,
    });
    // One `write` per line: servers of several workers append to one log, and a
    // formatted write would reach the file in pieces that interleave with theirs.
    let bytes = format!("{line}\n");
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut file| file.write_all(bytes.as_bytes()));
    if let Err(error) = written {
        tracing::warn!(%error, "cannot write the call log");
    }
}

fn tool_response(outcome: Outcome<CallToolResult>) -> CallToolResponse {
    match outcome {
        Outcome::Done(result) => result.into(),
        Outcome::InputRequired(result) => result.into(),
    }
}

impl ServerHandler for ShippingHandler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_prompts()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new(
            SHIPPING_SERVER_NAME,
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(
            "Example shipping server of m3-rs: tools, a prompt and a resource that ask for input.",
        )
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        self.inner.options.era.supported_versions()
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        if self.inner.options.era == Era::Legacy {
            // A server of the handshake era does not know server/discover.
            return Err(ErrorData::method_not_found::<DiscoverRequestMethod>());
        }
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let arguments = request.arguments.unwrap_or_default();
        let operation = OperationKey::new("tool", &name, Value::Object(arguments.clone()));
        let input = RetryInput {
            responses: request.input_responses,
            state: request.request_state,
        };
        if !tools().iter().any(|tool| tool.name == name) {
            return Err(ErrorData::invalid_params(
                format!("unknown tool '{name}'"),
                None,
            ));
        }
        let weight_kg = weight(&arguments)?;
        let answered = input.responses.is_some();
        if let Some(path) = &self.inner.options.call_log {
            log_call(path, &name, input.responses.as_ref());
        }
        if answered && self.inner.options.hold_retry {
            self.stopped(&context).await;
            return Err(ErrorData::internal_error("cancelled", None));
        }
        if let Some(fault) = self.inner.options.fault {
            return self.faulty_call(fault, operation, input, context).await;
        }
        let outcome = match name.as_str() {
            "book_shipment" => self.run(&context, operation, input, book_shipment).await?,
            "book_verified_shipment" => {
                self.run(&context, operation, input, book_verified_shipment)
                    .await?
            }
            "book_gift_shipment" => {
                self.run(&context, operation, input, book_gift_shipment)
                    .await?
            }
            "quote" => {
                if let Ok(mut latest) = self.inner.latest_quote.lock() {
                    *latest = Some(weight_kg);
                }
                let price = quote_price(weight_kg);
                Outcome::Done(booked(
                    &format!("Quote: {price:.2} EUR for {weight_kg} kg."),
                    quote_json(weight_kg),
                ))
            }
            _ => return Err(ErrorData::method_not_found::<CallToolRequestMethod>()),
        };
        Ok(tool_response(outcome))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(vec![Prompt::new(
            LABEL_PROMPT,
            Some(
                "Asks for the delivery address (form, key shipping_address), then returns a message to print the label.",
            ),
            None,
        )]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name != LABEL_PROMPT {
            return Err(ErrorData::invalid_params(
                format!("unknown prompt '{}'", request.name),
                None,
            ));
        }
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let operation = OperationKey::new("prompt", &request.name, arguments);
        let input = RetryInput {
            responses: request.input_responses,
            state: request.request_state,
        };
        Ok(
            match self.run(&context, operation, input, shipping_label).await? {
                Outcome::Done(result) => result.into(),
                Outcome::InputRequired(result) => result.into(),
            },
        )
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let mut resource = Resource::new(QUOTE_RESOURCE_URI, "latest_quote");
        resource.description = Some(
            "The latest quote; asks for a confirmation first (form, key confirmation).".to_owned(),
        );
        resource.mime_type = Some("application/json".to_owned());
        let mut rates = Resource::new(RATES_RESOURCE_URI, "rates");
        rates.description =
            Some("The rate table (asks nothing; cacheable for an hour).".to_owned());
        rates.mime_type = Some("application/json".to_owned());
        Ok(ListResourcesResult::with_all_items(vec![rates, resource]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri == RATES_RESOURCE_URI {
            let text = rates_json().to_string();
            return Ok(ReadResourceResult::new(vec![ResourceContents::text(
                text,
                RATES_RESOURCE_URI,
            )])
            .with_ttl_ms(3_600_000)
            .with_cache_scope(CacheScope::Public)
            .into());
        }
        if request.uri != QUOTE_RESOURCE_URI {
            return Err(ErrorData::resource_not_found(
                format!("unknown resource '{}'", request.uri),
                Some(json!({"uri": request.uri})),
            ));
        }
        let weight_kg = self
            .inner
            .latest_quote
            .lock()
            .ok()
            .and_then(|latest| *latest)
            .unwrap_or(1.0);
        let operation = OperationKey::new("resource", &request.uri, Value::Null);
        let input = RetryInput {
            responses: request.input_responses,
            state: request.request_state,
        };
        let script = |_: &str, answers: &[RoundAnswers]| {
            let Some(first) = answers.first() else {
                return Ok(Step::Ask(Round::one(
                    CONFIRMATION_KEY,
                    confirmation_params()?,
                )));
            };
            let confirmed = matches!(
                answer(first, CONFIRMATION_KEY),
                Answer::Accepted(Some(content)) if content.get("confirm") == Some(&Value::Bool(true))
            );
            let text = if confirmed {
                quote_json(weight_kg).to_string()
            } else {
                json!({"withheld": true}).to_string()
            };
            // The quote changes with every booking: fresh for no time, for this client only.
            Ok(Step::Done(
                ReadResourceResult::new(vec![ResourceContents::text(text, QUOTE_RESOURCE_URI)])
                    .with_ttl_ms(0)
                    .with_cache_scope(CacheScope::Private),
            ))
        };
        Ok(match self.run(&context, operation, input, script).await? {
            Outcome::Done(result) => result.into(),
            Outcome::InputRequired(result) => result.into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::log_call;

    #[test]
    fn concurrent_servers_append_whole_call_log_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("calls.jsonl");
        let writers: Vec<_> = (0..8)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        log_call(&path, "book_shipment", None);
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1600);
        for line in lines {
            let value: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|error| panic!("broken line {line:?}: {error}"));
            assert_eq!(value["tool"], "book_shipment");
        }
    }
}
