"""A raw MCP server (2026-07-28 only, no SDK) that runs tool calls as tasks.

It implements the tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663) as the
specification text and the official conformance suite's tasks-* server scenarios
describe it (scripts/conformance.sh runs those scenarios against it), because the
official MCP Python SDK (mcp 2.3.0) offers an extension mechanism but not the tasks
extension itself:

- ``server/discover`` advertises ``capabilities.extensions["io.modelcontextprotocol/tasks"]``.
- A ``tools/call`` whose ``_meta`` client capabilities declare the extension is answered
  with a ``CreateTaskResult`` (``resultType: "task"``, flat: ``taskId``, ``status``,
  ``createdAt``, ``lastUpdatedAt``, ``ttlMs``, ``pollIntervalMs``). Without the extension the
  tools run synchronously, except those whose task support is "required": -32021 naming
  the extension. ``greet`` is never a task.
- ``tasks/get`` answers the task's ``DetailedTask`` (``resultType: "complete"``): ``working``,
  ``input_required`` with the still unanswered ``inputRequests``, ``completed`` with
  ``result``, ``failed`` with ``error``, ``cancelled``; an unknown id is -32602.
- ``tasks/update`` delivers ``inputResponses`` (the first answer per key counts);
  ``tasks/cancel`` cancels a running task. Both answer the empty ack
  ``{"resultType": "complete"}``. ``tasks/result`` and ``tasks/list`` are -32601.

Tools (task progress follows the clock, so no worker threads are needed):

- ``confirm_delete {filename}``: working 0.2 s, then ``input_required`` asking a boolean
  ``confirm`` under a key unique to the task until ``tasks/update`` answers it; then
  working 0.2 s and completed with "deleted FILE" (accepted with confirm true) or "kept FILE".
- ``multi_input``: asks two questions at once; completes with the answers' JSON.
- ``slow_compute {seconds}``: completed with "computed in S s" after ``seconds``.
- ``failing_job`` (task required): completed after 0.2 s with a tool error (``isError``).
- ``protocol_error_job``: failed after 0.2 s with the JSON-RPC error -32603 "the job crashed".
- ``test_tool_with_task`` (task required): first an MRTR ``input_required`` result asking
  ``user_name``; the retry answering it becomes a task whose result is "Hello, NAME!".
- ``greet {name}``: "Hello, NAME!" at once.

Over stdio by default; ``--http PORT`` serves Streamable HTTP on 127.0.0.1:PORT/mcp (plain
JSON answers) and rejects a request whose ``Mcp-Method`` or ``Mcp-Name`` header does not
match its body (HTTP 400, -32020; for ``tasks/*`` ``Mcp-Name`` is the task id).

``--log PATH`` appends one JSON line per request received: ``{"method", "params"}`` with
``params._meta`` reduced to the declared client capabilities (``declared``), so a test
sees exactly what was delivered (each ``tasks/update``, each ``tasks/cancel``).
``--poll-ms N`` sets the suggested ``pollIntervalMs`` (default 100; 0 leaves it out).
"""

import argparse
import base64
import datetime
import json
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("--log")
parser.add_argument("--poll-ms", type=int, default=100)
parser.add_argument("--http", type=int, help="serve Streamable HTTP on 127.0.0.1:PORT/mcp")
args = parser.parse_args()

EXTENSION = "io.modelcontextprotocol/tasks"
VERSION = "2026-07-28"
SERVER_INFO = {"io.modelcontextprotocol/serverInfo": {"name": "task-server", "version": "1.0"}}

