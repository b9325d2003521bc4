//! Document-scoped client tokens, for applications that keep their own sign-in: a short-lived
//! grant of read or write access to one document, which a browser presents as `?token=`.
//!
//! No row is kept for a token. Its grant (document, access, expiry, issuer) is sealed by the
//! keyring under its own purpose, so it can be neither read nor forged without the keys; the
//! envelope names the key version that sealed it, so tokens minted before a key rotation keep
//! opening while that version stays in the key file. The expiry is checked on this process's
//! clock, the only clock there is for a token without a row. A token ends early when its issuer
//! is no longer an admin of the document's repository (the caller checks that at each use).

use std::fmt;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use fermata_crypto::{Aad, Purpose, SecretToken};
use fermata_store::{ChannelId, UnixMillis, UserId};
use serde::{Deserialize, Serialize};

use crate::{AccountError, Accounts};

/// The prefix of a client token.
pub const CLIENT_TOKEN_PREFIX: &str = "fmtc_";

/// The longest a client token may live.
pub const MAX_CLIENT_TOKEN_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// What a client token lets its holder do with its document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientAccess {
    /// Read it through its read routes and open read-only live connections.
    Read,
    /// Also edit it over a live connection.
    Write,
}

impl ClientAccess {
    pub fn as_str(self) -> &'static str {
        match self {
            ClientAccess::Read => "read",
            ClientAccess::Write => "write",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "read" => Some(ClientAccess::Read),
            "write" => Some(ClientAccess::Write),
            _ => None,
        }
    }
}

/// The grant a valid client token carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientGrant {
    pub document: ChannelId,
    pub access: ClientAccess,
    pub expires_at: UnixMillis,
    /// The admin who minted it; the token is good only while they still are one.
    pub issuer: UserId,
}

/// Why a client token was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ClientTokenError {
    #[error("the client token is not one this server issued")]
    Invalid,
    #[error("the client token has expired")]
    Expired,
}

/// A minted client token: the secret (shown once) and when it expires.
pub struct MintedClientToken {
    pub token: SecretToken,
    pub expires_at: UnixMillis,
}

impl fmt::Debug for MintedClientToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MintedClientToken")
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

/// The sealed grant, with short field names to keep tokens short in URLs.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Sealed {
    d: String,
    a: ClientAccess,
    e: i64,
    i: String,
}

/// Every client token is sealed for the same row: the grant inside names its document.
const ROW: &str = "client-token";

fn aad() -> Aad<'static> {
    Aad {
        purpose: Purpose::ClientToken,
        row: ROW,
    }
}

impl Accounts {
    /// Mints a client token for one document, valid for `ttl` (1 second to
    /// [`MAX_CLIENT_TOKEN_TTL`]) from now. The caller checked that `issuer` administers it.
    pub fn mint_client_token(
        &self,
        document: &ChannelId,
        access: ClientAccess,
        ttl: Duration,
        issuer: &UserId,
    ) -> Result<MintedClientToken, AccountError> {
        if ttl < Duration::from_secs(1) || ttl > MAX_CLIENT_TOKEN_TTL {
            return Err(AccountError::Invalid(format!(
                "a client token lives 1 to {} seconds",
                MAX_CLIENT_TOKEN_TTL.as_secs()
            )));
        }
        let expires_at = UnixMillis::now().plus(ttl);
        let sealed = Sealed {
            d: document.0.clone(),
            a: access,
            e: expires_at.0,
            i: issuer.0.clone(),
        };
        let plaintext = serde_json::to_vec(&sealed).expect("a grant serializes");
        let envelope = self.keys.seal(aad(), &plaintext);
        let mut token = String::from(CLIENT_TOKEN_PREFIX);
        URL_SAFE_NO_PAD.encode_string(envelope, &mut token);
        Ok(MintedClientToken {
            token: SecretToken::from_given(token),
            expires_at,
        })
    }

    /// Whether `token` looks like a client token (it may still be invalid).
    pub fn is_client_token(token: &SecretToken) -> bool {
        token.expose().starts_with(CLIENT_TOKEN_PREFIX)
    }

