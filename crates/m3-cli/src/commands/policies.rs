//! `m3 policies add|list|remove`: the store's policies for unattended rounds, fired by
//! whichever worker holds a waiting round's lease (`docs/policies.md`).

use std::path::Path;
use std::time::Duration;

use clap::{ArgGroup, Args, Subcommand};
use m3_kit::policies::{NewPolicy, Policy};
use m3_types::{ElicitationResponse, OperationKind};
use serde_json::{Value, json};

use crate::commands::inspect::open_existing_kit;
use crate::failure::Failure;
use crate::output::Output;

/// `m3 policies`.
#[derive(Debug, Subcommand)]
pub(crate) enum PoliciesCommand {
    /// Add a policy: after a matching round has waited DURATION, answer it.
    Add(AddPolicyArgs),
    /// List the policies, oldest first.
    List,
    /// Remove a policy by name.
    Remove {
        /// The policy's name.
        name: String,
    },
}

/// `m3 policies add`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("answer").required(true).args(["decline", "cancel", "accept"])))]
pub(crate) struct AddPolicyArgs {
    /// The policy's name (unique; answers are recorded as `policy:NAME`).
    name: String,
    /// Only rounds from this server.
    #[arg(long, value_name = "NAME")]
    server: Option<String>,
    /// Only rounds from this kind of operation: tool, prompt or resource.
    #[arg(long, value_name = "KIND")]
    operation_kind: Option<String>,
    /// Only rounds from this tool or prompt name (or resource URI).
    #[arg(long = "operation", value_name = "NAME")]
    operation_name: Option<String>,
    /// Only rounds whose every request has this key.
    #[arg(long, value_name = "KEY")]
    request_key: Option<String>,
    /// Only requests with exactly this message.
    #[arg(long, value_name = "TEXT")]
    message: Option<String>,
    /// Only form requests whose schema has this digest (sha256:...).
    #[arg(long, value_name = "DIGEST")]
    schema_digest: Option<String>,
    /// Answer once the round has waited this long (10m, 1h, 30s).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    after: Duration,
    /// Decline every request of the round.
    #[arg(long)]
    decline: bool,
    /// Cancel every request of the round.
    #[arg(long)]
    cancel: bool,
    /// Accept every request with this content: a JSON object of strings, numbers and
    /// booleans.
    #[arg(long, value_name = "JSON")]
    accept: Option<String>,
}

impl AddPolicyArgs {
    /// The policy these flags describe.
    fn policy(self) -> Result<NewPolicy, Failure> {
        let answer = match (&self.accept, self.decline, self.cancel) {
            (Some(text), _, _) => {
                let content: Value = serde_json::from_str(text)
                    .map_err(|e| Failure::invalid(format!("--accept is not JSON: {e}")))?;
                let Value::Object(content) = content else {
                    return Err(Failure::invalid("--accept takes a JSON object"));
                };
                ElicitationResponse::accept(content)
            }
            (None, true, _) => ElicitationResponse::decline(),
            _ => ElicitationResponse::cancel(),
        };
        let mut new = NewPolicy::new(self.name, self.after, answer);
        new.server = self.server;
        new.operation_kind = self
            .operation_kind
            .as_deref()
            .map(str::parse::<OperationKind>)
            .transpose()?;
        new.operation_name = self.operation_name;
        new.request_key = self.request_key;
        new.message = self.message;
        new.schema_digest = self.schema_digest;
        Ok(new)
    }
}

/// `m3 policies ...`.
pub(crate) async fn run(out: Output, db: &Path, command: PoliciesCommand) -> Result<(), Failure> {
    // Check the flags before the store is touched: a refused policy changes nothing.
    let (command, new) = match command {
        PoliciesCommand::Add(args) => (None, Some(args.policy()?)),
        other => (Some(other), None),
    };
    let kit = open_existing_kit(db, false).await?;
    let outcome = async {
        match (command, new) {
            (_, Some(new)) => {
                let policy = kit.add_policy(new).await?;
                if out.is_json() {
                    return out.document(&policy_json(&policy));
                }
                out.say(format!("added policy {}", describe(&policy)));
                Ok(())
            }
            (Some(PoliciesCommand::Remove { name }), None) => {
                let removed = kit.remove_policy(&name).await?;
                if out.is_json() {
                    let mut document = policy_json(&removed);
                    document["removed"] = json!(true);
                    return out.document(&document);
                }
                out.say(format!("removed policy {}", removed.name));
                Ok(())
            }
            _ => {
                let listed = kit.policies().await?;
                if out.is_json() {
                    let all: Vec<_> = listed.iter().map(policy_json).collect();
                    return out.document(&all);
                }
                if listed.is_empty() {
                    out.say("no policies");
                }
                for policy in &listed {
                    out.say(describe(policy));
                }
                Ok(())
            }
        }
    }
    .await;
    kit.close().await?;
    outcome
}

/// One line: the name, what it answers, after how long, and what it matches (never the
/// content's values).
fn describe(policy: &Policy) -> String {
    let mut matches = Vec::new();
    let fields = [
        ("server", policy.server.clone()),
        (
            "operation_kind",
            policy.operation_kind.map(|k| k.to_string()),
        ),
        ("operation", policy.operation_name.clone()),
        ("request_key", policy.request_key.clone()),
        ("message", policy.message.clone()),
        ("schema_digest", policy.schema_digest.clone()),
    ];
    for (field, value) in fields {
        if let Some(value) = value {
            matches.push(format!("{field}={value}"));
        }
    }
    let matching = if matches.is_empty() {
        "every round".to_owned()
    } else {
        matches.join(" ")
    };
    format!(
        "{}: {} after {} ({matching})",
        policy.name,
        policy.answer.action,
        humantime::format_duration(policy.after())
    )
}

/// The policy as `--json` shows it: its answer's content in the redacted projection, so a
/// secret-named value it gives (a password) is never printed.
fn policy_json(policy: &Policy) -> Value {
    let answer = serde_json::to_value(&policy.answer).unwrap_or(Value::Null);
    json!({
        "name": policy.name,
        "server": policy.server,
        "operation_kind": policy.operation_kind,
        "operation_name": policy.operation_name,
        "request_key": policy.request_key,
        "message": policy.message,
        "schema_digest": policy.schema_digest,
        "after_ms": policy.after_ms,
        "answer": m3_types::redact(&answer),
        "created_at": m3_types::timestamp::format(policy.created_at),
    })
}
