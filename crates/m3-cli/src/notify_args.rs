//! The arguments of `m3 webhooks`, `m3 notify`, `m3 links` and `--notify` (their commands:
//! `commands/webhooks.rs`).

use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use m3_kit::notify::{Notifier, NotifierOptions};
use tokio_util::sync::CancellationToken;

use crate::failure::Failure;

/// `m3 webhooks`.
#[derive(Debug, Subcommand)]
pub(crate) enum WebhooksCommand {
    /// Add a subscription; prints its id and signing secret (shown this once).
    Add {
        /// Where deliveries are POSTed (http or https, no credentials in it).
        url: String,
        /// Only these record kinds (default: every kind); repeat or separate with commas.
        #[arg(long, value_name = "KIND", value_delimiter = ',')]
        events: Vec<String>,
        /// Only rounds of this MCP server.
        #[arg(long, value_name = "NAME")]
        server: Option<String>,
        /// What the subscription is for.
        #[arg(long, value_name = "TEXT", default_value = "")]
        description: String,
        /// `standard` (one signed JSON event) or `slack` (an incoming-webhook message).
        #[arg(long, default_value = "standard")]
        format: String,
        /// Allow a loopback or link-local receiver (one on this machine).
        #[arg(long)]
        allow_loopback: bool,
    },
    /// List the subscriptions.
    List,
    /// Show a subscription: its delivery progress, last failure and dead letters.
    Show {
        /// Subscription id.
        id: String,
    },
    /// Stop delivering to a subscription.
    Disable {
        /// Subscription id.
        id: String,
    },
    /// Deliver to a subscription again (from where it stopped).
    Enable {
        /// Subscription id.
        id: String,
    },
    /// Remove a subscription.
    Remove {
        /// Subscription id.
        id: String,
    },
    /// Give a subscription a new signing secret; prints it (shown this once).
    RotateSecret {
        /// Subscription id.
        id: String,
        /// Keep signing with the old secret too for this long, so receivers can switch.
        #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = humantime::parse_duration)]
        keep_previous: Duration,
    },
}

/// `m3 notify`'s options (also `--notify` on `m3 worker` and `m3 serve`).
#[derive(Debug, Clone, Args)]
pub(crate) struct NotifyArgs {
    /// `m3 serve`'s public base URL: deliveries of waiting rounds carry answer links on it.
    #[arg(long, value_name = "URL")]
    pub(crate) public_url: Option<url::Url>,
    /// How long one delivery may take, answer included.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    pub(crate) delivery_timeout: Duration,
    /// How long a failing delivery is retried before it is dead-lettered.
    #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = humantime::parse_duration)]
    pub(crate) retry_for: Duration,
    /// How long a subscription stays with this notifier without a renewal: after a crash,
    /// another notifier takes it over once this passed.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    pub(crate) lease: Duration,
}

/// `m3 notify`'s options: the notifier's, and its metrics listener.
#[derive(Debug, Args)]
pub(crate) struct NotifyCommandArgs {
    #[command(flatten)]
    pub(crate) notifier: NotifyArgs,
    /// Serve Prometheus metrics at `http://ADDR/metrics` (no credential: bind loopback or
    /// a private network; `127.0.0.1:0` picks a free port, printed as `metrics_listening`).
    #[arg(long, value_name = "ADDR")]
    pub(crate) metrics: Option<std::net::SocketAddr>,
}

impl NotifyArgs {
    /// The notifier's options.
    pub(crate) fn options(&self) -> NotifierOptions {
        let mut options = NotifierOptions::default();
        options.public_url = self.public_url.clone();
        options.timeout = self.delivery_timeout;
        options.retry_for = self.retry_for;
        options.lease = self.lease;
        options
    }
}

/// `--notify` of `m3 worker` and `m3 serve`: the same code as `m3 notify`.
#[derive(Debug, Clone, Args)]
pub(crate) struct InProcessNotify {
    /// Also deliver webhooks from this process (as `m3 notify` does).
    #[arg(long)]
    pub(crate) notify: bool,
    #[command(flatten)]
    pub(crate) options: NotifyArgs,
}

/// `m3 links`.
#[derive(Debug, Subcommand)]
pub(crate) enum LinksCommand {
    /// Replace the key that signs answer links: every link made before stops working.
    RotateKey,
}

/// Starts the notifier on `kit`'s store when `--notify` was given; it stops when `stop`
/// is cancelled (await the handle to let it release its subscriptions).
pub(crate) async fn start_in_process(
    args: &InProcessNotify,
    kit: &m3_kit::AsyncMcpTestKit,
    stop: CancellationToken,
) -> Result<Option<tokio::task::JoinHandle<()>>, Failure> {
    if !args.notify {
        return Ok(None);
    }
    let notifier = Notifier::new(Arc::clone(kit.store()), args.options.options()).await?;
    // `run` logs what fails and keeps going; it ends only when stopped.
    Ok(Some(tokio::spawn(async move {
        let _ = notifier.run(stop).await;
    })))
}
