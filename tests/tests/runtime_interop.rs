//! The managed one-round flow against other MCP implementations: the official
//! MCP Python SDK (2026-07-28 era, tests/peers/dual_era_server.py) and
//! `@modelcontextprotocol/server-everything` (legacy era).

// Helpers outside #[test] fns fail the test on purpose (clippy.toml only relaxes
// these lints inside test functions).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use m3_kit::{AgentSelection, Script, SubmitOptions};
use m3_tests::runtime_support::{WAIT, completes, kit, npm_dir, pending, python};
use m3_types::{
    ElicitationRequest, ElicitationResponse, HumanInput, ManagedInputStatus, ResponseMap,
    StdioServer,
};
use serde_json::{Map, json};

fn on_path(program: &str) -> String {
    let paths = std::env::var_os("PATH").unwrap();
    std::env::split_paths(&paths)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| panic!("{program} is not on PATH"))
        .display()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_round_against_the_python_sdk_modern_era() {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/dual_era_server.py");
    let peer = StdioServer::new("peer", python()).with_args([script.display().to_string()]);
    let dir = tempfile::tempdir().unwrap();
    let kit = kit(&dir.path().join("m3.sqlite")).await.unwrap();
    let mut args = Map::new();
    args.insert("plan".into(), json!("name"));
    let agent = kit
        .agents([AgentSelection::scripted(Script::call("peer:ask", args))])
        .unwrap()
        .remove(0);
    let handle = agent
        .submit(
            "Ask for a name.",
            SubmitOptions::new()
                .server(peer)
                .tools(["peer:ask"])
                .human_input(HumanInput::Managed),
        )
        .await
        .unwrap();
    let round = pending(&handle).await;
    assert!(matches!(
        round.requests["name"],
        ElicitationRequest::Form(_)
    ));
    assert!(
        round.request_state.is_some(),
        "2026-07-28 rounds carry requestState"
    );
    let mut content = Map::new();
    content.insert("name".into(), json!("Ada"));
    let responses = ResponseMap::from([("name".to_owned(), ElicitationResponse::accept(content))]);
    handle
        .respond_elicitation(
            &round.round_id,
            responses,
            &format!("name-{}", round.round_id),
        )
        .await
        .unwrap();
    let trace = completes(&handle, WAIT).await.unwrap();
    let text = trace.final_text.unwrap();
    let answer: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["era"], json!("2026-07-28"));
    assert_eq!(answer["answers"]["name"]["content"]["name"], json!("Ada"));
    assert_eq!(trace.operations[0].attempts.len(), 2);
    assert_eq!(
        handle.rounds().await.unwrap()[0].status,
        ManagedInputStatus::Resolved
    );
    kit.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_round_against_server_everything_legacy_era() {
    let script = PathBuf::from(npm_dir())
        .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let everything = StdioServer::new("everything", on_path("node"))
        .with_args([script.display().to_string(), "stdio".into()]);
    let dir = tempfile::tempdir().unwrap();
    let kit = kit(&dir.path().join("m3.sqlite")).await.unwrap();
    let agent = kit
        .agents([AgentSelection::scripted(Script::call(
            "everything:trigger-elicitation-request",
            Map::new(),
        ))])
        .unwrap()
        .remove(0);
    let handle = agent
        .submit(
            "Ask for a name.",
            SubmitOptions::new()
                .server(everything)
                .tools(["everything:trigger-elicitation-request"])
                .human_input(HumanInput::Managed),
        )
        .await
        .unwrap();
    let round = pending(&handle).await;
    assert_eq!(
        round.requests.keys().collect::<Vec<_>>(),
        vec!["elicitation"]
    );
    assert!(round.request_state.is_none());
    let mut content = Map::new();
    content.insert("name".into(), json!("Ada"));
    let responses = ResponseMap::from([(
        "elicitation".to_owned(),
        ElicitationResponse::accept(content),
    )]);
    handle
        .respond_elicitation(&round.round_id, responses, "name")
        .await
        .unwrap();
    let text = completes(&handle, WAIT).await.unwrap().final_text.unwrap();
    assert!(text.contains("Ada"), "{text}");
    assert_eq!(
        handle.rounds().await.unwrap()[0].status,
        ManagedInputStatus::Resolved
    );
    kit.close().await.unwrap();
}
