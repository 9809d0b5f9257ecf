//! The `shipping` example server: tools, a prompt and a resource that ask for input.

use std::{
    borrow::Cow,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestMethod, CallToolRequestParams, CallToolResponse, CallToolResult,
        ContentBlock, ElicitRequestParams, ElicitationSchema, GetPromptRequestParams,
        GetPromptResponse, GetPromptResult, Implementation, JsonObject, ListPromptsResult,
        ListResourcesResult, ListToolsResult, PaginatedRequestParams, Prompt, PromptMessage,
        ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
        Resource, ResourceContents, Role, ServerCapabilities, ServerConfig, Tool,
    },
    service::RequestContext,
};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::{
    error::FixtureError,
    flow::{Answer, Outcome, RetryInput, Round, RoundAnswers, Step, answer, drive},
    options::{Fault, GARBAGE_LINE, OVERSIZED_TEXT_BYTES, ShippingOptions},
    state::{OperationKey, StateSealer},
};

/// Name the server reports in `serverInfo`.
pub const SHIPPING_SERVER_NAME: &str = "m3-shipping";
/// Request key of the address question.
pub const SHIPPING_ADDRESS_KEY: &str = "shipping_address";
/// Message of the address question.
pub const SHIPPING_ADDRESS_MESSAGE: &str = "Enter the delivery address.";
/// Request key of the URL verification round of `book_verified_shipment`.
pub const VERIFICATION_KEY: &str = "verification";
/// Prefix of the verification URL; the operation id follows it.
pub const VERIFICATION_URL_PREFIX: &str = "https://example.test/verify/";
/// Request key of the gift message question of `book_gift_shipment`.
pub const GIFT_MESSAGE_KEY: &str = "gift_message";
/// Request key of the confirmation asked by the quote resource.
pub const CONFIRMATION_KEY: &str = "confirmation";
/// URI of the resource that asks for a confirmation.
pub const QUOTE_RESOURCE_URI: &str = "shipping://quote/latest";
/// Name of the prompt that asks for the address.
pub const LABEL_PROMPT: &str = "shipping_label";

/// Where a fault writes raw output and signals a crash.
#[derive(Debug, Clone)]
pub(crate) struct Wire {
    pub(crate) raw: UnboundedSender<Vec<u8>>,
    pub(crate) crash: CancellationToken,
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
                context.ct.cancelled().await;
                Err(ErrorData::internal_error("crashed", None))
            }
            Fault::Garbage => {
                let mut line = GARBAGE_LINE.as_bytes().to_vec();
                line.push(b'\n');
                if self.inner.wire.raw.send(line).is_err() {
                    tracing::warn!("fault garbage: the output is closed");
                }
                context.ct.cancelled().await;
                Err(ErrorData::internal_error("cancelled", None))
            }
            Fault::Oversized => Ok(CallToolResult::success(vec![ContentBlock::text(
                "x".repeat(OVERSIZED_TEXT_BYTES),
            )])
            .into()),
            Fault::Hang => {
                context.ct.cancelled().await;
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

fn tool_response(outcome: Outcome<CallToolResult>) -> CallToolResponse {
    match outcome {
        Outcome::Done(result) => result.into(),
        Outcome::InputRequired(result) => result.into(),
    }
}

fn form(message: &str, schema: ElicitationSchema) -> ElicitRequestParams {
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message.to_owned(),
        requested_schema: schema,
    }
}

fn schema(build: Result<ElicitationSchema, &'static str>) -> Result<ElicitationSchema, ErrorData> {
    build.map_err(|error| ErrorData::internal_error(format!("bad schema: {error}"), None))
}

fn address_params() -> Result<ElicitRequestParams, ErrorData> {
    Ok(form(
        SHIPPING_ADDRESS_MESSAGE,
        schema(
            ElicitationSchema::builder()
                .required_string("street")
                .required_string("city")
                .build(),
        )?,
    ))
}

fn address_round() -> Round {
    // The schema has two plain required strings; the builder cannot fail on it.
    match address_params() {
        Ok(params) => Round::one(SHIPPING_ADDRESS_KEY, params),
        Err(_) => Round { requests: vec![] },
    }
}

