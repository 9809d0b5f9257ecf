"""An MCP server behind OAuth, with its own authorization server: the official MCP Python
SDK (mcp 2.3.0) as both the resource server and the authorization server, in one
process, the way the SDK's own examples run it.

The authorization server registers clients dynamically, approves every authorization
request at once (it redirects straight back with a code, as a person clicking "allow"
would), and issues access tokens that expire after ``--ttl`` seconds with refresh
tokens. Every grant it answers is appended to ``--log`` as one line
(``authorization_code`` or ``refresh_token``), so a test can tell a refresh from a new
authorization. Tool ``whoami`` answers ``authorized``.

Usage: ``oauth_server.py PORT --ttl SECONDS --log FILE``.
"""

from __future__ import annotations

import argparse
import secrets
import time

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

    def __init__(self, ttl: int, log: str) -> None:
        self.ttl, self.log = ttl, log
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.access: dict[str, AccessToken] = {}

    def grant(self, kind: str) -> None:
        with open(self.log, "a") as f:
            f.write(kind + "\n")

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(16)
        self.codes[code] = AuthorizationCode(
            code=code, scopes=params.scopes or [], expires_at=time.time() + 300,
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
        self.grant("authorization_code")
        return self.tokens(client.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(self, client, refresh_token: str):
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(self, client, refresh_token: RefreshToken, scopes: list[str]) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)
        self.grant("refresh_token")
        return self.tokens(client.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token) -> None:
        self.access.pop(getattr(token, "token", ""), None)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--ttl", type=int, default=3600)
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    base = f"http://127.0.0.1:{args.port}"
    mcp = MCPServer(
        "m3-oauth-peer",
        version="1.0.0",
        auth_server_provider=Provider(args.ttl, args.log),
        auth=AuthSettings(
            issuer_url=base,
            resource_server_url=f"{base}/mcp",
            client_registration_options=ClientRegistrationOptions(enabled=True),
        ),
    )

    @mcp.tool()
    async def whoami() -> str:
        """Answers once the request carries a valid token."""
        return "authorized"

    mcp.run(transport="streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
