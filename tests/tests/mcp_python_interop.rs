//! The MCP client against the official MCP Python SDK (mcp 2.3.0), in both eras,
//! for tools, prompts and resources (peer: tests/peers/dual_era_server.py).

// Helpers outside #[test] fns fail the test on purpose (clippy.toml only relaxes
// these lints inside test functions).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod mcp_support;

use std::time::Duration;

use m3_mcp::{
    AttemptOutcome, ConnectOptions, LEGACY_REQUEST_KEY, OperationRequest, ProtocolEra,
    ResumeRequest,
};
use m3_types::{
    ElicitationRequest, ElicitationResponse, OperationKind, ResponseMap, ToolSelection,
};
use mcp_support::*;
use serde_json::{Map, Value, json};

fn op(kind: OperationKind, plan: &str) -> OperationRequest {
    let mut args = Map::new();
    args.insert("plan".into(), json!(plan));
    match kind {
        OperationKind::Tool => OperationRequest::tool("ask", args),
        OperationKind::Prompt => OperationRequest::prompt("ask_prompt", args),
        _ => OperationRequest::resource(format!("ask://{plan}")),
    }
}

const KINDS: [OperationKind; 3] = [
    OperationKind::Tool,
    OperationKind::Prompt,
    OperationKind::Resource,
];

async fn connect_era(era: ProtocolEra) -> m3_mcp::McpConnection {
    // The era is fixed here (negotiation has its own test) so that a slow
    // interpreter start under parallel tests cannot turn into a legacy fallback.
    let connection = connect(&python_peer(), ConnectOptions::new().with_era(Some(era))).await;
    assert_eq!(connection.era(), era);
    connection
}

#[tokio::test]
async fn negotiation_reports_the_era() {
    let modern = connect(&python_peer(), ConnectOptions::new()).await;
    assert_eq!(modern.era(), ProtocolEra::Modern);
    assert_eq!(modern.protocol_version(), "2026-07-28");
    assert_eq!(
        modern.server_identity().map(|i| i.name.as_str()),
        Some("m3-dual-era-peer")
    );
    modern.close().await.unwrap();
    let legacy = connect(
        &python_peer(),
        ConnectOptions::new().with_era(Some(ProtocolEra::Legacy)),
    )
    .await;
    assert_eq!(legacy.era(), ProtocolEra::Legacy);
    assert_eq!(legacy.protocol_version(), "2025-11-25");
    legacy.close().await.unwrap();
}

#[tokio::test]
async fn one_two_and_multi_request_rounds_for_every_kind_in_both_eras() {
    for era in [ProtocolEra::Modern, ProtocolEra::Legacy] {
        let connection = connect_era(era).await;
        for kind in KINDS {
            let ctx = format!("{era} {kind:?}");
            // One round, form.
            let (done, rounds) = drive(&connection, op(kind, "name"), accept).await.unwrap();
            let answers = peer_answers(&done);
            assert_eq!(
                answers["answers"]["name"],
                json!({"action": "accept", "content": {"name": "Ada"}}),
                "{ctx}"
            );
            let expected_key = if era == ProtocolEra::Modern {
                "name"
            } else {
                LEGACY_REQUEST_KEY
            };
            assert_eq!(rounds, vec![vec![expected_key.to_string()]], "{ctx}");

            // Two rounds.
            let (done, rounds) = drive(&connection, op(kind, "name_age"), accept)
                .await
                .unwrap();
            let answers = peer_answers(&done);
            assert_eq!(
                answers["answers"]["age"]["content"]["age"],
                json!(36),
                "{ctx}"
            );
            assert_eq!(rounds.len(), 2, "{ctx}");
            let record = done.record();
            assert_eq!(record.rounds, 2, "{ctx}");
            if era == ProtocolEra::Modern {
                // One attempt per round plus the completing one; every retry echoes
                // the previous state byte for byte and carries the answers.
                assert_eq!(record.attempts.len(), 3, "{ctx}");
                for pair in record.attempts.windows(2) {
                    let AttemptOutcome::InputRequired { request_state, .. } = &pair[0].outcome
                    else {
                        panic!("{ctx}: expected input_required, got {:?}", pair[0].outcome)
                    };
                    assert!(request_state.is_some());
                    assert_eq!(&pair[1].request_state, request_state, "{ctx}");
                    assert!(pair[1].input_responses.is_some(), "{ctx}");
                    assert!(pair[0].input_required);
                }
                assert!(matches!(
                    record.attempts[2].outcome,
                    AttemptOutcome::Complete { .. }
                ));
            } else {
                assert_eq!(record.attempts.len(), 1, "{ctx}");
                assert_eq!(record.attempts[0].rounds.len(), 2, "{ctx}");
                assert!(
                    record.attempts[0]
                        .rounds
                        .iter()
                        .all(|r| r.responses.is_some())
                );
            }
            assert_eq!(
                connection
                    .operation_record(&record.logical_operation_id)
                    .as_ref(),
                Some(record)
            );

            // A multi-request round: a form and a URL answered together (legacy: the
            // protocol has one request per round, so they come one after another).
            let (done, rounds) = drive(&connection, op(kind, "confirm-login"), accept)
                .await
                .unwrap();
            let answers = peer_answers(&done);
            assert_eq!(
                answers["answers"]["confirm"]["content"]["confirm"],
                json!(true),
                "{ctx}"
            );
            assert_eq!(
                answers["answers"]["login"]["action"],
                json!("accept"),
                "{ctx}"
            );
            if era == ProtocolEra::Modern {
                assert_eq!(
                    rounds,
                    vec![vec!["confirm".to_string(), "login".to_string()]],
                    "{ctx}"
                );
            } else {
                assert_eq!(rounds.len(), 2, "{ctx}");
            }
        }
        connection.close().await.unwrap();
    }
}