fn gift_params() -> Result<ElicitRequestParams, ErrorData> {
    Ok(form(
        "Enter a gift message.",
        schema(
            ElicitationSchema::builder()
                .required_string("message")
                .build(),
        )?,
    ))
}

fn confirmation_params() -> Result<ElicitRequestParams, ErrorData> {
    Ok(form(
        "Show the latest quote?",
        schema(
            ElicitationSchema::builder()
                .required_bool("confirm")
                .build(),
        )?,
    ))
}

fn verification_params(operation_id: &str) -> ElicitRequestParams {
    ElicitRequestParams::UrlElicitationParams {
        meta: None,
        message: "Verify the shipment in your browser.".to_owned(),
        url: format!("{VERIFICATION_URL_PREFIX}{operation_id}"),
        elicitation_id: operation_id.to_owned(),
    }
}

/// A valid address: an object whose `street` and `city` are strings.
#[derive(Debug, Clone, PartialEq)]
struct Address {
    street: String,
    city: String,
}

/// Reads the address answer: `Ok(address)` or the text of the error result.
fn read_address(round: &RoundAnswers) -> Result<Address, String> {
    match answer(round, SHIPPING_ADDRESS_KEY) {
        Answer::Accepted(Some(content)) => {
            let street = content.get("street").and_then(Value::as_str);
            let city = content.get("city").and_then(Value::as_str);
            match (street, city) {
                (Some(street), Some(city)) => Ok(Address {
                    street: street.to_owned(),
                    city: city.to_owned(),
                }),
                _ => Err("Shipment not booked: the address needs a street and a city.".to_owned()),
            }
        }
        Answer::Accepted(None) => {
            Err("Shipment not booked: the address needs a street and a city.".to_owned())
        }
        Answer::Declined => Err("Shipment not booked: the address was declined.".to_owned()),
        Answer::Cancelled => Err("Shipment not booked: the address was cancelled.".to_owned()),
    }
}

