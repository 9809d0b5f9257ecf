//! Sealing OAuth credentials: ChaCha20-Poly1305 with a 256-bit key the application holds,
//! a fresh random nonce per seal, and the server URL and client as associated data (a
//! sealed text moved to another row does not open). The sealed text names the key by a
//! short digest, so a rotation can tell which key sealed it.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use m3_types::{Error, Result};
use sha2::{Digest, Sha256};

/// What every sealed text starts with: the format's version.
const VERSION: &str = "m3oauth1";
/// Bytes of a key.
pub const KEY_BYTES: usize = 32;
/// Bytes of a nonce.
const NONCE_BYTES: usize = 12;

/// A key that seals OAuth credentials (never printed: its `Debug` shows its id only).
#[derive(Clone)]
pub struct CredentialKey {
    bytes: [u8; KEY_BYTES],
}

impl std::fmt::Debug for CredentialKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialKey")
            .field("id", &self.id())
            .finish_non_exhaustive()
    }
}

impl CredentialKey {
    /// The key `text` encodes: 32 bytes in standard base64 (what `openssl rand -base64 32`
    /// prints), surrounding whitespace ignored.
    ///
    /// # Errors
    /// `invalid_argument` when it is not base64 of exactly 32 bytes (never echoing it).
    pub fn from_base64(text: &str) -> Result<Self> {
        let bytes = STANDARD
            .decode(text.trim())
            .ok()
            .and_then(|bytes| <[u8; KEY_BYTES]>::try_from(bytes).ok())
            .ok_or_else(|| {
                Error::model_validation(
                    "an OAuth credential key is 32 bytes in base64 (openssl rand -base64 32)",
                )
            })?;
        Ok(Self { bytes })
    }

    /// The key's id: the first 8 hex digits of the SHA-256 of its bytes.
    pub fn id(&self) -> String {
        Sha256::digest(self.bytes)
            .iter()
            .take(4)
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }
}

/// The associated data of a row: its server URL and client.
pub fn binding(server_url: &str, client: &str) -> Vec<u8> {
    format!("{server_url}\n{client}").into_bytes()
}

/// `credentials` sealed with `key`, bound to `aad`: `m3oauth1.<key id>.<base64 of nonce
/// and ciphertext>`.
///
/// # Errors
/// `storage_error` when the random source or the cipher fails.
pub fn seal(key: &CredentialKey, credentials: &str, aad: &[u8]) -> Result<String> {
    let mut nonce = [0_u8; NONCE_BYTES];
    getrandom::fill(&mut nonce)
        .map_err(|e| Error::storage("cannot generate a nonce").with_detail("why", e.to_string()))?;
    let cipher = ChaCha20Poly1305::new(&Key::from(key.bytes));
    let payload = Payload {
        msg: credentials.as_bytes(),
        aad,
    };
    let sealed = cipher
        .encrypt(&Nonce::from(nonce), payload)
        .map_err(|_| Error::storage("cannot seal OAuth credentials"))?;
    let mut bytes = nonce.to_vec();
    bytes.extend_from_slice(&sealed);
    Ok(format!("{VERSION}.{}.{}", key.id(), STANDARD.encode(bytes)))
}

/// The credentials `sealed` holds, when `key` sealed them for `aad`; `None` otherwise
/// (another key, another row, a damaged or foreign text).
pub fn open(key: &CredentialKey, sealed: &str, aad: &[u8]) -> Option<String> {
    let mut parts = sealed.splitn(3, '.');
    let (version, id, body) = (parts.next()?, parts.next()?, parts.next()?);
    if version != VERSION || id != key.id() {
        return None;
    }
    let bytes = STANDARD.decode(body).ok()?;
    if bytes.len() < NONCE_BYTES {
        return None;
    }
    let (nonce, ciphertext) = bytes.split_at(NONCE_BYTES);
    let nonce: [u8; NONCE_BYTES] = nonce.try_into().ok()?;
    let cipher = ChaCha20Poly1305::new(&Key::from(key.bytes));
    let plain = cipher
        .decrypt(
            &Nonce::from(nonce),
            Payload {
                msg: ciphertext,
                aad,
            },
        )
        .ok()?;
    String::from_utf8(plain).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> CredentialKey {
        CredentialKey::from_base64(&STANDARD.encode([byte; KEY_BYTES])).unwrap()
    }

    #[test]
    fn sealed_credentials_open_only_with_their_key_and_row() {
        let aad = binding("https://mcp.example/mcp", "dynamic");
        let sealed = seal(&key(1), "{\"access_token\":\"t0k3n\"}", &aad).unwrap();
        assert!(!sealed.contains("t0k3n"));
        assert_eq!(
            open(&key(1), &sealed, &aad).as_deref(),
            Some("{\"access_token\":\"t0k3n\"}")
        );
        assert_eq!(open(&key(2), &sealed, &aad), None);
        assert_eq!(
            open(&key(1), &sealed, &binding("https://other/mcp", "dynamic")),
            None
        );
        let mut damaged = sealed.clone();
        damaged.pop();
        assert_eq!(open(&key(1), &damaged, &aad), None);
        // Two seals of the same text differ (fresh nonces).
        assert_ne!(
            sealed,
            seal(&key(1), "{\"access_token\":\"t0k3n\"}", &aad).unwrap()
        );
    }

    #[test]
    fn keys_are_32_bytes_of_base64_and_never_printed() {
        assert!(CredentialKey::from_base64("c2hvcnQ=").is_err());
        assert!(CredentialKey::from_base64("not base64 at all!").is_err());
        let text = STANDARD.encode([7_u8; KEY_BYTES]);
        let debug = format!(
            "{:?}",
            CredentialKey::from_base64(&format!(" {text}\n")).unwrap()
        );
        assert!(!debug.contains(&text) && debug.contains("id"), "{debug}");
    }
}
