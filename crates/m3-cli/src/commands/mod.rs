//! One module per `m3` command (or group of small commands).

pub(crate) mod changes;
pub(crate) mod demo;
pub(crate) mod doctor;
pub(crate) mod example_provider;
pub(crate) mod example_server;
pub(crate) mod inspect;
pub(crate) mod mcp_relay;
pub(crate) mod plans;
pub(crate) mod policies;
mod process;
pub(crate) mod respond;
mod respond_all;
pub(crate) mod run;
pub(crate) mod schema;
pub(crate) mod serve;
pub(crate) mod submit;
mod telemetry;
pub(crate) mod tokens;
pub(crate) mod webhooks;
pub(crate) mod worker;
pub(crate) mod workers;

pub(crate) use process::init_logging;
