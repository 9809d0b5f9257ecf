//! One delivery attempt: the body of a record in the subscription's format, signed, POSTed
//! to the receiver's checked address with a timeout and no redirects, and what came back.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use m3_store::subscriptions::{SigningSecrets, Subscription, WebhookFormat, rules};
use m3_store::{ExecutionStore, RoundRef};
use m3_types::{ChangeRecord, ChangeRecordKind, Error, Result};
use time::OffsetDateTime;
use url::Url;

use super::links;
use super::payload::{EventData, Question, standard_body};
use super::sign::signature_header;
use super::slack::slack_body;

/// How much of a failing receiver's body is kept in the failure text.
const BODY_EXCERPT_CHARS: usize = 200;

/// The most of a response body read (the rest is never read).
const MAX_BODY_BYTES: usize = 4_096;

/// What an attempt came to.
#[derive(Debug)]
pub(crate) enum Attempt {
    /// A 2xx.
    Delivered,
    /// `410 Gone`.
    Gone,
    /// Anything else: the status if there was an answer, and why.
    Failed { status: Option<u16>, error: String },
}

/// How long a receiver's resolved addresses (and the client pinned to them) are reused
/// before its host is resolved and checked again.
const CLIENT_REUSE: Duration = Duration::from_secs(60);

/// What every attempt of one notifier needs.
#[derive(Debug)]
pub(crate) struct Sender {
    pub(crate) store: std::sync::Arc<dyn ExecutionStore>,
    pub(crate) timeout: Duration,
    pub(crate) public_url: Option<Url>,
    pub(crate) link_ttl: Duration,
    /// A client per receiver URL, pinned to its checked addresses, with when it was built:
    /// connections are kept alive between deliveries.
    pub(crate) clients: Mutex<HashMap<(String, bool), (reqwest::Client, Instant)>>,
}

impl Sender {
    /// Delivers `record` to `subscription` once.
    pub(crate) async fn attempt(
        &self,
        subscription: &Subscription,
        secrets: &SigningSecrets,
        record: &ChangeRecord,
        now: OffsetDateTime,
    ) -> Attempt {
        let body = match self.body(subscription, record, now).await {
            Ok(body) => body,
            Err(error) => {
                return Attempt::Failed {
                    status: None,
                    error: format!("cannot build the event: {}", error.code()),
                };
            }
        };
        let id = subscription.webhook_id(record.cursor);
        let timestamp = now.unix_timestamp();
        let signature = signature_header(&secrets.at(now), &id, timestamp, &body);
        match self
            .post(subscription, &id, timestamp, &signature, body)
            .await
        {
            Ok(attempt) => attempt,
            Err(error) => Attempt::Failed {
                status: None,
                error,
            },
        }
    }

    /// The body of `record` in the subscription's format, with its round's question and
    /// answer link.
    async fn body(
        &self,
        subscription: &Subscription,
        record: &ChangeRecord,
        now: OffsetDateTime,
    ) -> Result<Vec<u8>> {
        let question = self.question(record).await?;
        let answer_url = match (&question, record.kind) {
            // A reminder carries the link too: it asks the same person the same question.
            (
                Some(question),
                ChangeRecordKind::RoundPending | ChangeRecordKind::RoundDeadlineApproaching,
            ) => {
                self.answer_url(record, question, &subscription.id, now)
                    .await?
            }
            _ => None,
        };
        match subscription.format {
            WebhookFormat::Slack => {
                let body = slack_body(record, question.as_ref(), answer_url.as_deref());
                serde_json::to_vec(&body).map_err(|e| Error::storage(e.to_string()))
            }
            _ => standard_body(EventData {
                record,
                question: question.as_ref(),
                answer_url: answer_url.as_deref(),
            }),
        }
    }

    /// The question of the round `record` is about (`None` for executions, or a round no
    /// longer readable).
    async fn question(&self, record: &ChangeRecord) -> Result<Option<Question>> {
        let Some(round_id) = &record.round_id else {
            return Ok(None);
        };
        let rounds = self.store.managed_input_store().await?;
        let round = RoundRef::new(record.execution_id.clone(), round_id.clone());
        Ok(rounds
            .get_round(&round)
            .await?
            .map(|stored| Question::of(&stored.pending)))
    }

