//! The command line of `m3` (CLI.md), as clap definitions.

use std::path::PathBuf;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};
use m3_fixtures::{Era, Fault};

use crate::notify_args::{InProcessNotify, LinksCommand, NotifyCommandArgs, WebhooksCommand};
pub(crate) use crate::respond_args::{PlansCommand, RespondArgs};

/// m3: run agent executions with managed elicitation input, see what they wait for, answer
/// them from another terminal, read the results.
#[derive(Debug, Parser)]
#[command(name = "m3", version, color = clap::ColorChoice::Never)]
pub(crate) struct Cli {
    /// The execution store: a SQLite file, or a postgres:// (postgresql://) URL of a
    /// PostgreSQL database (opening it runs recovery).
    #[arg(long, global = true, env = "M3_DB", default_value = "./m3.sqlite")]
    pub(crate) db: PathBuf,
    /// Machine output: one JSON document on stdout; failures as one JSON object on stderr.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// More log lines on stderr: -v info, -vv debug, -vvv trace (`M3_LOG`, or else
    /// `RUST_LOG`, when set, wins).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
    /// Log lines as plain text (with a timestamp) or as JSON objects, one per line, with
    /// the fields of the spans they happen in. `M3_LOG` filters them (`RUST_LOG` syntax).
    #[arg(
        long,
        global = true,
        env = "M3_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub(crate) log_format: LogFormat,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// How log lines on stderr are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    /// One human-readable line per event, with a UTC timestamp.
    Text,
    /// One JSON object per event: timestamp, level, target, fields and the span fields.
    Json,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Book a shipment end to end: a bundled server asks for the delivery address, the
    /// question is stored as a round, answered, and the booking completes.
    Demo {
        /// Answer the round in this terminal (a form rendered from the requested schema).
        #[arg(long)]
        interactive: bool,
    },
    /// Run one agent execution in the foreground (this process is its worker).
    #[command(after_help = RUN_EXAMPLES)]
    Run(RunArgs),
    /// Queue one agent execution (the arguments of `run`, without --interactive) and print
    /// its id; any `m3 worker` on the store runs it.
    #[command(after_help = SUBMIT_EXAMPLES)]
    Submit(RunArgs),
    /// Run queued executions until SIGINT/SIGTERM, then drain and exit 0.
    #[command(after_help = WORKER_EXAMPLES)]
    Worker(WorkerArgs),
    /// List executions, oldest first.
    #[command(after_help = EXECUTIONS_EXAMPLES)]
    Executions(ExecutionsArgs),
    /// Show the snapshot of one execution.
    Status {
        /// Execution id.
        execution: String,
    },
    /// Show pending rounds of one execution, or of all executions.
    #[command(after_help = PENDING_EXAMPLES)]
    Pending {
        /// Execution id (omitted: every execution).
        execution: Option<String>,
        /// Keep running and print each round as it becomes pending (woken by the
        /// store's change signal; Ctrl-C stops).
        #[arg(long)]
        watch: bool,
    },
    /// Commit responses to a pending round.
    #[command(after_help = RESPOND_EXAMPLES)]
    Respond(RespondArgs),
    /// Wait for the terminal result of an execution.
    Result {
        /// Execution id.
        execution: String,
        /// Wait at most this many seconds (exit 7 on timeout; the execution keeps running).
        #[arg(long, value_parser = parse_seconds)]
        timeout: Option<f64>,
    },
    /// Request cancellation of an execution.
    Cancel {
        /// Execution id.
        execution: String,
    },
    /// Run recovery and show what it terminalized.
    Recover,
    /// Print the store's change feed: one JSON line per change of a round or an execution,
    /// in commit order (from any process); exit 0 at the end, or keep following.
    #[command(after_help = EVENTS_EXAMPLES)]
    Events {
        /// Keep printing records as they commit, until SIGINT/SIGTERM (exit 0).
        #[arg(long)]
        follow: bool,
        /// Start after this cursor (the `cursor` of the last record you processed;
        /// default: from the oldest record kept).
        #[arg(long, value_name = "CURSOR")]
        after: Option<String>,
        /// Only this execution's records.
        #[arg(long, value_name = "ID")]
        execution: Option<String>,
        /// Only records of these kinds (round.pending, round.answered, round.delivery_started,
        /// round.delivered, round.resolved, round.failed, execution.queued,
        /// execution.claimed, execution.waiting_for_input, execution.finished,
        /// execution.cancel_requested); repeat the flag or separate with commas.
        #[arg(long, value_name = "KIND", value_delimiter = ',')]
        kind: Vec<String>,
    },
    /// Remove old change-feed records (and nothing else: rounds and executions stay).
    Prune {
        /// Remove records older than this: a duration ago (30d, 12h, 90m) or an RFC 3339
        /// time (2026-11-01T00:00:00Z).
        #[arg(long, value_name = "DURATION|TIMESTAMP")]
        before: String,
        /// Only count what would be removed.
        #[arg(long)]
        dry_run: bool,
    },
    /// Manage webhook subscriptions: receivers told when rounds wait (signed deliveries).
    Webhooks {
        #[command(subcommand)]
        command: WebhooksCommand,
    },
    /// Deliver the store's changes to its webhook subscriptions, until SIGINT/SIGTERM.
    Notify(NotifyCommandArgs),
    /// Manage answer links (the signed links deliveries carry).
    Links {
        #[command(subcommand)]
        command: LinksCommand,
    },
    /// List the workers registered on the store: host, process, state, last heartbeat.
    Workers,
    /// Manage the store's policies: answer a round nobody answered in time.
    Policies {
        #[command(subcommand)]
        command: crate::commands::policies::PoliciesCommand,
    },
    /// Manage API tokens: the principals `m3 serve` authenticates, with their scopes.
    Tokens {
        #[command(subcommand)]
        command: crate::commands::tokens::TokensCommand,
    },
    /// Show every round of an execution (diagnostics, redacted responses).
    Rounds {
        /// Execution id.
        execution: String,
        /// Instead of listing the rounds, write the answered ones as a plan file that
        /// `--plan` replays (needs --include-values: the plan holds the answers).
        #[arg(long, value_name = "FILE")]
        export_plan: Option<PathBuf>,
        /// Allow writing the answers' values (secrets) into the plan file.
        #[arg(long, requires = "export_plan")]
        include_values: bool,
    },
    /// Elicitation plans: record one from the answers of a managed execution.
    Plans {
        #[command(subcommand)]
        command: PlansCommand,
    },
    /// Serve the HTTP API and the answer page over the store (until SIGINT/SIGTERM).
    Serve(ServeArgs),
    /// Run a bundled example MCP server on stdin/stdout, or over Streamable HTTP.
    ExampleServer {
        /// The server: `shipping`.
        name: String,
        /// The protocol era to serve: auto, 2026-07-28 or legacy.
        #[arg(long, default_value = "auto")]
        era: Era,
        /// Misbehave on tools/call: crash-mid-call, garbage, oversized, endless-rounds, hang
        /// (stdio only).
        #[arg(long, conflicts_with = "http")]
        fault: Option<Fault>,
        /// Append one JSON line per tools/call to FILE (pid, parent pid, tool, whether it
        /// carried an answer, the answered city): tests count deliveries with it.
        #[arg(long, value_name = "FILE")]
        call_log: Option<PathBuf>,
        /// Never answer a tools/call that carries input responses (tests kill a worker
        /// while the answer is in flight).
        #[arg(long, conflicts_with = "http")]
        hold_retry: bool,
        /// Serve Streamable HTTP on this address (`127.0.0.1:0`: an ephemeral port) instead
        /// of stdio; the endpoint URL is printed first, on its own line.
        #[arg(long, value_name = "ADDRESS")]
        http: Option<std::net::SocketAddr>,
    },
    /// Run the deterministic local model provider (an OpenAI Responses API) for Codex.
    ExampleProvider {
        /// The script: {"model": "...", "steps": [{"call": "SERVER:TOOL", "arguments": {..}} | {"text": "..."}]}.
        #[arg(long, value_name = "FILE")]
        script: PathBuf,
        /// The port on 127.0.0.1 (default: an ephemeral port).
        #[arg(long, value_name = "N", default_value_t = 0)]
        port: u16,
        /// Append every request received as one JSON line to this file.
        #[arg(long, value_name = "FILE")]
        record: Option<PathBuf>,
    },
    /// Relay a stdio MCP server for a harness and report its traffic to M3 (internal:
    /// M3 writes this command into a harness's MCP server configuration).
    #[command(hide = true)]
    McpRelay {
        /// The handoff file M3 wrote for this server (socket, token, environment, policy).
        #[arg(long, value_name = "FILE")]
        handoff: PathBuf,
        /// The server command and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Print the JSON Schema of a public value type (without NAME: all of them).
    Schema {
        /// Type name, e.g. PendingElicitationRound.
        name: Option<String>,
    },
    /// Print a shell completion script: `m3 completions bash > ~/.local/share/bash-completion/completions/m3`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Check the set-up and say what to fix (exit 0 when `m3 demo` will work).
    Doctor {
        /// Announce a change of this probe id on the store's change signal until killed
        /// (internal: the change-signal check runs `m3 doctor` in a second process so).
        #[arg(long, value_name = "PROBE", hide = true)]
        announce_change: Option<String>,
    },
}

/// The commands that never open a store: `--db` is hidden from their help.
pub(crate) const STORELESS: [&str; 5] = [
    "example-server",
    "example-provider",
    "mcp-relay",
    "schema",
    "completions",
];

const RUN_EXAMPLES: &str = "\
Examples:
  # A managed execution that waits for an answer from any terminal:
  m3 run --server 'shipping=m3 example-server shipping' \\
      --call shipping:book_shipment --arguments '{\"weight_kg\": 2}' --human-input managed
  # The same, answered in this terminal:
  m3 run --server 'shipping=m3 example-server shipping' \\
      --call shipping:book_shipment --arguments '{\"weight_kg\": 2}' --human-input managed --interactive";

const SUBMIT_EXAMPLES: &str = "\
Examples:
  # Queue a managed execution; a worker in another terminal runs it:
  m3 submit --server 'shipping=m3 example-server shipping' \\
      --call shipping:book_shipment --arguments '{\"weight_kg\": 2}' --human-input managed
  m3 worker --concurrency 4";

const WORKER_EXAMPLES: &str = "\
Examples:
  m3 worker                              # 16 at once, 30 s drain on SIGINT/SIGTERM
  m3 --json worker --concurrency 64 --drain-timeout 10
  m3 worker --handover-only              # takes over what stopping workers hand over";

/// `m3 worker`'s options.
#[derive(Debug, Args)]
pub(crate) struct WorkerArgs {
    /// At most N executions at once (an execution waiting for input counts).
    #[arg(long, value_name = "N", default_value_t = m3_kit::DEFAULT_CONCURRENCY,
        value_parser = parse_concurrency)]
    pub(crate) concurrency: usize,
    /// On SIGINT/SIGTERM, hand executions waiting on a transferable round to another live
    /// worker and let the rest finish this long; what is left then fails closed as
    /// recovery would.
    #[arg(long, value_name = "SECONDS", default_value = "30", value_parser = parse_seconds)]
    pub(crate) drain_timeout: f64,
    /// Claim nothing new: only go on with executions other workers hand over when they
    /// stop (the successor in a rolling deploy, docs/workers.md).
    #[arg(long)]
    pub(crate) handover_only: bool,
    /// Sweep recovery this often (default: half the default lease, 15 s).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub(crate) sweep_every: Option<f64>,
    /// Fail executions that waited in the queue longer than this (default: off).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub(crate) max_queue_age: Option<f64>,
    /// The lease a claim takes until the execution's own lease (`--lease` of `m3 submit`)
    /// applies, a moment later.
    #[arg(long, value_name = "SECONDS", default_value = "30", value_parser = parse_seconds)]
    pub(crate) claim_lease: f64,
    /// Serve Prometheus metrics at `http://ADDR/metrics` (no credential: bind loopback or
    /// a private network; `127.0.0.1:0` picks a free port, printed as `metrics_listening`).
    #[arg(long, value_name = "ADDR")]
    pub(crate) metrics: Option<std::net::SocketAddr>,
    #[command(flatten)]
    pub(crate) round_limits: RoundLimitArgs,
    #[command(flatten)]
    pub(crate) notify: InProcessNotify,
}

