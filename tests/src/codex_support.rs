//! Helpers for the end-to-end tests of the `codex` harness: real Codex CLIs
//! installed by `scripts/test.sh`, the deterministic local model provider, and
//! the relay binary.
#![expect(clippy::panic, reason = "test support: a missing peer fails the test")]

use std::path::{Path, PathBuf};

use m3_fixtures::provider::{ExampleProvider, ProviderScript};
use m3_kit::{AgentSelection, CodexMcpProtocol, CodexProvider, CodexSelection};
use serde_json::json;

/// The Codex version every test runs unless it names another.
pub const CODEX: &str = "0.169.0";
/// The older tested version (the one the Python original pins).
pub const CODEX_OLD: &str = "0.156.1";

/// The installed `codex` of `version` (`M3_TEST_CODEX_DIR` or the tools folder),
/// which must exist.
pub fn codex(version: &str) -> PathBuf {
    let root = std::env::var("M3_TEST_CODEX_DIR").unwrap_or_else(|_| {
        format!(
            "{}/.cache/m3-rs/tools",
            std::env::var("HOME").unwrap_or_default()
        )
    });
    let path = Path::new(&root).join(format!("codex-{version}/node_modules/.bin/codex"));
    assert!(
        path.exists(),
        "codex {version} missing at {}: run scripts/test.sh to install it",
        path.display()
    );
    path
}

/// A provider that calls `target` (`"server:tool"`) with `{"weight_kg": 2}`,
/// then says `text`.
pub async fn provider(target: &str, text: &str) -> ExampleProvider {
    provider_with(target, json!({"weight_kg": 2}), text).await
}

/// A provider that calls `target` with `arguments`, then says `text`.
pub async fn provider_with(
    target: &str,
    arguments: serde_json::Value,
    text: &str,
) -> ExampleProvider {
    let script = json!({
        "model": "m3-example-model",
        "steps": [
            {"call": target, "arguments": arguments},
            {"text": text}
        ]
    });
    let script = ProviderScript::from_json(&script.to_string()).unwrap_or_else(|e| panic!("{e}"));
    ExampleProvider::start(script)
        .await
        .unwrap_or_else(|e| panic!("provider did not start: {e}"))
}

/// `{"harness": "codex", ...}` with the local provider, the given executable, era and relay.
pub fn selection(
    executable: &Path,
    provider: &ExampleProvider,
    protocol: CodexMcpProtocol,
    relay: &str,
) -> AgentSelection {
    AgentSelection::Codex(
        CodexSelection::new("m3-example-model")
            .with_executable(executable.display().to_string())
            .with_provider(CodexProvider::new(provider.base_url()))
            .with_mcp_protocol(protocol)
            .with_relay([relay]),
    )
}

/// A wrapper script around `codex` that writes its own pid to `pid_file`
/// before `exec`ing Codex, so a test can kill exactly its app-server.
pub fn pid_recording_codex(codex: &Path, dir: &Path, pid_file: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("codex-with-pid");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho $$ > '{}'\nexec '{}' \"$@\"\n",
            pid_file.display(),
            codex.display()
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("{e}"));
    script
}
