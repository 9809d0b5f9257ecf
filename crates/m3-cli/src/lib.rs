//! The `m3` command line: run an agent execution with managed elicitation input, see what it
//! waits for, answer it from another terminal, read the result.
//!
//! Everything the binary does goes through the public API of `m3-kit`; this crate adds no
//! behaviour of its own beyond parsing arguments, rendering output, mapping error codes to exit
//! codes, and asking a person in a terminal. The contract (commands, flags, JSON shapes, exit
//! codes) is `docs/cli.md`.
//!
//! # Concepts
//!
//! - [`main`]: the whole command line (the `m3` binary only calls it); it is this library's
//!   only public item. The terminal form renderer behind `m3 run --interactive` and
//!   `m3 demo --interactive` (plain line prompts on any `BufRead` + `Write`, rendered from a
//!   request's schema, decline and cancel always offered, URL requests shown, never opened)
//!   is a private module: nothing outside the binary uses it.
//!
//! # Feature flags
//!
//! None.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![deny(unused_must_use)]

mod agent;
mod cli;
mod commands;
mod deadline_args;
mod edit_answer;
mod failure;
mod form;
mod ids;
mod lease;
mod metrics_listener;
mod notify_args;
mod oauth;
mod output;
mod progress;
mod render;
mod respond_args;
mod responses;
mod servers;
mod stop_signal;
mod terminal;

use std::path::Path;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

use crate::cli::{Cli, Command};
use crate::failure::{Failure, exit};
use crate::output::Output;

/// Runs the `m3` command line with the process arguments and returns its exit code.
///
/// Exit codes are CLI.md's table: 0 success, 2 usage, 3 `invalid_argument` /
/// `managed_input_invalid`, 4 conflict, 5 state, 6 recovery unavailable, 7 timeout,
/// 8 not found, 9 execution finished but not `completed`, 1 anything else.
pub fn main() -> ExitCode {
    let cli = match parse() {
        Ok(cli) => cli,
        Err(error) => return usage_error(&error),
    };
    let out = Output::new(cli.json);
    let plumbing = matches!(
        cli.command,
        Command::ExampleServer { .. } | Command::ExampleProvider { .. } | Command::McpRelay { .. }
    );
    let traces = matches!(
        cli.command,
        Command::Run(_)
            | Command::Worker(_)
            | Command::Serve(_)
            | Command::Submit(_)
            | Command::Notify(_)
    );
    // Dropped last, after the runtime: flushes the spans still in the exporter's batch.
    let _telemetry = commands::init_logging(
        cli.verbose,
        if plumbing { "warn" } else { "off" },
        cli.log_format,
        traces,
    );
    let command = match run_without_runtime(out, cli.command) {
        Ok(code) => return code,
        Err(command) => command,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            let message = format!("cannot start the runtime: {error}");
            return finish(out, Err(Failure::other("io_error", message)));
        }
    };
    let outcome = runtime.block_on(run_store_command(out, &cli.db, *command));
    // Do not wait for blocking reads (an unanswered terminal prompt) at exit.
    runtime.shutdown_background();
    finish(out, outcome)
}

/// Runs the commands that need no async runtime (the example peers, the relay, schemas,
/// completions) to their exit code; hands any other command back.
fn run_without_runtime(out: Output, command: Command) -> Result<ExitCode, Box<Command>> {
    Ok(match command {
        Command::ExampleServer {
            name,
            era,
            fault,
            call_log,
            hold_retry,
            http,
        } => match http {
            Some(address) => commands::example_server::run_http(out, &name, era, address, call_log),
            None => commands::example_server::run(&name, era, fault, call_log, hold_retry),
        },
        Command::ExampleProvider {
            script,
            port,
            record,
        } => commands::example_provider::run(out, &script, port, record),
        Command::McpRelay { handoff, command } => commands::mcp_relay::run(&handoff, &command),
        Command::Schema { name } => finish(out, commands::schema::run(out, name.as_deref())),
        Command::Completions { shell } => {
            let mut visible = visible_only(&crate::command());
            clap_complete::generate(shell, &mut visible, "m3", &mut std::io::stdout());
            ExitCode::from(exit::SUCCESS)
        }
        command => return Err(Box::new(command)),
    })
}

