//! Unique id prefixes, as git accepts them: every command that takes an execution or round
//! id also takes the start of one (at least [`MIN_PREFIX`] characters, ASCII
//! case-insensitive) when exactly one id of the store starts so.
//!
//! An id found as given is used as given; a prefix that matches nothing is passed on
//! unchanged, so the kit says `not_found` in its own words (and an id with no execution
//! record, such as a round another implementation of M3 wrote, still works in full); a prefix
//! that matches several ids is `invalid_argument` with reason `ambiguous_id` listing them.

use m3_kit::{AsyncExecutionHandle, AsyncMcpTestKit};
use m3_types::{Error, HumanInput, Reason};
use serde_json::json;

use crate::failure::Failure;

/// The shortest prefix looked up (shorter text is taken as a whole id).
pub(crate) const MIN_PREFIX: usize = 4;

/// The length of a ULID, the ids m3 writes.
const ULID_LEN: usize = 26;

/// The id of `ids` that `given` names: `given` itself when listed, else the one id starting
/// with it (see the module docs); `given` unchanged when none does.
///
/// # Errors
/// `invalid_argument` (reason `ambiguous_id`, `details.candidates`) for a prefix of
/// several ids.
pub(crate) fn resolve<'a>(
    what: &str,
    given: &str,
    ids: impl IntoIterator<Item = &'a str>,
) -> Result<String, Error> {
    if given.chars().count() < MIN_PREFIX {
        return Ok(given.to_owned());
    }
    let wanted = given.to_ascii_uppercase();
    let mut candidates: Vec<&str> = Vec::new();
    for id in ids {
        if id == given {
            return Ok(given.to_owned());
        }
        if id.to_ascii_uppercase().starts_with(&wanted) && !candidates.contains(&id) {
            candidates.push(id);
        }
    }
    match candidates.as_slice() {
        [] => Ok(given.to_owned()),
        [one] => Ok((*one).to_owned()),
        many => Err(Error::model_validation(format!(
            "{what} id prefix '{given}' is ambiguous: it matches {}",
            many.join(", ")
        ))
        .with_reason(Reason::AmbiguousId)
        .with_detail("prefix", given)
        .with_detail("candidates", json!(many))),
    }
}

/// Whether `given` can only be a whole id: as long as a ULID and in its upper case.
fn is_whole(given: &str) -> bool {
    given.len() >= ULID_LEN && !given.bytes().any(|byte| byte.is_ascii_lowercase())
}

/// The execution id `given` names (a whole id or a unique prefix of one).
///
/// # Errors
/// `invalid_argument` (`ambiguous_id`); the store's errors.
pub(crate) async fn execution(kit: &AsyncMcpTestKit, given: &str) -> Result<String, Failure> {
    if is_whole(given) {
        return Ok(given.to_owned());
    }
    let summaries = kit.executions().await?;
    let ids = summaries
        .iter()
        .map(|summary| summary.state.execution_id.as_str());
    Ok(resolve("execution", given, ids)?)
}

/// The execution `given` names, attached.
///
/// # Errors
/// `invalid_argument` (`ambiguous_id`); `not_found`; the store's errors.
pub(crate) async fn attach(
    kit: &AsyncMcpTestKit,
    given: &str,
) -> Result<AsyncExecutionHandle, Failure> {
    let id = execution(kit, given).await?;
    Ok(kit.attach(&id).await?)
}

/// The round id `given` names among the rounds of `handle`'s execution.
///
/// # Errors
/// `invalid_argument` (`ambiguous_id`); the store's errors.
pub(crate) async fn round(handle: &AsyncExecutionHandle, given: &str) -> Result<String, Failure> {
    if is_whole(given) {
        return Ok(given.to_owned());
    }
    let rounds = handle.rounds().await?;
    let ids = rounds.iter().map(|round| round.round_id.as_str());
    Ok(resolve("round", given, ids)?)
}

/// The execution holding the round `given` names (a whole id or a unique prefix), searched
/// in every managed execution of the store, with the round's whole id.
///
/// # Errors
/// `not_found` (exit 8) when no execution has such a round; `invalid_argument`
/// (`ambiguous_id`) for a prefix of several rounds; the store's errors.
pub(crate) async fn find_round(
    kit: &AsyncMcpTestKit,
    given: &str,
) -> Result<(AsyncExecutionHandle, String), Failure> {
    let mut found: Vec<(String, String)> = Vec::new();
    for summary in kit.executions().await? {
        if summary.human_input != HumanInput::Managed {
            continue;
        }
        let execution_id = &summary.state.execution_id;
        for round in kit.attach(execution_id).await?.rounds().await? {
            found.push((execution_id.clone(), round.round_id));
        }
    }
    let round_id = resolve("round", given, found.iter().map(|(_, id)| id.as_str()))?;
    match found.iter().find(|(_, id)| *id == round_id) {
        Some((execution_id, _)) => Ok((kit.attach(execution_id).await?, round_id)),
        None => Err(Failure::from(
            Error::not_found(format!(
                "no execution in this store has round '{given}' (give EXECUTION ROUND, see `m3 pending`)"
            ))
            .with_detail("round_id", given),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDS: [&str; 3] = [
        "01KB0000000000000000000001",
        "01KB0000000000000000000002",
        "01KC0000000000000000000003",
    ];

    #[test]
    fn a_unique_prefix_names_its_id_in_any_case() {
        assert_eq!(resolve("execution", "01kc", IDS).unwrap(), IDS[2]);
        assert_eq!(
            resolve("execution", "01KB0000000000000000000002", IDS).unwrap(),
            IDS[1]
        );
        // Too short, or matching nothing: passed on for the kit to say `not_found`.
        assert_eq!(resolve("execution", "01K", IDS).unwrap(), "01K");
        assert_eq!(resolve("execution", "01M90QJQ", IDS).unwrap(), "01M90QJQ");
    }

    #[test]
    fn an_ambiguous_prefix_lists_the_candidates() {
        let error = resolve("execution", "01KB", IDS).unwrap_err();
        assert_eq!(error.code(), "invalid_argument");
        assert_eq!(error.reason(), Some(Reason::AmbiguousId));
        assert_eq!(error.details()["candidates"], json!(IDS[..2]));
        assert!(error.message().contains(IDS[0]), "{}", error.message());
    }
}
