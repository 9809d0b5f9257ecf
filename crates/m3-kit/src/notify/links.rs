//! Answer links: a signed, expiring capability to answer one round, carried in a URL on
//! `m3 serve`'s public base (`<base>/answer/<token>`).
//!
//! The token is `<payload>.<mac>`, both base64url without padding: the payload is the JSON
//! `{"e": execution id, "r": round id, "s": subscription id, "x": expiry in Unix seconds}`
//! (the subscription whose notification carried it: an answer through the link is recorded
//! as principal `link:<subscription>`, see [`LinkGrant::actor`]), the MAC is
//! HMAC-SHA256 over `m3-answer-link.<payload>` with the store's link key
//! ([`LinkKey`]). Rotating the key (`m3 links rotate-key`) invalidates every link; a link
//! also stops working at its expiry and once its round is no longer pending (the server
//! checks that). The token is a bearer secret: never log it.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use m3_store::RoundRef;
use m3_store::subscriptions::LinkKey;
use m3_types::{Actor, ActorSurface};
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
    #[serde(default)]
    s: String,
    x: i64,
}

/// What a verified link grants: answering one round, as minted for one subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LinkGrant {
    /// The round the link answers.
    pub round: RoundRef,
    /// The subscription whose notification carried the link (empty if none was named).
    pub subscription_id: String,
}

impl LinkGrant {
    /// Answering `round` through a link sent to subscription `subscription_id`.
    pub fn new(round: RoundRef, subscription_id: impl Into<String>) -> Self {
        Self {
            round,
            subscription_id: subscription_id.into(),
        }
    }

    /// Who an answer through this link is recorded as: principal `link:<subscription>`
    /// (`link` when the link names none), surface `link`.
    pub fn actor(&self) -> Actor {
        let principal = if self.subscription_id.is_empty() {
            "link".to_owned()
        } else {
            format!("link:{}", self.subscription_id)
        };
        // A subscription id is a short generated identifier: always a valid principal.
        Actor::new(principal, ActorSurface::Link)
            .unwrap_or_else(|_| Actor::of_process_user(ActorSurface::Link))
    }
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

/// The token of a link that grants `grant` until `expires_at`, signed with `key`.
pub fn mint(key: &LinkKey, grant: &LinkGrant, expires_at: OffsetDateTime) -> String {
    let payload = Payload {
        e: grant.round.execution_id.clone(),
        r: grant.round.round_id.clone(),
        s: grant.subscription_id.clone(),
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

/// What `token` grants, if `key` signed it and it has not expired at `now`.
///
/// # Errors
/// [`LinkRefusal::Invalid`] for anything not signed by `key` (checked in constant time
/// before the payload is read); [`LinkRefusal::Expired`] after its expiry.
pub fn verify(key: &LinkKey, token: &str, now: OffsetDateTime) -> Result<LinkGrant, LinkRefusal> {
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
    Ok(LinkGrant::new(
        RoundRef::new(payload.e, payload.r),
        payload.s,
    ))
}

/// What `token` grants on `store`: verified with the store's current link key at the
/// store's time. `Ok(Err(_))` for a refused link.
///
/// # Errors
/// `storage_error` if the key cannot be read.
pub async fn round_of(
    store: &dyn m3_store::ExecutionStore,
    token: &str,
) -> m3_types::Result<Result<LinkGrant, LinkRefusal>> {
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
        let grant = LinkGrant::new(RoundRef::new("exec-1", "round-1"), "sub_1");
        let token = mint(&key, &grant, now + Duration::from_secs(60));
        assert_eq!(verify(&key, &token, now).as_ref(), Ok(&grant));
        let actor = grant.actor();
        assert_eq!(
            (actor.principal.as_str(), actor.surface),
            ("link:sub_1", ActorSurface::Link)
        );
        let later = now + Duration::from_secs(61);
        assert_eq!(verify(&key, &token, later), Err(LinkRefusal::Expired));
    }

    #[test]
    fn tampered_foreign_and_malformed_tokens_are_invalid() {
        let key = key();
        let now = OffsetDateTime::now_utc();
        let token = mint(
            &key,
            &LinkGrant::new(RoundRef::new("exec-1", "round-1"), "sub_1"),
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
