//! The throw-away `CODEX_HOME` of one session: `config.toml`, the copied sign-in,
//! and the minimal environment the app-server runs with.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use m3_types::{Error, Result, StdioServer, ToolSelection};
use toml::{Table, Value};

use crate::selection::{CodexMcpProtocol, CodexSelection};
use m3_mcp::ProtocolEra;

/// The protocol version string Codex reads from a server's `env` table.
const PROTOCOL_VARIABLE: &str = "CODEX_MCP_PROTOCOL_VERSION";
/// The version Codex is told to speak to a legacy-era server.
const CODEX_LEGACY_VERSION: &str = "2025-06-18";
/// Codex's per-call timeout; waiting for a human does not count against it
/// (codex-app-server.md §6.6), so this only bounds a hung server.
const TOOL_TIMEOUT_SECONDS: i64 = 3600;
/// Name of the provider table M3 writes when the selection overrides the provider.
const PROVIDER_ID: &str = "m3";

/// One MCP server as Codex will reach it: through one of M3's relays.
#[derive(Debug, Clone)]
pub(super) struct RelayedServer {
    /// The binding name (the `mcp_servers` key).
    pub(super) name: String,
    /// The era Codex speaks to it.
    pub(super) era: CodexMcpProtocol,
    /// How Codex reaches the relay.
    pub(super) launch: Launch,
}

/// How Codex reaches one relayed server.
#[derive(Debug, Clone)]
pub(super) enum Launch {
    /// A stdio server: the relay argv prefix plus `--handoff FILE --` and the real
    /// command (env and cwd travel in the handoff).
    Command(Vec<String>),
    /// A Streamable HTTP server: the loopback URL of the in-process HTTP relay.
    Url(String),
}

/// The era a stdio binding runs in: its own `CODEX_MCP_PROTOCOL_VERSION`, else the
/// selection's.
pub(super) fn binding_era(binding: &StdioServer, selection: &CodexSelection) -> CodexMcpProtocol {
    match binding.env.get(PROTOCOL_VARIABLE).map(String::as_str) {
        Some(ProtocolEra::MODERN_VERSION) => CodexMcpProtocol::V2026_07_28,
        Some(_) => CodexMcpProtocol::Legacy,
        None => selection.mcp_protocol,
    }
}

/// The `config.toml` for a session.
pub(super) fn config_toml(
    selection: &CodexSelection,
    model: &str,
    servers: &[RelayedServer],
    tools: Option<&ToolSelection>,
) -> Result<String> {
    let mut root = Table::new();
    root.insert("model".into(), model.into());
    root.insert("check_for_update_on_startup".into(), false.into());
    root.insert("suppress_unstable_features_warning".into(), true.into());
    let any_2026 = servers
        .iter()
        .any(|s| s.era == CodexMcpProtocol::V2026_07_28);
    let mut features = Table::new();
    features.insert("plugins".into(), false.into());
    features.insert("apps".into(), false.into());
    features.insert("mcp_2026_07_28".into(), any_2026.into());
    root.insert("features".into(), Value::Table(features));
    if let Some(provider) = &selection.provider {
        root.insert("model_provider".into(), PROVIDER_ID.into());
        let mut table = Table::new();
        table.insert(
            "name".into(),
            provider
                .name
                .clone()
                .unwrap_or_else(|| "m3 provider".into())
                .into(),
        );
        table.insert("base_url".into(), provider.base_url.clone().into());
        table.insert("wire_api".into(), "responses".into());
        table.insert("requires_openai_auth".into(), false.into());
        table.insert("supports_websockets".into(), false.into());
        table.insert("request_max_retries".into(), 0.into());
        table.insert("stream_max_retries".into(), 0.into());
        let mut providers = Table::new();
        providers.insert(PROVIDER_ID.into(), Value::Table(table));
        root.insert("model_providers".into(), Value::Table(providers));
    }
    let mut mcp_servers = Table::new();
    for server in servers {
        mcp_servers.insert(
            server.name.clone(),
            Value::Table(server_table(server, tools)?),
        );
    }
    root.insert("mcp_servers".into(), Value::Table(mcp_servers));
    toml::to_string(&root)
        .map_err(|e| Error::model_validation("cannot write codex config.toml").with_source(e))
}

