//! Helper process for `store_two_process`: waits for a start signal, then submits one
//! response to each of N rounds of the execution `race` on a shared database (a path or a
//! store URL, opened with `m3_store::open`), printing one JSON line per round (`ok` with
//! the record's write time, or the error code).
//!
//! usage: store_race DB GO_FILE ROUNDS KEY STREET

use std::path::PathBuf;
use std::time::{Duration, Instant};

use m3_store::{LeaseRef, ResponseSubmission, RoundRef};
use m3_tests::store_support::address_response;
use serde_json::json;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [db, go, rounds, key, street] = args.as_slice() else {
        eprintln!("usage: store_race DB GO_FILE ROUNDS KEY STREET");
        return std::process::ExitCode::from(2);
    };
    let Ok(rounds) = rounds.parse::<usize>() else {
        eprintln!("ROUNDS must be a number");
        return std::process::ExitCode::from(2);
    };
    let store = match open(db).await {
        Ok(store) => store,
        Err(e) => {
            eprintln!("open failed: {} {e}", e.code());
            return std::process::ExitCode::FAILURE;
        }
    };
    // Ready; wait for the start signal so both processes race from the same instant.
    println!("{}", json!({"ready": true}));
    let go = PathBuf::from(go);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !go.exists() {
        if Instant::now() > deadline {
            eprintln!("no start signal");
            return std::process::ExitCode::FAILURE;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let lease = LeaseRef::new("race-worker", "lease-race");
    for i in 0..rounds {
        let round = RoundRef::new("race", format!("round-{i}"));
        let submission = ResponseSubmission::new(address_response(street), key.as_str());
        let line = match store.submit_responses(&round, &lease, submission).await {
            Ok(record) => json!({
                "round": i,
                "ok": true,
                "key": record.response_idempotency_key,
                "response_validated_at": record.response_validated_at.map(m3_types::timestamp::format),
                "updated_at": m3_types::timestamp::format(record.updated_at),
            }),
            Err(e) => json!({
                "round": i,
                "ok": false,
                "code": e.code(),
                "message": e.message(),
                "details": e.details(),
            }),
        };
        println!("{line}");
    }
    std::process::ExitCode::SUCCESS
}

async fn open(db: &str) -> m3_types::Result<std::sync::Arc<dyn m3_store::ManagedInputStore>> {
    m3_store_postgres::register();
    m3_store::open(db).await?.managed_input_store().await
}
