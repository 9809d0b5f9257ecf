//! Example MCP servers for demos, docs and tests (the `shipping` server and its fault modes),
//! and a deterministic local model provider for Codex.
//!
//! `m3-fixtures` depends on rmcp and m3-types at most; it knows nothing about stores,
//! the runtime or the kit.
//!
//! # The `shipping` server
//!
//! One rmcp server that serves both MCP eras and asks for input from all three kinds of
//! operation:
//!
//! | operation | asks | completes with |
//! |---|---|---|
//! | tool `book_shipment {weight_kg}` | `shipping_address` (form `{street, city}`, "Enter the delivery address.") | "Shipment booked." + `{status: "booked", city}`; `isError` on decline, cancel or a bad address |
//! | tool `book_verified_shipment {weight_kg}` | `shipping_address` (form), then `verification` (url `https://example.test/verify/<id>`) | "Verified shipment booked." + `{status, city, verification_id}` |
//! | tool `book_gift_shipment {weight_kg}` | `shipping_address` and `gift_message` (form `{message}`): one round with two keys in 2026-07-28, two `elicitation/create` one after another in legacy | "Gift shipment booked." + `{status, city, gift_message}` |
//! | tool `quote {weight_kg}` | never | "Quote: P EUR for W kg." + `{weight_kg, price, currency}` |
//! | prompt `shipping_label` | `shipping_address` (form) | one user message "Print a shipping label for STREET, CITY." |
//! | resource `shipping://quote/latest` | `confirmation` (form `{confirm: boolean}`) | JSON text of the latest quote, or `{"withheld": true}` |
//! | resource `shipping://rates` | never | JSON text of the rate table (`ttlMs` one hour, `cacheScope: public`) |
//!
//! In the 2026-07-28 era a round is an `InputRequiredResult` with keyed `inputRequests` and an
//! HMAC-sealed `requestState` bound to the operation (kind, name, canonical arguments) and the
//! round; a tampered or foreign state is rejected with JSON-RPC error `-32602`. In the legacy
//! era the server sends `elicitation/create` (one request at a time) while the call is in
//! flight. [`Era`] narrows what the server accepts; [`Fault`] makes `tools/call` misbehave.
//!
//! # Serving
//!
//! In-process, with any byte stream pair (the client uses the other ends):
//!
//! ```no_run
//! # async fn demo() -> Result<(), m3_fixtures::FixtureError> {
//! use m3_fixtures::{Era, ShippingOptions, serve_shipping};
//! let (client_side, server_side) = tokio::io::duplex(64 * 1024);
//! let (server_read, server_write) = tokio::io::split(server_side);
//! let server = tokio::spawn(serve_shipping(ShippingOptions::new(Era::Auto), server_read, server_write));
//! // ... connect an rmcp client to `client_side` ...
//! # drop(client_side); let _ = server.await;
//! # Ok(()) }
//! ```
//!
//! As a process: `m3 example-server shipping [--era auto|2026-07-28|legacy] [--fault MODE]`,
//! which calls [`serve_named_stdio`]. See `docs/fixtures.md` for the full description.
//!
//! # The example model provider
//!
//! [`provider::ExampleProvider`] is a deterministic local OpenAI Responses API on 127.0.0.1
//! for running real Codex offline: a [`provider::ProviderScript`] of steps (call an MCP tool
//! as a namespaced `function_call`, or answer with text), the step chosen by the number of
//! `function_call_output` items in the request, replies streamed as SSE with usage, every
//! request recorded, and requests carrying an `authorization` header refused with 401.
//!
//! ```no_run
//! # async fn demo() -> Result<(), m3_fixtures::FixtureError> {
//! use m3_fixtures::provider::{ExampleProvider, ProviderScript};
//! let script = ProviderScript::from_json(
//!     r#"{"steps": [{"call": "shipping:book_shipment", "arguments": {"weight_kg": 2}},
//!                   {"text": "Shipment booked."}]}"#,
//! )?;
//! let provider = ExampleProvider::start(script).await?;
//! let base_url = provider.base_url(); // "http://127.0.0.1:PORT/v1", for Codex's config.toml
//! # let _ = base_url;
//! # Ok(()) }
//! ```
//!
//! As a process: `m3 example-provider --script FILE [--port N] [--record FILE]`.
#![doc(test(attr(deny(warnings), allow(dead_code))))]
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![deny(unused_must_use)]

mod error;
mod flow;
mod options;
pub mod provider;
mod scripts;
mod serve;
mod serve_http;
mod shipping;
mod state;

pub use error::FixtureError;
pub use options::{
    CRASH_EXIT_CODE, Era, Fault, GARBAGE_LINE, OVERSIZED_TEXT_BYTES, ShippingOptions,
};
pub use scripts::{
    CONFIRMATION_KEY, GIFT_MESSAGE_KEY, LABEL_PROMPT, QUOTE_RESOURCE_URI, RATES_RESOURCE_URI,
    SHIPPING_ADDRESS_KEY, SHIPPING_ADDRESS_MESSAGE, VERIFICATION_KEY, VERIFICATION_URL_PREFIX,
    quote_price,
};
pub use serve::{SERVER_NAMES, ServeOutcome, serve_named_stdio, serve_shipping, serve_stdio};
pub use serve_http::{HTTP_PATH, HttpFixture, serve_named_http, serve_shipping_http};
pub use shipping::SHIPPING_SERVER_NAME;

/// This crate's README, compiled and run as a doctest so its example keeps working.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctest;
