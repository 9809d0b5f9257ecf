//! `m3 run`: one agent execution in the foreground. This process is its worker: it prints the
//! execution id, each pending round as it appears (answering it in the terminal with
//! `--interactive`), then the result.

use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

use m3_kit::{AgentSelection, AsyncExecutionHandle, AsyncMcpTestKit, SubmitOptions};
use m3_types::{
    ExecutionOutcome, ExecutionResult, HumanInput, PendingElicitationRound, ResponseMap,
    ToolSelection,
};
use serde_json::json;

use crate::agent::{AgentSource, selection_json};
use crate::cli::{HumanInputArg, RunArgs};
use crate::commands::inspect::open_kit_with;
use crate::failure::Failure;
use crate::form::{Prompter, TerminalInput, answer_round};
use crate::output::Output;
use crate::progress::Ticker;
use crate::render;
use crate::servers::{ServerFlags, parse_servers};
use crate::stop_signal::{StopSignal, StopSignals};

/// How often the foreground loop looks for a new round or the end of the execution.
const POLL: Duration = Duration::from_millis(20);

/// The prompt given to a scripted agent when `--prompt` is omitted.
const DEFAULT_PROMPT: &str = "Run the script.";

/// What `m3 run` and `m3 submit` submit: the agent, its prompt and the options.
pub(crate) struct Submission {
    pub(crate) selection: AgentSelection,
    pub(crate) prompt: String,
    pub(crate) options: SubmitOptions,
}

/// Builds the submission `args` describe.
pub(crate) fn submission(args: &RunArgs) -> Result<Submission, Failure> {
    let servers = parse_servers(ServerFlags {
        servers: &args.servers,
        envs: &args.server_env,
        cwds: &args.server_cwd,
        headers: &args.server_header,
        trusts: &args.server_trust,
        eras: &args.server_era,
        oauth: &args.server_oauth,
    })?;
    let source = if let Some(target) = args.call.clone() {
        AgentSource::Call {
            target,
            arguments: args.arguments.clone(),
        }
    } else if let Some(path) = args.script.clone() {
        AgentSource::Script(path)
    } else if let Some(agent) = args.agent.clone() {
        AgentSource::Agent(agent)
    } else {
        return Err(Failure::usage(
            "one of --call, --script or --agent is required",
        ));
    };
    let selection = parse_selection(&selection_json(&source)?)?;
    let tools = args
        .tools
        .as_deref()
        .map(str::parse::<ToolSelection>)
        .transpose()?
        .map(|selection| {
            selection
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        });
    let human_input = match args.human_input {
        HumanInputArg::Fail => HumanInput::Fail,
        HumanInputArg::Managed => HumanInput::Managed,
    };
    let lease = Duration::from_secs_f64(args.lease.max(0.1));
    let mut options = SubmitOptions::new()
        .servers(servers)
        .human_input(human_input)
        .elicitation_round_limit(args.round_limit)
        .timeout(Duration::from_secs_f64(args.timeout))
        .lease(lease)
        .renew_every(lease / 3);
    if let Some(tools) = tools {
        options = options.tools(tools);
    }
    if let Some(deadline) = args.deadline.input_deadline {
        options = options.input_deadline(deadline);
    }
    if let Some(fractions) = &args.deadline.remind_at {
        options = options.remind_at(fractions.iter().copied());
    }
    if let Some(path) = &args.plan {
        options = options.elicitation_plan(m3_types::ElicitationPlan::from_path(path)?);
    }
    let prompt = args
        .prompt
        .clone()
        .unwrap_or_else(|| DEFAULT_PROMPT.to_owned());
    Ok(Submission {
        selection,
        prompt,
        options,
    })
}

impl Submission {
    /// Submits the execution through `kit` (the one agent `selection` names).
    pub(crate) async fn submit(
        self,
        kit: &AsyncMcpTestKit,
    ) -> Result<AsyncExecutionHandle, Failure> {
        let agent = kit
            .agents([self.selection])?
            .into_iter()
            .next()
            .ok_or_else(|| Failure::other("internal", "the kit returned no agent"))?;
        Ok(agent.submit(self.prompt, self.options).await?)
    }
}

pub(crate) async fn run(out: Output, db: &Path, args: RunArgs) -> Result<(), Failure> {
    let submission = submission(&args)?;
    let oauth = (crate::oauth::context(out), crate::oauth::keys()?);
    let kit = open_kit_with(db, true, args.round_limits.limits(), Some(oauth)).await?;
    let outcome = async {
        let handle = submission.submit(&kit).await?;
        if out.is_json() {
            out.event("execution", &json!({"execution_id": handle.execution_id()}))?;
        } else {
            out.say(format!("execution {}", handle.execution_id()));
        }
        let answer = if args.interactive {
            Answer::Terminal
        } else {
            Answer::AnyProcess
        };
        let result = follow(out, &handle, answer).await?;
        print_result(out, &result)?;
        Ok::<_, Failure>(result)
    }
    .await;
    kit.close().await?;
    finished(&outcome?)
}

pub(crate) fn parse_selection(value: &serde_json::Value) -> Result<AgentSelection, Failure> {
    serde_json::from_value(value.clone())
        .map_err(|error| Failure::invalid(format!("invalid agent selection: {error}")))
}

/// Who answers the rounds of a followed execution.
#[derive(Debug, Clone)]
pub(crate) enum Answer {
    /// A person in this terminal (`--interactive`).
    Terminal,
    /// Any process, through `m3 respond`: this one only waits.
    AnyProcess,
    /// This process, with fixed responses built per round (the demo's sample address).
    Fixed(fn(&PendingElicitationRound) -> ResponseMap),
}

