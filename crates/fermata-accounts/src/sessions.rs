//! Logging in and out, re-authenticating, recognising a session cookie or an API token, and the
//! credentials a session holds.

use std::net::IpAddr;

use fermata_crypto::{Aad, Purpose, SecretToken, verify_password};
use fermata_store::{NewSession, SecretHash, Session, SessionId, UserName};

use crate::credentials::Credentials;
use crate::{
    AccountError, Accounts, Principal, SESSION_SECRET_PREFIX, SessionContext, Via, blocking, new_id,
};

/// A successful login: the principal and the secret for the browser's cookie.
#[derive(Debug)]
pub struct LoggedIn {
    pub principal: Principal,
    pub secret: SecretToken,
}

/// How many times a credential change is retried when another change to the same row won.
const ROTATION_ATTEMPTS: usize = 3;

pub(crate) fn hash_of(secret: &SecretToken) -> SecretHash {
    SecretHash(secret.hash().0)
}

impl Accounts {
    /// Checks a name and password, throttled per account and per address; on success, opens a
    /// session. A wrong password and an unknown name fail the same way, in the same time.
    pub async fn login(
        &self,
        name: &str,
        password: &SecretToken,
        address: Option<IpAddr>,
    ) -> Result<LoggedIn, AccountError> {
        self.throttle
            .attempt(name, address)
            .map_err(|retry_after| AccountError::Throttled { retry_after })?;
        let user = match UserName::new(name) {
            Ok(name) => self.storage.users().user_by_name(&name).await?,
            Err(_) => None,
        };
        let stored = user.as_ref().map(|user| user.password_hash.clone());
        let given = password.clone();
        let matches = blocking(move || verify_password(given.expose(), stored.as_deref())).await;
        let Some(user) = user.filter(|_| matches) else {
            return Err(AccountError::WrongCredentials);
        };
        self.throttle.succeeded(name, address);
        let secret = SecretToken::generate(SESSION_SECRET_PREFIX);
        self.storage
            .sessions()
            .create_session(&NewSession {
                id: SessionId(new_id()),
                user: user.id.clone(),
                secret_hash: Some(hash_of(&secret)),
                ttl: self.settings.session_ttl,
                credentials: None,
            })
            .await?;
        let principal = self
            .authenticate_session(&secret)
            .await?
            .ok_or(AccountError::NotFound("session"))?;
        tracing::info!(user = %principal.user.name, "logged in");
        Ok(LoggedIn { principal, secret })
    }

    /// The principal behind a session cookie's secret, if the session is live.
    pub async fn authenticate_session(
        &self,
        secret: &SecretToken,
    ) -> Result<Option<Principal>, AccountError> {
        if !secret.expose().starts_with(SESSION_SECRET_PREFIX) {
            return Ok(None);
        }
        let Some(lookup) = self
            .storage
            .sessions()
            .session_by_secret(&hash_of(secret))
            .await?
        else {
            return Ok(None);
        };
        let Some(user) = self
            .storage
            .users()
            .user_by_id(&lookup.session.user)
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(Principal {
            user,
            via: Via::Session(SessionContext {
                session: lookup.session,
                secret: secret.clone(),
                now: lookup.now,
            }),
        }))
    }

    /// Records a fresh password entry for the principal's session, throttled like a login.
    pub async fn reauthenticate(
        &self,
        principal: &Principal,
        password: &SecretToken,
        address: Option<IpAddr>,
    ) -> Result<Session, AccountError> {
        let context = principal.session().ok_or_else(|| {
            AccountError::Invalid("only a browser session can re-authenticate".to_owned())
        })?;
        let name = principal.user.name.as_str();
        self.throttle
            .attempt(name, address)
            .map_err(|retry_after| AccountError::Throttled { retry_after })?;
        // Read the hash again: the password may have changed since the session began.
        let stored = self
            .storage
            .users()
            .user_by_id(&principal.user.id)
            .await?
            .map(|user| user.password_hash);
        let given = password.clone();
        if !blocking(move || verify_password(given.expose(), stored.as_deref())).await {
            return Err(AccountError::WrongCredentials);
        }
        self.throttle.succeeded(name, address);
        Ok(self
            .storage
            .sessions()
            .reauthenticate(&context.session.id)
            .await?)
    }

    /// Ends a session.
    pub async fn logout(&self, session: &SessionId) -> Result<(), AccountError> {
        self.storage.sessions().delete_session(session).await?;
        Ok(())
    }

    /// Replaces a session's credentials (all of them; an empty set clears them).
    pub async fn set_session_credentials(
        &self,
        session: &SessionId,
        credentials: &Credentials,
    ) -> Result<Session, AccountError> {
        let sealed = (!credentials.is_empty()).then(|| {
            self.keys
                .seal(aad_of_session(session), &credentials.to_plaintext())
        });
        let mut attempt = 0;
        loop {
            let current = self
                .storage
                .sessions()
                .session(session)
                .await?
                .ok_or(AccountError::NotFound("session"))?
                .session;
            let rotated = self
                .storage
                .sessions()
                .rotate_session_credentials(session, current.revision, sealed.as_deref())
                .await;
            match rotated {
                Err(error)
                    if error.kind() == fermata_store::ErrorKind::Conflict
                        && attempt + 1 < ROTATION_ATTEMPTS =>
                {
                    attempt += 1;
                }
                Err(error) if error.kind() == fermata_store::ErrorKind::Missing => {
                    return Err(AccountError::NotFound("session"));
                }
                other => return Ok(other?),
            }
        }
    }

    /// The credentials a session holds, decrypted.
    pub async fn session_credentials(
        &self,
        session: &SessionId,
    ) -> Result<Credentials, AccountError> {
        let lookup = self
            .storage
            .sessions()
            .session(session)
            .await?
            .ok_or(AccountError::NotFound("session"))?;
        match lookup.session.credentials {
            None => Ok(Credentials::default()),
            Some(sealed) => {
                let plain = self.keys.open(aad_of_session(session), &sealed)?;
                Credentials::from_plaintext(&plain)
            }
        }
    }
}

fn aad_of_session(session: &SessionId) -> Aad<'_> {
    Aad {
        purpose: Purpose::SessionCredentials,
        row: &session.0,
    }
}