#[tokio::test]
async fn rounds_carry_form_and_url_requests_with_context() {
    for era in [ProtocolEra::Modern, ProtocolEra::Legacy] {
        let connection = connect_era(era).await;
        let progress = connection
            .start(op(OperationKind::Tool, "login"))
            .await
            .unwrap();
        let round = progress.input_round().expect("a round");
        assert_eq!(round.round_index(), 1);
        assert_eq!(round.attempt(), 1);
        assert!(!round.logical_operation_id().is_empty());
        let request = round.requests().values().next().unwrap().clone();
        let ElicitationRequest::Url(url) = &request else {
            panic!("expected a URL request, got {request:?}")
        };
        assert_eq!(url.url, "https://example.com/login");
        assert_eq!(url.message, "Sign in to continue");
        assert_eq!(url.server.as_deref(), Some("peer"));
        assert_eq!(url.operation_name.as_deref(), Some("ask"));
        // 2026-07-28 removed the elicitation id; the legacy request carries one.
        assert_eq!(url.elicitation_id.is_some(), era == ProtocolEra::Legacy);
        assert_eq!(round.request_state().is_some(), era == ProtocolEra::Modern);
        let done = round.respond(
            [(
                request.request_key().to_string(),
                ElicitationResponse::accept_url(),
            )]
            .into_iter()
            .collect(),
        );
        let done = done.await.unwrap().complete().expect("complete");
        assert_eq!(
            peer_answers(&done)["answers"]["login"]["action"],
            json!("accept")
        );

        let progress = connection
            .start(op(OperationKind::Prompt, "name"))
            .await
            .unwrap();
        let round = progress.input_round().expect("a round");
        let request = round.requests().values().next().unwrap();
        let ElicitationRequest::Form(form) = request else {
            panic!("expected a form")
        };
        assert_eq!(form.message, "Please provide name");
        assert_eq!(form.requested_schema["required"], json!(["name"]));
        assert_eq!(form.operation_kind, Some(OperationKind::Prompt));
        let wrong: ResponseMap = [("nope".to_string(), ElicitationResponse::decline())]
            .into_iter()
            .collect();
        let error = round.check_responses(&wrong).unwrap_err();
        assert_eq!(error.code(), "managed_input_invalid");
        assert!(round.decline().await.unwrap().complete().is_some());
        connection.close().await.unwrap();
    }
}

#[tokio::test]
async fn decline_and_cancel_reach_the_server_in_both_eras() {
    for era in [ProtocolEra::Modern, ProtocolEra::Legacy] {
        let connection = connect_era(era).await;
        for kind in KINDS {
            for (action, response) in [
                ("decline", ElicitationResponse::decline()),
                ("cancel", ElicitationResponse::cancel()),
            ] {
                let (done, _) = drive(&connection, op(kind, "name"), |_| response.clone())
                    .await
                    .unwrap();
                let answers = peer_answers(&done);
                assert_eq!(
                    answers["answers"]["name"],
                    json!({"action": action}),
                    "{era} {kind:?}"
                );
            }
        }
        connection.close().await.unwrap();
    }
}

