//! Answer links: a signed, expiring capability to answer one round, carried in a URL on
//! `m3 serve`'s public base (`<base>/answer/<token>`).
//!
//! The token is `<payload>.<mac>`, both base64url without padding: the payload is the JSON
//! `{"e": execution id, "r": round id, "x": expiry in Unix seconds}`, the MAC is
//! HMAC-SHA256 over `m3-answer-link.<payload>` with the store's link key
//! ([`LinkKey`]). Rotating the key (`m3 links rotate-key`) invalidates every link; a link
//! also stops working at its expiry and once its round is no longer pending (the server
//! checks that). The token is a bearer secret: never log it.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use m3_store::RoundRef;
use m3_store::subscriptions::LinkKey;
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use time::OffsetDateTime;

/// What the MAC covers besides the payload, so a link's MAC can never be replayed as
/// another HMAC of the same key.
const DOMAIN: &[u8] = b"m3-answer-link.";

/// The longest token accepted (a round id and an execution id are bounded; this is ample).
const MAX_TOKEN_BYTES: usize = 2_048;

#[derive(Serialize, Deserialize)]
struct Payload {
    e: String,
    r: String,
    x: i64,
}

/// Why a link was refused. Deliberately coarse: none says whether the round exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinkRefusal {
    /// Not a token, or not signed by the current key (tampered, or the key was rotated).
    Invalid,
    /// Signed, but past its expiry.
    Expired,
}

impl LinkRefusal {
    /// The stable code an HTTP answer carries (`link_invalid`, `link_expired`).
    pub fn code(self) -> &'static str {
        match self {
            Self::Invalid => "link_invalid",
            Self::Expired => "link_expired",
        }
    }
}

/// The token of a link that answers `round` until `expires_at`, signed with `key`.
pub fn mint(key: &LinkKey, round: &RoundRef, expires_at: OffsetDateTime) -> String {
    let payload = Payload {
        e: round.execution_id.clone(),
        r: round.round_id.clone(),
        x: expires_at.unix_timestamp(),
    };
    // A struct of strings and an integer always serializes.
    let json = serde_json::to_vec(&payload).unwrap_or_default();
    let encoded = URL_SAFE_NO_PAD.encode(json);
    let mac = URL_SAFE_NO_PAD.encode(
        mac(key)
            .chain_update(encoded.as_bytes())
            .finalize()
            .into_bytes(),
    );
    format!("{encoded}.{mac}")
}

/// The round `token` answers, if `key` signed it and it has not expired at `now`.
///
/// # Errors
/// [`LinkRefusal::Invalid`] for anything not signed by `key` (checked in constant time
/// before the payload is read); [`LinkRefusal::Expired`] after its expiry.
pub fn verify(key: &LinkKey, token: &str, now: OffsetDateTime) -> Result<RoundRef, LinkRefusal> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err(LinkRefusal::Invalid);
    }
    let (encoded, signature) = token.split_once('.').ok_or(LinkRefusal::Invalid)?;
    let signature = URL_SAFE_NO_PAD
        .decode(signature)
        .map_err(|_| LinkRefusal::Invalid)?;
    mac(key)
        .chain_update(encoded.as_bytes())
        .verify_slice(&signature)
        .map_err(|_| LinkRefusal::Invalid)?;
    let json = URL_SAFE_NO_PAD
        .decode(encoded)
        .map_err(|_| LinkRefusal::Invalid)?;
    let payload: Payload = serde_json::from_slice(&json).map_err(|_| LinkRefusal::Invalid)?;
    if now.unix_timestamp() >= payload.x {
        return Err(LinkRefusal::Expired);
    }
    Ok(RoundRef::new(payload.e, payload.r))
}

/// The round `token` answers on `store`: verified with the store's current link key at
/// the store's time. `Ok(Err(_))` for a refused link.
///
/// # Errors
/// `storage_error` if the key cannot be read.
pub async fn round_of(
    store: &dyn m3_store::ExecutionStore,
    token: &str,
) -> m3_types::Result<Result<RoundRef, LinkRefusal>> {
    let key = store.subscription_store().await?.link_key().await?;
    let now = m3_store::store_now(store.clock().as_ref());
    Ok(verify(&key, token, now))
}

fn mac(key: &LinkKey) -> Hmac<Sha256> {
    // HMAC takes a key of any length; a link key is 16 to 64 bytes.
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key.bytes())
        .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"));
    mac.update(DOMAIN);
    mac
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn key() -> LinkKey {
        LinkKey::generate(OffsetDateTime::now_utc()).unwrap()
    }

    #[test]
    fn a_minted_link_answers_its_round_until_it_expires() {
        let key = key();
        let now = OffsetDateTime::now_utc();
        let round = RoundRef::new("exec-1", "round-1");
        let token = mint(&key, &round, now + Duration::from_secs(60));
        assert_eq!(verify(&key, &token, now), Ok(round));
        let later = now + Duration::from_secs(61);
        assert_eq!(verify(&key, &token, later), Err(LinkRefusal::Expired));
    }

    #[test]
    fn tampered_foreign_and_malformed_tokens_are_invalid() {
        let key = key();
        let now = OffsetDateTime::now_utc();
        let token = mint(
            &key,
            &RoundRef::new("exec-1", "round-1"),
            now + Duration::from_secs(60),
        );
        let (payload, signature) = token.split_once('.').unwrap();
        let other = URL_SAFE_NO_PAD.encode(br#"{"e":"exec-1","r":"round-2","x":99999999999}"#);
        for bad in [
            format!("{other}.{signature}"),
            format!("{payload}.{}", &signature[1..]),
            format!("{payload}x.{signature}"),
            "no-dot".to_owned(),
            String::new(),
            "x".repeat(5_000),
        ] {
            assert_eq!(verify(&key, &bad, now), Err(LinkRefusal::Invalid), "{bad}");
        }
        assert_eq!(verify(&self::key(), &token, now), Err(LinkRefusal::Invalid));
    }
}
