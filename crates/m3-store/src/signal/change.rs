//! What a store announces and a waiter listens for: each committed [`Change`] (which
//! execution, and its [`ChangeKind`]) with its wire payload, and the [`Topic`] a
//! subscription matches changes against.

/// What a committed change was about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ChangeKind {
    /// A round of the execution was created or changed (a response committed, delivery
    /// started or ended, resolved, failed, claimed).
    Round,
    /// The execution itself changed: created, transitioned, cancel requested, lease
    /// acquired or released, finished or terminalized by recovery.
    Execution,
    /// The execution was queued: a worker may claim it.
    Queued,
    /// Unknown: wake every waiter (a backend that cannot say what changed, a garbled or
    /// possibly dropped notification).
    Any,
}

impl ChangeKind {
    /// The one-byte wire tag of this kind (used by the datagram and `NOTIFY` payloads).
    pub fn tag(self) -> u8 {
        match self {
            Self::Round => b'r',
            Self::Execution => b'e',
            Self::Queued => b'q',
            Self::Any => b'*',
        }
    }

    /// The kind of a wire tag; an unknown tag is [`ChangeKind::Any`].
    pub fn from_tag(tag: u8) -> Self {
        match tag {
            b'r' => Self::Round,
            b'e' => Self::Execution,
            b'q' => Self::Queued,
            _ => Self::Any,
        }
    }
}

/// One committed change: which execution, and what about it (build with [`Change::new`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Change {
    /// The execution the change belongs to (empty for [`ChangeKind::Any`] of no execution).
    pub execution_id: String,
    /// What changed.
    pub kind: ChangeKind,
}

/// Longest execution id a wire payload carries; a longer one is sent as [`ChangeKind::Any`].
const MAX_WIRE_ID: usize = 512;

impl Change {
    /// The change a commit that left an execution as `record` announces (its kind from
    /// [`ChangeKind::of_lifecycle`]).
    pub fn of_execution(record: &crate::ExecutionRecord) -> Self {
        Self::new(
            record.execution_id.clone(),
            ChangeKind::of_lifecycle(record.lifecycle),
        )
    }

    /// A change of `kind` to execution `execution_id`.
    pub fn new(execution_id: impl Into<String>, kind: ChangeKind) -> Self {
        Self {
            execution_id: execution_id.into(),
            kind,
        }
    }

    /// A change nobody can attribute: wakes every waiter.
    pub fn any() -> Self {
        Self::new(String::new(), ChangeKind::Any)
    }

    /// The wire payload: the kind's tag, then the execution id in UTF-8 (a bare `*` for
    /// [`ChangeKind::Any`] or an id longer than 512 bytes).
    pub fn encode(&self) -> Vec<u8> {
        if self.kind == ChangeKind::Any || self.execution_id.len() > MAX_WIRE_ID {
            return vec![ChangeKind::Any.tag()];
        }
        let mut out = Vec::with_capacity(1 + self.execution_id.len());
        out.push(self.kind.tag());
        out.extend_from_slice(self.execution_id.as_bytes());
        out
    }

    /// Decodes a wire payload; anything malformed is [`Change::any`] (wake everyone).
    pub fn decode(payload: &[u8]) -> Self {
        match payload.split_first() {
            Some((&tag, id)) => match (ChangeKind::from_tag(tag), std::str::from_utf8(id)) {
                (ChangeKind::Any, _) | (_, Err(_)) => Self::any(),
                (_, Ok("")) => Self::any(),
                (kind, Ok(id)) => Self::new(id, kind),
            },
            None => Self::any(),
        }
    }
}

impl ChangeKind {
    /// The kind of a change that leaves an execution in `lifecycle`: [`Queued`](Self::Queued)
    /// while it is queued (claimable), else [`Execution`](Self::Execution).
    pub fn of_lifecycle(lifecycle: m3_types::ExecutionStatus) -> Self {
        if lifecycle == m3_types::ExecutionStatus::Queued {
            Self::Queued
        } else {
            Self::Execution
        }
    }
}

/// What a waiter wants to hear about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Topic {
    /// Every change of one execution: its row, its cancel flag, its rounds.
    Execution(String),
    /// Any round of any execution was created or changed.
    Rounds,
    /// An execution was queued (what a worker's claim loop waits for).
    Queue,
    /// Every change.
    All,
}

impl Topic {
    /// Whether `change` concerns this topic ([`ChangeKind::Any`] concerns every topic).
    pub fn matches(&self, change: &Change) -> bool {
        if change.kind == ChangeKind::Any {
            return true;
        }
        match self {
            Self::Execution(id) => *id == change.execution_id,
            Self::Rounds => change.kind == ChangeKind::Round,
            Self::Queue => change.kind == ChangeKind::Queued,
            Self::All => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_garbage_wakes_everyone() {
        let change = Change::new("01KB", ChangeKind::Round);
        assert_eq!(Change::decode(&change.encode()), change);
        let queued = Change::new("x", ChangeKind::Queued);
        assert_eq!(Change::decode(&queued.encode()), queued);
        assert_eq!(Change::decode(b""), Change::any());
        assert_eq!(Change::decode(b"r"), Change::any());
        assert_eq!(Change::decode(b"r\xff\xfe"), Change::any());
        assert_eq!(Change::decode(b"zabc"), Change::any());
        let long = Change::new("x".repeat(MAX_WIRE_ID + 1), ChangeKind::Execution);
        assert_eq!(long.encode(), b"*");
    }

    #[test]
    fn topics_match_their_changes() {
        let round = Change::new("a", ChangeKind::Round);
        let queued = Change::new("a", ChangeKind::Queued);
        assert!(Topic::Execution("a".into()).matches(&round));
        assert!(!Topic::Execution("b".into()).matches(&round));
        assert!(Topic::Rounds.matches(&round));
        assert!(!Topic::Rounds.matches(&queued));
        assert!(Topic::Queue.matches(&queued));
        assert!(!Topic::Queue.matches(&round));
        assert!(Topic::All.matches(&queued));
        assert!(Topic::Execution("b".into()).matches(&Change::any()));
    }
}
