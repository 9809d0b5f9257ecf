//! Prometheus metrics of an m3 process: one registry per process ([`Metrics::global`]),
//! recorded where things happen and rendered in the text exposition format by
//! `prometheus-client` (never by hand).
//!
//! Three kinds of metric live here, each filled by a different part of the program
//! (`docs/operations.md` lists every name; `docs/decisions.md` says why):
//!
//! - **Store gauges** (`m3_rounds_pending`, `m3_executions_running`,
//!   `m3_executions_waiting`): set from the store right before each scrape
//!   ([`Metrics::set_store_gauges`]), so every process reading one store reports the same
//!   values.
//! - **Feed metrics** (`m3_round_wait_seconds`, `m3_round_delivery_seconds`,
//!   `m3_rounds_finished_total`, `m3_executions_finished_total`): derived from the store's
//!   change feed by the process that follows it for metrics (`m3 serve`); they describe
//!   every round of the store, whoever ran it, on the store's clock.
//! - **Process metrics** (lease renewal failures, recovery fail-closes, queue wake-ups,
//!   webhook deliveries, HTTP requests, executions this worker finished): recorded on the
//!   code path in the process where they happen.
//!
//! Recording is a few atomic operations, so it is always on; only serving `/metrics` is
//! opt-in. No label ever carries a response value, a token or a secret: labels are server
//! names, surfaces, statuses, error codes, routes and outcomes.

mod classic;

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::sync::atomic::AtomicU64;

use m3_types::{Error, Result};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

pub use classic::CLASSIC_CONTENT_TYPE;

/// Label pairs of one series.
type Labels = Vec<(&'static str, String)>;
/// A histogram family whose histograms share one bucket layout.
type Histograms = Family<Labels, Histogram, fn() -> Histogram>;

/// The content type of [`Metrics::render`]'s output (OpenMetrics text, which Prometheus
/// asks for).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Buckets for waits on people (seconds): 1 s to about 18 hours.
fn human_wait() -> Histogram {
    Histogram::new([
        1.0, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 14400.0, 65536.0,
    ])
}

/// Buckets for machine latencies (seconds): 1 ms to about 30 s.
fn machine_latency() -> Histogram {
    Histogram::new([
        0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    ])
}

/// Every metric of one process, registered once in one [`Registry`].
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    rounds_pending: Family<Labels, Gauge>,
    oldest_pending: Family<Labels, Gauge<f64, AtomicU64>>,
    executions_running: Gauge,
    executions_waiting: Gauge,
    round_wait: Histograms,
    round_delivery: Histograms,
    rounds_finished: Family<Labels, Counter>,
    executions_finished: Family<Labels, Counter>,
    worker_executions: Family<Labels, Counter>,
    recovery_fail_closes: Family<Labels, Counter>,
    lease_renewal_failures: Counter,
    queue_wakeups: Family<Labels, Counter>,
    webhook_deliveries: Family<Labels, Counter>,
    webhook_dead_letters: Counter,
    http_requests: Family<Labels, Counter>,
    http_duration: Histograms,
}

static GLOBAL: OnceLock<Metrics> = OnceLock::new();

/// The pending rounds of one MCP server, as a scrape reads them from the store.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct PendingServer {
    /// How many rounds wait.
    pub count: i64,
    /// How long the oldest has waited, in seconds.
    pub oldest_seconds: f64,
}

impl PendingServer {
    /// Adds a round that has waited `seconds`.
    pub fn add(&mut self, seconds: f64) {
        self.count += 1;
        self.oldest_seconds = self.oldest_seconds.max(seconds);
    }
}