/// The bounds on each round a server sends (`m3_types::limits::RoundLimits`); a round over
/// one fails its operation with `protocol_error` and is never stored.
#[derive(Debug, Clone, Args)]
pub(crate) struct RoundLimitArgs {
    /// At most N requests in one round. These bounds apply where rounds enter: `m3 run` and
    /// `m3 worker` (`m3 submit` only queues; the worker that runs the execution applies its own).
    #[arg(long, value_name = "N",
        default_value_t = m3_types::RoundLimits::DEFAULT_MAX_REQUESTS)]
    pub(crate) max_round_requests: usize,
    /// The largest message of one request, in bytes.
    #[arg(long, value_name = "BYTES",
        default_value_t = m3_types::RoundLimits::DEFAULT_MAX_MESSAGE_BYTES)]
    pub(crate) max_message_bytes: usize,
    /// The largest requested schema of one request, in bytes of compact JSON.
    #[arg(long, value_name = "BYTES",
        default_value_t = m3_types::RoundLimits::DEFAULT_MAX_SCHEMA_BYTES)]
    pub(crate) max_schema_bytes: usize,
    /// The largest request (message, schema or URL, _meta, task), in bytes of compact JSON.
    #[arg(long, value_name = "BYTES",
        default_value_t = m3_types::RoundLimits::DEFAULT_MAX_REQUEST_BYTES)]
    pub(crate) max_request_bytes: usize,
}

