//! The m3-rs facade: `AsyncMcpTestKit`, `McpTestKit`, agents and execution handles.
//!
//! `m3-kit` is what applications import. It wires stores and the runtime together
//! and knows nothing about the command line.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![deny(unused_must_use)]
