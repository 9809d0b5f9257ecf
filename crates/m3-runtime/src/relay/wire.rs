//! The lines a relay writes on the observer socket.
//!
//! - first, the hello: `{"connection_id": "...", "token": "..."}`;
//! - a frame: `{"sequence": N, "direction": "client_to_server", "payload": <frame>}`
//!   (the payload is the frame's own bytes, so nothing is re-encoded);
//! - a refused call: `{"policy_denied": {"tool": "...", "request_id": <id>}}`;
//! - lost observations: `{"incomplete": {"reason": "..."}}`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Direction;

/// The first line on the socket.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Hello {
    pub(crate) connection_id: String,
    pub(crate) token: String,
}

/// Every later line.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RelayMessage {
    Frame {
        sequence: u64,
        direction: Direction,
        payload: Value,
    },
    PolicyDenied {
        policy_denied: Denied,
    },
    Incomplete {
        incomplete: Lost,
    },
}

/// The body of a `policy_denied` line.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Denied {
    pub(crate) tool: String,
    pub(crate) request_id: Value,
}

/// The body of an `incomplete` line.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Lost {
    pub(crate) reason: String,
}

/// The line of one frame; `frame` must be valid JSON (it is embedded as is).
pub(crate) fn frame_line(sequence: u64, direction: Direction, frame: &[u8]) -> Vec<u8> {
    let head = format!(
        "{{\"sequence\":{sequence},\"direction\":\"{}\",\"payload\":",
        direction.as_str()
    );
    let mut line = Vec::with_capacity(head.len() + frame.len() + 2);
    line.extend_from_slice(head.as_bytes());
    line.extend_from_slice(frame);
    line.extend_from_slice(b"}\n");
    line
}

/// The line of any serializable message.
pub(crate) fn json_line<T: Serialize>(message: &T) -> Option<Vec<u8>> {
    let mut line = serde_json::to_vec(message).ok()?;
    line.push(b'\n');
    Some(line)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_line_parses_back() {
        let line = frame_line(7, Direction::ServerToClient, br#"{"id":1,"result":{}}"#);
        match serde_json::from_slice::<RelayMessage>(&line).unwrap() {
            RelayMessage::Frame {
                sequence,
                direction,
                payload,
            } => {
                assert_eq!(sequence, 7);
                assert_eq!(direction, Direction::ServerToClient);
                assert_eq!(payload, json!({"id": 1, "result": {}}));
            }
            other => panic!("unexpected {other:?}"),
        }
        let denied = json_line(&json!({"policy_denied": {"tool": "t", "request_id": 3}})).unwrap();
        assert!(matches!(
            serde_json::from_slice::<RelayMessage>(&denied).unwrap(),
            RelayMessage::PolicyDenied { .. }
        ));
        let lost = json_line(&json!({"incomplete": {"reason": "r"}})).unwrap();
        assert!(matches!(
            serde_json::from_slice::<RelayMessage>(&lost).unwrap(),
            RelayMessage::Incomplete { .. }
        ));
        assert!(serde_json::from_slice::<RelayMessage>(b"{\"other\":1}").is_err());
    }
}
