//! `m3 webhooks ...` (the store's webhook subscriptions), `m3 notify` (deliver them until
//! SIGINT/SIGTERM) and `m3 links rotate-key` (invalidate every answer link).

use std::path::Path;
use std::sync::Arc;

use m3_kit::notify::Notifier;
use m3_kit::subscriptions::{
    NewSubscription, Subscription, SubscriptionEdit, SubscriptionStore, WebhookFormat,
    WebhookSecret,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::commands::changes::parse_kinds;
use crate::commands::inspect::open_existing_kit;
use crate::commands::serve::signal;
use crate::failure::Failure;
use crate::notify_args::{LinksCommand, NotifyCommandArgs, WebhooksCommand};
use crate::output::{Output, table};

async fn subscriptions(
    db: &Path,
) -> Result<(m3_kit::AsyncMcpTestKit, Arc<dyn SubscriptionStore>), Failure> {
    let kit = open_existing_kit(db, false).await?;
    let store = kit.store().subscription_store().await?;
    Ok((kit, store))
}

/// `m3 webhooks ...`.
pub(crate) async fn webhooks(
    out: Output,
    db: &Path,
    command: WebhooksCommand,
) -> Result<(), Failure> {
    let (kit, store) = subscriptions(db).await?;
    let outcome = dispatch(out, store.as_ref(), command).await;
    kit.close().await?;
    outcome
}

async fn dispatch(
    out: Output,
    store: &dyn SubscriptionStore,
    command: WebhooksCommand,
) -> Result<(), Failure> {
    match command {
        WebhooksCommand::Add {
            url,
            events,
            server,
            description,
            format,
            allow_loopback,
        } => {
            let secret = WebhookSecret::generate()?;
            let mut new = NewSubscription::new(url, secret.clone())
                .with_description(description)
                .with_format(format.parse::<WebhookFormat>()?)
                .allow_loopback(allow_loopback);
            if !events.is_empty() {
                new = new.with_events(parse_kinds(&events)?);
            }
            if let Some(server) = server {
                new = new.with_server(server);
            }
            let added = store.create_subscription(new).await?;
            show_secret(out, &added, &secret)
        }
        WebhooksCommand::List => list(out, &store.list_subscriptions().await?),
        WebhooksCommand::Show { id } => {
            let found = store.get_subscription(&id).await?;
            let subscription =
                found.ok_or_else(|| Failure::from(m3_kit::subscriptions::rules::missing(&id)))?;
            show(out, &subscription)
        }
        WebhooksCommand::Disable { id } => {
            let edit = SubscriptionEdit::Disable {
                reason: "disabled".into(),
            };
            say_state(out, &store.edit_subscription(&id, edit).await?)
        }
        WebhooksCommand::Enable { id } => say_state(
            out,
            &store
                .edit_subscription(&id, SubscriptionEdit::Enable)
                .await?,
        ),
        WebhooksCommand::Remove { id } => {
            if !store.remove_subscription(&id).await? {
                return Err(m3_kit::subscriptions::rules::missing(&id).into());
            }
            if out.is_json() {
                return out.document(&json!({"id": id, "removed": true}));
            }
            out.say(format!("removed {id}"));
            Ok(())
        }
        WebhooksCommand::RotateSecret { id, keep_previous } => {
            let secret = WebhookSecret::generate()?;
            let until = time::OffsetDateTime::now_utc() + keep_previous;
            let edit = SubscriptionEdit::RotateSecret {
                secret: secret.clone(),
                keep_previous_until: until,
            };
            let rotated = store.edit_subscription(&id, edit).await?;
            show_secret(out, &rotated, &secret)
        }
    }
}

fn show_secret(
    out: Output,
    subscription: &Subscription,
    secret: &WebhookSecret,
) -> Result<(), Failure> {
    if out.is_json() {
        return out.document(&json!({"subscription": subscription, "secret": secret.expose()}));
    }
    out.say(format!("{}\n{}", subscription.id, secret.expose()));
    out.say("the secret is shown this once: keep it where the receiver verifies signatures");
    Ok(())
}

fn list(out: Output, all: &[Subscription]) -> Result<(), Failure> {
    if out.is_json() {
        return out.document(&json!({"subscriptions": all}));
    }
    let rows: Vec<Vec<String>> = all
        .iter()
        .map(|s| {
            vec![
                s.id.clone(),
                state(s),
                s.format.to_string(),
                s.delivery.cursor.to_string(),
                s.dead_lettered.to_string(),
                s.url.clone(),
            ]
        })
        .collect();
    out.say(table(
        &["ID", "STATE", "FORMAT", "CURSOR", "DEAD", "URL"],
        &rows,
    ));
    Ok(())
}

fn show(out: Output, subscription: &Subscription) -> Result<(), Failure> {
    if out.is_json() {
        return out.document(subscription);
    }
    let progress = &subscription.delivery;
    let mut lines = vec![
        format!("id           {}", subscription.id),
        format!("url          {}", subscription.url),
        format!("state        {}", state(subscription)),
        format!(
            "events       {}",
            subscription
                .events
                .iter()
                .map(|k| k.as_str())
                .collect::<Vec<_>>()
                .join(",")
        ),
        format!(
            "cursor       {} ({} delivered)",
            progress.cursor, progress.delivered
        ),
    ];
    if progress.attempts > 0 {
        lines.push(format!(
            "retrying     {} failed attempts, last: {}",
            progress.attempts,
            progress.last_error.as_deref().unwrap_or("")
        ));
    }
    lines.push(format!("dead letters {}", subscription.dead_lettered));
    for letter in &subscription.dead_letters {
        let status = letter
            .last_status
            .map_or_else(|| "no answer".to_owned(), |s| s.to_string());
        lines.push(format!(
            "  cursor {} {} status {} after {} attempts: {}",
            letter.cursor, letter.kind, status, letter.attempts, letter.last_error
        ));
    }
    out.say(lines.join("\n"));
    Ok(())
}

fn state(subscription: &Subscription) -> String {
    match (&subscription.enabled, &subscription.disabled_reason) {
        (true, _) => "enabled".into(),
        (false, Some(reason)) => format!("disabled ({reason})"),
        (false, None) => "disabled".into(),
    }
}

fn say_state(out: Output, subscription: &Subscription) -> Result<(), Failure> {
    if out.is_json() {
        return out.document(subscription);
    }
    out.say(format!("{} {}", subscription.id, state(subscription)));
    Ok(())
}

/// `m3 notify`: delivers until SIGINT/SIGTERM, then releases its subscriptions (exit 0).
pub(crate) async fn notify(out: Output, db: &Path, args: NotifyCommandArgs) -> Result<(), Failure> {
    let kit = open_existing_kit(db, false).await?;
    let notifier = Notifier::new(Arc::clone(kit.store()), args.notifier.options()).await?;
    let stop = CancellationToken::new();
    let stopper = stop.clone();
    tokio::spawn(async move {
        signal().await;
        stopper.cancel();
    });
    let metrics = match args.metrics {
        Some(addr) => Some(crate::metrics_listener::start(out, addr, &kit, stop.clone()).await?),
        None => None,
    };
    out.say("delivering webhooks (SIGINT or SIGTERM stops)");
    notifier.run(stop.clone()).await?;
    stop.cancel();
    if let Some(metrics) = metrics {
        let _ = metrics.await;
    }
    kit.close().await?;
    Ok(())
}

/// `m3 links rotate-key`.
pub(crate) async fn links(out: Output, db: &Path, command: LinksCommand) -> Result<(), Failure> {
    let (kit, store) = subscriptions(db).await?;
    let LinksCommand::RotateKey = command;
    let key = store.rotate_link_key().await;
    kit.close().await?;
    let key = key?;
    if out.is_json() {
        return out.document(
            &json!({"rotated": true, "created_at": m3_types::timestamp::format(key.created_at)}),
        );
    }
    out.say("rotated the answer-link key: every link made before no longer works");
    Ok(())
}
