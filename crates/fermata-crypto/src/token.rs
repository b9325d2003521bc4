//! Random secret tokens (session cookies, API tokens, machine tokens, generated passwords), the
//! SHA-256 hashes the database keeps instead of them, and CSRF tokens derived from a session's
//! secret.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use rand::RngCore;
use rand::rngs::OsRng;
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

/// A secret shown once (to a browser, a program or an operator) and never stored.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretToken(Zeroizing<String>);

impl SecretToken {
    /// `prefix` followed by 256 random bits, URL-safe. The prefix says what the token is for, so
    /// a leaked one is recognised (and secret scanners can match it).
    pub fn generate(prefix: &str) -> Self {
        let mut bytes = Zeroizing::new([0u8; 32]);
        OsRng.fill_bytes(bytes.as_mut_slice());
        let mut token = Zeroizing::new(String::from(prefix));
        URL_SAFE_NO_PAD.encode_string(bytes.as_slice(), &mut token);
        SecretToken(token)
    }

    /// A secret given from outside (a cookie, a header, standard input).
    pub fn from_given(text: impl Into<String>) -> Self {
        SecretToken(Zeroizing::new(text.into()))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    /// What the database keeps instead of the secret.
    pub fn hash(&self) -> TokenHash {
        TokenHash(Sha256::digest(self.0.as_bytes()).into())
    }
}

impl fmt::Debug for SecretToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretToken(<redacted>)")
    }
}

/// The SHA-256 of a secret token: what lookups use and what the database stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenHash(pub [u8; 32]);

type HmacSha256 = Hmac<Sha256>;

/// The CSRF token of the session whose cookie secret is `session_secret`: derived, not stored,
/// and useless without the cookie it belongs to.
pub fn csrf_token(session_secret: &SecretToken) -> String {
    let mut mac = HmacSha256::new_from_slice(session_secret.expose().as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(b"fermata csrf v1");
    URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
}

/// Compares a submitted CSRF token with the expected one in constant time.
pub fn csrf_tokens_match(session_secret: &SecretToken, submitted: &str) -> bool {
    let Ok(submitted) = URL_SAFE_NO_PAD.decode(submitted) else {
        return false;
    };
    let mut mac = HmacSha256::new_from_slice(session_secret.expose().as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(b"fermata csrf v1");
    mac.verify_slice(&submitted).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_prefixed_and_hashed() {
        let one = SecretToken::generate("fms_");
        let two = SecretToken::generate("fms_");
        assert_ne!(one, two);
        assert!(one.expose().starts_with("fms_"));
        assert_eq!(one.expose().len(), 4 + 43);
        assert_eq!(one.hash(), SecretToken::from_given(one.expose()).hash());
        assert_ne!(one.hash(), two.hash());
        assert_eq!(format!("{one:?}"), "SecretToken(<redacted>)");
    }

    #[test]
    fn csrf_tokens_belong_to_their_session() {
        let session = SecretToken::generate("fms_");
        let other = SecretToken::generate("fms_");
        let token = csrf_token(&session);
        assert!(csrf_tokens_match(&session, &token));
        assert!(!csrf_tokens_match(&other, &token));
        assert!(!csrf_tokens_match(&session, ""));
        assert!(!csrf_tokens_match(&session, "not base64 !"));
    }
}
