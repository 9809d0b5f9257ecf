//! Example MCP servers for demos, docs and tests (the `shipping` server and its fault modes).
//!
//! `m3-fixtures` depends on rmcp and m3-types at most; it knows nothing about stores,
//! the runtime or the kit.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![deny(unused_must_use)]
