//! Ids as git takes them (a unique prefix, any case, at least 4 characters) on every command
//! that takes an execution or round id; an ambiguous prefix lists its candidates; a replayed
//! answer says so; `m3 executions --limit --lifecycle --since`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Store, managed_run, refs, shipping_server};
use serde_json::Value;

const ADDRESS: &str = r#"{"shipping_address": {"action": "accept", "content": {"street": "1 Main Street", "city": "Pune"}}}"#;

/// A store with one finished managed execution (answered), and two queued ones after it.
struct Fixture {
    store: Store,
    answered: String,
    round: String,
    queued: [String; 2],
}

fn fixture() -> Fixture {
    let store = Store::new();
    let mut run = store.spawn(&refs(&managed_run(&shipping_server(""), "book_shipment")));
    let answered = run.next_json()["execution_id"].as_str().unwrap().to_owned();
    let round = run.next_json()["round_id"].as_str().unwrap().to_owned();
    // The first answer, by prefixes of both ids in lower case.
    let first = store
        .m3(&[
            "--json",
            "respond",
            &answered[..10].to_lowercase(),
            &round[..12].to_lowercase(),
            "--idempotency-key",
            "a",
            "--responses",
            ADDRESS,
        ])
        .expect_code(0)
        .json();
    assert_eq!(first["execution_id"], answered.as_str());
    assert_eq!(first["round_id"], round.as_str());
    assert_eq!(first["replayed"], false, "{first}");
    run.finish().expect_code(0);
    let mut submit = managed_run(&shipping_server(""), "book_shipment");
    submit[1] = "submit".to_owned();
    let queued = [0, 1].map(|_| {
        store.m3(&refs(&submit)).expect_code(0).json()["execution_id"]
            .as_str()
            .unwrap()
            .to_owned()
    });
    Fixture {
        store,
        answered,
        round,
        queued,
    }
}

fn common_prefix<'a>(ids: &[&'a str]) -> &'a str {
    let first = ids[0];
    let len = (0..first.len())
        .take_while(|&i| {
            ids.iter()
                .all(|id| id.as_bytes().get(i) == first.as_bytes().get(i))
        })
        .count();
    &first[..len]
}

#[test]
fn unique_prefixes_name_their_ids_and_a_replay_says_so() {
    let Fixture {
        store,
        answered,
        round,
        queued,
    } = fixture();
    let short = answered[..14].to_lowercase();
    let status = store
        .m3(&["--json", "status", &short])
        .expect_code(0)
        .json();
    assert_eq!(status["execution_id"], answered.as_str());
    let rounds = store
        .m3(&["--json", "rounds", &short])
        .expect_code(0)
        .json();
    assert_eq!(rounds[0]["round_id"], round.as_str());
    store.m3(&["--json", "pending", &short]).expect_code(0);
    let result = store
        .m3(&["--json", "result", &short])
        .expect_code(0)
        .json();
    assert_eq!(result["snapshot"]["execution_id"], answered.as_str());
    let cancel = store
        .m3(&["--json", "cancel", &short])
        .expect_code(0)
        .json();
    assert_eq!(cancel["execution_id"], answered.as_str());
    let events = store
        .m3(&["events", "--execution", &short])
        .expect_code(0)
        .stdout;
    assert!(!events.is_empty());
    for line in events.lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        assert_eq!(record["execution_id"], answered.as_str(), "{line}");
    }

    // The same answer again: a replay, said in JSON and in text (by the round id alone).
    let again = store
        .m3(&[
            "--json",
            "respond",
            &short,
            &round[..12],
            "--idempotency-key",
            "a",
            "--responses",
            ADDRESS,
        ])
        .expect_code(0)
        .json();
    assert_eq!(again["replayed"], true, "{again}");
    let text = store
        .m3(&[
            "respond",
            &round[..12],
            "--idempotency-key",
            "a",
            "--responses",
            ADDRESS,
        ])
        .expect_code(0)
        .stdout;
    assert!(
        text.starts_with(&format!(
            "responses already committed (replay) to round {round} of execution {answered}"
        )),
        "{text}"
    );

    // A prefix of several executions lists them; too short or matching nothing: not found.
    let ids = [answered.as_str(), queued[0].as_str(), queued[1].as_str()];
    let shared = common_prefix(&ids);
    assert!(shared.len() >= 4, "{ids:?}");
    let ambiguous = store.m3(&["--json", "status", shared]).expect_code(3);
    let error: Value = serde_json::from_str(ambiguous.stderr.trim()).unwrap();
    assert_eq!(error["error"]["code"], "invalid_argument");
    assert_eq!(error["error"]["details"]["reason"], "ambiguous_id");
    let candidates = error["error"]["details"]["candidates"].as_array().unwrap();
    for id in ids {
        assert!(candidates.contains(&Value::from(id)), "{error}");
    }
    let human = store.m3(&["status", shared]).expect_code(3).stderr;
    assert!(
        human.starts_with(&format!(
            "error[invalid_argument]: execution id prefix '{shared}' is ambiguous: it matches "
        )) && human.contains(&queued[1]),
        "{human}"
    );
    store.m3(&["status", &answered[..3]]).expect_code(8);
    store.m3(&["status", "01M90QJQ"]).expect_code(8);
}

#[test]
fn executions_filter_by_lifecycle_time_and_count() {
    let Fixture {
        store,
        answered,
        queued,
        ..
    } = fixture();
    let ids = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["--json", "executions"];
        all.extend_from_slice(args);
        store
            .m3(&all)
            .expect_code(0)
            .json()
            .as_array()
            .unwrap()
            .iter()
            .map(|state| state["execution_id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        ids(&[]),
        [answered.clone(), queued[0].clone(), queued[1].clone()]
    );
    assert_eq!(ids(&["--lifecycle", "queued"]), queued.to_vec());
    assert_eq!(ids(&["--lifecycle", "finished"]), vec![answered.clone()]);
    assert_eq!(ids(&["--limit", "1"]), vec![answered.clone()]);
    assert_eq!(
        ids(&["--lifecycle", "queued", "--limit", "1"]),
        [queued[0].clone()]
    );
    assert_eq!(ids(&["--since", "1h"]).len(), 3);
    assert_eq!(ids(&["--since", "1h", "--limit", "2"]).len(), 2);
    assert!(ids(&["--since", "2999-01-01T00:00:00Z"]).is_empty());
    let table = store
        .m3(&["executions", "--lifecycle", "queued"])
        .expect_code(0)
        .stdout;
    assert!(
        table.contains(&queued[0]) && !table.contains(&answered),
        "{table}"
    );
    store
        .m3(&["executions", "--lifecycle", "sleeping"])
        .expect_code(2);
    store.m3(&["executions", "--since", "soon"]).expect_code(3);
}
