//! Values, errors, validation, redaction and clocks of M3 managed elicitation input.
//!
//! `m3-types` is the bottom of the m3-rs workspace: every other crate and every
//! custom `ManagedInputStore` backend builds on it. It does no I/O and knows
//! nothing about tokio, SQLite or MCP transports.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![deny(unused_must_use)]
