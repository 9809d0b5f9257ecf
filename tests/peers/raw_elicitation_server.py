"""A raw stdio MCP server, written by hand (no SDK), that asks one elicitation.

Usage: raw_elicitation_server.py --era modern|legacy --params JSON

It lists one tool, ``ask``. Calling it asks for input with exactly the
``elicitation/create`` params given in ``--params`` (message, requestedSchema or
url, _meta, task, anything else), byte for byte:

- ``modern`` (2026-07-28): the call answers ``input_required`` with the request
  under key ``q``; the retry carrying ``inputResponses`` completes.
- ``legacy`` (2025-11-25): the server sends ``elicitation/create`` while the call
  is open and completes the call when the client answers.

The completed tool result's text is the JSON of the answer the server received
(``{"action": ..., "content": ...}``), so a test sees exactly what was delivered.
"""

import argparse
import json
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--era", default="modern")
parser.add_argument("--params", required=True)
args = parser.parse_args()
PARAMS = json.loads(args.params)

TOOL = {"name": "ask", "description": "asks one question", "inputSchema": {"type": "object"}}


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def result(msg_id, value):
    send({"jsonrpc": "2.0", "id": msg_id, "result": value})


def delivered(msg_id, answer):
    result(msg_id, {"content": [{"type": "text", "text": json.dumps(answer, sort_keys=True)}]})


pending_call = None

for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    msg = json.loads(line)
    method = msg.get("method")
    msg_id = msg.get("id")
    if method is None and msg_id is not None:
        # The client's answer to our legacy elicitation/create.
        if pending_call is not None:
            delivered(pending_call, msg.get("result", msg.get("error")))
            pending_call = None
        continue
    if msg_id is None:
        continue
    if method == "server/discover":
        if args.era == "legacy":
            send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32601, "message": "Method not found"}})
        else:
            result(msg_id, {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "resultType": "complete",
                            "ttlMs": 0, "cacheScope": "private",
                            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "raw-peer", "version": "0.1"}}})
    elif method == "initialize":
        result(msg_id, {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                        "serverInfo": {"name": "raw-peer", "version": "0.1"}})
    elif method == "tools/list":
        result(msg_id, {"tools": [TOOL]})
    elif method == "tools/call":
        params = msg.get("params") or {}
        responses = params.get("inputResponses")
        if args.era == "legacy":
            pending_call = msg_id
            send({"jsonrpc": "2.0", "id": 900, "method": "elicitation/create", "params": PARAMS})
        elif responses:
            delivered(msg_id, responses.get("q"))
        else:
            result(msg_id, {"resultType": "input_required", "requestState": "raw-state",
                            "inputRequests": {"q": {"method": "elicitation/create", "params": PARAMS}}})
    elif method == "ping":
        result(msg_id, {})
    else:
        send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32601, "message": "Method not found"}})
