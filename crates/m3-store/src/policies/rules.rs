//! Every decision of the policy store: names, matchers, delays and answers when a policy
//! is added; which policy answers a round, and when, when a worker waits on it. Backends
//! only keep rows ([`super::rows`]).

use std::time::Duration;

use m3_types::plan::PlanQuestion;
use m3_types::{ElicitationAction, Error, PendingElicitationRound, Reason, ResponseMap, Result};
use serde_json::Value;
use time::OffsetDateTime;

use super::record::{NewPolicy, Policy};

/// The longest policy name.
pub const NAME_MAX_CHARS: usize = 64;

/// The longest delay a policy may wait (a year): longer is surely a mistake.
pub const AFTER_MAX: Duration = Duration::from_secs(366 * 24 * 60 * 60);

/// The longest matcher value (server, operation, key, message).
const MATCHER_MAX_CHARS: usize = 8 * 1024;

/// The largest fixed content, as compact JSON.
const CONTENT_MAX_BYTES: usize = 64 * 1024;

fn invalid(message: impl Into<String>) -> Error {
    Error::model_validation(message).with_reason(Reason::InvalidPolicy)
}

/// Checks a policy name: 1 to 64 characters of ASCII letters, digits, `.`, `_`, `-`, `@`.
///
/// # Errors
/// `invalid_argument` (reason `invalid_policy`).
pub fn check_name(name: &str) -> Result<()> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@');
    if name.is_empty() || name.len() > NAME_MAX_CHARS || !name.chars().all(allowed) {
        return Err(invalid(format!(
            "a policy name is 1 to {NAME_MAX_CHARS} characters of letters, digits, '.', '_', '-' and '@'"
        ))
        .with_detail("name", name.chars().take(80).collect::<String>()));
    }
    Ok(())
}

/// Checks the answer: decline and cancel carry nothing; accept carries content that is a
/// JSON object of primitive values (strings, numbers, booleans, as a form's content is),
/// at most 64 KiB. Whether it fits a round's schema is checked when the policy fires.
///
/// # Errors
/// `invalid_argument` (reason `invalid_policy`); the message never quotes a value.
pub fn check_answer(answer: &m3_types::ElicitationResponse) -> Result<()> {
    if answer.meta.is_some() {
        return Err(invalid("a policy's answer carries no meta"));
    }
    answer
        .validate()
        .map_err(|e| invalid(e.message().to_owned()))?;
    if answer.action != ElicitationAction::Accept {
        return Ok(());
    }
    let Some(content) = &answer.content else {
        return Err(invalid("a policy that accepts gives the content to accept"));
    };
    if let Some((field, _)) = content
        .iter()
        .find(|(_, value)| !matches!(value, Value::String(_) | Value::Number(_) | Value::Bool(_)))
    {
        return Err(invalid(format!(
            "a policy's content holds only strings, numbers and booleans; field '{}' does not",
            field.chars().take(80).collect::<String>()
        ))
        .with_detail("field", field.chars().take(80).collect::<String>()));
    }
    let bytes = serde_json::to_vec(content).map_or(usize::MAX, |bytes| bytes.len());
    if bytes > CONTENT_MAX_BYTES {
        return Err(invalid(format!(
            "a policy's content is at most {CONTENT_MAX_BYTES} bytes of JSON"
        )));
    }
    Ok(())
}

fn check_matcher(new: &NewPolicy) -> Result<()> {
    let texts = [
        ("server", &new.server),
        ("operation_name", &new.operation_name),
        ("request_key", &new.request_key),
        ("message", &new.message),
    ];
    for (field, value) in texts {
        if let Some(value) = value
            && (value.is_empty() || value.len() > MATCHER_MAX_CHARS)
        {
            return Err(invalid(format!(
                "a policy's {field} is 1 to {MATCHER_MAX_CHARS} characters when given"
            ))
            .with_detail("field", field));
        }
    }
    if let Some(digest) = &new.schema_digest {
        let hex = digest.strip_prefix("sha256:").unwrap_or("");
        if hex.len() != 64
            || !hex
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        {
            return Err(invalid(
                "a schema digest is 'sha256:' and 64 lower-case hex digits (`m3 rounds` shows a round's)",
            )
            .with_detail("field", "schema_digest"));
        }
    }
    Ok(())
}

