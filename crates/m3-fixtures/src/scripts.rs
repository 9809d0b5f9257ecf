//! The operations of the shipping server as scripts: what each one asks, round by round, and
//! what it answers once the rounds are done. Pure functions of the answers so far.

use std::sync::Arc;

use rmcp::{
    ErrorData,
    model::{
        CallToolResult, ContentBlock, ElicitRequestParams, ElicitationSchema, GetPromptResult,
        JsonObject, PromptMessage, Role, Tool,
    },
};
use serde_json::{Value, json};

use crate::flow::{Answer, Round, RoundAnswers, Step, answer};

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
/// URI of the rate table: a resource that asks nothing and may be cached for an hour
/// by anyone (`ttlMs`, `cacheScope: public`).
pub const RATES_RESOURCE_URI: &str = "shipping://rates";
/// Name of the prompt that asks for the address.
pub const LABEL_PROMPT: &str = "shipping_label";

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
    let mut address = schema(
        ElicitationSchema::builder()
            .required_string("street")
            .required_string("city")
            .build(),
    )?;
    // The builder keeps properties by name; an address is asked street first, as people
    // write it (and as a form that is not in alphabetical order, which m3 must keep).
    address.property_order = Some(vec!["street".to_owned(), "city".to_owned()]);
    Ok(form(SHIPPING_ADDRESS_MESSAGE, address))
}

pub(crate) fn address_round() -> Round {
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

pub(crate) fn confirmation_params() -> Result<ElicitRequestParams, ErrorData> {
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

pub(crate) fn booked(text: &str, structured: Value) -> CallToolResult {
    let mut result = CallToolResult::structured(structured);
    result.content = vec![ContentBlock::text(text)];
    result
}

pub(crate) fn book_shipment(
    _: &str,
    answers: &[RoundAnswers],
) -> Result<Step<CallToolResult>, ErrorData> {
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

pub(crate) fn book_verified_shipment(
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

pub(crate) fn book_gift_shipment(
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

pub(crate) fn shipping_label(
    _: &str,
    answers: &[RoundAnswers],
) -> Result<Step<GetPromptResult>, ErrorData> {
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

/// The rate table `shipping://rates` serves: the formula [`quote_price`] applies.
pub(crate) fn rates_json() -> Value {
    json!({"base": 4.0, "per_kg": 1.5, "currency": "EUR"})
}

pub(crate) fn quote_json(weight_kg: f64) -> Value {
    json!({"weight_kg": weight_kg, "price": quote_price(weight_kg), "currency": "EUR"})
}

pub(crate) fn weight(arguments: &JsonObject) -> Result<f64, ErrorData> {
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

pub(crate) fn tools() -> Vec<Tool> {
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
