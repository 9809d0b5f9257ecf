//! `pending_page`: the inbox's page of pending rounds (filters, search, sort, paging).

use std::time::Duration;

use m3_types::{ElicitationRequest, FormElicitationRequest, ManagedInputStatus};

use super::check::{ensure, expect_error};
use super::fixture::{
    ADDRESS, Step, address_round, address_schema, lease, pending, round_ref, start_time, submission,
};
use super::{CaseResult, Harness};
use crate::{CreateRound, PENDING_PAGE_MAX, PendingQuery, PendingSort};

/// One inbox round: `server`, tool `operation`, asking `message`, created `age_minutes`
/// before the start time, with a deadline `deadline_minutes` after it.
struct Sample {
    execution: &'static str,
    server: &'static str,
    operation: &'static str,
    message: &'static str,
    age_minutes: i64,
    deadline_minutes: Option<i64>,
}

const SAMPLES: [Sample; 4] = [
    Sample {
        execution: "exec-a",
        server: "shipping",
        operation: "book_shipment",
        message: "Enter the delivery address.",
        age_minutes: 30,
        deadline_minutes: Some(20),
    },
    Sample {
        execution: "exec-b",
        server: "billing",
        operation: "charge_card",
        message: "Confirm the AMOUNT to charge.",
        age_minutes: 5,
        deadline_minutes: None,
    },
    Sample {
        execution: "exec-c",
        server: "shipping",
        operation: "track_parcel",
        message: "Which parcel?",
        age_minutes: 90,
        deadline_minutes: Some(10),
    },
    Sample {
        execution: "exec-d",
        server: "archive",
        operation: "book_shipment",
        message: "Old address?",
        age_minutes: 1,
        deadline_minutes: None,
    },
];

/// Creates the samples' rounds (`round-1` of each sample's execution).
async fn create_samples(h: &Harness) -> Step<()> {
    for sample in &SAMPLES {
        let mut round = address_round(sample.execution, "round-1");
        round.server = sample.server.to_owned();
        round.operation_name = sample.operation.to_owned();
        round.created_at = start_time() - time::Duration::minutes(sample.age_minutes);
        round.deadline = sample
            .deadline_minutes
            .map(|m| start_time() + time::Duration::minutes(m));
        let request = FormElicitationRequest::new(ADDRESS, sample.message, address_schema());
        round
            .requests
            .insert(ADDRESS.to_owned(), ElicitationRequest::Form(request));
        h.store
            .create_round(CreateRound::new(round, "worker-a", Duration::from_secs(30)))
            .await?;
    }
    Ok(())
}

/// The executions of the page of `query`, in order, and the page's total.
async fn listed(h: &Harness, query: PendingQuery) -> Step<(Vec<String>, usize)> {
    let page = h.store.pending_page(&query).await?;
    let ids = page
        .rounds
        .iter()
        .map(|r| r.pending.execution_id.clone())
        .collect();
    Ok((ids, page.total))
}

fn expect_page(got: (Vec<String>, usize), ids: &[&str], total: usize, what: &str) -> CaseResult {
    ensure!(
        got.0 == ids && got.1 == total,
        "{what}: expected {ids:?} of {total}, got {:?} of {}",
        got.0,
        got.1
    );
    Ok(())
}

/// Only `pending` rounds are listed (of every execution), newest first by default; a
/// second store object lists the same page.
pub async fn pending_page_lists_only_pending_rounds(h: &Harness) -> CaseResult {
    create_samples(h).await?;
    pending(h).await?;
    h.store
        .submit_responses(&round_ref(), &lease(), submission("key-1"))
        .await?;
    let answered = h.store.get_round(&round_ref()).await?;
    ensure!(
        answered.is_some_and(|r| r.status == ManagedInputStatus::ResponseValidated),
        "the answered round must have left pending"
    );
    let newest = ["exec-d", "exec-b", "exec-a", "exec-c"];
    expect_page(listed(h, PendingQuery::new()).await?, &newest, 4, "default")?;
    let peer = h.peer.pending_page(&PendingQuery::new()).await?;
    ensure!(peer.total == 4, "a second store must list the same rounds");
    Ok(())
}

/// Server, operation and age filters, and the ASCII case-insensitive text search over
/// server, operation name and request messages, each with the matching total.
pub async fn pending_page_filters_and_searches(h: &Harness) -> CaseResult {
    create_samples(h).await?;
    let q = PendingQuery::new().sort(PendingSort::Oldest);
    let by_server = listed(h, q.clone().server("shipping")).await?;
    expect_page(by_server, &["exec-c", "exec-a"], 2, "server")?;
    let by_operation = listed(h, q.clone().operation("book_shipment")).await?;
    expect_page(by_operation, &["exec-a", "exec-d"], 2, "operation")?;
    let older = q
        .clone()
        .created_before(start_time() - time::Duration::minutes(10));
    expect_page(listed(h, older).await?, &["exec-c", "exec-a"], 2, "age")?;
    let both = q.clone().server("shipping").operation("book_shipment");
    expect_page(
        listed(h, both).await?,
        &["exec-a"],
        1,
        "server and operation",
    )?;
    expect_page(
        listed(h, q.clone().text("amount")).await?,
        &["exec-b"],
        1,
        "message",
    )?;
    expect_page(
        listed(h, q.clone().text("ARCH")).await?,
        &["exec-d"],
        1,
        "server text",
    )?;
    let op_text = listed(h, q.clone().text("Book_")).await?;
    expect_page(op_text, &["exec-a", "exec-d"], 2, "operation text")?;
    expect_page(listed(h, q.clone().text("%")).await?, &[], 0, "a literal %")?;
    expect_page(listed(h, q.server("nobody")).await?, &[], 0, "no match")
}

/// The four orders, and pages that skip `offset` and keep `limit` with the same total.
pub async fn pending_page_sorts_and_pages(h: &Harness) -> CaseResult {
    create_samples(h).await?;
    let q = PendingQuery::new();
    let oldest = ["exec-c", "exec-a", "exec-b", "exec-d"];
    expect_page(
        listed(h, q.clone().sort(PendingSort::Oldest)).await?,
        &oldest,
        4,
        "oldest",
    )?;
    let deadline = ["exec-c", "exec-a", "exec-b", "exec-d"];
    let by_deadline = listed(h, q.clone().sort(PendingSort::Deadline)).await?;
    expect_page(by_deadline, &deadline, 4, "deadline")?;
    let server = ["exec-d", "exec-b", "exec-c", "exec-a"];
    expect_page(
        listed(h, q.clone().sort(PendingSort::Server)).await?,
        &server,
        4,
        "server",
    )?;
    let second = q.clone().sort(PendingSort::Oldest).page(1, 2);
    expect_page(
        listed(h, second).await?,
        &["exec-a", "exec-b"],
        4,
        "offset 1 limit 2",
    )?;
    let beyond = q.clone().page(10, 2);
    expect_page(listed(h, beyond).await?, &[], 4, "offset past the end")?;
    for limit in [0, PENDING_PAGE_MAX + 1] {
        let refused = h.store.pending_page(&q.clone().page(0, limit)).await;
        expect_error(refused, "invalid_argument", None)?;
    }
    Ok(())
}
