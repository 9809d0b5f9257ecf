"""A raw MCP server (stdio, 2026-07-28 only, no SDK) that runs tool calls as tasks.

It implements the tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663) as the
specification text and the official conformance suite's tasks-* scenarios describe it,
because the official MCP Python SDK (mcp 2.3.0) offers the extension mechanism but not
the tasks extension itself:

- ``server/discover`` advertises ``capabilities.extensions["io.modelcontextprotocol/tasks"]``.
- A ``tools/call`` whose ``_meta`` client capabilities declare the extension is answered
  with a ``CreateTaskResult`` (``resultType: "task"``, flat: ``taskId``, ``status``,
  ``createdAt``, ``lastUpdatedAt``, ``ttlMs``, ``pollIntervalMs``). Without the extension the
  tools run synchronously (``sync_only`` always does), except ``failing_job``, whose task
  support is "required": -32021 naming the extension.
- ``tasks/get`` answers the task's ``DetailedTask`` (``resultType: "complete"``): ``working``,
  ``input_required`` with ``inputRequests``, ``completed`` with ``result``, ``failed`` with
  ``error``, ``cancelled``; an unknown id is -32602.
- ``tasks/update`` delivers ``inputResponses``; ``tasks/cancel`` cancels. Both answer the
  empty ack ``{"resultType": "complete"}``. ``tasks/result`` and ``tasks/list`` are -32601.

Tools (task progress follows the clock, so no threads are needed):

- ``confirm_delete {filename}``: working for 0.2 s, then ``input_required`` asking
  ``confirm`` (a form with a boolean ``confirm``) under a key unique to the task, until
  ``tasks/update`` answers it; then working 0.2 s and completed with "deleted FILE" (an
  accept with confirm true) or "kept FILE".
- ``slow_compute {seconds}``: completed with "computed in S s" after ``seconds``.
- ``failing_job``: failed after 0.3 s with the JSON-RPC error -32603 "the job crashed".
- ``sync_only``: never a task.

``--log PATH`` appends one JSON line per request received: ``{"method", "params"}`` with
``params._meta`` reduced to the declared client capabilities, so a test sees exactly what
was delivered (each ``tasks/update``, each ``tasks/cancel``). ``--poll-ms N`` sets the
suggested ``pollIntervalMs`` (default 100; 0 leaves it out).
"""

import argparse
import datetime
import json
import sys
import time
import uuid

parser = argparse.ArgumentParser()
parser.add_argument("--log")
parser.add_argument("--poll-ms", type=int, default=100)
args = parser.parse_args()

EXTENSION = "io.modelcontextprotocol/tasks"
VERSION = "2026-07-28"
SERVER_INFO = {"io.modelcontextprotocol/serverInfo": {"name": "task-server", "version": "1.0"}}

TOOLS = [
    {"name": "confirm_delete", "description": "deletes a file after asking",
     "inputSchema": {"type": "object", "properties": {"filename": {"type": "string"}}},
     "execution": {"taskSupport": "optional"}},
    {"name": "slow_compute", "description": "computes for a while",
     "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}},
     "execution": {"taskSupport": "optional"}},
    {"name": "failing_job", "description": "always fails",
     "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}},
    {"name": "sync_only", "description": "answers at once", "inputSchema": {"type": "object"}},
]

TASKS = {}


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


class Task:
    def __init__(self, tool, arguments):
        self.id = str(uuid.uuid4())
        self.tool = tool
        self.arguments = arguments or {}
        self.started = time.monotonic()
        self.created_at = now_iso()
        self.answer = None  # (time, response) once tasks/update delivered the confirmation
        self.cancelled = False
        self.key = f"confirm-{self.id[:8]}"

    def envelope(self, status):
        task = {"taskId": self.id, "status": status, "createdAt": self.created_at,
                "lastUpdatedAt": now_iso(), "ttlMs": 600000}
        if args.poll_ms:
            task["pollIntervalMs"] = args.poll_ms
        return task

    def detailed(self):
        """The task as tasks/get shows it now."""
        age = time.monotonic() - self.started
        if self.cancelled:
            return self.envelope("cancelled")
        if self.tool == "slow_compute":
            seconds = float(self.arguments.get("seconds", 0))
            if age < seconds:
                return self.envelope("working")
            return dict(self.envelope("completed"), result=text_result(f"computed in {seconds:g} s"))
        if self.tool == "failing_job":
            if age < 0.3:
                return self.envelope("working")
            return dict(self.envelope("failed"), statusMessage="the job crashed",
                        error={"code": -32603, "message": "the job crashed"})
        # confirm_delete
        if age < 0.2:
            return self.envelope("working")
        if self.answer is None:
            question = {"method": "elicitation/create", "params": {
                "mode": "form",
                "message": f"Delete {self.arguments.get('filename')}?",
                "requestedSchema": {"type": "object",
                                    "properties": {"confirm": {"type": "boolean", "title": "Confirm"}},
                                    "required": ["confirm"]}}}
            return dict(self.envelope("input_required"), inputRequests={self.key: question})
        answered_at, response = self.answer
        if time.monotonic() - answered_at < 0.2:
            return self.envelope("working")
        confirmed = response.get("action") == "accept" and (response.get("content") or {}).get("confirm") is True
        verb = "deleted" if confirmed else "kept"
        return dict(self.envelope("completed"), result=text_result(f"{verb} {self.arguments.get('filename')}"))


def error(code, message, data=None):
    body = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return {"error": body}


def call_tool(params):
    name = params.get("name")
    if name not in {tool["name"] for tool in TOOLS}:
        return error(-32602, f"unknown tool {name}")
    if name == "sync_only":
        return {"result": dict(text_result("done at once"), resultType="complete")}
    if not declares_tasks(params):
        if name == "failing_job":
            return error(-32021, "failing_job runs only as a task",
                         {"requiredCapabilities": {"extensions": {EXTENSION: {}}}})
        return {"result": dict(text_result(f"{name} ran synchronously"), resultType="complete")}
    task = Task(name, params.get("arguments"))
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
            return error(-32021, f"{method} needs the tasks extension",
                         {"requiredCapabilities": {"extensions": {EXTENSION: {}}}})
        task = TASKS.get(params.get("taskId"))
        if method == "tasks/get":
            if task is None:
                return error(-32602, "Failed to retrieve task: Task not found")
            return {"result": dict(task.detailed(), resultType="complete")}
        if task is not None and method == "tasks/cancel" and task.detailed()["status"] not in (
                "completed", "failed"):
            task.cancelled = True
        if task is not None and method == "tasks/update" and task.answer is None:
            response = (params.get("inputResponses") or {}).get(task.key)
            if response is not None:
                task.answer = (time.monotonic(), response)
        return {"result": {"resultType": "complete"}}
    if method in ("tasks/result", "tasks/list"):
        return error(-32601, f"{method} is not part of the tasks extension")
    return error(-32601, f"method not found: {method}")


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method = message.get("method")
        if method is None or "id" not in message:
            continue  # notifications (notifications/cancelled) need no answer
        params = message.get("params") or {}
        log(method, params)
        reply = handle(method, params)
        if "result" in reply:
            reply["result"]["_meta"] = SERVER_INFO
        reply.update({"jsonrpc": "2.0", "id": message["id"]})
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


main()