impl RoundLimitArgs {
    /// The limits these flags set.
    pub(crate) fn limits(&self) -> m3_types::RoundLimits {
        m3_types::RoundLimits::new()
            .with_max_requests(self.max_round_requests)
            .with_max_message_bytes(self.max_message_bytes)
            .with_max_schema_bytes(self.max_schema_bytes)
            .with_max_request_bytes(self.max_request_bytes)
    }
}

const EXECUTIONS_EXAMPLES: &str = "\
Examples:
  m3 executions --lifecycle waiting_for_input   # the executions waiting for an answer
  m3 executions --since 1h --limit 20           # the first 20 created in the last hour";

/// `m3 executions`' filters (those of the JSON API's `GET /api/v1/executions`, plus
/// `--since`).
#[derive(Debug, Args)]
pub(crate) struct ExecutionsArgs {
    /// At most N executions (the oldest N the other filters select).
    #[arg(long, value_name = "N")]
    pub(crate) limit: Option<u32>,
    /// Only executions in this lifecycle state: created, queued, starting, idle,
    /// running_turn, waiting_for_input, closing, finished.
    #[arg(long, value_name = "LIFECYCLE", value_parser = parse_lifecycle)]
    pub(crate) lifecycle: Option<m3_types::ExecutionStatus>,
    /// Only executions created at or after this time: a duration ago (30d, 12h, 90m) or an
    /// RFC 3339 time (2026-11-01T00:00:00Z).
    #[arg(long, value_name = "DURATION|TIMESTAMP")]
    pub(crate) since: Option<String>,
}

