//! End-to-end: policies for unattended rounds and deadline reminders, with the scripted
//! harness and the real `shipping` MCP server process (m3-fixtures), on SQLite and on
//! PostgreSQL. A `ManualClock` the store and the worker share moves time: nothing sleeps
//! through a delay.

// Helpers outside #[test] fns fail the test on purpose (clippy.toml only relaxes
// these lints inside test functions).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use m3_kit::policies::NewPolicy;
use m3_kit::{AsyncExecutionHandle, AsyncMcpTestKit, SubmitOptions};
use m3_store::{ExecutionStore, RoundRef, SqliteExecutionStore, SqliteStoreOptions};
use m3_store_postgres::{PgExecutionStore, PgStoreOptions};
use m3_tests::runtime_support::{WAIT, address, call, completes, pending, shipping};
use m3_tests::store_support::TestDb;
use m3_types::{
    ChangeRecordKind, Cursor, ElicitationResponse, ExecutionOutcome, HumanInput,
    ManagedInputStatus, ManualClock, PendingElicitationRound,
};
use serde_json::json;
use time::macros::datetime;

const SERVER: &str = env!("CARGO_BIN_EXE_m3-test-shipping-server");

/// A kit on a fresh store of `backend` on `clock` (and the temporary directory a SQLite
/// file lives in).
async fn kit_on(backend: TestDb, clock: &ManualClock) -> (AsyncMcpTestKit, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let clock: Arc<dyn m3_types::Clock> = Arc::new(clock.clone());
    let store: Arc<dyn ExecutionStore> = match backend {
        TestDb::Sqlite => Arc::new(
            SqliteExecutionStore::open_with(
                dir.path().join("m3.sqlite"),
                SqliteStoreOptions::new().clock(clock),
            )
            .await
            .unwrap(),
        ),
        TestDb::Postgres => {
            let url = backend.location(dir.path()).unwrap();
            let options = PgStoreOptions::from_url(&url).unwrap().clock(clock);
            Arc::new(PgExecutionStore::open_with(options).await.unwrap())
        }
    };
    let kit = AsyncMcpTestKit::builder()
        .shared_store(store)
        .build()
        .await
        .unwrap();
    (kit, dir)
}

/// Managed, a 100 s deadline per round, a day of lease: only the deadline, an answer or a
/// policy ends the wait.
fn managed() -> SubmitOptions {
    SubmitOptions::new()
        .server(shipping(SERVER, "modern"))
        .tools(["shipping:book_shipment"])
        .human_input(HumanInput::Managed)
        .input_deadline(Duration::from_secs(100))
        .lease(Duration::from_secs(86_400))
}

fn start() -> time::OffsetDateTime {
    datetime!(2026-12-01 12:00:00 UTC)
}

async fn submit(kit: &AsyncMcpTestKit) -> (AsyncExecutionHandle, PendingElicitationRound) {
    let agent = kit.agents([call("book_shipment")]).unwrap().remove(0);
    let handle = agent.submit("Book a shipment.", managed()).await.unwrap();
    let round = pending(&handle).await;
    (handle, round)
}

fn accept_home() -> ElicitationResponse {
    let content = json!({"street": "1 Main Street", "city": "Pune"});
    ElicitationResponse::accept(content.as_object().cloned().unwrap())
}

async fn status(kit: &AsyncMcpTestKit, round: &PendingElicitationRound) -> ManagedInputStatus {
    let rounds = kit.store().managed_input_store().await.unwrap();
    let reference = RoundRef::new(&round.execution_id, &round.round_id);
    rounds.get_round(&reference).await.unwrap().unwrap().status
}

async fn answered_by(kit: &AsyncMcpTestKit, round: &PendingElicitationRound) -> Option<String> {
    let rounds = kit.store().managed_input_store().await.unwrap();
    let reference = RoundRef::new(&round.execution_id, &round.round_id);
    rounds
        .answered_by(&reference)
        .await
        .unwrap()
        .map(|actor| format!("{}/{}", actor.principal, actor.surface))
}

