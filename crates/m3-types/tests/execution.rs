//! Execution lifecycle table, human input policy, tool selection and error codes.
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers outside #[test] fns"
)]

use m3_types::{
    Error, ErrorCode, ExecutionOutcome, ExecutionState, ExecutionStatus, HumanInput, ToolSelection,
};
use time::macros::datetime;

use ExecutionStatus::*;

#[test]
fn transition_table_is_exactly_the_reference_one() {
    let allowed: &[(ExecutionStatus, &[ExecutionStatus])] = &[
        (Created, &[Queued, Starting, Finished]),
        (Queued, &[Starting, Finished]),
        (Starting, &[Idle, RunningTurn, Closing, Finished]),
        (Idle, &[RunningTurn, Closing, Finished]),
        (RunningTurn, &[Idle, WaitingForInput, Closing, Finished]),
        (WaitingForInput, &[RunningTurn, Closing, Finished]),
        (Closing, &[Finished]),
        (Finished, &[]),
    ];
    for (from, targets) in allowed {
        for to in &ExecutionStatus::ALL {
            assert_eq!(
                from.can_transition_to(*to),
                targets.contains(to),
                "{from} -> {to}"
            );
        }
    }
    assert!(!WaitingForInput.can_transition_to(Idle));
    assert!(Finished.is_terminal());
}

#[test]
fn state_transition_refuses_with_invalid_transition() {
    let mut state = ExecutionState::new("e", datetime!(2026-01-01 0:00 UTC));
    state.transition(Starting).unwrap();
    state.transition(RunningTurn).unwrap();
    state.transition(WaitingForInput).unwrap();
    let err = state.transition(Idle).unwrap_err();
    assert_eq!(err.code(), "invalid_argument");
    assert_eq!(err.details()["code"], "invalid_transition");
    assert_eq!(state.lifecycle, WaitingForInput);
    state.transition(RunningTurn).unwrap();
    state
        .finish(ExecutionOutcome::Completed, datetime!(2026-01-01 0:01 UTC))
        .unwrap();
    assert!(state.transition(Finished).is_err());
}

#[test]
fn human_input_defaults_to_fail_and_rejects_other_text() {
    assert_eq!(HumanInput::default(), HumanInput::Fail);
    assert_eq!(
        "managed".parse::<HumanInput>().unwrap(),
        HumanInput::Managed
    );
    for bad in ["Managed", "", "auto", "fail "] {
        let err = bad.parse::<HumanInput>().unwrap_err();
        assert_eq!(err.code(), "invalid_argument");
        assert_eq!(err.message(), "human_input must be 'fail' or 'managed'");
        assert_eq!(err.details()["operation"], "execution.submit");
    }
    assert!(serde_json::from_str::<HumanInput>("\"maybe\"").is_err());
}

#[test]
fn outcome_follows_the_error_mapping() {
    assert_eq!(
        ExecutionOutcome::for_error(None),
        ExecutionOutcome::Completed
    );
    assert_eq!(
        ExecutionOutcome::for_error(Some(&Error::timeout("t"))),
        ExecutionOutcome::TimedOut
    );
    assert_eq!(
        ExecutionOutcome::for_error(Some(&Error::cancelled("c"))),
        ExecutionOutcome::Cancelled
    );
    assert_eq!(
        ExecutionOutcome::for_error(Some(&Error::managed_input_recovery("r"))),
        ExecutionOutcome::Failed
    );
}

#[test]
fn tool_selection_parses_server_tool_names() {
    let s = ToolSelection::parse(&["shipping:book_shipment", "billing:charge"]).unwrap();
    assert!(s.allows("shipping", "book_shipment"));
    assert!(s.allows("billing", "charge"));
    assert!(!s.allows("shipping", "charge"));
    assert!(!s.allows("billing", "book_shipment"));
    assert_eq!(
        s.servers().into_iter().collect::<Vec<_>>(),
        ["billing", "shipping"]
    );
    assert!(s.check_servers(["shipping", "billing", "x"]).is_ok());
    let err = s.check_servers(["shipping"]).unwrap_err();
    assert!(err.message().contains("unknown server 'billing'"));

    let none = ToolSelection::parse::<&str>(&[]).unwrap();
    assert!(none.is_empty());
    assert!(!none.allows("shipping", "book_shipment"));
    assert_eq!(none, ToolSelection::none());
    assert_eq!("".parse::<ToolSelection>().unwrap(), none);
    assert_eq!(
        "a:x, b:y".parse::<ToolSelection>().unwrap(),
        ToolSelection::parse(&["a:x", "b:y"]).unwrap()
    );

    let dup = ToolSelection::parse(&["a:x", "a:x"]).unwrap_err();
    assert_eq!(dup.code(), "invalid_argument");
    assert!(dup.message().contains("duplicate"));
    for bad in [
        "book_shipment",
        ":tool",
        "server:",
        "a:b:c",
        "a: b",
        "",
        ":",
    ] {
        let err = ToolSelection::parse(&[bad]).unwrap_err();
        assert_eq!(err.code(), "invalid_argument", "{bad}");
        assert!(err.message().contains("server:tool"), "{bad}: {err}");
    }
}