fn parse_lifecycle(text: &str) -> Result<m3_types::ExecutionStatus, String> {
    text.parse()
        .map_err(|error: m3_types::Error| error.message().to_owned())
}

const PENDING_EXAMPLES: &str = "\
Examples:
  m3 pending                  # every pending round, with a ready-to-edit `m3 respond` line
  m3 pending 01KB...          # the pending rounds of one execution
  m3 --json pending | jq '.[0].round_id'";

const EVENTS_EXAMPLES: &str = "\
Examples:
  m3 events                              # every record kept, oldest first
  m3 events --after 120                  # the records after cursor 120
  m3 events --follow --kind round.pending,round.failed
  m3 events --execution 01KB... | jq -r '.kind'";

const RESPOND_EXAMPLES: &str = "\
Examples:
  m3 respond EXECUTION ROUND --idempotency-key address-1 \\
      --accept 'shipping_address={\"street\": \"1 Main Street\", \"city\": \"Pune\"}'
  m3 respond ROUND --idempotency-key k --decline shipping_address   # the round id alone
  m3 respond ROUND --idempotency-key k --responses @answers.json    # or --responses - (stdin)";

/// `--human-input`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum HumanInputArg {
    /// Elicitation requests fail the operation.
    Fail,
    /// Rounds are stored and answered through `m3 respond` (or `--interactive`).
    Managed,
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("agent_source").required(true).args(["call", "script", "agent"])))]
pub(crate) struct RunArgs {
    /// An MCP server: NAME=COMMAND (a stdio server; COMMAND split like a shell splits words)
    /// or NAME=http://HOST:PORT/PATH (a Streamable HTTP endpoint; also https://). Repeatable.
    #[arg(long = "server", value_name = "NAME=COMMAND|URL")]
    pub(crate) servers: Vec<String>,
    /// An environment variable for a server: NAME:KEY=VALUE. Repeatable.
    #[arg(long = "server-env", value_name = "NAME:KEY=VALUE")]
    pub(crate) server_env: Vec<String>,
    /// The working directory of a server: NAME=DIR. Repeatable.
    #[arg(long = "server-cwd", value_name = "NAME=DIR")]
    pub(crate) server_cwd: Vec<String>,
    /// A request header for an HTTP server: NAME:KEY=VALUE; VALUE may reference ${VAR}, read
    /// from the environment when connecting. Repeatable.
    #[arg(long = "server-header", value_name = "NAME:KEY=VALUE")]
    pub(crate) server_header: Vec<String>,
    /// Which addresses an HTTP server may reach: NAME=LEVEL, LEVEL one of untrusted (default;
    /// public addresses only), public, trusted_private, loopback. Repeatable.
    #[arg(long = "server-trust", value_name = "NAME=LEVEL")]
    pub(crate) server_trust: Vec<String>,
    /// The protocol era of server NAME: auto (default: server/discover, falling back to
    /// the initialize handshake), 2026-07-28, or a handshake version, 2025-11-25 or
    /// 2025-06-18 (for a server that asks with a server-to-client elicitation/create, as
    /// the MCP Python SDK's ctx.elicit does). Repeatable.
    #[arg(long = "server-era", value_name = "NAME=ERA")]
    pub(crate) server_era: Vec<String>,
    /// OAuth for HTTP server NAME: NAME:KEY=VALUE, KEY one of grant
    /// (authorization_code, the default, or client_credentials), client_id,
    /// client_secret_env, client_secret_file, client_metadata_url, scope (space-separated;
    /// repeatable),
    /// callback_port. Without it a server's 401 still starts the authorization code grant
    /// with a dynamically registered client (docs/oauth.md). Repeatable.
    #[arg(long = "server-oauth", value_name = "NAME:KEY=VALUE")]
    pub(crate) server_oauth: Vec<String>,
    /// A one-step scripted agent calling SERVER:TOOL.
    #[arg(long, value_name = "SERVER:TOOL")]
    pub(crate) call: Option<String>,
    /// The arguments of --call (a JSON object).
    #[arg(long, value_name = "JSON", requires = "call")]
    pub(crate) arguments: Option<String>,
    /// A scripted agent from a JSON file: {"steps": [...]}.
    #[arg(long, value_name = "FILE")]
    pub(crate) script: Option<PathBuf>,
    /// A full agent selection (JSON), e.g. {"harness": "codex", "models": ["..."]}.
    #[arg(long, value_name = "JSON")]
    pub(crate) agent: Option<String>,
    /// The prompt given to the agent.
    #[arg(long, value_name = "TEXT")]
    pub(crate) prompt: Option<String>,
    /// The tools the agent may call: SERVER:TOOL[,...] (omitted: all; empty: none).
    #[arg(long, value_name = "SERVER:TOOL,...")]
    pub(crate) tools: Option<String>,
    /// How elicitation requests are handled.
    #[arg(long, value_enum, default_value = "fail")]
    pub(crate) human_input: HumanInputArg,
    /// Answer elicitation requests from this plan file (JSON, `m3 schema
    /// ElicitationPlan`): each request gets the first entry that matches it; a request no
    /// entry matches fails the execution. Not with --human-input managed.
    #[arg(long, value_name = "FILE")]
    pub(crate) plan: Option<std::path::PathBuf>,
    /// At most this many input rounds per operation.
    #[arg(long, default_value_t = 10)]
    pub(crate) round_limit: u32,
    /// The execution deadline in seconds.
    #[arg(long, default_value = "180", value_parser = parse_seconds)]
    pub(crate) timeout: f64,
    /// The worker lease in seconds: after a crash, recovery may terminalize the execution
    /// once it expires.
    #[arg(long, default_value = "30", value_parser = parse_seconds)]
    pub(crate) lease: f64,
    /// Answer rounds in this terminal.
    #[arg(long)]
    pub(crate) interactive: bool,
    #[command(flatten)]
    pub(crate) round_limits: RoundLimitArgs,
    #[command(flatten)]
    pub(crate) deadline: crate::deadline_args::DeadlineArgs,
}

