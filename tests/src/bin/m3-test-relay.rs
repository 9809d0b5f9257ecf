//! Test helper: the MCP relay as its own small binary
//! (`m3-test-relay --handoff FILE -- <command> [args...]`), what `m3 mcp-relay`
//! does, for the Codex tests of this package (cargo gives tests the paths of
//! their own package's binaries only).

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(flag), Some(handoff), Some(dashes)) = (args.next(), args.next(), args.next()) else {
        return Err("usage: m3-test-relay --handoff FILE -- <command> [args...]".into());
    };
    if flag != "--handoff" || dashes != "--" {
        return Err("usage: m3-test-relay --handoff FILE -- <command> [args...]".into());
    }
    let command: Vec<String> = args.collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let code = runtime.block_on(m3_runtime::relay::run_relay(
        &PathBuf::from(handoff),
        &command,
        tokio::io::stdin(),
        tokio::io::stdout(),
    ))?;
    std::process::exit(code);
}
