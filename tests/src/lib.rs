//! Shared helpers for the m3-rs end-to-end, cross-process and interop tests.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![deny(unused_must_use)]

pub mod browser_support;
pub mod codex_support;
pub mod disk_support;
pub mod http_support;
pub mod runtime_support;
pub mod store_support;