TOOLS = [
    {"name": "confirm_delete", "description": "deletes a file after asking",
     "inputSchema": {"type": "object", "properties": {"filename": {"type": "string"}}},
     "execution": {"taskSupport": "optional"}},
    {"name": "multi_input", "description": "asks two questions at once",
     "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}},
    {"name": "slow_compute", "description": "computes for a while",
     "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}},
     "execution": {"taskSupport": "optional"}},
    {"name": "failing_job", "description": "a tool error (isError) after a while",
     "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}},
    {"name": "protocol_error_job", "description": "fails with a JSON-RPC error",
     "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}},
    {"name": "test_tool_with_task", "description": "asks a name (input_required), then runs as a task",
     "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}},
    {"name": "greet", "description": "says hello at once",
     "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}}},
]

TASKS = {}
LOCK = threading.RLock()


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def log(method, params):
    if not args.log:
        return
    params = dict(params or {})
    meta = params.pop("_meta", None) or {}
    params["declared"] = meta.get("io.modelcontextprotocol/clientCapabilities")
    with open(args.log, "a", encoding="utf-8") as out:
        out.write(json.dumps({"method": method, "params": params}) + "\n")


def declares_tasks(params):
    meta = (params or {}).get("_meta") or {}
    capabilities = meta.get("io.modelcontextprotocol/clientCapabilities") or {}
    return EXTENSION in (capabilities.get("extensions") or {})


def text_result(text, is_error=False):
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


def form(message, properties):
    return {"method": "elicitation/create", "params": {
        "mode": "form", "message": message,
        "requestedSchema": {"type": "object", "properties": properties,
                            "required": sorted(properties)}}}


class Task:
    def __init__(self, tool, arguments, gathered=None):
        self.id = str(uuid.uuid4())
        self.tool = tool
        self.arguments = arguments or {}
        self.gathered = gathered  # what an MRTR round asked before the task existed
        self.started = time.monotonic()
        self.created_at = now_iso()
        self.cancelled = False
        short = self.id[:8]
        if tool == "confirm_delete":
            self.questions = {f"confirm-{short}": form(
                f"Delete {self.arguments.get('filename')}?",
                {"confirm": {"type": "boolean", "title": "Confirm"}})}
        elif tool == "multi_input":
            self.questions = {
                f"name-{short}": form("Your name?", {"name": {"type": "string"}}),
                f"sure-{short}": form("Sure?", {"confirm": {"type": "boolean"}}),
            }
        else:
            self.questions = {}
        self.answers = {}  # key -> (time delivered, response), the first delivery only

    def envelope(self, status):
        task = {"taskId": self.id, "status": status, "createdAt": self.created_at,
                "lastUpdatedAt": now_iso(), "ttlMs": 600000}
        if args.poll_ms:
            task["pollIntervalMs"] = args.poll_ms
        return task

    def deliver(self, responses):
        for key, response in (responses or {}).items():
            if key in self.questions and key not in self.answers:
                self.answers[key] = (time.monotonic(), response)

    def detailed(self):
        """The task as tasks/get shows it now (progress follows the clock)."""
        age = time.monotonic() - self.started
        if self.cancelled:
            return self.envelope("cancelled")
        if self.tool == "slow_compute":
            seconds = float(self.arguments.get("seconds", 0))
            if age < seconds:
                return self.envelope("working")
            return dict(self.envelope("completed"), result=text_result(f"computed in {seconds:g} s"))
        if age < 0.2:
            return self.envelope("working")
        if self.tool == "failing_job":
            return dict(self.envelope("completed"), result=text_result("the job failed: disk full", True))
        if self.tool == "protocol_error_job":
            return dict(self.envelope("failed"), statusMessage="the job crashed",
                        error={"code": -32603, "message": "the job crashed"})
        if self.tool == "test_tool_with_task":
            return dict(self.envelope("completed"), result=text_result(f"Hello, {self.gathered}!"))
        pending = {k: q for k, q in self.questions.items() if k not in self.answers}
        if pending:
            return dict(self.envelope("input_required"), inputRequests=pending)
        if time.monotonic() - max(t for t, _ in self.answers.values()) < 0.2:
            return self.envelope("working")
        responses = [r for _, r in self.answers.values()]
        if self.tool == "multi_input":
            return dict(self.envelope("completed"), result=text_result(json.dumps(responses)))
        response = responses[0]
        confirmed = response.get("action") == "accept" and (response.get("content") or {}).get("confirm") is True
        verb = "deleted" if confirmed else "kept"
        return dict(self.envelope("completed"), result=text_result(f"{verb} {self.arguments.get('filename')}"))


def error(code, message, data=None):
    body = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return {"error": body}


def needs_extension(what):
    return error(-32021, f"{what} needs the tasks extension",
                 {"requiredCapabilities": {"extensions": {EXTENSION: {}}}})


def call_tool(params):
    name = params.get("name")
    arguments = params.get("arguments") or {}
    if name not in {tool["name"] for tool in TOOLS}:
        return error(-32602, f"unknown tool {name}")
    if name == "greet":
        return {"result": dict(text_result(f"Hello, {arguments.get('name', 'World')}!"),
                               resultType="complete")}
    required = {"failing_job", "test_tool_with_task"}
    if not declares_tasks(params):
        if name in required:
            return needs_extension(name)
        return {"result": dict(text_result(f"{name} ran synchronously"), resultType="complete")}
    gathered = None
    if name == "test_tool_with_task":
        # MRTR first: ask the name in the result, become a task once it is answered.
        answer = (params.get("inputResponses") or {}).get("user_name") or {}
        gathered = (answer.get("content") or {}).get("name")
        if answer.get("action") != "accept" or not gathered:
            return {"result": {"resultType": "input_required", "requestState": "asked-name",
                               "inputRequests": {"user_name": form("Your name?", {"name": {"type": "string"}})}}}
    task = Task(name, arguments, gathered)
    with LOCK:
        TASKS[task.id] = task
    return {"result": dict(task.envelope("working"), resultType="task")}


def handle(method, params):
    if method == "server/discover":
        return {"result": {"supportedVersions": [VERSION], "resultType": "complete",
                           "capabilities": {"tools": {}, "extensions": {EXTENSION: {}}},
                           "ttlMs": 0, "cacheScope": "private"}}
    if method == "tools/list":
        return {"result": {"tools": TOOLS, "resultType": "complete", "ttlMs": 0,
                           "cacheScope": "private"}}
    if method == "tools/call":
        return call_tool(params)
    if method in ("tasks/get", "tasks/update", "tasks/cancel"):
        if not declares_tasks(params):
            return needs_extension(method)
        task = TASKS.get(params.get("taskId"))
        if method == "tasks/get":
            if task is None:
                return error(-32602, "Failed to retrieve task: Task not found")
            return {"result": dict(task.detailed(), resultType="complete")}
        if task is not None and method == "tasks/cancel" and task.detailed()["status"] not in (
                "completed", "failed"):
            task.cancelled = True
        if task is not None and method == "tasks/update":
            task.deliver(params.get("inputResponses"))
        return {"result": {"resultType": "complete"}}
    if method in ("tasks/result", "tasks/list"):
        return error(-32601, f"{method} is not part of the tasks extension")
    return error(-32601, f"method not found: {method}")


def answer(message):
    """The reply to one JSON-RPC request (None for a notification)."""
    method = message.get("method")
    if method is None or "id" not in message:
        return None  # notifications (notifications/cancelled) need no answer
    params = message.get("params") or {}
    with LOCK:
        log(method, params)
        reply = handle(method, params)
    if "result" in reply:
        reply["result"]["_meta"] = SERVER_INFO
    reply.update({"jsonrpc": "2.0", "id": message["id"]})
    return reply


def header_value(raw):
    """A SEP-2243 header value, Base64-unwrapped when the sender wrapped it."""
    if raw and raw.startswith("=?base64?") and raw.endswith("?="):
        return base64.b64decode(raw[len("=?base64?"):-2]).decode()
    return raw


def header_mismatch(headers, message):
    """SEP-2243 (and SEP-2663 for tasks/*): Mcp-Method and Mcp-Name must match the body."""
    method = message.get("method")
    if method is None or "id" not in message:
        return None
    if header_value(headers.get("Mcp-Method")) != method:
        return f"Mcp-Method {headers.get('Mcp-Method')!r} does not match {method!r}"
    params = message.get("params") or {}
    key = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
           "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}.get(method)
    if key is not None and header_value(headers.get("Mcp-Name")) != params.get(key):
        return f"Mcp-Name {headers.get('Mcp-Name')!r} does not match params.{key}"
    return None


class Http(BaseHTTPRequestHandler):
    def log_message(self, *_):
        pass

    def send(self, status, body=None):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        message = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        mismatch = header_mismatch(self.headers, message)
        if mismatch:
            log("header-mismatch", {"detail": mismatch})
            self.send(400, {"jsonrpc": "2.0", "id": message.get("id"),
                            "error": {"code": -32020, "message": mismatch}})
            return
        reply = answer(message)
        if reply is None:
            self.send(202)
        else:
            self.send(200, reply)

    def do_GET(self):
        self.send(405)

    def do_DELETE(self):
        self.send(405)


def main():
    if args.http:
        server = ThreadingHTTPServer(("127.0.0.1", args.http), Http)
        print(f"http://127.0.0.1:{args.http}/mcp", flush=True)
        server.serve_forever()
        return
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


main()