/// Waits (real time, bounded) until the round leaves `pending`.
async fn answered(kit: &AsyncMcpTestKit, round: &PendingElicitationRound) {
    let until = tokio::time::Instant::now() + WAIT;
    while status(kit, round).await == ManagedInputStatus::Pending {
        assert!(
            tokio::time::Instant::now() < until,
            "the round stayed pending"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn a_policy_answers_once_it_is_due(backend: TestDb) {
    let clock = ManualClock::new(start());
    let (kit, _dir) = kit_on(backend, &clock).await;
    kit.add_policy(
        NewPolicy::new("accept-home", Duration::from_secs(60), accept_home())
            .server("shipping")
            .request_key("shipping_address"),
    )
    .await
    .unwrap();
    let (handle, round) = submit(&kit).await;
    // Not due yet: the worker's wait looks at the clock every second.
    clock.advance(time::Duration::seconds(59));
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(status(&kit, &round).await, ManagedInputStatus::Pending);
    clock.advance(time::Duration::seconds(2));
    let trace = completes(&handle, WAIT).await.unwrap();
    assert!(
        trace
            .final_text
            .as_deref()
            .unwrap_or("")
            .contains("Shipment booked."),
        "{trace:?}"
    );
    assert_eq!(
        answered_by(&kit, &round).await.as_deref(),
        Some("policy:accept-home/policy")
    );
    let rounds = kit.store().managed_input_store().await.unwrap();
    let stored = rounds.list_rounds(handle.execution_id()).await.unwrap();
    assert_eq!(
        stored[0].response_idempotency_key.as_deref(),
        Some(format!("policy:accept-home:{}", round.round_id).as_str())
    );
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_answers_once_it_is_due_on_sqlite() {
    a_policy_answers_once_it_is_due(TestDb::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_answers_once_it_is_due_on_postgres() {
    a_policy_answers_once_it_is_due(TestDb::Postgres).await;
}

async fn a_policy_and_a_person_race(backend: TestDb) {
    let clock = ManualClock::new(start());
    let (kit, _dir) = kit_on(backend, &clock).await;
    kit.add_policy(NewPolicy::new(
        "decline-late",
        Duration::from_secs(10),
        ElicitationResponse::decline(),
    ))
    .await
    .unwrap();
    // The race: the policy becomes due while a person answers.
    let (handle, round) = submit(&kit).await;
    clock.advance(time::Duration::seconds(11));
    let person = handle
        .respond_elicitation(
            &round.round_id,
            address("shipping_address", "Pune"),
            "person-1",
        )
        .await;
    answered(&kit, &round).await;
    let winner = answered_by(&kit, &round).await.unwrap();
    match person {
        Ok(()) => assert_eq!(winner, format!("{}/kit", kit.actor().principal)),
        Err(error) => {
            assert_eq!(error.code(), "managed_input_conflict", "{error}");
            assert_eq!(winner, "policy:decline-late/policy");
        }
    }
    handle.result(Some(WAIT)).await.unwrap();
    // No race: the policy answered first; the person's late answer is refused with the
    // documented code and the policy stays the actor.
    let (handle, round) = submit(&kit).await;
    clock.advance(time::Duration::seconds(11));
    answered(&kit, &round).await;
    let late = handle
        .respond_elicitation(
            &round.round_id,
            address("shipping_address", "Pune"),
            "person-2",
        )
        .await
        .unwrap_err();
    assert_eq!(late.code(), "managed_input_conflict", "{late}");
    assert_eq!(
        answered_by(&kit, &round).await.as_deref(),
        Some("policy:decline-late/policy")
    );
    handle.result(Some(WAIT)).await.unwrap();
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_and_a_person_race_on_sqlite() {
    a_policy_and_a_person_race(TestDb::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_and_a_person_race_on_postgres() {
    a_policy_and_a_person_race(TestDb::Postgres).await;
}

/// A policy due at the deadline never fires: the deadline fails the round.
async fn a_policy_never_fires_at_the_deadline(backend: TestDb) {
    let clock = ManualClock::new(start());
    let (kit, _dir) = kit_on(backend, &clock).await;
    kit.add_policy(NewPolicy::new(
        "too-late",
        Duration::from_secs(100),
        accept_home(),
    ))
    .await
    .unwrap();
    let (handle, round) = submit(&kit).await;
    clock.advance(time::Duration::seconds(101));
    let result = handle.result(Some(WAIT)).await.unwrap();
    assert_eq!(result.outcome(), Some(ExecutionOutcome::TimedOut));
    assert_eq!(status(&kit, &round).await, ManagedInputStatus::Failed);
    assert_eq!(answered_by(&kit, &round).await, None);
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_never_fires_at_the_deadline_on_sqlite() {
    a_policy_never_fires_at_the_deadline(TestDb::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_never_fires_at_the_deadline_on_postgres() {
    a_policy_never_fires_at_the_deadline(TestDb::Postgres).await;
}

/// Content that does not fit the round's schema is not an answer: the round keeps waiting,
/// and a person answers it.
async fn a_policy_that_does_not_fit_does_not_answer(backend: TestDb) {
    let clock = ManualClock::new(start());
    let (kit, _dir) = kit_on(backend, &clock).await;
    let content = json!({"city": "Pune"}); // the schema requires the street too
    kit.add_policy(NewPolicy::new(
        "half-address",
        Duration::from_secs(5),
        ElicitationResponse::accept(content.as_object().cloned().unwrap()),
    ))
    .await
    .unwrap();
    let (handle, round) = submit(&kit).await;
    clock.advance(time::Duration::seconds(6));
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(status(&kit, &round).await, ManagedInputStatus::Pending);
    handle
        .respond_elicitation(
            &round.round_id,
            address("shipping_address", "Pune"),
            "person",
        )
        .await
        .unwrap();
    completes(&handle, WAIT).await.unwrap();
    let expected = format!("{}/kit", kit.actor().principal);
    assert_eq!(answered_by(&kit, &round).await, Some(expected));
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_that_does_not_fit_does_not_answer_on_sqlite() {
    a_policy_that_does_not_fit_does_not_answer(TestDb::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_that_does_not_fit_does_not_answer_on_postgres() {
    a_policy_that_does_not_fit_does_not_answer(TestDb::Postgres).await;
}

/// The reminders of a round, as the feed holds them: (fraction, at).
async fn reminders(kit: &AsyncMcpTestKit) -> Vec<(f64, time::OffsetDateTime)> {
    let page = kit.read_changes(Cursor::START, 1_000).await.unwrap();
    page.records
        .iter()
        .filter(|record| record.kind == ChangeRecordKind::RoundDeadlineApproaching)
        .map(|record| (record.reminder.unwrap().fraction, record.at))
        .collect()
}

/// Waits (real time, bounded) until the feed holds `count` reminders.
async fn reminded(kit: &AsyncMcpTestKit, count: usize) -> Vec<(f64, time::OffsetDateTime)> {
    let until = tokio::time::Instant::now() + WAIT;
    loop {
        let found = reminders(kit).await;
        if found.len() >= count {
            return found;
        }
        assert!(tokio::time::Instant::now() < until, "reminders: {found:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Reminders at 50% and 90% of the deadline window, once each, in order, before the
/// deadline; with the fraction and the deadline, never an answer.
async fn reminders_come_at_the_fractions(backend: TestDb) {
    let clock = ManualClock::new(start());
    let (kit, _dir) = kit_on(backend, &clock).await;
    let (handle, round) = submit(&kit).await;
    let deadline = round.deadline.unwrap();
    clock.advance(time::Duration::seconds(49));
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(reminders(&kit).await.is_empty());
    clock.advance(time::Duration::seconds(2));
    assert_eq!(reminded(&kit, 1).await[0].0, 0.5);
    clock.advance(time::Duration::seconds(40));
    let found = reminded(&kit, 2).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(reminders(&kit).await, found, "a reminder came twice");
    assert_eq!(
        found
            .iter()
            .map(|(fraction, _)| *fraction)
            .collect::<Vec<_>>(),
        [0.5, 0.9]
    );
    assert!(found.iter().all(|(_, at)| *at < deadline));
    let page = kit.read_changes(Cursor::START, 1_000).await.unwrap();
    for record in page.records.iter().filter(|r| r.kind.is_round()) {
        let text = serde_json::to_string(record).unwrap();
        assert!(!text.contains("Pune"), "{text}");
        if record.kind == ChangeRecordKind::RoundDeadlineApproaching {
            assert_eq!(record.reminder.unwrap().deadline, deadline);
        }
    }
    handle
        .respond_elicitation(&round.round_id, address("shipping_address", "Pune"), "k")
        .await
        .unwrap();
    completes(&handle, WAIT).await.unwrap();
    assert_eq!(
        answered_by(&kit, &round).await.map(|a| a.ends_with("/kit")),
        Some(true)
    );
    assert_eq!(reminders(&kit).await.len(), 2);
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reminders_come_at_the_fractions_on_sqlite() {
    reminders_come_at_the_fractions(TestDb::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reminders_come_at_the_fractions_on_postgres() {
    reminders_come_at_the_fractions(TestDb::Postgres).await;
}