impl Metrics {
    /// The process's metrics, created at first use.
    ///
    /// ```
    /// let metrics = m3_runtime::metrics::Metrics::global();
    /// metrics.record_lease_renewal_failure();
    /// let text = metrics.render()?;
    /// assert!(text.contains("m3_lease_renewal_failures_total"));
    /// # Ok::<(), m3_types::Error>(())
    /// ```
    pub fn global() -> &'static Metrics {
        GLOBAL.get_or_init(Metrics::new)
    }

    /// A fresh registry with every metric at zero (tests; programs use [`Metrics::global`]).
    pub fn new() -> Self {
        let mut metrics = Self {
            rounds_pending: Family::default(),
            oldest_pending: Family::default(),
            executions_running: Gauge::default(),
            executions_waiting: Gauge::default(),
            round_wait: Family::new_with_constructor(human_wait),
            round_delivery: Family::new_with_constructor(machine_latency),
            rounds_finished: Family::default(),
            executions_finished: Family::default(),
            worker_executions: Family::default(),
            recovery_fail_closes: Family::default(),
            lease_renewal_failures: Counter::default(),
            queue_wakeups: Family::default(),
            webhook_deliveries: Family::default(),
            webhook_dead_letters: Counter::default(),
            http_requests: Family::default(),
            http_duration: Family::new_with_constructor(machine_latency),
            registry: Registry::default(),
        };
        // Registering clones each family's handle into the registry, so it is filled
        // beside the struct and put in afterwards.
        let mut registry = Registry::default();
        metrics.register_all(&mut registry);
        metrics.registry = registry;
        metrics.initialize_known_labels();
        metrics
    }

    /// Creates the series whose label values are known in advance at zero, so a rate or an
    /// alert sees them before the first event (Prometheus's advice on missing series).
    fn initialize_known_labels(&self) {
        for outcome in ["failed", "interrupted"] {
            let _ = self
                .recovery_fail_closes
                .get_or_create(&vec![("outcome", outcome.to_owned())]);
        }
        for cause in ["signal", "poll"] {
            let _ = self
                .queue_wakeups
                .get_or_create(&vec![("cause", cause.to_owned())]);
        }
        for result in ["delivered", "failed", "dead_lettered", "gone"] {
            let _ = self
                .webhook_deliveries
                .get_or_create(&vec![("result", result.to_owned())]);
        }
    }

    /// Registers every metric under its `m3_` name (counters get `_total` from the encoder).
    fn register_all(&self, r: &mut Registry) {
        r.register(
            "m3_rounds_pending",
            "Rounds waiting for an answer now, by MCP server (read from the store at scrape time)",
            self.rounds_pending.clone(),
        );
        r.register(
            "m3_rounds_oldest_pending_seconds",
            "Age of the oldest round waiting for an answer now, by MCP server (read from the store at scrape time)",
            self.oldest_pending.clone(),
        );
        r.register(
            "m3_executions_running",
            "Executions in the store that are starting, idle or running a turn (at scrape time)",
            self.executions_running.clone(),
        );
        r.register(
            "m3_executions_waiting",
            "Executions in the store paused on a managed round (at scrape time)",
            self.executions_waiting.clone(),
        );
        r.register(
            "m3_round_wait_seconds",
            "Time from a round's round.pending to its round.answered record, by server and answering surface",
            self.round_wait.clone(),
        );
        r.register(
            "m3_round_delivery_seconds",
            "Time from a round's round.answered to its round.delivered record, by server",
            self.round_delivery.clone(),
        );
        r.register(
            "m3_rounds_finished",
            "Rounds that reached a final status (delivered, resolved, failed), by status and failure code",
            self.rounds_finished.clone(),
        );
        r.register(
            "m3_executions_finished",
            "Executions of the store that finished, by outcome (from the change feed)",
            self.executions_finished.clone(),
        );
        r.register(
            "m3_worker_executions_finished",
            "Executions this worker process ran to the end, by outcome (or error code)",
            self.worker_executions.clone(),
        );
        r.register(
            "m3_recovery_fail_closes",
            "Executions whose worker lease expired and that recovery terminalized, by outcome",
            self.recovery_fail_closes.clone(),
        );
        r.register(
            "m3_lease_renewal_failures",
            "Lease renewals (execution or round) that failed, transient or final",
            self.lease_renewal_failures.clone(),
        );
        r.register(
            "m3_queue_wakeups",
            "Idle claim-loop wake-ups of a worker, by cause (signal: the store's change signal; poll: the fallback poll)",
            self.queue_wakeups.clone(),
        );
        r.register(
            "m3_webhook_deliveries",
            "Webhook delivery attempts, by result (delivered, failed, dead_lettered, gone)",
            self.webhook_deliveries.clone(),
        );
        r.register(
            "m3_webhook_dead_letters",
            "Change records a subscription gave up delivering (dead letters)",
            self.webhook_dead_letters.clone(),
        );
        r.register(
            "m3_http_requests",
            "HTTP requests served by m3 serve, by route, method and status",
            self.http_requests.clone(),
        );
        r.register(
            "m3_http_request_duration_seconds",
            "Latency of HTTP requests served by m3 serve, by route and method",
            self.http_duration.clone(),
        );
    }

    /// The exposition of every metric (OpenMetrics text, [`CONTENT_TYPE`]).
    ///
    /// # Errors
    /// `protocol_error` if the encoder fails (it writes to a string, so it does not).
    pub fn render(&self) -> Result<String> {
        let mut text = String::new();
        encode(&mut text, &self.registry)
            .map_err(|_| Error::protocol("cannot encode the metrics exposition"))?;
        Ok(text)
    }

    /// The exposition in the format a scraper's `Accept` header asks for: OpenMetrics
    /// ([`CONTENT_TYPE`]) when it names `application/openmetrics-text` (Prometheus does),
    /// else the classic text format ([`CLASSIC_CONTENT_TYPE`]: `curl`,
    /// `promtool check metrics`). Returns the content type and the body.
    ///
    /// # Errors
    /// As [`Metrics::render`].
    pub fn render_for(&self, accept: Option<&str>) -> Result<(&'static str, String)> {
        let text = self.render()?;
        if accept.is_some_and(|accept| accept.contains("application/openmetrics-text")) {
            Ok((CONTENT_TYPE, text))
        } else {
            Ok((CLASSIC_CONTENT_TYPE, classic::to_classic(&text)))
        }
    }

    /// Sets the store gauges from one read of the store: pending rounds by server and the
    /// age of the oldest (servers with none pending disappear), and the running and waiting
    /// execution counts.
    pub fn set_store_gauges(
        &self,
        pending: &BTreeMap<String, PendingServer>,
        running: i64,
        waiting: i64,
    ) {
        self.rounds_pending.clear();
        self.oldest_pending.clear();
        for (server, rounds) in pending {
            let labels = vec![("server", server.clone())];
            self.rounds_pending.get_or_create(&labels).set(rounds.count);
            self.oldest_pending
                .get_or_create(&labels)
                .set(rounds.oldest_seconds);
        }
        self.executions_running.set(running);
        self.executions_waiting.set(waiting);
    }

    /// A round of `server` answered through `surface` after `seconds` pending.
    pub fn observe_round_wait(&self, server: &str, surface: &str, seconds: f64) {
        let labels = vec![
            ("server", server.to_owned()),
            ("surface", surface.to_owned()),
        ];
        self.round_wait.get_or_create(&labels).observe(seconds);
    }

    /// A round of `server` delivered `seconds` after its answer.
    pub fn observe_round_delivery(&self, server: &str, seconds: f64) {
        let labels = vec![("server", server.to_owned())];
        self.round_delivery.get_or_create(&labels).observe(seconds);
    }

    /// A round reached final `status` (`failure_code` empty unless it failed).
    pub fn count_round_finished(&self, status: &str, failure_code: &str) {
        let labels = vec![
            ("status", status.to_owned()),
            ("failure_code", failure_code.to_owned()),
        ];
        self.rounds_finished.get_or_create(&labels).inc();
    }

    /// An execution of the store finished with `outcome` (seen on the change feed).
    pub fn count_execution_finished(&self, outcome: &str) {
        let labels = vec![("outcome", outcome.to_owned())];
        self.executions_finished.get_or_create(&labels).inc();
    }

    /// An execution this worker ran ended with `outcome` (an outcome, or an error code).
    pub fn count_worker_execution(&self, outcome: &str) {
        let labels = vec![("outcome", outcome.to_owned())];
        self.worker_executions.get_or_create(&labels).inc();
    }

    /// Recovery terminalized an execution whose lease expired, with `outcome`.
    pub fn count_recovery_fail_close(&self, outcome: &str) {
        let labels = vec![("outcome", outcome.to_owned())];
        self.recovery_fail_closes.get_or_create(&labels).inc();
    }

    /// A lease renewal failed.
    pub fn record_lease_renewal_failure(&self) {
        self.lease_renewal_failures.inc();
    }

    /// An idle claim loop woke up because of `cause` (`signal` or `poll`).
    pub fn count_queue_wakeup(&self, cause: &'static str) {
        self.queue_wakeups
            .get_or_create(&vec![("cause", cause.to_owned())])
            .inc();
    }

    /// A webhook delivery attempt ended with `result`; `dead_lettered` also counts a dead
    /// letter.
    pub fn count_webhook_delivery(&self, result: &'static str) {
        self.webhook_deliveries
            .get_or_create(&vec![("result", result.to_owned())])
            .inc();
        if result == "dead_lettered" {
            self.webhook_dead_letters.inc();
        }
    }

    /// An HTTP request to `route` (the route template, never the raw path) answered `status`
    /// after `seconds`.
    pub fn observe_http_request(&self, route: &str, method: &str, status: u16, seconds: f64) {
        let counted = vec![
            ("route", route.to_owned()),
            ("method", method.to_owned()),
            ("status", status.to_string()),
        ];
        self.http_requests.get_or_create(&counted).inc();
        let timed = vec![("route", route.to_owned()), ("method", method.to_owned())];
        self.http_duration.get_or_create(&timed).observe(seconds);
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_exposed_with_its_conventional_name() -> Result<()> {
        let metrics = Metrics::new();
        let mut shop = PendingServer::default();
        shop.add(5.0);
        shop.add(90.0);
        metrics.set_store_gauges(&BTreeMap::from([("shop".to_owned(), shop)]), 1, 3);
        metrics.observe_round_wait("shop", "cli", 2.0);
        metrics.observe_round_delivery("shop", 0.02);
        metrics.count_round_finished("delivered", "");
        metrics.count_webhook_delivery("dead_lettered");
        metrics.observe_http_request("/api/v1/rounds", "GET", 200, 0.003);
        let text = metrics.render()?;
        for expected in [
            "m3_rounds_pending{server=\"shop\"} 2",
            "m3_executions_waiting 3",
            "m3_rounds_oldest_pending_seconds{server=\"shop\"} 90.0",
            "m3_round_wait_seconds_bucket{le=\"5.0\",server=\"shop\",surface=\"cli\"} 1",
            "m3_round_delivery_seconds_count{server=\"shop\"} 1",
            "m3_rounds_finished_total{status=\"delivered\",failure_code=\"\"} 1",
            "m3_webhook_dead_letters_total 1",
            "m3_http_requests_total{route=\"/api/v1/rounds\",method=\"GET\",status=\"200\"} 1",
            "# EOF",
        ] {
            assert!(text.contains(expected), "{expected} missing in\n{text}");
        }
        Ok(())
    }

    #[test]
    fn a_server_with_nothing_pending_disappears() -> Result<()> {
        let metrics = Metrics::new();
        let mut shop = PendingServer::default();
        shop.add(1.0);
        metrics.set_store_gauges(&BTreeMap::from([("shop".to_owned(), shop)]), 0, 0);
        metrics.set_store_gauges(&BTreeMap::new(), 0, 0);
        assert!(!metrics.render()?.contains("server=\"shop\""));
        Ok(())
    }
}
