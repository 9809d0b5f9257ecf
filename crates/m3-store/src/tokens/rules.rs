//! Every decision of the token store: names, secrets, digests, expiry. Backends only keep
//! rows ([`super::rows`]).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use m3_types::{Error, Reason, Result, new_id};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use super::record::{ApiToken, NewToken, TokenCheck, TokenSecret};

/// What every secret starts with (so a leaked one is recognizable by scanners).
pub const SECRET_PREFIX: &str = "m3t_";

/// The longest token name.
pub const NAME_MAX_CHARS: usize = 64;

/// How many random bytes a secret holds.
const SECRET_BYTES: usize = 32;

/// Checks a token name: 1 to 64 characters of ASCII letters, digits, `.`, `_`, `-`, `@`.
///
/// # Errors
/// `invalid_argument` (reason `invalid_token`).
pub fn check_name(name: &str) -> Result<()> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@');
    if name.is_empty() || name.len() > NAME_MAX_CHARS || !name.chars().all(allowed) {
        return Err(Error::model_validation(format!(
            "a token name is 1 to {NAME_MAX_CHARS} characters of letters, digits, '.', '_', '-' and '@'"
        ))
        .with_reason(Reason::InvalidToken)
        .with_detail("name", name.chars().take(80).collect::<String>()));
    }
    Ok(())
}

/// A fresh secret.
///
/// # Errors
/// `storage_error` if the system's random source fails.
pub fn new_secret() -> Result<TokenSecret> {
    let mut bytes = [0_u8; SECRET_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| {
        Error::storage("cannot generate a token secret").with_detail("why", e.to_string())
    })?;
    Ok(TokenSecret::new(format!(
        "{SECRET_PREFIX}{}",
        URL_SAFE_NO_PAD.encode(bytes)
    )))
}

/// The digest the store keeps for `secret`: SHA-256, lower-case hex.
pub fn digest(secret: &str) -> String {
    Sha256::digest(secret.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The record and secret of `new`, made at `now`.
///
/// # Errors
/// As [`check_name`]; `invalid_argument` for a zero or unrepresentable lifetime;
/// `storage_error` from [`new_secret`].
pub fn make(new: &NewToken, now: OffsetDateTime) -> Result<(ApiToken, TokenSecret)> {
    check_name(&new.name)?;
    let expires_at = match new.lifetime {
        None => None,
        Some(lifetime) if lifetime.is_zero() => {
            return Err(
                Error::model_validation("a token's lifetime must be positive")
                    .with_reason(Reason::InvalidToken),
            );
        }
        Some(lifetime) => Some(
            now.checked_add(lifetime.try_into().map_err(|_| too_long())?)
                .ok_or_else(too_long)?,
        ),
    };
    let token = ApiToken {
        id: format!("tok_{}", new_id()),
        name: new.name.clone(),
        scope: new.scope,
        created_at: now,
        expires_at,
    };
    Ok((token, new_secret()?))
}

fn too_long() -> Error {
    Error::model_validation("a token's lifetime is too long").with_reason(Reason::InvalidToken)
}

/// A token's stored text.
///
/// # Errors
/// `storage_error` if it cannot be encoded.
pub fn encode(token: &ApiToken) -> Result<String> {
    serde_json::to_string(token).map_err(|e| Error::storage(format!("cannot encode a token: {e}")))
}

/// A token from its stored text.
///
/// # Errors
/// `storage_error` (reason `stored_record_invalid`) for text that is not a token.
pub fn decode(text: &str) -> Result<ApiToken> {
    serde_json::from_str(text).map_err(|e| {
        Error::storage(format!("a stored token is invalid: {e}"))
            .with_reason(Reason::StoredRecordInvalid)
    })
}

/// What the stored token `found` (by the digest of the presented secret) is at `now`.
pub fn check(found: Option<ApiToken>, now: OffsetDateTime) -> TokenCheck {
    match found {
        None => TokenCheck::Unknown,
        Some(token) if token.is_expired(now) => TokenCheck::Expired(token),
        Some(token) => TokenCheck::Valid(token),
    }
}

/// The error for a name another token has.
pub fn name_taken(name: &str) -> Error {
    Error::model_validation(format!("a token named '{name}' exists"))
        .with_reason(Reason::TokenNameTaken)
        .with_detail("name", name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::TokenScope;

    #[test]
    fn secrets_are_prefixed_random_and_digested_as_hex() {
        let (a, b) = (new_secret().unwrap(), new_secret().unwrap());
        assert!(a.expose().starts_with(SECRET_PREFIX));
        assert_eq!(a.expose().len(), SECRET_PREFIX.len() + 43);
        assert_ne!(a, b);
        assert_eq!(
            digest("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(!format!("{a:?}").contains(a.expose()));
    }

    #[test]
    fn names_and_lifetimes_are_checked() {
        let now = OffsetDateTime::UNIX_EPOCH;
        for bad in ["", "a b", "x\n", &"n".repeat(65)] {
            let error = make(&NewToken::new(bad, TokenScope::Read), now).unwrap_err();
            assert_eq!(error.reason(), Some(Reason::InvalidToken), "{bad:?}");
        }
        let zero = NewToken::new("ci", TokenScope::Read).expires_after(std::time::Duration::ZERO);
        assert_eq!(
            make(&zero, now).unwrap_err().reason(),
            Some(Reason::InvalidToken)
        );
        let (token, _) = make(
            &NewToken::new("ci-bot@example", TokenScope::Answer)
                .expires_after(std::time::Duration::from_secs(60)),
            now,
        )
        .unwrap();
        assert!(token.id.starts_with("tok_"));
        assert!(!token.is_expired(now + std::time::Duration::from_secs(59)));
        assert!(matches!(
            check(
                Some(token.clone()),
                now + std::time::Duration::from_secs(60)
            ),
            TokenCheck::Expired(_)
        ));
        assert_eq!(decode(&encode(&token).unwrap()).unwrap(), token);
    }
}
