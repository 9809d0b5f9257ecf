//! Secret key names: which object keys (and URL query parameters) hold secrets.
//!
//! A key is split into lower-case words at `_`, `-`, `.`, spaces and camelCase boundaries
//! (`creditCard`, `HTTPSessionId` → `http session id`), then matched three ways: one word
//! from [`SECRET_WORDS`] (`user_pin`, `X-Api-Key`'s `key` does not count alone), two
//! adjacent words from [`SECRET_WORD_PAIRS`] (`credit_card_number`), or all words run
//! together from [`SECRET_COMPACT_NAMES`] (`CREDITCARD`, `apikey`). Matching on word
//! boundaries keeps `max_tokens`, `tokenizer`, `secretary` and `spin` readable.

/// Words that make a key secret wherever they stand in it.
pub const SECRET_WORDS: &[&str] = &[
    "token",
    "secret",
    "password",
    "passwd",
    "pwd",
    "passphrase",
    "passcode",
    "credential",
    "credentials",
    "authorization",
    "cookie",
    "apikey",
    "session",
    "sessionid",
    "pin",
    "otp",
    "totp",
    "hotp",
    "ssn",
    "cvv",
    "cvv2",
    "cvc",
    "cvc2",
    "csc",
    "jwt",
    "bearer",
];

/// Adjacent word pairs that make a key secret (`credit_card`, `creditCard`, `card-number`).
pub const SECRET_WORD_PAIRS: &[(&str, &str)] = &[
    ("api", "key"),
    ("private", "key"),
    ("session", "key"),
    ("set", "cookie"),
    ("access", "key"),
    ("secret", "key"),
    ("signing", "key"),
    ("encryption", "key"),
    ("master", "key"),
    ("credit", "card"),
    ("debit", "card"),
    ("card", "number"),
    ("security", "code"),
    ("verification", "code"),
    ("auth", "code"),
    ("mfa", "code"),
    ("recovery", "code"),
    ("backup", "code"),
    ("social", "security"),
    ("account", "number"),
    ("routing", "number"),
];

/// Keys that are secret when all their words run together (`APIKEY`, `creditcard`).
pub const SECRET_COMPACT_NAMES: &[&str] = &[
    "apikey",
    "privatekey",
    "sessionkey",
    "clientsecret",
    "accesstoken",
    "refreshtoken",
    "creditcard",
    "cardnumber",
    "ccnumber",
    "securitycode",
    "pincode",
    "onetimepassword",
    "onetimecode",
];

/// Splits a key into lower-case words at `_`, `-`, `.`, spaces and camelCase boundaries: a
/// new word starts at an upper-case letter after a lower-case letter or digit, and at the
/// last upper-case letter of a run followed by a lower-case one (`HTTPSession`).
fn words(key: &str) -> Vec<String> {
    let chars: Vec<char> = key.chars().collect();
    let mut words = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if matches!(c, '_' | '-' | '.' | ' ') {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            continue;
        }
        let prev = i.checked_sub(1).and_then(|p| chars.get(p)).copied();
        let next = chars.get(i + 1).copied();
        let after_lower = prev.is_some_and(|p| p.is_lowercase() || p.is_ascii_digit());
        let ends_acronym =
            prev.is_some_and(char::is_uppercase) && next.is_some_and(char::is_lowercase);
        if c.is_uppercase() && (after_lower || ends_acronym) && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// Whether values under `key` are secrets: any case, `_`/`-`/`.`/camelCase spellings
/// (`access_token`, `apiKey`, `X-Api-Key`, `client_secret`, `PIN`, `creditCard`,
/// `card-number`, `SSN` are; `max_tokens`, `tokenizer`, `spin` are not). See the module
/// docs for the lists.
pub fn is_sensitive_key(key: &str) -> bool {
    let words = words(key);
    if words.iter().any(|w| SECRET_WORDS.contains(&w.as_str())) {
        return true;
    }
    if SECRET_COMPACT_NAMES.contains(&words.concat().as_str()) {
        return true;
    }
    words.windows(2).any(|w| {
        SECRET_WORD_PAIRS
            .iter()
            .any(|(a, b)| w[0] == *a && w[1] == *b)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_at_separators_and_case_changes() {
        assert_eq!(words("creditCard"), ["credit", "card"]);
        assert_eq!(words("HTTPSessionId"), ["http", "session", "id"]);
        assert_eq!(words("api-key"), ["api", "key"]);
        assert_eq!(words("user.PIN"), ["user", "pin"]);
        assert_eq!(words("cvv2"), ["cvv2"]);
        assert_eq!(words("__x__"), ["x"]);
    }
}