fn error_result(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

fn booked(text: &str, structured: Value) -> CallToolResult {
    let mut result = CallToolResult::structured(structured);
    result.content = vec![ContentBlock::text(text)];
    result
}

fn book_shipment(_: &str, answers: &[RoundAnswers]) -> Result<Step<CallToolResult>, ErrorData> {
    let Some(first) = answers.first() else {
        return Ok(Step::Ask(Round::one(
            SHIPPING_ADDRESS_KEY,
            address_params()?,
        )));
    };
    Ok(Step::Done(match read_address(first) {
        Ok(address) => booked(
            "Shipment booked.",
            json!({"status": "booked", "city": address.city}),
        ),
        Err(text) => error_result(text),
    }))
}

fn book_verified_shipment(
    operation_id: &str,
    answers: &[RoundAnswers],
) -> Result<Step<CallToolResult>, ErrorData> {
    let Some(first) = answers.first() else {
        return Ok(Step::Ask(Round::one(
            SHIPPING_ADDRESS_KEY,
            address_params()?,
        )));
    };
    let address = match read_address(first) {
        Ok(address) => address,
        Err(text) => return Ok(Step::Done(error_result(text))),
    };
    let Some(second) = answers.get(1) else {
        return Ok(Step::Ask(Round::one(
            VERIFICATION_KEY,
            verification_params(operation_id),
        )));
    };
    Ok(Step::Done(match answer(second, VERIFICATION_KEY) {
        Answer::Accepted(_) => booked(
            "Verified shipment booked.",
            json!({"status": "booked", "city": address.city, "verification_id": operation_id}),
        ),
        Answer::Declined => {
            error_result("Shipment not booked: the verification was declined.".into())
        }
        Answer::Cancelled => {
            error_result("Shipment not booked: the verification was cancelled.".into())
        }
    }))
}

fn book_gift_shipment(
    _: &str,
    answers: &[RoundAnswers],
) -> Result<Step<CallToolResult>, ErrorData> {
    let Some(first) = answers.first() else {
        return Ok(Step::Ask(Round {
            requests: vec![
                (SHIPPING_ADDRESS_KEY.to_owned(), address_params()?),
                (GIFT_MESSAGE_KEY.to_owned(), gift_params()?),
            ],
        }));
    };
    let address = match read_address(first) {
        Ok(address) => address,
        Err(text) => return Ok(Step::Done(error_result(text))),
    };
    Ok(Step::Done(match answer(first, GIFT_MESSAGE_KEY) {
        Answer::Accepted(Some(content)) => match content.get("message").and_then(Value::as_str) {
            Some(message) => booked(
                "Gift shipment booked.",
                json!({"status": "booked", "city": address.city, "gift_message": message}),
            ),
            None => error_result("Shipment not booked: the gift message needs a message.".into()),
        },
        Answer::Accepted(None) => {
            error_result("Shipment not booked: the gift message needs a message.".into())
        }
        Answer::Declined => {
            error_result("Shipment not booked: the gift message was declined.".into())
        }
        Answer::Cancelled => {
            error_result("Shipment not booked: the gift message was cancelled.".into())
        }
    }))
}

fn shipping_label(_: &str, answers: &[RoundAnswers]) -> Result<Step<GetPromptResult>, ErrorData> {
    let Some(first) = answers.first() else {
        return Ok(Step::Ask(Round::one(
            SHIPPING_ADDRESS_KEY,
            address_params()?,
        )));
    };
    let mut result = match read_address(first) {
        Ok(address) => {
            let mut result = GetPromptResult::new(vec![PromptMessage::new_text(
                Role::User,
                format!(
                    "Print a shipping label for {}, {}.",
                    address.street, address.city
                ),
            )]);
            result.description = Some("Shipping label".to_owned());
            result
        }
        Err(text) => {
            let mut result = GetPromptResult::new(vec![PromptMessage::new_text(
                Role::User,
                format!("No shipping label. {text}"),
            )]);
            result.description = Some("Shipping label not available".to_owned());
            result
        }
    };
    result.meta = None;
    Ok(Step::Done(result))
}

/// The price of a shipment of `weight_kg` in EUR: 4.00 plus 1.50 per kg, rounded to cents.
pub fn quote_price(weight_kg: f64) -> f64 {
    ((4.0 + 1.5 * weight_kg) * 100.0).round() / 100.0
}

fn quote_json(weight_kg: f64) -> Value {
    json!({"weight_kg": weight_kg, "price": quote_price(weight_kg), "currency": "EUR"})
}

fn weight(arguments: &JsonObject) -> Result<f64, ErrorData> {
    match arguments.get("weight_kg").and_then(Value::as_f64) {
        Some(weight) if weight.is_finite() && weight > 0.0 => Ok(weight),
        _ => Err(ErrorData::invalid_params(
            "weight_kg must be a positive number",
            None,
        )),
    }
}

fn weight_schema() -> Arc<JsonObject> {
    let schema = json!({
        "type": "object",
        "properties": {"weight_kg": {"type": "number", "exclusiveMinimum": 0, "description": "Weight of the parcel in kilograms."}},
        "required": ["weight_kg"],
    });
    Arc::new(match schema {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    })
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "book_shipment",
            "Books a shipment; asks for the delivery address (form, key shipping_address).",
            weight_schema(),
        ),
        Tool::new(
            "book_verified_shipment",
            "Books a verified shipment; asks for the address (form), then for a verification in the browser (url, key verification).",
            weight_schema(),
        ),
        Tool::new(
            "book_gift_shipment",
            "Books a gift shipment; asks for the address and a gift message (keys shipping_address and gift_message; one round in 2026-07-28).",
            weight_schema(),
        ),
        Tool::new(
            "quote",
            "Quotes the price of a shipment; never asks for input.",
            weight_schema(),
        ),
    ]
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
        Ok(ListResourcesResult::with_all_items(vec![resource]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri != QUOTE_RESOURCE_URI {
            return Err(ErrorData::resource_not_found(
                format!("unknown resource '{}'", request.uri),
                None,
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
            Ok(Step::Done(ReadResourceResult::new(vec![
                ResourceContents::text(text, QUOTE_RESOURCE_URI),
            ])))
        };
        Ok(match self.run(&context, operation, input, script).await? {
            Outcome::Done(result) => result.into(),
            Outcome::InputRequired(result) => result.into(),
        })
    }
}
