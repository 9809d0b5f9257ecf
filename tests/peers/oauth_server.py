"""An MCP server behind OAuth, with its own authorization server: the official MCP Python
SDK (mcp 2.3.0) as both the resource server and the authorization server, in one
process, the way the SDK's own examples run it.

The authorization server registers clients dynamically, approves every authorization
request at once (it redirects straight back with a code, as a person clicking "allow"
would), and issues access tokens that expire after ``--ttl`` seconds with refresh
tokens. Every grant it answers is appended to ``--log`` as one line
(``authorization_code`` or ``refresh_token``), so a test can tell a refresh from a new
authorization. Tool ``whoami`` answers ``authorized``.

``--confidential``: every client registered dynamically is made confidential (issued a
secret, authenticating with ``client_secret_basic``), as some authorization servers do
whatever the client asks for.

``--step-up``: every request needs scope ``notes:read``; a ``tools/call`` of
``write_note`` also needs ``notes:write`` and one of ``erase_notes`` needs
``notes:admin``, each refused with ``403`` and ``WWW-Authenticate: Bearer
error="insufficient_scope", scope="..."`` when the token lacks it. ``notes:admin`` is
never granted. Grant lines then name the scopes granted.

Usage: ``oauth_server.py PORT --ttl SECONDS --log FILE [--confidential] [--step-up]``.
"""

from __future__ import annotations

import argparse
import base64
import json
import secrets
import time
from urllib.parse import parse_qsl, unquote, urlencode

import uvicorn

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken


class Provider:
    """Keeps clients, codes and tokens in memory; logs each grant."""

    def __init__(self, ttl: int, log: str, confidential: bool, scoped: bool) -> None:
        self.ttl, self.log = ttl, log
        self.confidential, self.scoped = confidential, scoped
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.access: dict[str, AccessToken] = {}

    def grant(self, kind: str, scopes: list[str]) -> None:
        line = " ".join([kind, *scopes]) if self.scoped else kind
        with open(self.log, "a") as f:
            f.write(line + "\n")

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        if self.confidential:
            # The SDK answers the registration with this same record.
            client_info.client_secret = secrets.token_hex(16)
            client_info.token_endpoint_auth_method = "client_secret_basic"
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(16)
        self.codes[code] = AuthorizationCode(
            code=code, scopes=[s for s in params.scopes or [] if s != NEVER_GRANTED],
            expires_at=time.time() + 300,
            client_id=client.client_id, code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client, authorization_code: str):
        return self.codes.get(authorization_code)

    def tokens(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = "peer-at-" + secrets.token_urlsafe(16), "peer-rt-" + secrets.token_urlsafe(16)
        expires = int(time.time()) + self.ttl
        self.access[access] = AccessToken(token=access, client_id=client_id, scopes=scopes,
                                          expires_at=expires, resource=resource)
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes,
                                             resource=resource)
        return OAuthToken(access_token=access, token_type="Bearer", expires_in=self.ttl,
                          refresh_token=refresh, scope=" ".join(scopes) or None)

    async def exchange_authorization_code(self, client, authorization_code: AuthorizationCode) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        self.grant("authorization_code", authorization_code.scopes)
        return self.tokens(client.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(self, client, refresh_token: str):
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(self, client, refresh_token: RefreshToken, scopes: list[str]) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)
        self.grant("refresh_token", scopes or refresh_token.scopes)
        return self.tokens(client.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token) -> None:
        self.access.pop(getattr(token, "token", ""), None)


# The scope a `tools/call` of each tool needs beyond `notes:read` (with --step-up).
TOOL_SCOPES = {"write_note": "notes:write", "erase_notes": "notes:admin"}
# The scope the authorization server never grants.
NEVER_GRANTED = "notes:admin"


async def read_body(receive) -> bytes:
    body, more = b"", True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    return body


def replaying(body: bytes, receive):
    """An ASGI `receive` that gives `body` first (it was read already)."""
    replayed = False

    async def replay():
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


class Checks:
    """ASGI middleware for --step-up and --confidential (see the module docs)."""

    def __init__(self, app, provider: Provider, metadata_url: str) -> None:
        self.app, self.provider, self.metadata_url = app, provider, metadata_url

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        if scope["path"] == "/token":
            body = with_basic_client_id(scope, await read_body(receive))
            return await self.app(scope, replaying(body, receive), send)
        if scope["path"] != "/mcp" or not self.provider.scoped:
            return await self.app(scope, receive, send)
        body = await read_body(receive)
        needed = self.missing_scope(scope, body)
        if needed is None:
            return await self.app(scope, replaying(body, receive), send)
        challenge = (f'Bearer error="insufficient_scope", scope="{needed}", '
                     f'resource_metadata="{self.metadata_url}"')
        await send({"type": "http.response.start", "status": 403,
                    "headers": [(b"content-type", b"application/json"),
                                (b"www-authenticate", challenge.encode())]})
        await send({"type": "http.response.body", "body": b'{"error":"insufficient_scope"}'})
        return None

    def missing_scope(self, scope, body: bytes) -> str | None:
        """The scope a tool call's valid token lacks, if any (no token: the SDK answers)."""
        try:
            message = json.loads(body)
        except ValueError:
            return None
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            return None
        needed = TOOL_SCOPES.get((message.get("params") or {}).get("name"))
        authorization = dict(scope["headers"]).get(b"authorization", b"").decode()
        token = self.provider.access.get(authorization.removeprefix("Bearer "))
        if needed is None or token is None or needed in token.scopes:
            return None
        return needed


def with_basic_client_id(scope, body: bytes) -> bytes:
    """The SDK's authorization server looks a client up by the form's `client_id` even
    when it authenticates with `client_secret_basic`, where RFC 6749 (section 2.3.1)
    sends the id in the `Authorization` header only: copy it into the form."""
    authorization = dict(scope["headers"]).get(b"authorization", b"").decode()
    form = dict(parse_qsl(body.decode()))
    if not authorization.startswith("Basic ") or "client_id" in form:
        return body
    decoded = base64.b64decode(authorization[6:]).decode()
    form["client_id"] = unquote(decoded.split(":", 1)[0])
    return urlencode(form).encode()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--ttl", type=int, default=3600)
    parser.add_argument("--log", required=True)
    parser.add_argument("--confidential", action="store_true")
    parser.add_argument("--step-up", action="store_true")
    args = parser.parse_args()
    base = f"http://127.0.0.1:{args.port}"
    provider = Provider(args.ttl, args.log, args.confidential, args.step_up)
    mcp = MCPServer(
        "m3-oauth-peer",
        version="1.0.0",
        auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=base,
            resource_server_url=f"{base}/mcp",
            client_registration_options=ClientRegistrationOptions(enabled=True),
            required_scopes=["notes:read"] if args.step_up else None,
        ),
    )

    @mcp.tool()
    async def whoami() -> str:
        """Answers once the request carries a valid token."""
        return "authorized"

    @mcp.tool()
    async def write_note() -> str:
        """Needs scope notes:write (with --step-up)."""
        return "written"

    @mcp.tool()
    async def erase_notes() -> str:
        """Needs scope notes:admin, never granted (with --step-up)."""
        return "erased"

    metadata_url = f"{base}/.well-known/oauth-protected-resource/mcp"
    app = Checks(mcp.streamable_http_app(), provider, metadata_url)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