    /// The grant a client token carries, if it was sealed by this server's keys and has not
    /// expired.
    pub fn open_client_token(&self, token: &SecretToken) -> Result<ClientGrant, ClientTokenError> {
        let encoded = token
            .expose()
            .strip_prefix(CLIENT_TOKEN_PREFIX)
            .ok_or(ClientTokenError::Invalid)?;
        let envelope = URL_SAFE_NO_PAD
            .decode(encoded)
            .map_err(|_| ClientTokenError::Invalid)?;
        let plaintext = self
            .keys
            .open(aad(), &envelope)
            .map_err(|_| ClientTokenError::Invalid)?;
        let sealed: Sealed =
            serde_json::from_slice(&plaintext).map_err(|_| ClientTokenError::Invalid)?;
        let grant = ClientGrant {
            document: ChannelId(sealed.d),
            access: sealed.a,
            expires_at: UnixMillis(sealed.e),
            issuer: UserId(sealed.i),
        };
        if grant.expires_at <= UnixMillis::now() {
            return Err(ClientTokenError::Expired);
        }
        Ok(grant)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use fermata_crypto::Keyring;
    use fermata_store_testkit::memory::MemoryStorage;

    use super::*;
    use crate::{AccountSettings, KeyringHandle};

    fn accounts_with(keys: KeyringHandle) -> Accounts {
        Accounts::new(
            Arc::new(MemoryStorage::new(Default::default())),
            Arc::new(keys),
            AccountSettings::default(),
        )
    }

    fn document() -> ChannelId {
        ChannelId("0b6f3c1e-52a4-4d8e-9c61-7a2f0e9d4b13".to_owned())
    }

    #[test]
    fn a_minted_token_opens_to_its_grant_and_nothing_else_does() {
        let accounts = accounts_with(KeyringHandle::new(Keyring::generate(), None));
        let issuer = UserId("user-ann".to_owned());
        let minted = accounts
            .mint_client_token(
                &document(),
                ClientAccess::Write,
                Duration::from_secs(60),
                &issuer,
            )
            .unwrap();
        assert!(Accounts::is_client_token(&minted.token));
        let grant = accounts.open_client_token(&minted.token).unwrap();
        assert_eq!(grant.document, document());
        assert_eq!(grant.access, ClientAccess::Write);
        assert_eq!(grant.issuer, issuer);
        assert_eq!(grant.expires_at, minted.expires_at);
        assert!(!format!("{minted:?}").contains(minted.token.expose()));

        let text = minted.token.expose();
        let mut tampered = text.to_owned();
        let last = tampered.pop().unwrap();
        tampered.push(if last == 'A' { 'B' } else { 'A' });
        for bad in [
            tampered.as_str(),
            "fmtc_",
            "fmtc_!!",
            "fmta_abc",
            &text[..text.len() - 4],
        ] {
            assert_eq!(
                accounts.open_client_token(&SecretToken::from_given(bad)),
                Err(ClientTokenError::Invalid),
                "{bad}"
            );
        }
        // Another server's keys do not open it.
        let other = accounts_with(KeyringHandle::new(Keyring::generate(), None));
        assert_eq!(
            other.open_client_token(&minted.token),
            Err(ClientTokenError::Invalid)
        );
        for ttl in [
            Duration::ZERO,
            MAX_CLIENT_TOKEN_TTL + Duration::from_secs(1),
        ] {
            assert!(
                accounts
                    .mint_client_token(&document(), ClientAccess::Read, ttl, &issuer)
                    .is_err()
            );
        }
    }

    #[test]
    fn an_expired_token_is_refused() {
        let accounts = accounts_with(KeyringHandle::new(Keyring::generate(), None));
        let sealed = Sealed {
            d: document().0,
            a: ClientAccess::Read,
            e: UnixMillis::now().0 - 1,
            i: "user-ann".to_owned(),
        };
        let envelope = accounts
            .keys
            .seal(aad(), &serde_json::to_vec(&sealed).unwrap());
        let token = format!("{CLIENT_TOKEN_PREFIX}{}", URL_SAFE_NO_PAD.encode(envelope));
        assert_eq!(
            accounts.open_client_token(&SecretToken::from_given(token)),
            Err(ClientTokenError::Expired)
        );
    }

    #[test]
    fn tokens_minted_before_a_key_rotation_keep_opening() {
        let keyring = Keyring::generate();
        let text = keyring_text(&keyring);
        let file = Arc::new(Mutex::new(text));
        let reading = Arc::clone(&file);
        let reload: crate::Reload = Box::new(move |_force| {
            Keyring::from_key_file(&reading.lock().unwrap())
                .map(Some)
                .map_err(Into::into)
        });
        let accounts = accounts_with(KeyringHandle::new(keyring, Some(reload)));
        let issuer = UserId("user-ann".to_owned());
        let before = accounts
            .mint_client_token(
                &document(),
                ClientAccess::Read,
                Duration::from_secs(60),
                &issuer,
            )
            .unwrap();
        let mut rotated = Keyring::from_key_file(&file.lock().unwrap()).unwrap();
        rotated.rotate();
        *file.lock().unwrap() = keyring_text(&rotated);
        let after = accounts
            .mint_client_token(
                &document(),
                ClientAccess::Read,
                Duration::from_secs(60),
                &issuer,
            )
            .unwrap();
        let version = |token: &MintedClientToken| {
            let envelope = URL_SAFE_NO_PAD
                .decode(&token.token.expose()[CLIENT_TOKEN_PREFIX.len()..])
                .unwrap();
            Keyring::envelope_version(&envelope).unwrap()
        };
        assert_eq!((version(&before), version(&after)), (1, 2));
        assert!(accounts.open_client_token(&before.token).is_ok());
        assert!(accounts.open_client_token(&after.token).is_ok());
    }

    fn keyring_text(keyring: &Keyring) -> String {
        keyring.to_key_file().to_string()
    }
}
