//! Durable storage for managed elicitation rounds and executions.
//!
//! `m3-store` holds the `ManagedInputStore` and `ExecutionStore` contracts, their
//! SQLite backends and the backend conformance suite. It knows nothing about MCP,
//! harnesses or workers.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![deny(unused_must_use)]