/// The policy `new` describes, added at `now`.
///
/// # Errors
/// As [`check_name`] and [`check_answer`]; `invalid_argument` (reason `invalid_policy`)
/// for an empty or oversized matcher value, a malformed schema digest, or a delay above
/// [`AFTER_MAX`].
pub fn make(new: NewPolicy, now: OffsetDateTime) -> Result<Policy> {
    check_name(&new.name)?;
    check_matcher(&new)?;
    check_answer(&new.answer)?;
    if new.after > AFTER_MAX {
        return Err(invalid("a policy waits at most 366 days"));
    }
    let after_ms = u64::try_from(new.after.as_millis()).unwrap_or(u64::MAX);
    Ok(Policy {
        name: new.name,
        server: new.server,
        operation_kind: new.operation_kind,
        operation_name: new.operation_name,
        request_key: new.request_key,
        message: new.message,
        schema_digest: new.schema_digest,
        after_ms,
        answer: new.answer,
        created_at: now,
    })
}

/// A policy's stored text.
///
/// # Errors
/// `storage_error` if it cannot be encoded.
pub fn encode(policy: &Policy) -> Result<String> {
    serde_json::to_string(policy)
        .map_err(|e| Error::storage(format!("cannot encode a policy: {e}")))
}

/// A policy from its stored text.
///
/// # Errors
/// `storage_error` (reason `stored_record_invalid`) for text that is not a policy.
pub fn decode(text: &str) -> Result<Policy> {
    serde_json::from_str(text).map_err(|e| {
        Error::storage(format!("a stored policy is invalid: {e}"))
            .with_reason(Reason::StoredRecordInvalid)
    })
}

/// The error for a name another policy has.
pub fn name_taken(name: &str) -> Error {
    Error::model_validation(format!("a policy named '{name}' exists"))
        .with_reason(Reason::PolicyNameTaken)
        .with_detail("name", name)
}

/// The answers `policy` gives `round`: its answer for every request, when it matches every
/// request of the round; `None` when it does not match.
pub fn answers(policy: &Policy, round: &PendingElicitationRound) -> Option<ResponseMap> {
    let question = PlanQuestion {
        server: &round.server,
        operation_kind: round.operation_kind,
        operation_name: &round.operation_name,
        requests: &round.requests,
    };
    let all_match = !round.requests.is_empty()
        && round
            .requests
            .keys()
            .all(|key| policy.entry_for(key).matches(&question, key));
    all_match.then(|| {
        round
            .requests
            .keys()
            .map(|key| (key.clone(), policy.answer.clone()))
            .collect()
    })
}

/// When `policy` fires for `round`: the round's creation plus the policy's delay, if the
/// policy matches and that is before the round's deadline (a policy never fires at or
/// after the deadline: the deadline fails the round).
pub fn fires_at(policy: &Policy, round: &PendingElicitationRound) -> Option<OffsetDateTime> {
    answers(policy, round)?;
    let after = time::Duration::try_from(policy.after()).ok()?;
    let at = round.created_at.checked_add(after)?;
    match round.deadline {
        Some(deadline) if at >= deadline => None,
        _ => Some(at),
    }
}

/// The policy that answers `round` first, and when: the earliest [`fires_at`] among
/// `policies` not in `excluded` (the older policy on a tie, as listed).
pub fn first_to_fire<'a>(
    policies: &'a [Policy],
    round: &PendingElicitationRound,
    excluded: &[String],
) -> Option<(&'a Policy, OffsetDateTime)> {
    policies
        .iter()
        .filter(|policy| !excluded.contains(&policy.name))
        .filter_map(|policy| fires_at(policy, round).map(|at| (policy, at)))
        .min_by_key(|(_, at)| *at)
}

