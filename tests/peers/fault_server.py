"""A deliberately misbehaving stdio MCP server, written by hand (no SDK).

Usage: fault_server.py --fault MODE [--era modern|legacy|silent-legacy|empty-discover|error-discover]

It answers the handshake correctly (``server/discover`` for 2026-07-28, or
``initialize`` when ``--era legacy``: then discover gets -32601; with
``--era silent-legacy`` discover is never answered, like a server that ignores
unknown methods; ``empty-discover`` answers discover with an empty result and
``error-discover`` with -32603, like servers that answer every unknown method so) and
lists one
tool, ``ship``. Calling ``ship`` triggers the fault:

- ``crash-mid-call``              exit(3) without answering
- ``garbage``                     write a line that is not JSON, then wait
- ``oversized``                   write one 32 MiB line, then wait
- ``endless-rounds``              modern: answer every call with a fresh input_required round;
                                  legacy: send elicitation/create after every answer, forever
- ``hang``                        never answer
- ``deep``                        answer with a result nested 200 levels deep (valid JSON past
                                  serde_json's 128-level recursion limit)
- ``deep-result``                 answer with a structuredContent nested 124 levels deep (readable
                                  JSON, over M3's nesting bound of 64)
- ``many-requests``               modern: input_required with 5,000 requests in one round;
                                  legacy: one elicitation/create with a 5,000-property schema
- ``huge-message``                ask one question whose message is 5 MB (both eras)
- ``malformed-input-required``    answer ``{"resultType": "input_required"}`` (neither field)
- ``bad-request-method``          input_required whose request is ``sampling/createMessage``
- ``withdraw``                    legacy: send elicitation/create, withdraw it 0.3 s later with
                                  notifications/cancelled, then answer the call with text "withdrawn"
"""

import argparse
import json
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--fault", required=True)
parser.add_argument("--era", default="modern")
args = parser.parse_args()

out = sys.stdout


def send(message):
    out.write(json.dumps(message) + "\n")
    out.flush()


def result(msg_id, value):
    send({"jsonrpc": "2.0", "id": msg_id, "result": value})


TOOL = {"name": "ship", "description": "misbehaves", "inputSchema": {"type": "object"}}
FORM = {
    "method": "elicitation/create",
    "params": {"message": "again?", "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}},
}

server_request_id = 100
pending_call = None


def fault(msg_id):
    global server_request_id, pending_call
    mode = args.fault
    if mode == "crash-mid-call":
        sys.stderr.write("crashing now\n")
        sys.stderr.flush()
        sys.exit(3)
    if mode == "garbage":
        out.write("this is not json {{{\n")
        out.flush()
        return
    if mode == "oversized":
        out.write('{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"' + "x" * (32 * 1024 * 1024) + '"}}\n')
        out.flush()
        return
    if mode == "hang":
        return
    if mode == "deep":
        nested = '{"a":' * 200 + '1' + '}' * 200
        out.write('{"jsonrpc":"2.0","id":' + json.dumps(msg_id) + ',"result":{"content":[],"structuredContent":' + nested + '}}\n')
        out.flush()
        return
    if mode == "deep-result":
        nested = '{"a":' * 123 + '1' + '}' * 123
        out.write('{"jsonrpc":"2.0","id":' + json.dumps(msg_id) + ',"result":{"content":[],"structuredContent":' + nested + '}}\n')
        out.flush()
        return
    if mode in ("many-requests", "huge-message"):
        message = "x" * (5 * 1000 * 1000) if mode == "huge-message" else "again?"
        if mode == "many-requests" and args.era != "modern":
            props = {f"p{i}": {"type": "string"} for i in range(5000)}
            params = {"message": message, "requestedSchema": {"type": "object", "properties": props}}
        else:
            params = dict(FORM["params"], message=message)
        if args.era == "modern":
            count = 5000 if mode == "many-requests" else 1
            requests = {f"q{i}": {"method": "elicitation/create", "params": params} for i in range(count)}
            result(msg_id, {"resultType": "input_required", "inputRequests": requests, "requestState": "s"})
        else:
            server_request_id += 1
            send({"jsonrpc": "2.0", "id": server_request_id, "method": "elicitation/create", "params": params})
        return
    if mode == "withdraw":
        server_request_id += 1
        send({"jsonrpc": "2.0", "id": server_request_id, "method": "elicitation/create", "params": FORM["params"]})
        time.sleep(0.3)
        send({"jsonrpc": "2.0", "method": "notifications/cancelled",
              "params": {"requestId": server_request_id, "reason": "server gave up"}})
        result(msg_id, {"content": [{"type": "text", "text": "withdrawn"}]})
        return
    if mode == "malformed-input-required":
        result(msg_id, {"resultType": "input_required"})
        return
    if mode == "bad-request-method":
        result(msg_id, {"resultType": "input_required", "inputRequests": {"s": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}}, "requestState": "x"})
        return
    if mode == "endless-rounds":
        if args.era == "modern":
            result(msg_id, {"resultType": "input_required", "inputRequests": {"again": FORM}, "requestState": str(time.time())})
        else:
            pending_call = msg_id
            server_request_id += 1
            send({"jsonrpc": "2.0", "id": server_request_id, "method": "elicitation/create", "params": FORM["params"]})
        return
    raise SystemExit(f"unknown fault {mode}")


for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    msg = json.loads(line)
    method = msg.get("method")
    msg_id = msg.get("id")
    if method is None and msg_id is not None:
        # A response to our elicitation/create (legacy endless rounds): ask again.
        if args.fault == "endless-rounds" and pending_call is not None:
            server_request_id += 1
            send({"jsonrpc": "2.0", "id": server_request_id, "method": "elicitation/create", "params": FORM["params"]})
        continue
    if msg_id is None:
        continue
    if method == "server/discover":
        if args.era == "silent-legacy":
            continue
        if args.era == "legacy":
            send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32601, "message": "Method not found"}})
        elif args.era == "empty-discover":
            result(msg_id, {})
        elif args.era == "error-discover":
            send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32603, "message": "unknown method"}})
        else:
            result(msg_id, {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "resultType": "complete",
                            "ttlMs": 0, "cacheScope": "private",
                            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "fault-peer", "version": "0.1"}}})
    elif method == "initialize":
        result(msg_id, {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                        "serverInfo": {"name": "fault-peer", "version": "0.1"}})
    elif method == "tools/list":
        result(msg_id, {"tools": [TOOL]})
    elif method == "tools/call":
        fault(msg_id)
    elif method == "ping":
        result(msg_id, {})
    else:
        send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32601, "message": "Method not found"}})
