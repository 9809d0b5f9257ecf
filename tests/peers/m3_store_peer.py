"""On-disk interop peer for the m3-rs managed-input store tests.

Drives the real sf-m3 0.3.1 SQLiteManagedInputStore on a database file that the
Rust side also opens. Every command prints one JSON document on stdout.

usage:
  m3_store_peer.py write DB        create rounds in every status (Python writes, Rust reads and answers)
  m3_store_peer.py read DB EXEC..  list rounds of the executions with strict model validation
  m3_store_peer.py cli-write DB    rounds for the `m3` CLI tests: py-ex-1/py-round-1 pending (an address
                                   form with a secret-named field and a URL request), py-ex-failed/
                                   py-round-1 failed recovery_unavailable
  m3_store_peer.py answer DB EXEC ROUND OWNER TOKEN KEY
                                   submit the standard address response to a round Rust created,
                                   then replay it (must return the same record)
"""
import json
import sys
from datetime import datetime, timedelta, timezone

from m3 import ElicitationResponse, FormElicitationRequest, PendingElicitationRound
from m3.elicitation import UrlElicitationRequest
from m3.storage import SQLiteManagedInputStore

SCHEMA = {
    "type": "object",
    "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
    "required": ["street", "city"],
}
OWNER = "py-worker"
TOKEN = "lease-python-token"


def dump(record):
    return record.model_dump(mode="json")


def pending_round(execution_id, round_id, with_url=False):
    requests = {
        "shipping_address": FormElicitationRequest(
            request_key="shipping_address",
            message="Enter the delivery address.",
            requested_schema=SCHEMA,
            meta={"origin": "py"},
            server="shipping",
            operation_kind="tool",
            operation_name="book_shipment",
        )
    }
    if with_url:
        requests["payment"] = UrlElicitationRequest(
            request_key="payment",
            message="Authorize the payment.",
            url="https://pay.example/authorize?session=abc",
            elicitation_id="elicit-1",
        )
    return PendingElicitationRound(
        round_id=round_id,
        execution_id=execution_id,
        logical_operation_id="tool-call-1",
        server="shipping",
        operation_kind="tool",
        operation_name="book_shipment",
        request_state="opaque-state-é",
        requests=requests,
        created_at=datetime(2026, 11, 29, 17, 40, 10, 123456, tzinfo=timezone.utc),
        deadline=datetime(2026, 11, 29, 18, 40, 10, tzinfo=timezone.utc),
    )


def address(street="1 Main Street"):
    return ElicitationResponse(action="accept", content={"street": street, "city": "Pune"})


def write(db):
    store = SQLiteManagedInputStore(db)
    out = {}
    # 1. pending, long lease: Rust answers it.
    rec = store.create_round(
        pending_round("py-exec-pending", "py-round-1", with_url=True),
        round_index=0, round_limit=10, owner_id=OWNER, lease_seconds=3600,
        lease_token=TOKEN, harness_session_id="harness-1", native_resume_token="resume-1",
        delivery_idempotency_key="delivery-1", session_id="session-1", turn_id="turn-1",
        operation_parameters={"quantity": 2, "note": "fragile ✓", "nested": {"a": [1, 2.5, None]}},
    )
    out["pending"] = dump(rec)
    # 2. resolved with a secret in the response (redacted projection).
    rec = store.create_round(
        pending_round("py-exec-resolved", "py-round-1"),
        round_index=0, round_limit=3, owner_id=OWNER, lease_seconds=3600, lease_token=TOKEN,
    )
    content = {"street": "1 Main Street", "city": "Pune"}
    store.submit_responses(
        "py-exec-resolved", "py-round-1",
        {"shipping_address": ElicitationResponse(action="accept", content=content, meta={"k": "v"})},
        owner_id=OWNER, lease_token=TOKEN, response_idempotency_key="py-key-1",
    )
    store.start_delivery("py-exec-resolved", "py-round-1", owner_id=OWNER, lease_token=TOKEN)
    store.mark_delivered("py-exec-resolved", "py-round-1", owner_id=OWNER, lease_token=TOKEN)
    rec = store.resolve("py-exec-resolved", "py-round-1", owner_id=OWNER, lease_token=TOKEN)
    out["resolved"] = dump(rec)
    out["resolved_redacted"] = dict(store.redacted_responses("py-exec-resolved", "py-round-1"))
    # 3. failed after a response (responses kept as diagnostics).
    store.create_round(
        pending_round("py-exec-failed", "py-round-1"),
        round_index=0, round_limit=3, owner_id=OWNER, lease_seconds=3600, lease_token=TOKEN,
    )
    store.submit_responses(
        "py-exec-failed", "py-round-1", {"shipping_address": ElicitationResponse(action="decline")},
        owner_id=OWNER, lease_token=TOKEN, response_idempotency_key="py-key-2",
    )
    rec = store.fail("py-exec-failed", "py-round-1", owner_id=OWNER, lease_token=TOKEN,
                     code="cancelled", message="operation cancelled")
    out["failed"] = dump(rec)
    print(json.dumps(out))


SECRET_SCHEMA = {
    "type": "object",
    "properties": {
        "street": {"type": "string"},
        "city": {"type": "string"},
        "password": {"type": "string"},
    },
    "required": ["street", "city"],
}


def cli_write(db):
    store = SQLiteManagedInputStore(db)
    pending = pending_round("py-ex-1", "py-round-1", with_url=True)
    address = pending.requests["shipping_address"].model_copy(
        update={"requested_schema": SECRET_SCHEMA}
    )
    pending = pending.model_copy(
        update={"requests": {**pending.requests, "shipping_address": address}, "deadline": None}
    )
    out = {}
    out["pending"] = dump(store.create_round(
        pending, round_index=0, round_limit=10, owner_id=OWNER, lease_seconds=3600,
        lease_token=TOKEN,
    ))
    failed = pending_round("py-ex-failed", "py-round-1").model_copy(update={"deadline": None})
    store.create_round(
        failed, round_index=0, round_limit=10, owner_id=OWNER, lease_seconds=3600,
        lease_token=TOKEN,
    )
    out["failed"] = dump(store.fail(
        "py-ex-failed", "py-round-1", owner_id=OWNER, lease_token=TOKEN,
        code="recovery_unavailable",
        message="managed interaction cannot be resumed safely after worker loss",
    ))
    print(json.dumps(out))


def read(db, executions):
    store = SQLiteManagedInputStore(db)
    out = {}
    for execution in executions:
        rounds = store.list_rounds(execution)
        out[execution] = [
            {
                "record": dump(r),
                "redacted": (lambda p: dict(p) if p is not None else None)(
                    store.redacted_responses(execution, r.round_id)
                ),
            }
            for r in rounds
        ]
    print(json.dumps(out))


def answer(db, execution, round_id, owner, token, key):
    store = SQLiteManagedInputStore(db)
    responses = {"shipping_address": address("7 Python Lane")}
    first = store.submit_responses(execution, round_id, responses, owner_id=owner,
                                   lease_token=token, response_idempotency_key=key)
    replay = store.submit_responses(execution, round_id, responses, owner_id=owner,
                                    lease_token=token, response_idempotency_key=key)
    assert first == replay, "replay must return the same record"
    print(json.dumps(dump(first)))


def main():
    command, db = sys.argv[1], sys.argv[2]
    if command == "write":
        write(db)
    elif command == "cli-write":
        cli_write(db)
    elif command == "read":
        read(db, sys.argv[3:])
    elif command == "answer":
        answer(db, *sys.argv[3:8])
    else:
        raise SystemExit(f"unknown command {command}")


main()