#[test]
fn every_error_variant_has_its_stable_code() {
    let cases = [
        (
            Error::managed_input_validation("m"),
            "managed_input_invalid",
        ),
        (Error::managed_input_conflict("m"), "managed_input_conflict"),
        (Error::managed_input_state("m"), "managed_input_state"),
        (
            Error::managed_input_recovery("m"),
            "managed_input_recovery_unavailable",
        ),
        (Error::model_validation("m"), "invalid_argument"),
        (Error::timeout("m"), "timeout"),
        (Error::cancelled("m"), "cancelled"),
        (Error::round_limit("m"), "elicitation_round_limit"),
        (Error::protocol("m"), "protocol_error"),
        (Error::transport("m"), "transport_error"),
        (Error::storage("m"), "storage_error"),
    ];
    for (err, code) in cases {
        assert_eq!(err.code(), code);
        assert_eq!(err.error_code().as_str(), code);
        assert_eq!(code.parse::<ErrorCode>().unwrap(), err.error_code());
        assert_eq!(Error::from_code(err.error_code(), "m").code(), code);
        assert_eq!(err.to_string(), "m");
        let info = err.to_error_info();
        assert_eq!(info.code, err.error_code());
        assert_eq!(info.retryable, code == "timeout");
    }
    assert!(Error::managed_input_conflict("x").is_conflict());
    assert!(Error::managed_input_state("x").is_state());
    assert!(Error::timeout("x").is_timeout());
    assert!(!Error::timeout("x").is_conflict());
    assert!("nope".parse::<ErrorCode>().is_err());
}

#[test]
fn errors_carry_details_and_sources() {
    let io = std::io::Error::other("disk full");
    let err = Error::storage("sqlite write failed")
        .with_detail("sqlite_code", 13)
        .with_detail("round_id", "r1")
        .with_source(io);
    assert_eq!(err.details()["sqlite_code"], 13);
    assert_eq!(err.details()["round_id"], "r1");
    let source = std::error::Error::source(&err).unwrap();
    assert_eq!(source.to_string(), "disk full");
    assert!(err.cause().is_some());
    let info = err.to_error_info();
    assert_eq!(info.details["sqlite_code"], 13);
    let long = Error::protocol("x".repeat(5000)).to_error_info();
    assert_eq!(long.message.len(), 4096);
    let err = Error::from_code(ErrorCode::Unsupported, "no");
    assert_eq!(err.details()["code"], "unsupported");
}

#[test]
fn an_error_copy_keeps_variant_message_and_details_but_not_the_source() {
    let original = Error::managed_input_conflict("lease lost")
        .with_detail("round_id", "r1")
        .with_source(std::io::Error::other("disk full"));
    let copy = original.clone_without_source();
    assert!(copy.is_conflict());
    assert_eq!(copy.code(), original.code());
    assert_eq!(copy.message(), "lease lost");
    assert_eq!(copy.details(), original.details());
    assert!(copy.cause().is_none());
    for code in [
        ErrorCode::ManagedInputState,
        ErrorCode::Timeout,
        ErrorCode::NotFound,
    ] {
        let copy = Error::from_code(code, "m").clone_without_source();
        assert_eq!(copy.error_code(), code);
    }
}

#[test]
fn shared_messages_carry_the_reference_key_words() {
    use m3_types::messages::*;
    for (text, word) in [
        (EXACT_KEYS, "exactly"),
        (UNEXPECTED_KEYS, "unexpected"),
        (SCHEMA_MISMATCH, "schema"),
        (URL_CONTENT, "URL"),
        (LEASE_EXPIRED, "expired"),
        (IDEMPOTENCY_CONFLICT, "idempotency"),
        (MULTIPLE_PENDING, "multiple"),
        (FAILED_ROUND_CANNOT_ACCEPT, "cannot accept responses"),
        (ROUND_DOES_NOT_EXIST, "does not exist"),
        (OWNED_BY_ANOTHER_LEASE, "lease"),
        (STORED_RECORD_INVALID, "stored"),
        (DECLINE_CONTENT, "content"),
        (HUMAN_INPUT, "'fail' or 'managed'"),
        (MANAGED_WITH_PLAN, "predefined elicitation"),
        (MANAGED_NEEDS_PERSISTENT_STORE, "persistent"),
    ] {
        assert!(text.contains(word), "{text}");
        assert_eq!(text, text.trim());
    }
}

#[test]
fn errors_and_clocks_are_thread_safe_trait_objects() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<Error>();
    send_sync::<m3_types::ManualClock>();
    send_sync::<std::sync::Arc<dyn m3_types::Clock>>();
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(Error::storage("x"));
    assert_eq!(boxed.to_string(), "x");
}
