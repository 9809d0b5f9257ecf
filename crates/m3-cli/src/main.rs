//! `m3`: the m3-rs command line.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use m3_fixtures::{CRASH_EXIT_CODE, Era, Fault, ServeOutcome, ShippingOptions};

/// The m3 command line.
#[derive(Debug, Parser)]
#[command(name = "m3", version, about = "m3-rs: managed elicitation input")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the demo scenario (not yet available).
    Demo {
        /// Answer the round in this terminal.
        #[arg(long)]
        interactive: bool,
    },
    /// Run a bundled example MCP server on stdin/stdout.
    ExampleServer {
        /// The server: `shipping`.
        name: String,
        /// The protocol era to serve: auto, 2026-07-28 or legacy.
        #[arg(long, default_value = "auto")]
        era: Era,
        /// Misbehave on tools/call: crash-mid-call, garbage, oversized, endless-rounds, hang.
        #[arg(long)]
        fault: Option<Fault>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Demo { .. } => {
            eprintln!("m3 demo: not yet available (the runtime has not landed yet)");
            ExitCode::from(1)
        }
        Command::ExampleServer { name, era, fault } => example_server(&name, era, fault),
    }
}

fn example_server(name: &str, era: Era, fault: Option<Fault>) -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("m3 example-server: cannot start the runtime: {error}");
            return ExitCode::from(1);
        }
    };
    let options = ShippingOptions {
        era,
        fault,
        state_key: None,
    };
    let outcome = runtime.block_on(m3_fixtures::serve_named_stdio(name, options));
    match outcome {
        // Exit at once: the runtime would otherwise wait for the blocking stdin read.
        Ok(ServeOutcome::Crashed) => std::process::exit(i32::from(CRASH_EXIT_CODE)),
        Ok(_) => {
            runtime.shutdown_background();
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("m3 example-server: {error} ({})", error.code());
            runtime.shutdown_background();
            ExitCode::from(if error.code() == "invalid_argument" {
                2
            } else {
                1
            })
        }
    }
}
