//! Two OS processes race `submit_responses` on the same rounds of one database (a SQLite
//! file, a PostgreSQL schema): with the same key and payload both succeed and exactly one
//! write happens; with different payloads exactly one wins per round and the other
//! conflicts. No lock error escapes.

// The race bodies are shared by the SQLite and PostgreSQL tests: a broken invariant fails
// the test on purpose (clippy.toml only relaxes this lint inside test functions).
#![allow(clippy::panic)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use std::sync::Arc;

use m3_store::{CreateRound, ManagedInputStore, RoundRef};
use m3_tests::store_support::{TestDb, address_response, address_round};
use m3_types::{Clock, ManagedInputStatus, SystemClock};
use serde_json::Value;

const ROUNDS: usize = 40;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// The race's database and its store, with `ROUNDS` pending rounds of execution `race`.
struct Race {
    db: String,
    store: Arc<dyn ManagedInputStore>,
}

async fn prepare(
    backend: TestDb,
    dir: &std::path::Path,
) -> Result<Race, Box<dyn std::error::Error>> {
    let db = backend.location(dir)?;
    m3_store_postgres::register();
    let store = m3_store::open(&db).await?.managed_input_store().await?;
    let now = SystemClock.now();
    for i in 0..ROUNDS {
        let request = CreateRound::new(
            address_round("race", &format!("round-{i}"), now),
            "race-worker",
            Duration::from_secs(3600),
        )
        .with_round_index(u32::try_from(i)?)
        .with_round_limit(u32::try_from(ROUNDS)?)
        .with_lease_token("lease-race");
        store.create_round(request).await?;
    }
    Ok(Race { db, store })
}

fn spawn(
    db: &str,
    dir: &std::path::Path,
    key: &str,
    street: &str,
) -> Result<(Child, BufReader<std::process::ChildStdout>), Box<dyn std::error::Error>> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_store_race"))
        .arg(db)
        .arg(dir.join("go"))
        .arg(ROUNDS.to_string())
        .arg(key)
        .arg(street)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let mut stdout = BufReader::new(child.stdout.take().ok_or("stdout")?);
    let mut ready = String::new();
    stdout.read_line(&mut ready)?;
    assert!(ready.contains("ready"), "helper did not start: {ready:?}");
    Ok((child, stdout))
}

fn collect(
    mut child: Child,
    stdout: BufReader<std::process::ChildStdout>,
) -> Result<Vec<Value>, Box<dyn std::error::Error>> {
    let lines: Vec<Value> = stdout
        .lines()
        .map(|line| Ok::<_, Box<dyn std::error::Error>>(serde_json::from_str(&line?)?))
        .collect::<Result<_, _>>()?;
    let status = child.wait()?;
    assert!(status.success(), "helper failed: {status}");
    assert_eq!(lines.len(), ROUNDS, "one line per round");
    for line in &lines {
        let code = line["code"].as_str().unwrap_or_default();
        assert_ne!(code, "storage_error", "a storage error escaped: {line}");
        assert!(
            !line.to_string().contains("database is locked"),
            "a lock error escaped: {line}"
        );
    }
    Ok(lines)
}

