//! Lease tokens in the Python original's format.

use m3_types::{Error, Result};

/// Random lease token in the original's format: `lease-` + 24 random bytes, base64url
/// without padding (32 characters).
///
/// # Errors
/// `storage_error` if the system has no randomness.
pub fn new_lease_token() -> Result<String> {
    let mut bytes = [0_u8; 24];
    getrandom::fill(&mut bytes).map_err(|e| {
        Error::storage("cannot generate a lease token").with_detail("why", e.to_string())
    })?;
    Ok(format!("lease-{}", base64url(&bytes)))
}

fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk.first().copied().unwrap_or(0),
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            let index = ((n >> (18 - 6 * i)) & 0x3f) as usize;
            out.push(char::from(ALPHABET[index]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64url_matches_python_token_urlsafe_encoding() {
        // base64.urlsafe_b64encode(bytes(range(24))).rstrip(b"=")
        let bytes: Vec<u8> = (0..24).collect();
        assert_eq!(base64url(&bytes), "AAECAwQFBgcICQoLDA0ODxAREhMUFRYX");
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
    }

    #[test]
    fn lease_tokens_are_prefixed_random_and_distinct() {
        let a = new_lease_token().unwrap();
        let b = new_lease_token().unwrap();
        assert!(a.starts_with("lease-"));
        assert_eq!(a.len(), "lease-".len() + 32);
        assert_ne!(a, b);
    }
}