/// `m3 serve`'s flags.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The address to listen on (`127.0.0.1:0` picks a free port); anything but
    /// loopback needs a token.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7878")]
    pub(crate) bind: std::net::SocketAddr,
    /// A shared secret of at least 16 visible ASCII characters: API calls need
    /// `Authorization: Bearer TOKEN`; the printed page URL carries it once and sets a cookie.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "M3_SERVE_TOKEN",
        hide_env_values = true
    )]
    pub(crate) token: Option<String>,
    /// Also answer requests for this host name (`NAME` or `NAME:PORT`; repeatable).
    /// Without a token only loopback names are answered (DNS rebinding).
    #[arg(long = "allowed-host", value_name = "HOST", value_parser = parse_allowed_host)]
    pub(crate) allowed_hosts: Vec<m3_server::AllowedHost>,
    /// Believe this header (e.g. X-Forwarded-User) as the user an SSO proxy in front of the
    /// server vouches for, on connections from --trust-proxy-from only.
    #[arg(long, value_name = "HEADER", requires = "trust_proxy_from")]
    pub(crate) trust_proxy_header: Option<String>,
    /// The address ranges (CIDR, repeatable) the SSO proxy connects from.
    #[arg(long, value_name = "CIDR", requires = "trust_proxy_header")]
    pub(crate) trust_proxy_from: Vec<String>,
    /// Seconds a client may take to send a request's headers, or to start its next
    /// request on an idle connection.
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = parse_seconds)]
    pub(crate) header_timeout: f64,
    /// The most connections served at once (lowered to fit the file limit).
    #[arg(long, value_name = "N", default_value_t = m3_server::DEFAULT_MAX_CONNECTIONS)]
    pub(crate) max_connections: usize,
    /// Seconds a shutdown waits for open connections before closing them.
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = parse_seconds)]
    pub(crate) shutdown_grace: f64,
    /// A bearer token that may read `GET /metrics` only (for Prometheus), besides any
    /// credential with the `read` scope.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "M3_METRICS_TOKEN",
        hide_env_values = true
    )]
    pub(crate) metrics_token: Option<String>,
    /// Create the store when `--db` names no file yet (without it, a path that does not
    /// exist is refused: a typo would otherwise serve an empty store).
    #[arg(long)]
    pub(crate) create: bool,
    #[command(flatten)]
    pub(crate) notify: InProcessNotify,
}

