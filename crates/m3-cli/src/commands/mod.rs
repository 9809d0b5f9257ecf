//! One module per `m3` command (or group of small commands).

pub(crate) mod demo;
pub(crate) mod example_provider;
pub(crate) mod example_server;
pub(crate) mod inspect;
pub(crate) mod mcp_relay;
pub(crate) mod respond;
pub(crate) mod run;
pub(crate) mod schema;