fn server_table(server: &RelayedServer, tools: Option<&ToolSelection>) -> Result<Table> {
    let mut table = Table::new();
    let version = match server.era {
        CodexMcpProtocol::V2026_07_28 => ProtocolEra::MODERN_VERSION,
        CodexMcpProtocol::Legacy => CODEX_LEGACY_VERSION,
    };
    match &server.launch {
        Launch::Command(argv) => {
            let (program, args) = argv
                .split_first()
                .ok_or_else(|| Error::model_validation("codex relay argv is empty"))?;
            table.insert("command".into(), program.clone().into());
            table.insert(
                "args".into(),
                Value::Array(args.iter().cloned().map(Value::from).collect()),
            );
            let mut env = Table::new();
            env.insert(PROTOCOL_VARIABLE.into(), version.into());
            table.insert("env".into(), Value::Table(env));
        }
        Launch::Url(url) => {
            table.insert("url".into(), url.clone().into());
        }
    }
    table.insert("required".into(), true.into());
    table.insert("tool_timeout_sec".into(), TOOL_TIMEOUT_SECONDS.into());
    if let Some(selection) = tools {
        let names: Vec<Value> = selection
            .iter()
            .filter(|t| t.server == server.name)
            .map(|t| Value::from(t.tool.clone()))
            .collect();
        if !names.is_empty() {
            // Codex's own approval prompt is skipped only for tools the selection names.
            table.insert("default_tools_approval_mode".into(), "approve".into());
        }
        table.insert("enabled_tools".into(), Value::Array(names));
    }
    Ok(table)
}

/// The environment of the app-server: nothing inherited but `PATH`, a private
/// `HOME`, `CODEX_HOME`, a fixed locale and time zone.
pub(super) fn app_server_env(home: &Path, codex_home: &Path) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    if let Ok(path) = std::env::var("PATH") {
        env.insert("PATH".into(), path);
    }
    env.insert("HOME".into(), home.display().to_string());
    env.insert("CODEX_HOME".into(), codex_home.display().to_string());
    env.insert(
        "XDG_CONFIG_HOME".into(),
        home.join(".config").display().to_string(),
    );
    env.insert(
        "XDG_CACHE_HOME".into(),
        home.join(".cache").display().to_string(),
    );
    env.insert(
        "XDG_DATA_HOME".into(),
        home.join(".local/share").display().to_string(),
    );
    env.insert("TMPDIR".into(), home.join("tmp").display().to_string());
    env.insert("LANG".into(), "C.UTF-8".into());
    env.insert("LC_ALL".into(), "C.UTF-8".into());
    env.insert("TZ".into(), "UTC".into());
    env.insert("CODEX_APP_SERVER_DISABLE_MANAGED_CONFIG".into(), "1".into());
    env
}

/// Where the user's Codex sign-in lives: `$CODEX_HOME/auth.json`, else `~/.codex/auth.json`.
pub(super) fn user_auth_file() -> Option<PathBuf> {
    let from_codex_home =
        std::env::var_os("CODEX_HOME").map(|d| PathBuf::from(d).join("auth.json"));
    let from_home = std::env::var_os("HOME").map(|d| PathBuf::from(d).join(".codex/auth.json"));
    [from_codex_home, from_home]
        .into_iter()
        .flatten()
        .find(|p| p.is_file())
}

/// Writes `contents` to a new file with mode 0600.
pub(super) fn write_private(path: &Path, contents: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| io_error(path, e))?;
    file.write_all(contents).map_err(|e| io_error(path, e))
}

/// Creates a directory with mode 0700.
pub(super) fn private_dir(path: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| io_error(path, e))
}