async fn race(
    db: &str,
    dir: &std::path::Path,
    a: (&str, &str),
    b: (&str, &str),
) -> Result<(Vec<Value>, Vec<Value>), Box<dyn std::error::Error>> {
    let (child_a, out_a) = spawn(db, dir, a.0, a.1)?;
    let (child_b, out_b) = spawn(db, dir, b.0, b.1)?;
    std::fs::write(dir.join("go"), b"go")?;
    let lines_a =
        tokio::task::spawn_blocking(move || collect(child_a, out_a).map_err(|e| e.to_string()));
    let lines_b =
        tokio::task::spawn_blocking(move || collect(child_b, out_b).map_err(|e| e.to_string()));
    let (lines_a, lines_b) = tokio::time::timeout(Duration::from_secs(120), async {
        (lines_a.await, lines_b.await)
    })
    .await?;
    Ok((lines_a??, lines_b??))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_with_the_same_key_and_payload_both_succeed_with_one_write() -> TestResult {
    same_key_and_payload(TestDb::Sqlite).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_with_the_same_key_and_payload_both_succeed_with_one_write_on_postgres()
-> TestResult {
    same_key_and_payload(TestDb::Postgres).await
}

async fn same_key_and_payload(backend: TestDb) -> TestResult {
    let dir = tempfile::tempdir()?;
    let Race { db, store } = prepare(backend, dir.path()).await?;
    let (a, b) = race(
        &db,
        dir.path(),
        ("same-key", "1 Main Street"),
        ("same-key", "1 Main Street"),
    )
    .await?;
    for i in 0..ROUNDS {
        let (a, b) = (&a[i], &b[i]);
        assert_eq!(a["ok"], true, "round {i}: {a}");
        assert_eq!(b["ok"], true, "round {i}: {b}");
        // One write: both saw the record of the same commit.
        assert_eq!(
            a["response_validated_at"], b["response_validated_at"],
            "round {i}"
        );
        assert_eq!(a["updated_at"], b["updated_at"], "round {i}");
        let stored = store
            .get_round(&RoundRef::new("race", format!("round-{i}")))
            .await?
            .ok_or("round")?;
        assert_eq!(stored.status, ManagedInputStatus::ResponseValidated);
        assert_eq!(stored.response_idempotency_key.as_deref(), Some("same-key"));
        assert_eq!(stored.responses, Some(address_response("1 Main Street")));
        assert_eq!(
            Some(m3_types::timestamp::format(stored.updated_at)).as_deref(),
            a["updated_at"].as_str()
        );
    }
    feed_has_each_change_once(&db).await
}

/// The feed holds, in increasing cursors, each round's `round.pending` and then exactly one
/// `round.answered`, whichever process committed it.
async fn feed_has_each_change_once(db: &str) -> TestResult {
    let store = m3_store::open(db).await?;
    let records = store
        .read_changes(m3_types::Cursor::START, 1_000)
        .await?
        .records;
    assert!(records.windows(2).all(|w| w[0].cursor < w[1].cursor));
    for i in 0..ROUNDS {
        let round = format!("round-{i}");
        let kinds: Vec<&str> = records
            .iter()
            .filter(|r| r.round_id.as_deref() == Some(round.as_str()))
            .map(|r| r.kind.as_str())
            .collect();
        assert_eq!(kinds, ["round.pending", "round.answered"], "{round}");
    }
    assert_eq!(records.len(), 2 * ROUNDS);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_with_different_payloads_have_exactly_one_winner_per_round() -> TestResult {
    different_payloads(TestDb::Sqlite).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_with_different_payloads_have_exactly_one_winner_per_round_on_postgres()
-> TestResult {
    different_payloads(TestDb::Postgres).await
}

async fn different_payloads(backend: TestDb) -> TestResult {
    let dir = tempfile::tempdir()?;
    let Race { db, store } = prepare(backend, dir.path()).await?;
    let (a, b) = race(
        &db,
        dir.path(),
        ("key-a", "A Street"),
        ("key-b", "B Street"),
    )
    .await?;
    let (mut wins_a, mut wins_b) = (0, 0);
    for i in 0..ROUNDS {
        let (a, b) = (&a[i], &b[i]);
        let stored = store
            .get_round(&RoundRef::new("race", format!("round-{i}")))
            .await?
            .ok_or("round")?;
        assert_eq!(stored.status, ManagedInputStatus::ResponseValidated);
        let (winner, loser, key, street) = match (a["ok"].as_bool(), b["ok"].as_bool()) {
            (Some(true), Some(false)) => {
                wins_a += 1;
                (a, b, "key-a", "A Street")
            }
            (Some(false), Some(true)) => {
                wins_b += 1;
                (b, a, "key-b", "B Street")
            }
            _ => panic!("round {i}: expected exactly one winner: {a} / {b}"),
        };
        assert_eq!(
            loser["code"], "managed_input_conflict",
            "round {i}: {loser}"
        );
        assert_eq!(
            stored.response_idempotency_key.as_deref(),
            Some(key),
            "round {i}"
        );
        assert_eq!(
            stored.responses,
            Some(address_response(street)),
            "round {i}"
        );
        assert_eq!(
            Some(m3_types::timestamp::format(stored.updated_at)).as_deref(),
            winner["updated_at"].as_str()
        );
        let projection = store
            .redacted_responses(&RoundRef::new("race", format!("round-{i}")))
            .await?
            .ok_or("projection")?;
        assert_eq!(
            projection["shipping_address"]["content"]["street"], street,
            "projection belongs to the winner"
        );
    }
    assert_eq!(wins_a + wins_b, ROUNDS);
    println!("process A won {wins_a} rounds, process B won {wins_b}");
    feed_has_each_change_once(&db).await
}
