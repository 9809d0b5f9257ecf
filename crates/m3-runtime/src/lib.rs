//! The m3-rs runtime: MCP client, harnesses, the managed-input coordinator and the execution worker.
//!
//! `m3-runtime` drives agent executions against real MCP servers and pauses them on
//! elicitation requests through an `m3-store` backend. It knows nothing about the
//! kit facade or the command line.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![deny(unused_must_use)]

pub mod mcp;
