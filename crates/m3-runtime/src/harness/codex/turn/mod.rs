//! One Codex turn: the event loop over the app-server, the relays and the
//! pending answer.
//!
//! Native prompts are collected as an unordered set and matched to the keys of
//! rounds seen on the wire (see [`super::prompts`] and [`matching`]); once every
//! key of a round has its prompt, the answer comes from the input policy (managed
//! round, plan, or `fail`, see [`answer_source`] and [`answers`]), each prompt gets its key's response,
//! and the round is resolved only after its answers were seen reaching the
//! server. Codex's own approval prompts are decided in [`approvals`].

mod answer_source;
mod answers;
mod approvals;
mod event_loop;
mod matching;
mod tool_item;

pub(super) use answer_source::Answers;
pub(super) use event_loop::{Turn, TurnContext};
