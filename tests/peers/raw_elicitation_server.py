"""A raw MCP server, written by hand (no SDK), that asks one elicitation.

Usage: raw_elicitation_server.py --era modern|legacy --params JSON [--http PORT]

It lists one tool, ``ask``. Calling it asks for input with exactly the
``elicitation/create`` params given in ``--params`` (message, requestedSchema or
url, _meta, task, anything else), byte for byte:

- ``modern`` (2026-07-28): the call answers ``input_required`` with the request
  under key ``q``; the retry carrying ``inputResponses`` completes.
- ``legacy`` (2025-11-25): the server sends ``elicitation/create`` while the call
  is open and completes the call when the client answers.

Over stdio (the default) it reads and writes one JSON-RPC message per line.
With ``--http PORT`` it serves Streamable HTTP on 127.0.0.1:PORT/mcp and answers
every POST with plain ``application/json`` (never an event stream); in the legacy
era it issues an ``Mcp-Session-Id``, requires it afterwards, and sends its
``elicitation/create`` on the GET event stream. ``--echo-header NAME`` makes it
copy the value of the ``tools/call`` request's header NAME into the message (a
server leaking its credential into a question).

The completed tool result's text is the JSON of the answer the server received
(``{"action": ..., "content": ...}``), so a test sees exactly what was delivered.

``--meta-log PATH`` appends one JSON line per request received (stdio or HTTP):
``{"method": ..., "meta": <the request's params._meta or null>}``, so a test sees the
trace context (``traceparent``, ``tracestate``) the client sent.
"""

import argparse
import json
import queue
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("--era", default="modern")
parser.add_argument("--params", required=True)
parser.add_argument("--http", type=int)
parser.add_argument("--meta-log", help="append each request's method and params._meta to this file")
parser.add_argument("--echo-header", help="HTTP only: append this request header's value to the message")
args = parser.parse_args()
PARAMS = json.loads(args.params)
LEGACY = args.era == "legacy"

TOOL = {"name": "ask", "description": "asks one question", "inputSchema": {"type": "object"}}


def log_meta(msg):
    """Records a request's method and ``_meta`` when ``--meta-log`` asks for it."""
    if args.meta_log and msg.get("method") is not None and msg.get("id") is not None:
        meta = (msg.get("params") or {}).get("_meta")
        with open(args.meta_log, "a", encoding="utf-8") as log:
            log.write(json.dumps({"method": msg["method"], "meta": meta}) + "\n")


def elicitation(params):
    return {"jsonrpc": "2.0", "id": 900, "method": "elicitation/create", "params": params}


def result(msg_id, value):
    return {"jsonrpc": "2.0", "id": msg_id, "result": value}


def delivered(msg_id, answer):
    return result(msg_id, {"content": [{"type": "text", "text": json.dumps(answer, sort_keys=True)}]})


def not_found(msg_id):
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32601, "message": "Method not found"}}


def answer(msg, params=PARAMS):
    """The reply to a request other than a legacy ``tools/call``."""
    method, msg_id = msg.get("method"), msg.get("id")
    if method == "server/discover":
        if LEGACY:
            return not_found(msg_id)
        return result(msg_id, {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                               "resultType": "complete", "ttlMs": 0, "cacheScope": "private",
                               "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "raw-peer", "version": "0.1"}}})
    if method == "initialize":
        return result(msg_id, {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                               "serverInfo": {"name": "raw-peer", "version": "0.1"}})
    if method == "tools/list":
        return result(msg_id, {"tools": [TOOL]})
    if method == "tools/call":
        responses = (msg.get("params") or {}).get("inputResponses")
        if responses:
            return delivered(msg_id, responses.get("q"))
        return result(msg_id, {"resultType": "input_required", "requestState": "raw-state",
                               "inputRequests": {"q": {"method": "elicitation/create", "params": params}}})
    if method == "ping":
        return result(msg_id, {})
    return not_found(msg_id)


def serve_stdio():
    def send(message):
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    pending_call = None
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        log_meta(msg)
        method, msg_id = msg.get("method"), msg.get("id")
        if method is None and msg_id is not None:
            # The client's answer to our legacy elicitation/create.
            if pending_call is not None:
                send(delivered(pending_call, msg.get("result", msg.get("error"))))
                pending_call = None
        elif msg_id is None:
            continue
        elif LEGACY and method == "tools/call":
            pending_call = msg_id
            send(elicitation(PARAMS))
        else:
            send(answer(msg))


SESSION = "raw-session-1"
EVENTS = queue.Queue()  # server-to-client requests for the GET stream
ANSWERS = queue.Queue()  # the client's answers to them


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *_):
        pass

    def reply(self, status, body=b"", content_type=None, session=False):
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        if session:
            self.send_header("Mcp-Session-Id", SESSION)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def session_ok(self, msg):
        return not LEGACY or msg.get("method") == "initialize" or self.headers.get("Mcp-Session-Id") == SESSION

    def do_POST(self):
        msg = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        log_meta(msg)
        if not self.session_ok(msg):
            return self.reply(400, b"missing or unknown Mcp-Session-Id", "text/plain")
        method, msg_id = msg.get("method"), msg.get("id")
        if method is None and msg_id is not None:
            ANSWERS.put(msg.get("result", msg.get("error")))
            return self.reply(202)
        if msg_id is None:
            return self.reply(202)
        params = PARAMS
        if args.echo_header and method == "tools/call":
            params = dict(PARAMS, message=PARAMS["message"] + " " + self.headers.get(args.echo_header, ""))
        if LEGACY and method == "tools/call":
            EVENTS.put(elicitation(params))
            reply = delivered(msg_id, ANSWERS.get())
        else:
            reply = answer(msg, params)
        self.reply(200, json.dumps(reply).encode(), "application/json", session=LEGACY)

    def do_GET(self):
        if not LEGACY:
            return self.reply(405)
        if self.headers.get("Mcp-Session-Id") != SESSION:
            return self.reply(400, b"missing or unknown Mcp-Session-Id", "text/plain")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        try:
            while True:
                try:
                    event = EVENTS.get(timeout=1)
                    self.wfile.write(b"event: message\ndata: " + json.dumps(event).encode() + b"\n\n")
                except queue.Empty:
                    self.wfile.write(b": ping\n\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_DELETE(self):
        self.reply(200)


if args.http is None:
    serve_stdio()
else:
    server = ThreadingHTTPServer(("127.0.0.1", args.http), Handler)
    server.daemon_threads = True
    server.serve_forever()
