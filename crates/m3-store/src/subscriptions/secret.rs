//! The keys the store keeps for notifications: a subscription's webhook signing secret
//! ([`WebhookSecret`], written `whsec_<base64>` as the Standard Webhooks specification
//! says) and the store-wide key that signs answer links ([`LinkKey`]).

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use m3_types::{Error, Reason, Result};
use time::OffsetDateTime;

/// How many random bytes a generated key has.
const GENERATED_BYTES: usize = 32;

/// The shortest and longest key accepted (the specification's secrets are 24 to 64 bytes).
const KEY_BYTES: std::ops::RangeInclusive<usize> = 16..=64;

/// A webhook signing secret: the HMAC-SHA256 key of a subscription's signatures.
///
/// `Debug` never shows it; [`WebhookSecret::expose`] writes it for the one time a person
/// is shown it (when the subscription is added or its secret rotated).
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret(Vec<u8>);

impl WebhookSecret {
    /// The prefix of a secret's text form.
    pub const PREFIX: &'static str = "whsec_";

    /// A new secret of 32 random bytes.
    ///
    /// # Errors
    /// `storage_error` if the system has no randomness.
    pub fn generate() -> Result<Self> {
        random_bytes("a webhook secret").map(Self)
    }

    /// The secret written as `whsec_<base64>` (the prefix is optional, as receivers'
    /// libraries accept it).
    ///
    /// # Errors
    /// `invalid_argument` (reason `invalid_secret`) for text that is not base64 of 16 to 64
    /// bytes.
    pub fn parse(text: &str) -> Result<Self> {
        let encoded = text.strip_prefix(Self::PREFIX).unwrap_or(text);
        let bytes = STANDARD.decode(encoded).map_err(|_| invalid_secret())?;
        Self::from_bytes(bytes)
    }

    /// The secret with these key bytes.
    ///
    /// # Errors
    /// `invalid_argument` (reason `invalid_secret`) unless there are 16 to 64 bytes.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self> {
        if KEY_BYTES.contains(&bytes.len()) {
            Ok(Self(bytes))
        } else {
            Err(invalid_secret())
        }
    }

    /// The key bytes (what HMAC signs with).
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// The secret's text form, `whsec_<base64>`: for the person adding the subscription,
    /// and for the store's own record; never for logs.
    pub fn expose(&self) -> String {
        format!("{}{}", Self::PREFIX, STANDARD.encode(&self.0))
    }
}

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookSecret(..)")
    }
}

/// The store-wide key that signs answer links, with the time it was made: rotating it
/// ([`SubscriptionStore::rotate_link_key`](super::SubscriptionStore::rotate_link_key))
/// makes every link signed before unusable.
#[derive(Clone, PartialEq, Eq)]
pub struct LinkKey {
    key: Vec<u8>,
    /// When the key was made.
    pub created_at: OffsetDateTime,
}

impl LinkKey {
    /// A new key of 32 random bytes, made at `now`.
    ///
    /// # Errors
    /// `storage_error` if the system has no randomness.
    pub fn generate(now: OffsetDateTime) -> Result<Self> {
        Ok(Self {
            key: random_bytes("an answer-link key")?,
            created_at: now,
        })
    }

    /// A stored key: its base64 text and creation time.
    ///
    /// # Errors
    /// `storage_error` (reason `stored_record_invalid`) if the text is not a key.
    pub fn from_stored(encoded: &str, created_at: OffsetDateTime) -> Result<Self> {
        let key = STANDARD
            .decode(encoded)
            .ok()
            .filter(|key| KEY_BYTES.contains(&key.len()))
            .ok_or_else(|| {
                Error::storage("the stored answer-link key is invalid")
                    .with_reason(Reason::StoredRecordInvalid)
            })?;
        Ok(Self { key, created_at })
    }

    /// The key as base64, as a store keeps it.
    pub fn to_stored(&self) -> String {
        STANDARD.encode(&self.key)
    }

    /// The key bytes (what HMAC signs links with).
    pub fn bytes(&self) -> &[u8] {
        &self.key
    }
}

impl fmt::Debug for LinkKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LinkKey")
            .field("created_at", &self.created_at)
            .finish_non_exhaustive()
    }
}

fn random_bytes(what: &str) -> Result<Vec<u8>> {
    let mut bytes = vec![0_u8; GENERATED_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| {
        Error::storage(format!("cannot generate {what}")).with_detail("why", e.to_string())
    })?;
    Ok(bytes)
}

fn invalid_secret() -> Error {
    Error::model_validation("a webhook secret is whsec_ followed by base64 of 16 to 64 bytes")
        .with_reason(Reason::InvalidSecret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_reads_back_from_its_text_and_never_shows_in_debug() {
        let secret = WebhookSecret::generate().unwrap();
        let text = secret.expose();
        assert!(text.starts_with("whsec_"));
        assert_eq!(WebhookSecret::parse(&text).unwrap(), secret);
        assert_eq!(format!("{secret:?}"), "WebhookSecret(..)");
        assert!(!format!("{secret:?}").contains(&text[6..]));
    }

    #[test]
    fn short_or_malformed_secrets_are_refused_with_a_reason() {
        for text in ["whsec_", "whsec_!!!", "whsec_AAAA", "not base64 at all"] {
            let error = WebhookSecret::parse(text).unwrap_err();
            assert_eq!(error.reason(), Some(Reason::InvalidSecret), "{text}");
        }
    }
}