#[tokio::test]
async fn state_only_round_is_retried_at_once_without_a_round() {
    let connection = connect_era(ProtocolEra::Modern).await;
    let (done, rounds) = drive(&connection, op(OperationKind::Tool, "state_name"), accept)
        .await
        .unwrap();
    assert_eq!(rounds, vec![vec!["name".to_string()]]);
    let answers = peer_answers(&done);
    assert_eq!(
        answers["answers"]["state"],
        json!({"action": "state-echoed"})
    );
    let record = done.record();
    assert_eq!(record.rounds, 1);
    assert_eq!(record.attempts.len(), 3);
    let AttemptOutcome::InputRequired {
        request_keys,
        request_state,
    } = &record.attempts[0].outcome
    else {
        panic!("expected input_required")
    };
    assert!(request_keys.is_empty());
    assert_eq!(&record.attempts[1].request_state, request_state);
    assert!(record.attempts[1].input_responses.is_none());
    connection.close().await.unwrap();
}

#[tokio::test]
async fn tampered_request_state_is_rejected_by_the_server() {
    let connection = connect_era(ProtocolEra::Modern).await;
    let round = connection
        .start(op(OperationKind::Tool, "name"))
        .await
        .unwrap()
        .input_round()
        .unwrap();
    let state = round.request_state().unwrap().to_string();
    let responses = accept_all(&round);
    let tampered = tampered(&state);
    let error = connection
        .resume(
            ResumeRequest::new(op(OperationKind::Tool, "name"), responses.clone())
                .with_request_state(tampered),
        )
        .await
        .unwrap_err();
    assert_eq!(error.code(), "protocol_error", "{error}");
    assert_eq!(error.details()["jsonrpc_code"], json!(-32602), "{error}");
    // The untouched state, resumed from stored data, still completes.
    let done = connection
        .resume(
            ResumeRequest::new(op(OperationKind::Tool, "name"), responses)
                .with_request_state(state)
                .with_completed_rounds(1),
        )
        .await
        .unwrap()
        .complete()
        .unwrap();
    assert_eq!(
        peer_answers(&done)["answers"]["name"]["content"]["name"],
        json!("Ada")
    );
    drop(round);
    connection.close().await.unwrap();
}

#[tokio::test]
async fn non_conforming_schema_becomes_a_round_in_both_eras() {
    for era in [ProtocolEra::Modern, ProtocolEra::Legacy] {
        let connection = connect_era(era).await;
        let round = connection
            .start(op(OperationKind::Tool, "nested"))
            .await
            .unwrap()
            .input_round()
            .unwrap();
        let request = round.requests().values().next().unwrap();
        let ElicitationRequest::Form(form) = request else {
            panic!("expected a form")
        };
        assert_eq!(
            form.requested_schema["properties"]["address"]["type"],
            json!("object"),
            "{era}"
        );
        let done = round.decline().await.unwrap().complete().unwrap();
        assert_eq!(
            peer_answers(&done)["answers"]["nested"]["action"],
            json!("decline"),
            "{era}"
        );
        connection.close().await.unwrap();
    }
}

#[tokio::test]
async fn round_limit_ends_the_operation_in_both_eras() {
    for era in [ProtocolEra::Modern, ProtocolEra::Legacy] {
        let connection = connect_era(era).await;
        let request = op(OperationKind::Tool, "name_age_confirm").with_round_limit(2);
        let error = drive(&connection, request, accept).await.unwrap_err();
        assert_eq!(error.code(), "elicitation_round_limit", "{era}: {error}");
        let id = error.details()["logical_operation_id"]
            .as_str()
            .unwrap()
            .to_string();
        let record = connection.operation_record(&id).unwrap();
        assert!(record.is_finished());
        assert_eq!(
            record.error.as_ref().map(|e| e.code.as_str()),
            Some("elicitation_round_limit")
        );
        let last = &record.last_attempt().unwrap().outcome;
        if era == ProtocolEra::Modern {
            // The third answer was input_required; the client refused that round.
            assert_eq!(record.attempts.len(), 3);
            assert!(
                matches!(last, AttemptOutcome::InputRequired { .. }),
                "{last:?}"
            );
        } else {
            // The one legacy attempt was cancelled by the client.
            assert!(matches!(last, AttemptOutcome::Error { .. }), "{last:?}");
        }
        // The connection stays usable.
        let (done, _) = drive(&connection, op(OperationKind::Tool, "name"), accept)
            .await
            .unwrap();
        assert!(!done.is_error());
        connection.close().await.unwrap();
    }
}

fn echo() -> OperationRequest {
    let mut args = Map::new();
    args.insert("text".into(), json!("hi"));
    OperationRequest::tool("echo", args)
}

