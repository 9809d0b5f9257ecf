//! The flags of the answering commands: `m3 respond` (one round, `--edit`, `--all`) and
//! `m3 plans` (recording a plan from an execution's answers).

use std::path::PathBuf;

use clap::{ArgGroup, Args, Subcommand};

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("given").required(true).multiple(true)
    .args(["responses", "accept", "accept_url", "decline", "cancel", "edit"])))]
pub(crate) struct RespondArgs {
    /// Execution id (may be omitted: `m3 respond ROUND ...` finds the round's execution).
    #[arg(value_name = "EXECUTION", required_unless_present = "all")]
    pub(crate) first: Option<String>,
    /// Round id.
    #[arg(value_name = "ROUND")]
    pub(crate) second: Option<String>,
    /// The idempotency key: the same key with the same responses succeeds again (with
    /// --all, the prefix of each round's key: PREFIX-ROUND).
    #[arg(long, value_name = "KEY")]
    pub(crate) idempotency_key: String,
    /// Answer every pending round the filters select with the same responses, each round
    /// on its own (one failing does not stop the others); a summary at the end.
    #[arg(long, conflicts_with_all = ["first", "second", "edit"])]
    pub(crate) all: bool,
    /// With --all: only rounds from this server.
    #[arg(long, value_name = "NAME", requires = "all")]
    pub(crate) server: Option<String>,
    /// With --all: only rounds of this tool or prompt name (or resource URI).
    #[arg(long, value_name = "NAME", requires = "all")]
    pub(crate) operation: Option<String>,
    /// With --all: only rounds of this execution (an id or a unique prefix).
    #[arg(long, value_name = "ID", requires = "all")]
    pub(crate) execution: Option<String>,
    /// All responses: {"KEY": {"action": ..., "content": ..., "meta": ...}, ...}; @FILE reads
    /// them from a file, - from standard input.
    #[arg(long, value_name = "JSON|@FILE|-")]
    pub(crate) responses: Option<String>,
    /// Accept a form request with content: KEY=JSON. Repeatable.
    #[arg(long, value_name = "KEY=JSON")]
    pub(crate) accept: Vec<String>,
    /// Accept (consent to) a URL request. Repeatable.
    #[arg(long, value_name = "KEY")]
    pub(crate) accept_url: Vec<String>,
    /// Decline a request. Repeatable.
    #[arg(long, value_name = "KEY")]
    pub(crate) decline: Vec<String>,
    /// Cancel a request. Repeatable.
    #[arg(long, value_name = "KEY")]
    pub(crate) cancel: Vec<String>,
    /// Fill the fields an accepted form answer leaves out with the defaults its schema
    /// gives, as the interactive form does, before the answer is validated.
    #[arg(long)]
    pub(crate) accept_defaults: bool,
    /// Who answers, recorded with the answer and shown wherever the round is read
    /// (default: the operating-system user running the command).
    #[arg(long = "as", value_name = "NAME")]
    pub(crate) as_principal: Option<String>,
    /// Write the answer in $VISUAL or $EDITOR: a JSON skeleton of the round's requests
    /// (defaults filled in, comments allowed), submitted when saved.
    #[arg(
        long,
        conflicts_with_all = ["responses", "accept", "accept_url", "decline", "cancel"]
    )]
    pub(crate) edit: bool,
}

/// `m3 plans ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum PlansCommand {
    /// Write the answered rounds of a managed execution as a plan (JSON) that `m3 run
    /// --plan` replays: to --output FILE (readable only by you) or stdout.
    Record {
        /// The execution whose answers become the plan.
        #[arg(long, value_name = "ID")]
        execution: String,
        /// The plan file (default: stdout).
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Allow writing the answers' values (secrets) into the plan.
        #[arg(long)]
        include_values: bool,
    },
}