/// Runs a command that opens the store at `db`, on the async runtime.
async fn run_store_command(out: Output, db: &Path, command: Command) -> Result<(), Failure> {
    match command {
        Command::Demo { interactive } => commands::demo::run(out, db, interactive).await,
        Command::Run(args) => commands::run::run(out, db, args).await,
        Command::Submit(args) => commands::submit::run(out, db, args).await,
        Command::Worker(args) => commands::worker::run(out, db, args).await,
        Command::Executions(args) => {
            let filter = commands::inspect::ExecutionFilter {
                limit: args.limit,
                lifecycle: args.lifecycle,
                since: args.since,
            };
            commands::inspect::executions(out, db, filter).await
        }
        Command::Status { execution } => commands::inspect::status(out, db, &execution).await,
        Command::Pending { execution, watch } if watch => {
            commands::inspect::watch_pending(out, db, execution.as_deref()).await
        }
        Command::Pending { execution, .. } => {
            commands::inspect::pending(out, db, execution.as_deref()).await
        }
        Command::Respond(args) => commands::respond::run(out, db, args).await,
        Command::Result { execution, timeout } => {
            commands::inspect::result(out, db, &execution, timeout).await
        }
        Command::Cancel { execution } => commands::inspect::cancel(out, db, &execution).await,
        Command::Recover => commands::inspect::recover(out, db).await,
        Command::Events {
            follow,
            after,
            execution,
            kind,
        } => {
            let filter = commands::changes::EventFilter {
                execution,
                kinds: commands::changes::parse_kinds(&kind)?,
            };
            commands::changes::events(out, db, after.as_deref(), follow, filter).await
        }
        Command::Prune { before, dry_run } => {
            commands::changes::prune(out, db, &before, dry_run).await
        }
        Command::Rounds {
            execution,
            export_plan,
            include_values,
        } => match export_plan {
            // An export prints what it wrote instead of the list (one document with --json).
            Some(file) => {
                commands::plans::record(out, db, &execution, Some(&file), include_values).await
            }
            None => commands::inspect::rounds(out, db, &execution).await,
        },
        Command::Plans {
            command:
                cli::PlansCommand::Record {
                    execution,
                    output,
                    include_values,
                },
        } => commands::plans::record(out, db, &execution, output.as_deref(), include_values).await,
        Command::Webhooks { command } => commands::webhooks::webhooks(out, db, command).await,
        Command::Notify(args) => commands::webhooks::notify(out, db, args).await,
        Command::Links { command } => commands::webhooks::links(out, db, command).await,
        Command::Tokens { command } => commands::tokens::run(out, db, command).await,
        Command::Workers => commands::workers::run(out, db).await,
        Command::Policies { command } => commands::policies::run(out, db, command).await,
        Command::Serve(args) => commands::serve::run(out, db, args).await,
        Command::Doctor { announce_change } => match announce_change {
            Some(probe) => commands::doctor::announce_change(db, &probe).await,
            None => commands::doctor::run(out, db).await,
        },
        Command::ExampleServer { .. }
        | Command::ExampleProvider { .. }
        | Command::McpRelay { .. }
        | Command::Schema { .. }
        | Command::Completions { .. } => Ok(()),
    }
}

/// The command line's definition, with `--db` hidden from the help of the commands that
/// never open a store (it is global, so clap would show it everywhere).
pub(crate) fn command() -> clap::Command {
    let mut command = Cli::command();
    for name in cli::STORELESS {
        // A subcommand that defines the id itself does not get the global copy.
        command = command.mut_subcommand(name, |sub| {
            sub.arg(
                clap::Arg::new("db")
                    .long("db")
                    .value_parser(clap::value_parser!(std::path::PathBuf))
                    .hide(true),
            )
        });
    }
    command
}

/// A copy of `command` without its hidden subcommands and hidden arguments, at every level:
/// completion scripts offer only what the help shows (clap_complete's generators list
/// hidden items too).
fn visible_only(command: &clap::Command) -> clap::Command {
    let mut copy = clap::Command::new(command.get_name().to_owned())
        .about(command.get_about().cloned().unwrap_or_default())
        .args(
            command
                .get_arguments()
                .filter(|arg| !arg.is_hide_set())
                .cloned(),
        )
        .groups(command.get_groups().filter_map(|group| {
            // A group keeps its visible arguments (the derive groups every argument of a
            // command, hidden ones too).
            let visible: Vec<clap::Id> = group
                .get_args()
                .filter(|id| {
                    command
                        .get_arguments()
                        .any(|arg| arg.get_id() == *id && !arg.is_hide_set())
                })
                .cloned()
                .collect();
            let mut copy = group.clone();
            let multiple = copy.is_multiple();
            (!visible.is_empty()).then(|| {
                clap::ArgGroup::new(group.get_id().clone())
                    .args(visible)
                    .required(group.is_required_set())
                    .multiple(multiple)
            })
        }))
        .subcommands(
            command
                .get_subcommands()
                .filter(|sub| !sub.is_hide_set())
                .map(visible_only),
        );
    if let Some(version) = command.get_version() {
        copy = copy.version(version.to_owned());
    }
    copy
}

fn parse() -> Result<Cli, clap::Error> {
    let matches = command().try_get_matches()?;
    Cli::from_arg_matches(&matches)
}

fn finish(out: Output, outcome: Result<(), Failure>) -> ExitCode {
    match outcome {
        Ok(()) => ExitCode::from(exit::SUCCESS),
        Err(failure) => {
            out.fail(&failure);
            ExitCode::from(failure.exit())
        }
    }
}

/// Help and version go to stdout with exit 0; anything else is a usage error (exit 2).
fn usage_error(error: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        error.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = error.print();
        return ExitCode::from(
            if error.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                exit::USAGE
            } else {
                exit::SUCCESS
            },
        );
    }
    let json = std::env::args().any(|arg| arg == "--json");
    // clap's whole message: what is wrong, the usage line, a "similar subcommand" tip.
    let rendered = error.render().to_string();
    let message = rendered.trim_start_matches("error: ").trim_end();
    let message = if message.is_empty() {
        "invalid command line"
    } else {
        message
    };
    Output::new(json).fail(&Failure::usage(message));
    ExitCode::from(exit::USAGE)
}
