//! Elicitation plans: answers given without a person, matched to each request by what
//! asks (server, operation, request key, optionally the message or the requested schema's
//! digest), never by position. A plan is a JSON file (`m3 schema elicitation-plan`), built
//! by hand, with [`ElicitationPlan::builder`], or recorded from a managed run's answers.
//!
//! ```
//! use m3_types::plan::{ElicitationPlan, PlanEntry, PlanQuestion};
//! use m3_types::{ElicitationRequest, ElicitationResponse, FormElicitationRequest, OperationKind};
//! use serde_json::json;
//!
//! let plan = ElicitationPlan::builder()
//!     .entry(
//!         PlanEntry::new("shipping_address", ElicitationResponse::accept(
//!             json!({"street": "1 Main Street", "city": "Pune"}).as_object().unwrap().clone()))
//!         .server("shipping")
//!         .tool("book_shipment"),
//!     )
//!     .build();
//! let schema = json!({"type": "object", "properties": {"street": {"type": "string"}}});
//! let request = FormElicitationRequest::new("shipping_address", "Where to?",
//!     schema.as_object().unwrap().clone());
//! let requests = [("shipping_address".to_owned(), ElicitationRequest::Form(request))].into();
//! let mut matcher = plan.matcher();
//! let question = PlanQuestion {
//!     server: "shipping",
//!     operation_kind: OperationKind::Tool,
//!     operation_name: "book_shipment",
//!     requests: &requests,
//! };
//! let answers = matcher.answer(&question).unwrap();
//! assert_eq!(answers["shipping_address"].content.as_ref().unwrap()["city"], "Pune");
//! // The entry is used up: a second identical question has no answer.
//! assert_eq!(matcher.answer(&question).unwrap_err().code(), "protocol_error");
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

use crate::canonical::canonical_json;
use crate::elicitation::{ElicitationRequest, ElicitationResponse, OperationKind, ResponseMap};
use crate::error::{Error, Result};

/// The plan file format this crate writes and reads.
pub const PLAN_FORMAT_VERSION: u32 = 1;

/// Predefined answers to the elicitation requests of a `human_input = fail` execution.
///
/// `entries` are matched to each request by what asks; `rounds` is the older form (one
/// response map per round, in order), still read from stored executions and
/// [`ElicitationPlan::new`]. A plan has one or the other.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub struct ElicitationPlan {
    /// The file format (1); absent in plans stored before files existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u32>,
    /// Matched answers (see [`PlanEntry`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entries: Vec<PlanEntry>,
    /// Positional answers: one response map per round, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<ResponseMap>,
}

/// One answer of a plan and the requests it answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct PlanEntry {
    /// The request key it answers (required).
    pub request_key: String,
    /// Only requests from this server binding (absent: any server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Only requests during this kind of operation (absent: any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_kind: Option<OperationKind>,
    /// Only requests during this tool, prompt or resource (absent: any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_name: Option<String>,
    /// Only requests with exactly this message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Only form requests whose requested schema has this digest ([`schema_digest`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_digest: Option<String>,
    /// The answer: `accept` (with content for a form), `decline` or `cancel`.
    pub response: ElicitationResponse,
    /// How many requests it may answer (default 1); `0` means any number.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub uses: u32,
}

