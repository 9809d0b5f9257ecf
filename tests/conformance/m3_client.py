"""The client command the official MCP conformance suite runs: `m3` itself.

The suite (`@modelcontextprotocol/conformance`, client mode) starts a mock server,
appends its URL as the last argument of this command and names the scenario in
MCP_CONFORMANCE_SCENARIO. This driver turns the scenario into an `m3 run` with
managed input against that URL (a script of the calls the scenario's server expects),
and answers every round from a second process: `m3 respond` (ANSWER_VIA=cli, the
default) or the JSON API of a running `m3 serve` (ANSWER_VIA=api). So the managed
path is what the suite checks: the round is stored, read back and answered by another
process, and the worker delivers the answer.

Environment: M3 (the m3 binary), M3_CONFORMANCE_ANSWER_VIA (cli|api). Exit status:
that of `m3 run` (the suite only reads its own checks).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

M3 = os.environ.get("M3", "m3")
ANSWER_VIA = os.environ.get("M3_CONFORMANCE_ANSWER_VIA", "cli")


def call(tool: str, arguments: dict | None = None) -> dict:
    return {"call": f"conf:{tool}", "arguments": arguments or {}}


def custom_header_calls() -> list[dict]:
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    return [call(c["name"], c.get("arguments")) for c in context.get("toolCalls", [])]


# The calls each scenario's mock server expects; `say` alone just connects.
SCENARIOS = {
    "initialize": lambda: [{"say": "connected"}],
    "tools_call": lambda: [call("add_numbers", {"a": 2, "b": 3})],
    "elicitation-sep1034-client-defaults": lambda: [call("test_client_elicitation_defaults")],
    "sse-retry": lambda: [call("test_reconnection")],
    "request-metadata": lambda: [{"say": "connected"}],
    "sep-2322-client-request-state": lambda: [
        call("test_mrtr_echo_state"),
        call("test_mrtr_unrelated"),
        call("test_mrtr_no_state"),
        call("test_mrtr_no_result_type"),
    ],
    "http-standard-headers": lambda: [
        call("test_headers"),
        call("my-hyphenated-tool"),
        {"prompt": "conf:test_prompt"},
        {"read": "conf:file:///path/to/file%20name.txt"},
    ],
    "http-custom-headers": custom_header_calls,
    "http-invalid-tool-headers": lambda: [call("valid_tool", {"region": "us-west1"})],
    "json-schema-ref-no-deref": lambda: [call("lookup_user", {"id": "ada"})],
}

# Scenarios whose mock server lists tools but answers tools/call with -32601: the checks
# are about how the listing is treated, so the call failing is the expected end.
CALL_NOT_SERVED = {"json-schema-ref-no-deref"}

# How a round of each scenario is answered: (content of every request, --accept-defaults).
ANSWERS = {
    "elicitation-sep1034-client-defaults": ({}, True),
}
DEFAULT_ANSWER = ({"confirmed": True}, False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ApiAnswerer:
    """Answers through `m3 serve`'s JSON API on the same store."""

    def __init__(self, env: dict) -> None:
        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        self.token = "conformance-token"
        self.process = subprocess.Popen(
            [M3, "serve", "--create", "--bind", f"127.0.0.1:{port}", "--token", self.token],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("m3 serve did not start")

    def answer(self, execution: str, round_id: str, responses: dict, defaults: bool) -> None:
        body = {
            "idempotency_key": f"conformance-{round_id}",
            "responses": {k: {"action": "accept", "content": v} for k, v in responses.items()},
            "accept_defaults": defaults,
        }
        request = urllib.request.Request(
            f"{self.base}/api/v1/executions/{execution}/rounds/{round_id}/responses",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as reply:
            if reply.status >= 300:
                raise SystemExit(f"the API refused the answer: {reply.status}")

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


class CliAnswerer:
    """Answers with `m3 respond`, a separate process on the same store."""

    def __init__(self, env: dict) -> None:
        self.env = env

    def answer(self, execution: str, round_id: str, responses: dict, defaults: bool) -> None:
        args = [M3, "respond", execution, round_id, "--idempotency-key", f"conformance-{round_id}"]
        for key, content in responses.items():
            args += ["--accept", f"{key}={json.dumps(content)}"]
        if defaults:
            args.append("--accept-defaults")
        subprocess.run(args, env=self.env, check=True, stdout=subprocess.DEVNULL)

    def close(self) -> None:
        pass


# The OAuth scenarios: m3 connects (a 401 starts authorization), lists and calls nothing
# more than the handshake needs; the checks are about the authorization itself.
AUTH_STEPS = [{"say": "connected"}]
# The OAuth scenarios whose server refuses a later request (a call needing a larger
# scope, a token of an authorization server it no longer trusts): m3 also calls the
# mock server's one tool, so that refusal is met and answered.
AUTH_CALL_SCENARIOS = {"auth/scope-step-up", "auth/authorization-server-migration"}
# Where the driver puts a client secret the suite hands over (m3 reads it from there).
SECRET_VARIABLE = "M3_CONFORMANCE_CLIENT_SECRET"
# A client ID metadata document URL (SEP-991) as an operator would host one; the suite's
# authorization server takes it as the client id without fetching it.
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


def oauth_flags(scenario: str) -> tuple[list[str], dict]:
    """`--server-oauth` flags for an auth scenario: the client the suite pre-registered
    (its context names client_id and client_secret), with the client credentials grant
    for the client-credentials scenarios. Also the environment holding the secret."""
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    flags: list[str] = []
    env: dict = {}
    if scenario.startswith("auth/client-credentials"):
        flags += ["--server-oauth", "conf:grant=client_credentials"]
    else:
        flags += ["--server-oauth", f"conf:client_metadata_url={CLIENT_METADATA_URL}"]
    if context.get("client_id"):
        flags += ["--server-oauth", f"conf:client_id={context['client_id']}"]
    if context.get("client_secret"):
        env[SECRET_VARIABLE] = context["client_secret"]
        flags += ["--server-oauth", f"conf:client_secret_env={SECRET_VARIABLE}"]
    return flags, env


# The suite's authorization servers issue tokens starting with these; none may appear in
# anything m3 writes outside its sealed store rows.
TOKEN_PREFIXES = (b"test-token", b"cc-token")
# The key sealing OAuth tokens in the store during the auth scenarios (32 bytes, base64).
OAUTH_KEY = "bTMtY29uZm9ybWFuY2Utb2F1dGgta2V5LTMyLWJ5dGU="


def leaked_tokens(home: str, texts: dict[str, bytes], execution: str, env: dict) -> list[str]:
    """Where a token of the suite's authorization server shows up: m3's output and
    trace-level logs, the execution as `m3 status` and `m3 rounds` show it, and the store's bytes
    (where the credentials row must be sealed). Also that the row is there, sealed."""
    places = dict(texts)
    found: list[str] = []
    if execution:
        for command in ("status", "rounds"):
            shown = subprocess.run([M3, "--json", command, execution], env=env,
                                   capture_output=True, check=False)
            if shown.returncode != 0:
                found.append(f"m3 {command} (failed: {shown.stderr[-200:]!r})")
            places[f"m3 {command}"] = shown.stdout + shown.stderr
    for name in os.listdir(home):
        if name.startswith("m3.sqlite") and os.path.isfile(os.path.join(home, name)):
            with open(os.path.join(home, name), "rb") as f:
                places[name] = f.read()
    found += [where for where, data in places.items()
              if any(prefix in data for prefix in TOKEN_PREFIXES)]
    store = b"".join(data for where, data in places.items() if where.startswith("m3.sqlite"))
    if b"m3oauth1." not in store:
        found.append("the store (no sealed credentials row)")
    return found


def authorize(url: str) -> None:
    """What the person's browser does: open the authorization URL, whose answer redirects
    to m3's loopback listener, which completes the authorization."""
    with urllib.request.urlopen(url, timeout=30) as reply:
        reply.read()


def main() -> int:
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    steps = SCENARIOS.get(scenario)
    if steps is None and scenario in AUTH_CALL_SCENARIOS:
        steps = lambda: [*AUTH_STEPS, call("test-tool")]  # noqa: E731
    elif steps is None and scenario.startswith("auth/"):
        steps = lambda: AUTH_STEPS  # noqa: E731
    if steps is None:
        print(f"m3 conformance driver: no script for scenario '{scenario}'", file=sys.stderr)
        return 2
    content, defaults = ANSWERS.get(scenario, DEFAULT_ANSWER)
    auth = scenario.startswith("auth/")
    extra_flags, extra_env = oauth_flags(scenario) if auth else ([], {})
    if auth:
        # Tokens sealed in the store, and every log line m3 can write, to look for leaks.
        extra_env.update(M3_OAUTH_KEY=OAUTH_KEY, M3_LOG="trace")
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, M3_DB=os.path.join(home, "m3.sqlite"), **extra_env)
        script = os.path.join(home, "script.json")
        with open(script, "w") as f:
            json.dump({"steps": steps()}, f)
        answerer = ApiAnswerer(env) if ANSWER_VIA == "api" else CliAnswerer(env)
        log_path = os.path.join(home, "run.log")
        log = open(log_path, "wb") if auth else None  # noqa: SIM115
        run = subprocess.Popen(
            [M3, "--json", "run", "--server", f"conf={url}", "--server-trust", "conf=loopback",
             "--script", script, "--human-input", "managed", "--timeout", "60", *extra_flags],
            env=env,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        output: list[str] = []
        execution = ""
        jsonrpc_code = None
        try:
            assert run.stdout is not None
            for line in run.stdout:
                output.append(line)
                event = json.loads(line)
                if event.get("type") == "execution":
                    execution = event["execution_id"]
                elif event.get("type") == "authorization_required":
                    authorize(event["url"])
                elif event.get("type") == "round_pending":
                    responses = {key: content for key in event["requests"]}
                    answerer.answer(execution, event["round_id"], responses, defaults)
                elif event.get("type") == "result":
                    print(json.dumps(event.get("snapshot", {}).get("outcome")), file=sys.stderr)
                    error = event.get("error") or {}
                    jsonrpc_code = (error.get("details") or {}).get("jsonrpc_code")
            status = run.wait(timeout=60)
            if log is not None:
                log.close()
                with open(log_path, "rb") as f:
                    logged = f.read()
                sys.stderr.write(logged.decode(errors="replace")[-4000:])
                texts = {"m3 run's output": "".join(output).encode(), "m3 run's log": logged}
                leaks = leaked_tokens(home, texts, execution, env)
                if leaks:
                    print(f"m3 conformance driver: OAuth token check failed: {leaks}", file=sys.stderr)
                    return 1
            if scenario in CALL_NOT_SERVED and status == 9 and jsonrpc_code == -32601:
                return 0
            return status
        finally:
            answerer.close()


if __name__ == "__main__":
    sys.exit(main())
