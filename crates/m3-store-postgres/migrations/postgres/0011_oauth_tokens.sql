-- OAuth credentials of the MCP servers executions reach (m3_store::oauth): one row per
-- server URL and client, sealed (ChaCha20-Poly1305) with a key the application holds;
-- never a token in the clear.
CREATE TABLE m3rs_oauth_credentials (
    server_url  text NOT NULL,
    client      text NOT NULL,
    sealed      text NOT NULL,
    PRIMARY KEY (server_url, client)
);