fn one() -> u32 {
    1
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_one(uses: &u32) -> bool {
    *uses == 1
}

impl PlanEntry {
    /// An entry answering requests keyed `request_key` with `response`, once.
    pub fn new(request_key: impl Into<String>, response: ElicitationResponse) -> Self {
        Self {
            request_key: request_key.into(),
            server: None,
            operation_kind: None,
            operation_name: None,
            message: None,
            schema_digest: None,
            response,
            uses: 1,
        }
    }

    /// Only requests from `server`.
    #[must_use]
    pub fn server(mut self, server: impl Into<String>) -> Self {
        self.server = Some(server.into());
        self
    }

    /// Only requests during the tool `name`.
    #[must_use]
    pub fn tool(self, name: impl Into<String>) -> Self {
        self.operation(OperationKind::Tool, name)
    }

    /// Only requests during the operation `kind` `name`.
    #[must_use]
    pub fn operation(mut self, kind: OperationKind, name: impl Into<String>) -> Self {
        self.operation_kind = Some(kind);
        self.operation_name = Some(name.into());
        self
    }

    /// Only requests with exactly this message.
    #[must_use]
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }

    /// Only form requests whose schema has this digest ([`schema_digest`]).
    #[must_use]
    pub fn schema_digest(mut self, digest: impl Into<String>) -> Self {
        self.schema_digest = Some(digest.into());
        self
    }

    /// May answer `uses` requests (`0`: any number).
    #[must_use]
    pub fn uses(mut self, uses: u32) -> Self {
        self.uses = uses;
        self
    }

    /// Whether this entry matches `question`'s request `key` (its uses aside).
    pub fn matches(&self, question: &PlanQuestion<'_>, key: &str) -> bool {
        self.mismatches(question, key).is_empty()
    }

    /// What of `question`'s request `key` this entry does not match (empty: it matches).
    fn mismatches(&self, question: &PlanQuestion<'_>, key: &str) -> Vec<&'static str> {
        let request = question.requests.get(key);
        let mut wrong = Vec::new();
        if self.request_key != key {
            wrong.push("request_key");
        }
        if self.server.as_deref().is_some_and(|s| s != question.server) {
            wrong.push("server");
        }
        if self
            .operation_kind
            .is_some_and(|k| k != question.operation_kind)
        {
            wrong.push("operation_kind");
        }
        if let Some(name) = &self.operation_name
            && name != question.operation_name
        {
            wrong.push("operation_name");
        }
        if let (Some(message), Some(request)) = (&self.message, request)
            && message != request_message(request)
        {
            wrong.push("message");
        }
        if let Some(digest) = &self.schema_digest {
            let actual = match request {
                Some(ElicitationRequest::Form(form)) => schema_digest(&form.requested_schema).ok(),
                _ => None,
            };
            if actual.as_deref() != Some(digest.as_str()) {
                wrong.push("schema_digest");
            }
        }
        wrong
    }
}

fn request_message(request: &ElicitationRequest) -> &str {
    match request {
        ElicitationRequest::Form(form) => &form.message,
        ElicitationRequest::Url(url) => &url.message,
    }
}

/// `sha256:<hex>` of the canonical JSON of a requested schema: equal for schemas that
/// differ only in key order or spacing.
///
/// # Errors
/// `managed_input_invalid` for a schema canonical JSON cannot encode.
pub fn schema_digest(schema: &Map<String, Value>) -> Result<String> {
    let text = canonical_json(&Value::Object(schema.clone()))?;
    let digest = Sha256::digest(text.as_bytes());
    let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    Ok(format!("sha256:{hex}"))
}

/// Builds a plan entry by entry.
#[derive(Debug, Clone, Default)]
pub struct ElicitationPlanBuilder {
    entries: Vec<PlanEntry>,
}

impl ElicitationPlanBuilder {
    /// Adds `entry`.
    #[must_use]
    pub fn entry(mut self, entry: PlanEntry) -> Self {
        self.entries.push(entry);
        self
    }

    /// The plan.
    pub fn build(self) -> ElicitationPlan {
        ElicitationPlan {
            version: Some(PLAN_FORMAT_VERSION),
            entries: self.entries,
            rounds: Vec::new(),
        }
    }
}

impl ElicitationPlan {
    /// A positional plan answering the rounds with `rounds`, in order.
    pub fn new(rounds: Vec<ResponseMap>) -> Self {
        Self {
            version: None,
            entries: Vec::new(),
            rounds,
        }
    }

    /// A builder of a matched plan.
    pub fn builder() -> ElicitationPlanBuilder {
        ElicitationPlanBuilder::default()
    }

    /// Reads and checks a plan file (JSON).
    ///
    /// # Errors
    /// `invalid_argument` for an unreadable file, JSON that is not a plan, an unknown
    /// format version, or a plan with both `entries` and `rounds`.
    pub fn from_path(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|error| {
            Error::model_validation(format!("cannot read plan {}: {error}", path.display()))
        })?;
        Self::from_json(&text)
            .map_err(|error| error.with_detail("plan", path.display().to_string()))
    }

    /// Parses and checks a plan from JSON text.
    ///
    /// # Errors
    /// As [`ElicitationPlan::from_path`].
    pub fn from_json(text: &str) -> Result<Self> {
        let plan: Self = serde_json::from_str(text).map_err(|error| {
            Error::model_validation(format!("not an elicitation plan: {error}"))
        })?;
        plan.check()?;
        Ok(plan)
    }

    /// Checks what serde cannot: the version and the two forms kept apart.
    ///
    /// # Errors
    /// `invalid_argument` naming the problem.
    pub fn check(&self) -> Result<()> {
        if let Some(version) = self.version
            && version != PLAN_FORMAT_VERSION
        {
            return Err(Error::model_validation(format!(
                "elicitation plan version {version} is not supported (this m3 reads version {PLAN_FORMAT_VERSION})"
            )));
        }
        if !self.entries.is_empty() && !self.rounds.is_empty() {
            return Err(Error::model_validation(
                "an elicitation plan has either entries (matched) or rounds (in order), not both",
            ));
        }
        if let Some(entry) = self.entries.iter().find(|e| e.request_key.is_empty()) {
            return Err(Error::model_validation(format!(
                "a plan entry has an empty request_key (answer {:?})",
                entry.response.action
            )));
        }
        Ok(())
    }

    /// A fresh matcher: what one execution uses up as it answers.
    pub fn matcher(&self) -> PlanMatcher {
        PlanMatcher {
            entries: self
                .entries
                .iter()
                .map(|entry| (entry.clone(), entry.uses))
                .collect(),
            rounds: self.rounds.iter().cloned().collect(),
        }
    }
}

