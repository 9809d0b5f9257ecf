//! `m3 serve`: the HTTP API and the answer page over the `--db` store
//! (`m3-server`), until SIGINT or SIGTERM.

use std::path::Path;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::cli::ServeArgs;
use crate::commands::inspect::{open_existing_kit, open_kit};
use crate::failure::Failure;
use crate::output::Output;

/// Binds, prints the page's URL first (with `?token=` when a token is set),
/// serves, and exits 0 after a graceful stop on SIGINT / SIGTERM.
pub(crate) async fn run(out: Output, db: &Path, args: ServeArgs) -> Result<(), Failure> {
    let ServeArgs {
        bind,
        token,
        allowed_hosts,
        trust_proxy_header,
        trust_proxy_from,
        header_timeout,
        max_connections,
        shutdown_grace,
        metrics_token,
        create,
        notify,
    } = args;
    let token = token.filter(|t| !t.is_empty());
    m3_server::check_bind(bind, token.as_deref())?;
    let metrics_token = metrics_token.filter(|t| !t.is_empty());
    if let Some(metrics_token) = &metrics_token {
        m3_server::check_token(metrics_token)?;
    }
    let proxy = trust_proxy_header
        .map(|header| m3_server::TrustedProxy::new(&header, &trust_proxy_from))
        .transpose()?;
    // Serving answers and reads: an unknown path is refused unless --create asks for one.
    let kit = if create {
        open_kit(db, true).await?
    } else {
        open_existing_kit(db, true).await?
    };
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(|e| Failure::other("io_error", format!("cannot bind {bind}: {e}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| Failure::other("io_error", format!("cannot read the bound address: {e}")))?;
    let shutdown = CancellationToken::new();
    let mut builder = m3_server::ServerBuilder::new(kit.clone()).shutdown(shutdown.clone());
    if let Some(token) = &token {
        builder = builder.token(token.clone());
    }
    if let Some(metrics_token) = metrics_token {
        builder = builder.metrics_token(metrics_token);
    }
    for host in allowed_hosts {
        builder = builder.allowed_host(host);
    }
    if let Some(proxy) = proxy {
        builder = builder.trust_proxy(proxy);
    }
    let url = match &token {
        Some(token) => format!("http://{local}/?token={}", query_escape(token)),
        None => format!("http://{local}/"),
    };
    if out.is_json() {
        out.json_line(&serde_json::json!({"url": url, "bind": local.to_string()}))?;
    } else {
        out.say(&url);
    }
    let stop = shutdown.clone();
    tokio::spawn(async move {
        signal().await;
        stop.cancel();
    });
    let notifier =
        crate::notify_args::start_in_process(&notify, &kit, shutdown.child_token()).await?;
    // The round and execution metrics of /metrics come from the change feed.
    let feed_metrics = tokio::spawn(m3_kit::metrics::follow_feed(
        kit.clone(),
        shutdown.child_token(),
    ));
    let options = m3_server::ServeOptions::default()
        .header_read_timeout(Duration::from_secs_f64(header_timeout))
        .max_connections(max_connections)
        .shutdown_grace(Duration::from_secs_f64(shutdown_grace));
    m3_server::serve_with(
        listener,
        builder.build(),
        shutdown.cancelled_owned(),
        options,
    )
    .await?;
    if let Some(notifier) = notifier {
        let _ = notifier.await;
    }
    let _ = feed_metrics.await;
    kit.close().await?;
    Ok(())
}

fn query_escape(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// SIGINT or SIGTERM.
pub(crate) async fn signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let terminate = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut stream) => {
                    stream.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = interrupt => {}
            () = terminate => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}
