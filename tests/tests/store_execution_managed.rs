//! Execution store: lazy resolution of the managed-input store on the same
//! file, and recovery failing unresolved rounds.

mod store_execution_support;

use std::collections::BTreeMap;
use std::sync::Arc;

use m3_store::sqlite::{EXECUTION_EVENTS_TABLE, EXECUTION_SCHEMA_TABLE, EXECUTIONS_TABLE};
use m3_store::{CreateRound, ExecutionStore, RoundRef, TerminalizeExpired};
use m3_types::{
    ElicitationRequest, ErrorCode, ErrorInfo, ExecutionOutcome, FormElicitationRequest,
    ManagedInputStatus, OperationKind, PendingElicitationRound,
};
use serde_json::json;
use store_execution_support::*;

const MANAGED_TABLES: [&str; 3] = [
    "m3_managed_input_diagnostics",
    "m3_managed_input_rounds",
    "m3_managed_input_schema",
];

fn has_managed_tables(names: &[String]) -> bool {
    MANAGED_TABLES.iter().any(|t| names.iter().any(|n| n == t))
}

fn pending(execution_id: &str, round_id: &str) -> TestResult<PendingElicitationRound> {
    let schema = json!({
        "type": "object",
        "properties": {"confirm": {"type": "boolean"}},
        "required": ["confirm"]
    });
    let serde_json::Value::Object(schema) = schema else {
        return Err("schema is an object".into());
    };
    let request =
        ElicitationRequest::Form(FormElicitationRequest::new("confirm", "Ship it?", schema));
    Ok(PendingElicitationRound::new(
        round_id,
        execution_id,
        "op-1",
        "shipping",
        OperationKind::Tool,
        "ship",
        BTreeMap::from([("confirm".to_owned(), request)]),
        START,
    )?)
}

#[tokio::test(flavor = "multi_thread")]
async fn managed_tables_appear_only_after_first_managed_use() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    let names = table_names(&store).await?;
    for table in [
        EXECUTIONS_TABLE,
        EXECUTION_EVENTS_TABLE,
        EXECUTION_SCHEMA_TABLE,
    ] {
        assert!(
            names.iter().any(|n| n == table),
            "{table} missing: {names:?}"
        );
    }
    assert!(!has_managed_tables(&names), "after open: {names:?}");

    let record = create_managed(&store).await?;
    assert!(
        !has_managed_tables(&table_names(&store).await?),
        "after a managed submission"
    );

    let managed = store.managed_input_store().await?;
    assert!(managed.list_rounds(&record.execution_id).await?.is_empty());
    let names = table_names(&store).await?;
    for table in MANAGED_TABLES {
        assert!(
            names.iter().any(|n| n == table),
            "{table} missing: {names:?}"
        );
    }

    // Resolution is cached: the same object every time.
    let again = store.managed_input_store().await?;
    assert!(Arc::ptr_eq(&managed, &again));
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn managed_store_shares_the_file_and_the_clock() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    let id = create_managed(&store).await?.execution_id;
    let managed = store.managed_input_store().await?;
    let created = managed
        .create_round(CreateRound::new(
            pending(&id, "round-1")?,
            "managed-runtime:x",
            TTL,
        ))
        .await?;
    assert_eq!(
        created.created_at, START,
        "the injected clock reaches the managed store"
    );

    // A second execution-store object on the same file reads the round.
    let other = fx.open().await?;
    let rounds = other.managed_input_store().await?.list_rounds(&id).await?;
    assert_eq!(rounds.len(), 1);
    assert_eq!(rounds[0].status, ManagedInputStatus::Pending);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn terminalize_fails_unresolved_rounds_in_the_same_transaction() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    let id = create_managed(&store).await?.execution_id;
    let other_id = create_managed(&store).await?.execution_id;
    let held = lease(&store, &id, "worker-a").await?;
    let managed = store.managed_input_store().await?;
    managed
        .create_round(CreateRound::new(
            pending(&id, "round-1")?,
            "managed-runtime:a",
            TTL * 10,
        ))
        .await?;
    managed
        .create_round(CreateRound::new(
            pending(&other_id, "round-1")?,
            "managed-runtime:b",
            TTL,
        ))
        .await?;

    fx.clock.advance_std(TTL);
    let error = ErrorInfo::new(
        ErrorCode::ManagedInputRecoveryUnavailable,
        "managed input recovery is unavailable",
    );
    let done = store
        .terminalize_expired(
            TerminalizeExpired::new(
                held.to_ref(),
                ExecutionOutcome::Failed,
                "worker lease expired",
            )
            .with_error(error),
        )
        .await?;
    assert_eq!(done.rounds_failed, 1);

    let round = managed
        .get_round(&RoundRef::new(&id, "round-1"))
        .await?
        .ok_or("round missing")?;
    assert_eq!(round.status, ManagedInputStatus::Failed);
    assert_eq!(round.failure_code.as_deref(), Some("recovery_unavailable"));
    assert_eq!(
        round.failure_message.as_deref(),
        Some("worker lease expired")
    );
    assert_eq!(round.failed_at, Some(START + TTL));

    // The other execution's round is untouched.
    let untouched = managed
        .get_round(&RoundRef::new(&other_id, "round-1"))
        .await?
        .ok_or("round missing")?;
    assert_eq!(untouched.status, ManagedInputStatus::Pending);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn terminalize_never_creates_the_managed_tables() -> TestResult {
    let fx = Fixture::new()?;
    let store = fx.open().await?;
    let id = create(&store).await?.execution_id;
    let held = lease(&store, &id, "worker-a").await?;
    fx.clock.advance_std(TTL);
    let done = store
        .terminalize_expired(TerminalizeExpired::new(
            held.to_ref(),
            ExecutionOutcome::Interrupted,
            "worker lease expired",
        ))
        .await?;
    assert_eq!(done.rounds_failed, 0);
    assert_eq!(done.record.outcome, Some(ExecutionOutcome::Interrupted));
    assert!(!has_managed_tables(&table_names(&store).await?));
    Ok(())
}