/// What asks for input: the round's origin and its keyed requests.
#[derive(Debug, Clone, Copy)]
#[expect(
    clippy::exhaustive_structs,
    reason = "a borrowed view the runtimes build with a struct literal; every field is what asks"
)]
pub struct PlanQuestion<'a> {
    /// The server binding's name.
    pub server: &'a str,
    /// The kind of operation that asked.
    pub operation_kind: OperationKind,
    /// The tool or prompt name, or resource URI.
    pub operation_name: &'a str,
    /// The requests, by key.
    pub requests: &'a BTreeMap<String, ElicitationRequest>,
}

/// A plan being used by one execution: entries with the uses they have left.
#[derive(Debug, Clone)]
pub struct PlanMatcher {
    /// Each entry and how many uses it has left (`0` uses given: any number).
    entries: Vec<(PlanEntry, u32)>,
    rounds: VecDeque<ResponseMap>,
}

impl PlanMatcher {
    /// The answers to `question`: for each request, the first entry that matches it and has
    /// a use left (used up by this call); for a positional plan, the next round's map.
    ///
    /// # Errors
    /// `protocol_error` with reason `plan_no_match`, naming the request and the closest
    /// entry with what differs, when a request has no entry (nothing is used up then);
    /// reason `unexpected_elicitation` when a positional plan has no round left.
    pub fn answer(&mut self, question: &PlanQuestion<'_>) -> Result<ResponseMap> {
        if self.entries.is_empty() {
            return self.rounds.pop_front().ok_or_else(|| {
                Error::protocol("the elicitation plan has no answer left for this round")
                    .with_detail("reason", "unexpected_elicitation")
            });
        }
        let mut chosen = Vec::new();
        for key in question.requests.keys() {
            let found = self.entries.iter().position(|(entry, left)| {
                (entry.uses == 0 || *left > 0) && entry.mismatches(question, key).is_empty()
            });
            match found {
                Some(index) => chosen.push((key.clone(), index)),
                None => return Err(self.no_match(question, key)),
            }
        }
        let mut answers = ResponseMap::new();
        for (key, index) in chosen {
            if let Some((entry, left)) = self.entries.get_mut(index) {
                *left = left.saturating_sub(1);
                answers.insert(key, entry.response.clone());
            }
        }
        Ok(answers)
    }

    /// The error for request `key` that no entry answers, naming the closest entry.
    fn no_match(&self, question: &PlanQuestion<'_>, key: &str) -> Error {
        let closest = self
            .entries
            .iter()
            .enumerate()
            .map(|(index, (entry, left))| {
                let mut wrong = entry.mismatches(question, key);
                if entry.uses != 0 && *left == 0 {
                    wrong.push("uses");
                }
                (index, wrong)
            })
            // An entry for the same request key is closer than any entry for another key.
            .min_by_key(|(_, wrong)| (wrong.contains(&"request_key"), wrong.len()));
        let mut error = Error::protocol(format!(
            "no plan entry answers request '{key}' from server '{}' during {} '{}'{}",
            question.server,
            question.operation_kind,
            question.operation_name,
            closest
                .as_ref()
                .map_or_else(String::new, |(index, wrong)| format!(
                    "; the closest is entry {index}, which differs in {}",
                    wrong.join(", ")
                ))
        ))
        .with_detail("reason", "plan_no_match")
        .with_detail("request_key", key)
        .with_detail("server", question.server)
        .with_detail("operation_name", question.operation_name);
        if let Some((index, wrong)) = closest {
            error = error
                .with_detail("closest_entry", index)
                .with_detail("differs_in", wrong);
        }
        error
    }
}
