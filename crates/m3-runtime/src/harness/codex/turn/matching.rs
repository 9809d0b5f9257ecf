//! Prompt matching: each native prompt is paired with exactly one request key of
//! a round seen on the wire (same server, same fingerprint), never by order or
//! timing; a prompt or a round left unpaired for [`MATCH_WAIT`] fails the turn.

use std::time::{Duration, Instant};

use m3_types::{Error, Result};

use super::super::observe::Stage;
use super::event_loop::Turn;

/// How long a native prompt may wait for its round on the wire (and a round for
/// the rest of its prompts) before the turn fails closed.
const MATCH_WAIT: Duration = Duration::from_secs(10);

impl Turn<'_> {
    /// Matches waiting prompts to observed keys, then starts answering a round
    /// whose keys all have their prompt.
    pub(super) async fn match_prompts(&mut self) -> Result<()> {
        let mut still = Vec::new();
        for (prompt, since) in std::mem::take(&mut self.unmatched) {
            let candidates: Vec<(usize, String)> = self
                .tracker
                .rounds
                .iter()
                .enumerate()
                .filter(|(_, r)| r.stage == Stage::Collecting && r.server == prompt.server)
                .flat_map(|(i, r)| {
                    r.fingerprints
                        .iter()
                        .filter(|(key, fp)| {
                            **fp == prompt.fingerprint && !r.prompts.contains_key(*key)
                        })
                        .map(move |(key, _)| (i, key.clone()))
                })
                .collect();
            match candidates.as_slice() {
                [] => still.push((prompt, since)),
                [(round, key)] => {
                    if let Some(r) = self.tracker.rounds.get_mut(*round) {
                        r.prompts.insert(key.clone(), prompt.id.clone());
                    }
                }
                _ => {
                    let keys: Vec<String> = candidates.iter().map(|(_, k)| k.clone()).collect();
                    let error = Error::protocol(
                        "Codex could not complete action-bound elicitation: a native prompt matches more than one request",
                    )
                    .with_detail("reason", "ambiguous_native_prompt")
                    .with_detail("server", prompt.server.clone())
                    .with_detail("request_keys", keys);
                    return Err(self.interrupt(error).await);
                }
            }
        }
        self.unmatched = still;
        if self.answering.is_some() || self.pending_delivery() {
            return Ok(());
        }
        let ready = self.tracker.rounds.iter().position(|r| {
            r.stage == Stage::Collecting
                && !r.requests.is_empty()
                && r.prompts.len() == r.requests.len()
        });
        if let Some(round) = ready {
            self.start_answer(round)?;
        }
        Ok(())
    }

    /// Fails the turn when a prompt or a round waited too long for its pair.
    pub(super) async fn check_match_timeouts(&mut self) -> Result<()> {
        let now = Instant::now();
        if let Some((prompt, _)) = self
            .unmatched
            .iter()
            .find(|(_, since)| now.duration_since(*since) >= MATCH_WAIT)
        {
            let error = Error::protocol(
                "Codex could not complete action-bound elicitation: a native prompt matches no request seen on the wire",
            )
            .with_detail("reason", "unmatched_native_prompt")
            .with_detail("server", prompt.server.clone());
            return Err(self.interrupt(error).await);
        }
        if let Some(round) = self.tracker.rounds.iter().find(|r| {
            r.stage == Stage::Collecting
                && !r.prompts.is_empty()
                && now.duration_since(r.since) >= MATCH_WAIT
        }) {
            let missing: Vec<&String> = round
                .requests
                .keys()
                .filter(|k| !round.prompts.contains_key(*k))
                .collect();
            let error = Error::protocol(
                "Codex could not complete action-bound elicitation: a request got no native prompt",
            )
            .with_detail("reason", "missing_native_prompt")
            .with_detail("server", round.server.clone())
            .with_detail(
                "request_keys",
                missing.into_iter().cloned().collect::<Vec<_>>(),
            );
            return Err(self.interrupt(error).await);
        }
        Ok(())
    }

    /// When the oldest waiting prompt or partly prompted round times out.
    pub(super) fn match_deadline(&self) -> Option<Instant> {
        let prompts = self.unmatched.iter().map(|(_, since)| *since);
        let rounds = self
            .tracker
            .rounds
            .iter()
            .filter(|r| r.stage == Stage::Collecting && !r.prompts.is_empty())
            .map(|r| r.since);
        prompts.chain(rounds).min().map(|since| since + MATCH_WAIT)
    }
}