/// Prints each new pending round, answers it as `answer` says, and returns the final result.
/// Ctrl-C, SIGTERM or SIGHUP requests cancellation of the execution, so no round of it takes
/// an answer nobody would deliver, follows it to its end and then fails with `interrupted`,
/// `terminated` or `hung_up` (exit 130, 143, 129); a second signal stops following at once
/// (the execution is then cancelled by its worker's end, or failed by recovery once the
/// lease expires).
pub(crate) async fn follow(
    out: Output,
    handle: &AsyncExecutionHandle,
    answer: Answer,
) -> Result<ExecutionResult, Failure> {
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut ticker = Ticker::start(out.shows_progress(), "running");
    let mut stopped_by: Option<StopSignal> = None;
    let mut signals = StopSignals::foreground()?;
    loop {
        if let Some(round) = handle.pending_elicitation().await?
            && seen.insert(round.round_id.clone())
        {
            ticker.stop();
            show_round(out, &round, &answer)?;
            let waiting = match answer_for(out, &round, &answer).await? {
                Some(responses) => {
                    if !commit_answer(out, handle, &round, responses).await? {
                        // Still pending: ask again.
                        seen.remove(&round.round_id);
                    }
                    "running"
                }
                None => "waiting for a response",
            };
            ticker = Ticker::start(out.shows_progress(), waiting);
        }
        if handle.snapshot().await?.lifecycle.is_terminal() {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            signal = signals.next() => {
                if let Some(first) = stopped_by {
                    return Err(first.failure(handle.execution_id()));
                }
                stopped_by = Some(signal);
                ticker.stop();
                out.say(format!(
                    "{}: cancelling the execution (Ctrl-C again to stop waiting)",
                    signal.name()
                ));
                tokio::select! {
                    cancelled = handle.cancel() => cancelled?,
                    _ = signals.next() => return Err(signal.failure(handle.execution_id())),
                }
            }
        }
    }
    ticker.stop();
    let result = handle.result(None).await?;
    if let Some(signal) = stopped_by {
        print_result(out, &result)?;
        return Err(signal.failure(handle.execution_id()));
    }
    Ok(result)
}

/// The responses this process gives to `round`, if it answers at all.
async fn answer_for(
    out: Output,
    round: &PendingElicitationRound,
    answer: &Answer,
) -> Result<Option<ResponseMap>, Failure> {
    Ok(match answer {
        Answer::AnyProcess => None,
        Answer::Terminal => {
            let answered = ask_terminal(round).await?;
            if answered.is_none() {
                out.say(format!(
                    "round {} left pending; {}",
                    crate::terminal::escape(&round.round_id),
                    render::respond_hint(round)
                ));
            }
            answered
        }
        Answer::Fixed(build) => {
            let responses = build(round);
            if !out.is_json() {
                let shown = serde_json::to_value(&responses).unwrap_or_default();
                out.say(format!("answering with {shown}"));
            }
            Some(responses)
        }
    })
}

/// Commits `responses` to `round` and reports it; `false` when they were
/// invalid and the round is still pending (other failures are reported too).
async fn commit_answer(
    out: Output,
    handle: &AsyncExecutionHandle,
    round: &PendingElicitationRound,
    responses: ResponseMap,
) -> Result<bool, Failure> {
    let key = format!("m3-run-{}", round.round_id);
    match handle
        .respond_elicitation(&round.round_id, responses, &key)
        .await
    {
        Ok(()) => {
            if out.is_json() {
                out.event(
                    "round_committed",
                    &json!({"round_id": round.round_id, "committed": true}),
                )?;
            } else {
                out.say(format!("responses committed to round {}", round.round_id));
            }
            Ok(true)
        }
        Err(error) => {
            let failure = Failure::from(error);
            out.fail(&failure);
            Ok(failure.exit() != crate::failure::exit::INVALID)
        }
    }
}

fn show_round(
    out: Output,
    round: &PendingElicitationRound,
    answer: &Answer,
) -> Result<(), Failure> {
    if out.is_json() {
        return out.event("round_pending", round);
    }
    out.say(render::round(round));
    if matches!(answer, Answer::AnyProcess) {
        out.say(format!("  {}", render::respond_hint(round)));
    }
    Ok(())
}

/// Asks the person at this terminal: on a TTY with line editing and history (prompts on the
/// terminal), otherwise plain lines (prompts on stderr, answers from stdin). `None` when the
/// person quit or gave up (Ctrl-C, Ctrl-D): the round stays pending.
async fn ask_terminal(round: &PendingElicitationRound) -> Result<Option<ResponseMap>, Failure> {
    let round = round.clone();
    tokio::task::spawn_blocking(move || {
        let stdin = std::io::stdin();
        if stdin.is_terminal() {
            let mut prompter = Prompter::new(TerminalInput::open()?, std::io::stderr());
            answer_round(&mut prompter, &round)
        } else {
            let mut prompter = Prompter::new(stdin.lock(), std::io::stderr());
            answer_round(&mut prompter, &round)
        }
    })
    .await
    .map_err(|error| Failure::other("internal", format!("the prompt failed: {error}")))?
    .map_err(|error| Failure::other("io_error", format!("cannot read the answer: {error}")))
}

pub(crate) fn print_result(out: Output, result: &ExecutionResult) -> Result<(), Failure> {
    if out.is_json() {
        out.event("result", result)
    } else {
        out.say(render::result(out, result));
        Ok(())
    }
}

/// Exit 0 for `completed`, else the "finished but not completed" failure (exit 9).
pub(crate) fn finished(result: &ExecutionResult) -> Result<(), Failure> {
    if result.snapshot.outcome == Some(ExecutionOutcome::Completed) {
        Ok(())
    } else {
        Err(Failure::not_completed(result))
    }
}
