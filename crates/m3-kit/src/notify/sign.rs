//! Standard Webhooks signatures: `webhook-signature: v1,<base64 HMAC-SHA256>` over
//! `<webhook-id>.<webhook-timestamp>.<body>`, one entry per secret (two during a rotation),
//! so any receiver verifies them with an off-the-shelf library.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use m3_store::subscriptions::WebhookSecret;
use sha2::Sha256;

/// The `webhook-signature` header of a message: a space-separated `v1,<base64>` per secret.
pub fn signature_header(
    secrets: &[&WebhookSecret],
    id: &str,
    timestamp: i64,
    body: &[u8],
) -> String {
    secrets
        .iter()
        .map(|secret| {
            format!(
                "v1,{}",
                STANDARD.encode(sign(secret.bytes(), id, timestamp, body))
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// HMAC-SHA256 of `<id>.<timestamp>.<body>` with `key`.
fn sign(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> Vec<u8> {
    // Any key length is accepted by HMAC; the error is unreachable.
    let Ok(mut mac) = <Hmac<Sha256> as KeyInit>::new_from_slice(key) else {
        return Vec::new();
    };
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.finalize().into_bytes().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_matches_the_specification_example() {
        // The example of the Standard Webhooks specification (and its libraries' tests).
        let secret = WebhookSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        let header = signature_header(&[&secret], "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body);
        assert_eq!(header, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn a_rotation_signs_with_both_secrets() {
        let a = WebhookSecret::generate().unwrap();
        let b = WebhookSecret::generate().unwrap();
        let header = signature_header(&[&a, &b], "msg_1", 1, b"{}");
        let parts: Vec<&str> = header.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert!(parts.iter().all(|part| part.starts_with("v1,")));
        assert_ne!(parts[0], parts[1]);
    }
}
