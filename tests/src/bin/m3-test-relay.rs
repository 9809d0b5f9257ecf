//! Test helper: the relay process body (`m3_runtime::relay::run_relay`) on stdin/stdout.
//!
//! Usage: `m3-test-relay [--handoff] HANDOFF -- COMMAND [ARGS...]`; exits with the
//! server's code. With `--handoff` it takes the arguments `m3 mcp-relay` takes, so
//! the Codex tests can use it as the relay.

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--handoff") {
        args.remove(0);
    }
    let (handoff, command) = match args.split_first() {
        Some((handoff, rest)) if rest.first().map(String::as_str) == Some("--") => {
            (handoff.clone(), rest[1..].to_vec())
        }
        _ => {
            eprintln!("usage: m3-test-relay HANDOFF -- COMMAND [ARGS...]");
            std::process::exit(2);
        }
    };
    let outcome = m3_runtime::relay::run_relay(
        handoff.as_ref(),
        &command,
        tokio::io::stdin(),
        tokio::io::stdout(),
    )
    .await;
    match outcome {
        Ok(code) => std::process::exit(code),
        Err(error) => {
            eprintln!("m3-test-relay: {error} ({})", error.code());
            std::process::exit(1);
        }
    }
}
