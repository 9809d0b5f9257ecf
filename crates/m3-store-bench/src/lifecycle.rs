//! The measured work, the same on every backend: one round's lifecycle through the
//! [`ManagedInputStore`] contract, sequentially and from N concurrent executions.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use m3_store::{CreateRound, LeaseRef, ManagedInputStore, ResponseSubmission, RoundRef};
use m3_types::{
    Clock, ElicitationRequest, ElicitationResponse, FormElicitationRequest, OperationKind,
    PendingElicitationRound, SystemClock,
};
use serde_json::{Map, Value, json};

/// The operations of one round, in order (the five writes and one read).
pub(crate) const OPERATIONS: [&str; 6] = [
    "create_round",
    "submit_responses",
    "list_rounds",
    "start_delivery",
    "mark_delivered",
    "resolve",
];

/// Latency samples per operation.
pub(crate) type Samples = [Vec<Duration>; 6];

fn schema() -> Map<String, Value> {
    match json!({"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                 "required": ["street", "city"]})
    {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn pending(execution_id: &str, round_id: &str) -> PendingElicitationRound {
    let request =
        FormElicitationRequest::new("shipping_address", "Enter the delivery address.", schema());
    let mut requests = BTreeMap::new();
    requests.insert(
        "shipping_address".to_owned(),
        ElicitationRequest::Form(request),
    );
    PendingElicitationRound {
        round_id: round_id.to_owned(),
        execution_id: execution_id.to_owned(),
        logical_operation_id: "tool-1".to_owned(),
        server: "shipping".to_owned(),
        operation_kind: OperationKind::Tool,
        operation_name: "book_shipment".to_owned(),
        request_state: Some("opaque".to_owned()),
        requests,
        created_at: SystemClock.now(),
        deadline: None,
    }
}

fn response() -> ResponseSubmission {
    let content = match json!({"street": "1 Main Street", "city": "Pune"}) {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    ResponseSubmission::single("shipping_address", ElicitationResponse::accept(content), "")
}

/// Runs one full lifecycle, recording each operation's latency into `samples`.
pub(crate) async fn lifecycle(
    store: &dyn ManagedInputStore,
    execution_id: &str,
    key: &str,
    samples: &mut Samples,
) -> m3_types::Result<()> {
    let round_id = "round-0";
    let mut timed = |index: usize, start: Instant| {
        if let Some(bucket) = samples.get_mut(index) {
            bucket.push(start.elapsed());
        }
    };
    let t = Instant::now();
    let record = store
        .create_round(
            CreateRound::new(
                pending(execution_id, round_id),
                "bench-worker",
                Duration::from_secs(30),
            )
            .with_round_index(0)
            .with_round_limit(10),
        )
        .await?;
    timed(0, t);
    let round = RoundRef::new(execution_id, round_id);
    let lease = LeaseRef::of(&record.lease);
    let mut submission = response();
    submission.idempotency_key = key.to_owned();
    let t = Instant::now();
    store.submit_responses(&round, &lease, submission).await?;
    timed(1, t);
    let t = Instant::now();
    store.list_rounds(execution_id).await?;
    timed(2, t);
    let t = Instant::now();
    store.start_delivery(&round, &lease).await?;
    timed(3, t);
    let t = Instant::now();
    store.mark_delivered(&round, &lease).await?;
    timed(4, t);
    let t = Instant::now();
    store.resolve(&round, &lease).await?;
    timed(5, t);
    Ok(())
}

/// The `p`th percentile of `sorted`.
pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64 - 1.0)).round() as usize;
    sorted
        .get(rank.min(sorted.len() - 1))
        .copied()
        .unwrap_or_default()
}

/// Runs `rounds` lifecycles one after another (after 20 unmeasured warm-up rounds) and
/// prints `<label> rounds=N seconds=S rounds_per_s=R` and the per-operation percentiles.
/// Returns the rate.
pub(crate) async fn sequential(
    store: &dyn ManagedInputStore,
    label: &str,
    rounds: usize,
) -> m3_types::Result<f64> {
    let mut warm = Samples::default();
    for i in 0..20 {
        lifecycle(store, &format!("warm-{i}"), &format!("w-{i}"), &mut warm).await?;
    }
    let mut samples = Samples::default();
    let start = Instant::now();
    for i in 0..rounds {
        lifecycle(store, &format!("exec-{i}"), &format!("k-{i}"), &mut samples).await?;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let rate = rounds as f64 / elapsed;
    println!("{label} rounds={rounds} seconds={elapsed:.3} rounds_per_s={rate:.1}");
    println!("  {:<18} {:>10} {:>10}", "operation", "p50 us", "p99 us");
    for (name, bucket) in OPERATIONS.iter().zip(samples.iter_mut()) {
        bucket.sort_unstable();
        println!(
            "  {:<18} {:>10.1} {:>10.1}",
            name,
            percentile(bucket, 50.0).as_secs_f64() * 1e6,
            percentile(bucket, 99.0).as_secs_f64() * 1e6
        );
    }
    Ok(rate)
}

/// Runs about `rounds` lifecycles from `executions` concurrent tasks (each its rounds in
/// order, as a worker would) and prints `<label> executions=E rounds=N ... rounds_per_s=R`
/// with the submit latency. Returns the rate.
pub(crate) async fn concurrent(
    store: Arc<dyn ManagedInputStore>,
    label: &str,
    executions: usize,
    rounds: usize,
) -> m3_types::Result<f64> {
    let per_execution = rounds.div_ceil(executions).max(1);
    // Unmeasured: one lifecycle per execution, so the pool's connections are open (as the
    // bare floor's are) before the clock starts.
    in_parallel(&store, executions, 1, "warm").await?;
    let start = Instant::now();
    let mut all = in_parallel(&store, executions, per_execution, "exec").await?;
    let elapsed = start.elapsed().as_secs_f64();
    let total = per_execution * executions;
    let rate = total as f64 / elapsed;
    let submit = &mut all[1];
    submit.sort_unstable();
    println!(
        "{label} executions={executions} rounds={total} seconds={elapsed:.3} rounds_per_s={rate:.1} submit_p50_us={:.1} submit_p99_us={:.1}",
        percentile(submit, 50.0).as_secs_f64() * 1e6,
        percentile(submit, 99.0).as_secs_f64() * 1e6,
    );
    Ok(rate)
}

/// Runs `per_execution` lifecycles in each of `executions` concurrent tasks (execution ids
/// `<prefix>-<task>-<i>`) and returns their latency samples.
async fn in_parallel(
    store: &Arc<dyn ManagedInputStore>,
    executions: usize,
    per_execution: usize,
    prefix: &'static str,
) -> m3_types::Result<Samples> {
    let mut tasks = tokio::task::JoinSet::new();
    for e in 0..executions {
        let store = Arc::clone(store);
        tasks.spawn(async move {
            let mut samples = Samples::default();
            for i in 0..per_execution {
                let execution = format!("{prefix}-{e}-{i}");
                let key = format!("k-{e}-{i}");
                lifecycle(store.as_ref(), &execution, &key, &mut samples).await?;
            }
            Ok::<_, m3_types::Error>(samples)
        });
    }
    let mut all = Samples::default();
    while let Some(joined) = tasks.join_next().await {
        let samples =
            joined.map_err(|e| m3_types::Error::storage(format!("bench task failed: {e}")))??;
        for (into, from) in all.iter_mut().zip(samples) {
            into.extend(from);
        }
    }
    Ok(all)
}

/// A bare-sqlx failure as a bench error.
pub(crate) fn sqlx_error(e: sqlx::Error) -> m3_types::Error {
    m3_types::Error::storage("bench floor query failed").with_source(e)
}
