//! Who answered, through the kit: the builder's actor (else the process's user) answers
//! `respond_elicitation`, `respond_elicitation_as` names another, and the store, the round's
//! diagnostics and the change feed's `round.answered` record all say the same, on SQLite
//! and on PostgreSQL.

// Helpers outside #[test] fns fail the test on purpose (clippy.toml only relaxes
// these lints inside test functions).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use m3_kit::{
    Actor, ActorSurface, AsyncExecutionHandle, AsyncMcpTestKit, ChangeRecordKind, Cursor,
    SubmitOptions,
};
use m3_tests::runtime_support::{WAIT, address, call, completes, pending, shipping};
use m3_tests::store_support::TestDb;
use m3_types::HumanInput;

const SERVER: &str = env!("CARGO_BIN_EXE_m3-test-shipping-server");

async fn submit(kit: &AsyncMcpTestKit) -> AsyncExecutionHandle {
    let agent = kit.agents([call("book_shipment")]).unwrap().remove(0);
    let options = SubmitOptions::new()
        .server(shipping(SERVER, "modern"))
        .tools(["shipping:book_shipment"])
        .human_input(HumanInput::Managed);
    agent.submit("Book a shipment.", options).await.unwrap()
}

/// Answers the execution's round as `actor` (or the kit's actor) and checks every place
/// that records who answered.
async fn answer_and_check(kit: &AsyncMcpTestKit, actor: Option<Actor>, expected: &Actor) {
    let handle = submit(kit).await;
    let round = pending(&handle).await;
    let responses = address("shipping_address", "Pune");
    match actor {
        Some(actor) => handle
            .respond_elicitation_as(&round.round_id, responses, "k1", actor)
            .await
            .unwrap(),
        None => handle
            .respond_elicitation(&round.round_id, responses, "k1")
            .await
            .unwrap(),
    }
    completes(&handle, WAIT).await.unwrap();
    let details = handle.round(&round.round_id).await.unwrap();
    assert_eq!(details.diagnostics.answered_by.as_ref(), Some(expected));
    let feed = kit.read_changes(Cursor::START, 1_000).await.unwrap();
    let answered: Vec<_> = feed
        .records
        .iter()
        .filter(|r| r.round_id.as_deref() == Some(round.round_id.as_str()))
        .filter(|r| r.kind == ChangeRecordKind::RoundAnswered)
        .collect();
    assert_eq!(answered.len(), 1);
    assert_eq!(answered[0].actor.as_ref(), Some(expected));
}

async fn kit_actors_on(db: TestDb) {
    let dir = tempfile::tempdir().unwrap();
    let location = db.location(dir.path()).unwrap();
    let named = Actor::new("release-bot", ActorSurface::Kit)
        .unwrap()
        .with_display_name("Release bot")
        .unwrap();
    let kit = AsyncMcpTestKit::builder()
        .database(&location)
        .actor(named.clone())
        .build()
        .await
        .unwrap();
    assert_eq!(kit.actor(), &named);
    answer_and_check(&kit, None, &named).await;
    let other = Actor::new("grace", ActorSurface::Kit).unwrap();
    answer_and_check(&kit, Some(other.clone()), &other).await;
    kit.close().await.unwrap();

    let default_kit = AsyncMcpTestKit::builder()
        .database(&location)
        .build()
        .await
        .unwrap();
    let user = Actor::of_process_user(ActorSurface::Kit);
    assert_eq!(default_kit.actor(), &user);
    answer_and_check(&default_kit, None, &user).await;
    default_kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kit_records_its_actor_on_sqlite() {
    kit_actors_on(TestDb::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kit_records_its_actor_on_postgres() {
    kit_actors_on(TestDb::Postgres).await;
}
