//! [`AppState`]: what every handler reads (the kit, the options the builder
//! fixed). Handlers import this module, never the router.

use std::sync::Arc;

use m3_kit::AsyncMcpTestKit;
use tokio_util::sync::CancellationToken;

use crate::host::HostPolicy;

/// What every handler reads.
#[derive(Debug)]
pub(crate) struct AppState {
    pub(crate) hosts: HostPolicy,
    pub(crate) kit: AsyncMcpTestKit,
    pub(crate) token: Option<String>,
    /// The token that may read `/metrics` only, if any.
    pub(crate) metrics_token: Option<String>,
    pub(crate) body_limit: usize,
    pub(crate) base_path: String,
    pub(crate) shutdown: CancellationToken,
    /// How often an event stream re-reads the feed when the store's signal cannot wake it.
    pub(crate) event_poll: std::time::Duration,
    /// The SSO proxy whose user header is believed, if any.
    pub(crate) proxy: Option<crate::proxy::TrustedProxy>,
    /// Failed authentications per source address.
    pub(crate) failures: crate::throttle::FailureThrottle,
}

/// The shared state as handlers take it.
pub(crate) type Shared = Arc<AppState>;