fn io_error(path: &Path, error: std::io::Error) -> Error {
    Error::storage(format!("cannot write '{}': {error}", path.display())).with_source(error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selection::CodexProvider;

    fn relayed(name: &str) -> RelayedServer {
        relayed_in(name, CodexMcpProtocol::V2026_07_28)
    }

    fn relayed_in(name: &str, era: CodexMcpProtocol) -> RelayedServer {
        RelayedServer {
            name: name.to_owned(),
            era,
            launch: Launch::Command(vec![
                "/usr/bin/m3".into(),
                "mcp-relay".into(),
                "--handoff".into(),
                "/tmp/h \"1\".json".into(),
                "--".into(),
                "python3".into(),
                "server.py".into(),
            ]),
        }
    }

    #[test]
    fn config_names_the_selected_tools_and_the_provider() {
        let selection = CodexSelection::new("m3-example-model")
            .with_provider(CodexProvider::new("http://127.0.0.1:9/v1"));
        let tools = ToolSelection::parse(&["shipping:book_shipment"]).unwrap();
        let text = config_toml(
            &selection,
            "m3-example-model",
            &[relayed("shipping"), relayed("other")],
            Some(&tools),
        )
        .unwrap();
        let parsed: Table = toml::from_str(&text).unwrap();
        assert_eq!(parsed["model"].as_str(), Some("m3-example-model"));
        assert_eq!(parsed["model_provider"].as_str(), Some("m3"));
        let provider = &parsed["model_providers"]["m3"];
        assert_eq!(provider["base_url"].as_str(), Some("http://127.0.0.1:9/v1"));
        assert_eq!(provider["requires_openai_auth"].as_bool(), Some(false));
        assert_eq!(parsed["features"]["mcp_2026_07_28"].as_bool(), Some(true));
        let shipping = &parsed["mcp_servers"]["shipping"];
        assert_eq!(shipping["command"].as_str(), Some("/usr/bin/m3"));
        assert_eq!(
            shipping["args"].as_array().unwrap()[2].as_str(),
            Some("/tmp/h \"1\".json")
        );
        assert_eq!(shipping["required"].as_bool(), Some(true));
        assert_eq!(
            shipping["default_tools_approval_mode"].as_str(),
            Some("approve")
        );
        assert_eq!(shipping["enabled_tools"].as_array().unwrap().len(), 1);
        assert_eq!(
            shipping["env"]["CODEX_MCP_PROTOCOL_VERSION"].as_str(),
            Some("2026-07-28")
        );
        let other = &parsed["mcp_servers"]["other"];
        assert!(other.get("default_tools_approval_mode").is_none());
        assert_eq!(other["enabled_tools"].as_array().unwrap().len(), 0);
    }

    #[test]
    fn legacy_era_and_no_selection() {
        let selection = CodexSelection::new("m").with_mcp_protocol(CodexMcpProtocol::Legacy);
        let text = config_toml(
            &selection,
            "m",
            &[relayed_in("shipping", CodexMcpProtocol::Legacy)],
            None,
        )
        .unwrap();
        let parsed: Table = toml::from_str(&text).unwrap();
        assert!(parsed.get("model_provider").is_none());
        assert_eq!(parsed["features"]["mcp_2026_07_28"].as_bool(), Some(false));
        let shipping = &parsed["mcp_servers"]["shipping"];
        assert!(shipping.get("enabled_tools").is_none());
        assert!(shipping.get("default_tools_approval_mode").is_none());
        assert_eq!(
            shipping["env"]["CODEX_MCP_PROTOCOL_VERSION"].as_str(),
            Some("2025-06-18")
        );
        let mut binding = StdioServer::new("s", "x");
        binding
            .env
            .insert(PROTOCOL_VARIABLE.into(), "2026-07-28".into());
        assert_eq!(
            binding_era(&binding, &selection),
            CodexMcpProtocol::V2026_07_28
        );
    }

    #[test]
    fn an_http_binding_is_configured_by_its_relay_url() {
        let selection = CodexSelection::new("m");
        let server = RelayedServer {
            name: "shipping".to_owned(),
            era: CodexMcpProtocol::V2026_07_28,
            launch: Launch::Url("http://127.0.0.1:4000/abc".to_owned()),
        };
        let tools = ToolSelection::parse(&["shipping:book_shipment"]).unwrap();
        let text = config_toml(&selection, "m", &[server], Some(&tools)).unwrap();
        let parsed: Table = toml::from_str(&text).unwrap();
        let shipping = &parsed["mcp_servers"]["shipping"];
        assert_eq!(shipping["url"].as_str(), Some("http://127.0.0.1:4000/abc"));
        assert!(shipping.get("command").is_none());
        assert!(
            shipping.get("env").is_none(),
            "env is for stdio servers only"
        );
        assert_eq!(shipping["required"].as_bool(), Some(true));
        assert_eq!(shipping["enabled_tools"].as_array().unwrap().len(), 1);
        assert_eq!(parsed["features"]["mcp_2026_07_28"].as_bool(), Some(true));
    }
}