/// The idempotency key a policy's answer to a round is submitted under: the same for
/// every worker and every retry, so two workers firing the same policy commit one answer.
pub fn idempotency_key(policy: &Policy, round_id: &str) -> String {
    format!("policy:{}:{round_id}", policy.name)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use m3_types::{
        ElicitationRequest, ElicitationResponse, FormElicitationRequest, OperationKind,
    };
    use serde_json::json;

    use super::*;

    fn round(deadline: Option<OffsetDateTime>) -> PendingElicitationRound {
        let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}});
        let request = FormElicitationRequest::new(
            "address",
            "Where to?",
            schema.as_object().cloned().unwrap_or_default(),
        );
        let requests: BTreeMap<String, ElicitationRequest> =
            [("address".to_owned(), ElicitationRequest::Form(request))].into();
        let mut round = PendingElicitationRound::new(
            "r1",
            "e1",
            "op",
            "shipping",
            OperationKind::Tool,
            "book_shipment",
            requests,
            OffsetDateTime::UNIX_EPOCH,
        )
        .unwrap();
        round.deadline = deadline;
        round
    }

    fn accept(content: serde_json::Value) -> ElicitationResponse {
        ElicitationResponse::accept(content.as_object().cloned().unwrap_or_default())
    }

    #[test]
    fn answers_are_checked_when_added() {
        let now = OffsetDateTime::UNIX_EPOCH;
        let minute = Duration::from_secs(60);
        for bad in [
            NewPolicy::new("", minute, ElicitationResponse::decline()),
            NewPolicy::new("a b", minute, ElicitationResponse::decline()),
            NewPolicy::new("p", minute, accept(json!({"nested": {"a": 1}}))),
            NewPolicy::new("p", minute, accept(json!({"list": [1]}))),
            NewPolicy::new("p", minute, accept(json!({"none": null}))),
            NewPolicy::new("p", minute, ElicitationResponse::accept_url()),
            NewPolicy::new("p", minute, ElicitationResponse::decline()).schema_digest("md5:x"),
            NewPolicy::new("p", minute, ElicitationResponse::decline()).server(""),
            NewPolicy::new("p", AFTER_MAX + minute, ElicitationResponse::decline()),
        ] {
            let error = make(bad.clone(), now).unwrap_err();
            assert_eq!(error.reason(), Some(Reason::InvalidPolicy), "{bad:?}");
        }
        let good = make(
            NewPolicy::new("p", minute, accept(json!({"city": "Pune"}))),
            now,
        )
        .unwrap();
        assert_eq!(decode(&encode(&good).unwrap()).unwrap(), good);
    }

    #[test]
    fn a_policy_fires_after_its_delay_and_never_at_the_deadline() {
        let minute = Duration::from_secs(60);
        let epoch = OffsetDateTime::UNIX_EPOCH;
        let policy = make(
            NewPolicy::new("late", minute, ElicitationResponse::decline())
                .server("shipping")
                .request_key("address"),
            epoch,
        )
        .unwrap();
        assert_eq!(fires_at(&policy, &round(None)), Some(epoch + minute));
        let deadline = epoch + minute;
        assert_eq!(fires_at(&policy, &round(Some(deadline))), None);
        let other = make(
            NewPolicy::new("other", minute, ElicitationResponse::decline()).server("weather"),
            epoch,
        )
        .unwrap();
        assert!(answers(&other, &round(None)).is_none());
        let sooner = make(
            NewPolicy::new(
                "sooner",
                Duration::from_secs(1),
                ElicitationResponse::cancel(),
            ),
            epoch,
        )
        .unwrap();
        let policies = [policy.clone(), sooner.clone()];
        let first = first_to_fire(&policies, &round(None), &[]).map(|(p, _)| p.name.clone());
        assert_eq!(first.as_deref(), Some("sooner"));
        let first = first_to_fire(&policies, &round(None), &["sooner".to_owned()])
            .map(|(p, _)| p.name.clone());
        assert_eq!(first.as_deref(), Some("late"));
        assert_eq!(idempotency_key(&policy, "r1"), "policy:late:r1");
    }
}