fn parse_allowed_host(text: &str) -> Result<m3_server::AllowedHost, String> {
    text.parse()
        .map_err(|error: m3_types::Error| error.message().to_owned())
}

fn parse_concurrency(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("'{text}' is not a positive number of executions")),
    }
}

fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && (0.0..=31_536_000.0).contains(&seconds) => {
            Ok(seconds)
        }
        _ => Err(format!("'{text}' is not a number of seconds")),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
        crate::command().debug_assert();
    }

    #[test]
    fn db_is_accepted_everywhere_but_shown_only_where_it_is_used() {
        use clap::FromArgMatches;
        for args in [
            vec!["m3", "--db", "a.sqlite", "schema"],
            vec!["m3", "schema", "--db", "a.sqlite"],
            vec!["m3", "--db", "a.sqlite", "pending"],
            vec!["m3", "pending", "--db", "a.sqlite"],
        ] {
            let matches = crate::command().try_get_matches_from(&args).unwrap();
            let cli = Cli::from_arg_matches(&matches).unwrap();
            assert_eq!(cli.db, PathBuf::from("a.sqlite"), "{args:?}");
        }
        let mut command = crate::command();
        command.build();
        let schema = command.find_subcommand_mut("schema").unwrap().render_help();
        assert!(!schema.to_string().contains("--db"), "{schema}");
        let pending = command
            .find_subcommand_mut("pending")
            .unwrap()
            .render_help();
        assert!(pending.to_string().contains("--db"), "{pending}");
    }

    #[test]
    fn run_needs_exactly_one_agent_and_respond_needs_responses() {
        let ok = Cli::try_parse_from([
            "m3",
            "--json",
            "run",
            "--server",
            "shipping=m3 example-server shipping",
            "--call",
            "shipping:book_shipment",
            "--arguments",
            "{}",
            "--human-input",
            "managed",
        ]);
        assert!(ok.is_ok());
        for bad in [
            vec!["m3", "run", "--server", "s=x"],
            vec!["m3", "run", "--call", "s:t", "--agent", "{}"],
            vec!["m3", "run", "--call", "s:t", "--human-input", "maybe"],
            vec!["m3", "run", "--call", "s:t", "--timeout", "soon"],
            vec!["m3", "respond", "e", "r", "--idempotency-key", "k"],
            vec!["m3", "respond", "--idempotency-key", "k", "--decline", "a"],
            vec!["m3", "respond", "e", "r", "--decline", "a"],
            vec!["m3", "status"],
        ] {
            assert!(Cli::try_parse_from(&bad).is_err(), "{bad:?}");
        }
        let cli = Cli::try_parse_from([
            "m3",
            "respond",
            "e",
            "r",
            "--idempotency-key",
            "k",
            "--decline",
            "a",
            "--accept",
            "b={}",
            "--db",
            "x.sqlite",
        ])
        .unwrap();
        assert_eq!(cli.db, PathBuf::from("x.sqlite"));
    }
}