    /// The answer link of a pending round: on the public URL, expiring at the round's
    /// deadline or after the link lifetime, whichever comes first.
    async fn answer_url(
        &self,
        record: &ChangeRecord,
        question: &Question,
        subscription_id: &str,
        now: OffsetDateTime,
    ) -> Result<Option<String>> {
        let (Some(base), Some(round_id)) = (&self.public_url, &record.round_id) else {
            return Ok(None);
        };
        let key = self.store.subscription_store().await?.link_key().await?;
        let fallback = now + self.link_ttl;
        let expires_at = question
            .deadline
            .map_or(fallback, |deadline| deadline.min(fallback));
        let round = RoundRef::new(record.execution_id.clone(), round_id.clone());
        let grant = links::LinkGrant::new(round, subscription_id);
        let token = links::mint(&key, &grant, expires_at);
        Ok(Some(format!(
            "{}/answer/{token}",
            base.as_str().trim_end_matches('/')
        )))
    }

    /// POSTs `body` to the subscription's URL; `Err` with the reason when no answer came.
    async fn post(
        &self,
        subscription: &Subscription,
        id: &str,
        timestamp: i64,
        signature: &str,
        body: Vec<u8>,
    ) -> std::result::Result<Attempt, String> {
        let url = rules::check_url(&subscription.url, subscription.allow_loopback)
            .map_err(|error| format!("the URL is refused ({})", reason_of(&error)))?;
        let client = self.client(&url, subscription.allow_loopback).await?;
        let response = client
            .post(url)
            .header("content-type", "application/json")
            .header("user-agent", concat!("m3-rs/", env!("CARGO_PKG_VERSION")))
            .header("webhook-id", id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(body)
            .send()
            .await
            .map_err(|e| describe(&e))?;
        let status = response.status();
        if status.is_success() {
            return Ok(Attempt::Delivered);
        }
        if status == reqwest::StatusCode::GONE {
            return Ok(Attempt::Gone);
        }
        let excerpt = excerpt(response).await;
        Ok(Attempt::Failed {
            status: Some(status.as_u16()),
            error: format!("HTTP {}{excerpt}", status.as_u16()),
        })
    }
}

impl Sender {
    /// The client for `url`: kept for [`CLIENT_REUSE`], then built again on a fresh
    /// resolution of its host.
    async fn client(
        &self,
        url: &Url,
        allow_loopback: bool,
    ) -> std::result::Result<reqwest::Client, String> {
        let key = (url.as_str().to_owned(), allow_loopback);
        if let Some((client, built)) = self.clients_lock().get(&key)
            && built.elapsed() < CLIENT_REUSE
        {
            return Ok(client.clone());
        }
        let addresses = resolve(url, allow_loopback).await?;
        let host = url.host_str().unwrap_or_default();
        // reqwest is built without a bundled crypto provider; rustls then uses the process
        // default, which we make ring (a no-op when one is set).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(self.timeout)
            .resolve_to_addrs(
                host.trim_start_matches('[').trim_end_matches(']'),
                &addresses,
            )
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        self.clients_lock()
            .insert(key, (client.clone(), Instant::now()));
        Ok(client)
    }

    fn clients_lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(String, bool), (reqwest::Client, Instant)>> {
        self.clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The receiver's addresses, each checked as the URL was (names can point anywhere).
async fn resolve(url: &Url, allow_loopback: bool) -> std::result::Result<Vec<SocketAddr>, String> {
    let host = url.host_str().unwrap_or_default();
    let port = url.port_or_known_default().unwrap_or(443);
    let addresses: Vec<SocketAddr> =
        tokio::net::lookup_host((host.trim_start_matches('[').trim_end_matches(']'), port))
            .await
            .map_err(|e| format!("cannot resolve the receiver's host: {e}"))?
            .collect();
    if addresses.is_empty() {
        return Err("the receiver's host has no address".into());
    }
    if !allow_loopback && addresses.iter().any(|a| rules::is_local_address(a.ip())) {
        return Err("the receiver's host resolves to a loopback or link-local address".into());
    }
    Ok(addresses)
}

/// The first bytes of a failing answer's body, as text, for the failure record.
async fn excerpt(mut response: reqwest::Response) -> String {
    let mut bytes = Vec::new();
    while bytes.len() < MAX_BODY_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            _ => break,
        }
    }
    let text: String = String::from_utf8_lossy(&bytes)
        .chars()
        .filter(|c| !c.is_control())
        .take(BODY_EXCERPT_CHARS)
        .collect();
    if text.is_empty() {
        String::new()
    } else {
        format!(": {text}")
    }
}

fn describe(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        "the receiver did not answer in time".into()
    } else if error.is_connect() {
        "cannot connect to the receiver".into()
    } else {
        "the request failed".into()
    }
}

fn reason_of(error: &Error) -> String {
    error
        .reason()
        .map_or_else(|| error.code().to_owned(), |r| r.as_str().to_owned())
}