#[tokio::test]
async fn tool_selection_refuses_locally_and_filters_the_listing() {
    let selection = ToolSelection::parse(&["peer:echo"]).unwrap();
    let connection = connect(
        &python_peer(),
        ConnectOptions::new().with_tool_selection(Some(selection)),
    )
    .await;
    let tools: Vec<String> = tool_names(&connection).await;
    assert_eq!(tools, vec!["echo".to_string()]);
    let error = connection
        .start(op(OperationKind::Tool, "name"))
        .await
        .unwrap_err();
    assert_eq!(error.code(), "invalid_argument", "{error}");
    assert!(error.message().contains("peer:ask"), "{error}");
    assert!(
        connection.operation_log().is_empty(),
        "a refused call leaves no record"
    );
    let (done, _) = drive(&connection, echo(), accept).await.unwrap();
    assert_eq!(done.text(), "hi");
    // Prompts and resources are not tools: the selection does not apply.
    drive(&connection, op(OperationKind::Prompt, "name"), accept)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let stderr = connection.stderr_tail();
    assert!(stderr.contains("CALL echo hi"), "{stderr}");
    assert_eq!(
        stderr.matches("CALL plan=").count(),
        2,
        "only the prompt's two attempts reached the server: {stderr}"
    );
    connection.close().await.unwrap();

    let none = ToolSelection::parse::<&str>(&[]).unwrap();
    let connection = connect(
        &python_peer(),
        ConnectOptions::new().with_tool_selection(Some(none)),
    )
    .await;
    assert!(connection.list_tools().await.unwrap().is_empty());
    assert_eq!(
        connection.start(echo()).await.unwrap_err().code(),
        "invalid_argument"
    );
    connection.close().await.unwrap();

    let all = connect(&python_peer(), ConnectOptions::new()).await;
    let names: Vec<String> = tool_names(&all).await;
    assert!(
        names.contains(&"ask".to_string()) && names.contains(&"echo".to_string()),
        "{names:?}"
    );
    all.close().await.unwrap();
}

#[tokio::test]
async fn server_gets_exactly_the_configured_env_and_cwd_and_its_group_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = python_peer();
    server.env.insert("M3_PEER_MARK".into(), "42".into());
    server.cwd = Some(dir.path().to_path_buf());
    let connection = connect(&server, ConnectOptions::new()).await;
    let (done, _) = drive(
        &connection,
        OperationRequest::tool("environment", Map::new()),
        accept,
    )
    .await
    .unwrap();
    let seen: Value = serde_json::from_str(&done.text()).unwrap();
    let env = seen["env"].as_object().unwrap();
    assert_eq!(env["M3_PEER_MARK"], json!("42"));
    for ambient in ["PATH", "HOME", "M3_TEST_PYTHON", "CARGO_MANIFEST_DIR"] {
        assert!(
            !env.contains_key(ambient),
            "{ambient} leaked into the server: {env:?}"
        );
    }
    // Python itself may add LC_CTYPE; nothing else is allowed.
    assert!(
        env.keys().all(|k| k == "M3_PEER_MARK" || k == "LC_CTYPE"),
        "{env:?}"
    );
    assert_eq!(
        std::fs::canonicalize(seen["cwd"].as_str().unwrap()).unwrap(),
        std::fs::canonicalize(dir.path()).unwrap()
    );
    assert!(connection.stderr_tail().contains("dual-era peer starting"));

    // A grandchild in the server's process group dies with it.
    let (done, _) = drive(
        &connection,
        OperationRequest::tool("spawn_grandchild", Map::new()),
        accept,
    )
    .await
    .unwrap();
    let grandchild: u32 = done.text().trim().parse().unwrap();
    let pid = connection.pid().unwrap();
    assert!(alive(pid) && running(grandchild));
    connection.close().await.unwrap();
    assert!(
        !alive(pid),
        "server {pid} still in the process table after close"
    );
    assert!(
        gone_within(grandchild, Duration::from_secs(5)).await || !running(grandchild),
        "grandchild {grandchild} survived"
    );
}

#[tokio::test]
async fn inherited_path_is_opt_in() {
    let connection = connect(
        &python_peer(),
        ConnectOptions::new().with_inherited_env(["PATH"]),
    )
    .await;
    let (done, _) = drive(
        &connection,
        OperationRequest::tool("environment", Map::new()),
        accept,
    )
    .await
    .unwrap();
    let seen: Value = serde_json::from_str(&done.text()).unwrap();
    assert_eq!(
        seen["env"]["PATH"].as_str(),
        std::env::var("PATH").ok().as_deref()
    );
    connection.close().await.unwrap();
}

#[tokio::test]
async fn dropping_a_connection_kills_the_server() {
    let connection = connect(&python_peer(), ConnectOptions::new()).await;
    let pid = connection.pid().unwrap();
    drop(connection);
    assert!(
        gone_within(pid, Duration::from_secs(5)).await,
        "server {pid} survived the drop"
    );
}
