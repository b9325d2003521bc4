//! Logging in and out, re-authenticating, recognising a session cookie or an API token, checking
//! again that a credential still holds, and the credentials a session holds.

use std::net::IpAddr;

use fermata_crypto::{Aad, Purpose, SecretToken};
use fermata_store::{NewSession, SecretHash, Session, SessionId, User, UserName};

use crate::credentials::Credentials;
use crate::revision::at_read_revision;
use crate::throttle::Attempt;
use crate::{
    AccountError, Accounts, Principal, SESSION_SECRET_PREFIX, SessionContext, Via, new_id,
};

/// A successful login: the principal, the secret for the browser's cookie, and the browser's
/// known-device mark (the one it presented, or a new one).
#[derive(Debug)]
pub struct LoggedIn {
    pub principal: Principal,
    pub secret: SecretToken,
    pub device_mark: String,
}

/// A successful re-authentication: the session, fresh, and its new secret (the old cookie and
/// the CSRF token made from it no longer work).
#[derive(Debug)]
pub struct Reauthenticated {
    pub session: Session,
    pub secret: SecretToken,
}

/// Who is signing in, as the HTTP layer knows them.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoginClient<'a> {
    /// The client's address: never a configured proxy's own (behind one, the client it names).
    pub address: Option<IpAddr>,
    /// The known-device mark the browser presented, if any.
    pub device_mark: Option<&'a str>,
}

/// An address as logs show it.
fn shown(address: Option<IpAddr>) -> String {
    address.map_or_else(|| "unknown".to_owned(), |address| address.to_string())
}

pub(crate) fn hash_of(secret: &SecretToken) -> SecretHash {
    SecretHash(secret.hash().0)
}

impl Accounts {
    /// Checks a name and password, throttled per account, per address and per known device (see
    /// [`crate::throttle`]); on success, opens a session. A wrong password and an unknown name
    /// fail the same way, in the same time. Failures, locks and refusals are logged with the name
    /// and address, never the password.
    pub async fn login(
        &self,
        name: &str,
        password: &SecretToken,
        client: LoginClient<'_>,
    ) -> Result<LoggedIn, AccountError> {
        let user = match UserName::new(name) {
            Ok(name) => self.storage.users().user_by_name(&name).await?,
            Err(_) => None,
        };
        let known = user
            .as_ref()
            .zip(client.device_mark)
            .and_then(|(user, mark)| self.known_device(user, mark));
        let attempt = Attempt {
            account: name,
            address: client.address,
            known_device: known.as_deref(),
        };
        self.throttle
            .attempt(&attempt)
            .map_err(|retry_after| Self::throttled(&attempt, retry_after))?;
        let stored = user.as_ref().map(|user| user.password_hash.clone());
        let matches = match self
            .passwords
            .verify(password.clone(), stored.clone())
            .await
        {
            Ok(matches) => matches,
            Err(busy) => {
                // Not a failure of this name or address: its attempt is handed back.
                self.throttle.withdrawn(&attempt);
                return Err(busy);
            }
        };
        let Some(user) = user.filter(|_| matches) else {
            return Err(self.wrong_password(&attempt));
        };
        let secret = SecretToken::generate(SESSION_SECRET_PREFIX);
        let created = self
            .storage
            .sessions()
            .create_session(&NewSession {
                id: SessionId(new_id()),
                user: user.id.clone(),
                secret_hash: Some(hash_of(&secret)),
                ttl: self.settings.session_ttl,
                credentials: None,
                verified_password_hash: stored,
            })
            .await;
        match created {
            // The password changed after it was checked: the old one no longer logs in.
            Err(error) if error.kind() == fermata_store::ErrorKind::Conflict => {
                return Err(AccountError::WrongCredentials);
            }
            other => other?,
        };
        self.throttle.succeeded(&attempt);
        let principal = self
            .authenticate_session(&secret)
            .await?
            .ok_or(AccountError::NotFound("session"))?;
        tracing::info!(
            user = %principal.user.name,
            address = %shown(client.address),
            known_device = known.is_some(),
            "logged in"
        );
        let device_mark = match (known, client.device_mark) {
            (Some(_), Some(mark)) => mark.to_owned(),
            _ => self.device_mark(&principal.user),
        };
        Ok(LoggedIn {
            principal,
            secret,
            device_mark,
        })
    }

    /// Logs an attempt a lock refused (the throttle counted it).
    fn throttled(attempt: &Attempt<'_>, retry_after: std::time::Duration) -> AccountError {
        tracing::warn!(
            user = ?attempt.account,
            address = %shown(attempt.address),
            known_device = attempt.known_device.is_some(),
            retry_after_seconds = crate::retry_after_seconds(retry_after),
            "login refused: locked after failed attempts"
        );
        AccountError::Throttled { retry_after }
    }

    /// Logs and counts a wrong password (or unknown name), and the lock it starts.
    fn wrong_password(&self, attempt: &Attempt<'_>) -> AccountError {
        match self.throttle.failed(attempt) {
            Some(lock) => tracing::warn!(
                user = ?attempt.account,
                address = %shown(attempt.address),
                known_device = attempt.known_device.is_some(),
                lock_seconds = lock.as_secs(),
                "failed login; locked"
            ),
            None => tracing::warn!(
                user = ?attempt.account,
                address = %shown(attempt.address),
                known_device = attempt.known_device.is_some(),
                "failed login"
            ),
        }
        AccountError::WrongCredentials
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
            may_issue_credentials: true,
            user,
            via: Via::Session(SessionContext {
                session: lookup.session,
                secret: secret.clone(),
                now: lookup.now,
            }),
        }))
    }

    /// The principal's user as stored now, if the credential it authenticated with still holds:
    /// its session still exists unexpired, or its API token is unrevoked, and the user's
    /// password is the one they had when it authenticated (a password change ends their live
    /// connections, whatever credential opened them). Reads only; marks nothing as used.
    pub async fn still_valid(&self, principal: &Principal) -> Result<Option<User>, AccountError> {
        let live = match &principal.via {
            Via::Session(context) => self
                .storage
                .sessions()
                .session(&context.session.id)
                .await?
                .is_some(),
            Via::ApiToken(token) => self
                .storage
                .api_tokens()
                .api_token(&token.id)
                .await?
                .is_some_and(|token| token.revoked_at.is_none()),
        };
        if !live {
            return Ok(None);
        }
        let user = self.storage.users().user_by_id(&principal.user.id).await?;
        Ok(user.filter(|user| user.password_hash == principal.user.password_hash))
    }

    /// The user with this ID, if there is one.
    pub async fn user_by_id(
        &self,
        id: &fermata_store::UserId,
    ) -> Result<Option<User>, AccountError> {
        Ok(self.storage.users().user_by_id(id).await?)
    }

    /// Records a fresh password entry for the principal's session, throttled like a login (the
    /// session is a known client: the account's lock does not hold it, only its own failures),
    /// and gives the session a new secret, so the cookie and CSRF token in use before stop
    /// working.
    pub async fn reauthenticate(
        &self,
        principal: &Principal,
        password: &SecretToken,
        address: Option<IpAddr>,
    ) -> Result<Reauthenticated, AccountError> {
        let context = principal.session().ok_or_else(|| {
            AccountError::Invalid("only a browser session can re-authenticate".to_owned())
        })?;
        let device = format!("session:{}", context.session.id);
        let attempt = Attempt {
            account: principal.user.name.as_str(),
            address,
            known_device: Some(&device),
        };
        self.throttle
            .attempt(&attempt)
            .map_err(|retry_after| Self::throttled(&attempt, retry_after))?;
        // Read the hash again: the password may have changed since the session began.
        let stored = self
            .storage
            .users()
            .user_by_id(&principal.user.id)
            .await?
            .map(|user| user.password_hash);
        let matches = match self.passwords.verify(password.clone(), stored).await {
            Ok(matches) => matches,
            Err(busy) => {
                self.throttle.withdrawn(&attempt);
                return Err(busy);
            }
        };
        if !matches {
            return Err(self.wrong_password(&attempt));
        }
        self.throttle.succeeded(&attempt);
        let secret = SecretToken::generate(SESSION_SECRET_PREFIX);
        let session = self
            .storage
            .sessions()
            .reauthenticate(&context.session.id, &hash_of(&secret))
            .await?;
        tracing::info!(user = %principal.user.name, address = %shown(address), "re-authenticated");
        Ok(Reauthenticated { session, secret })
    }

    /// Ends a session, and the live connections it opened before this returns.
    pub async fn logout(&self, session: &SessionId) -> Result<(), AccountError> {
        let user = self
            .storage
            .sessions()
            .session(session)
            .await?
            .map(|lookup| lookup.session.user);
        self.storage.sessions().delete_session(session).await?;
        if let Some(user) = user {
            self.watch.recheck_user(&user).await;
        }
        Ok(())
    }

    /// Replaces a session's credentials (all of them; an empty set clears them).
    pub async fn set_session_credentials(
        &self,
        session: &SessionId,
        credentials: &Credentials,
    ) -> Result<Session, AccountError> {
        // The stored credentials are not needed, so even undecryptable ones can be replaced.
        self.change_session_credentials(session, |_| Ok(credentials.clone()))
            .await
    }

    /// Adds (or replaces) one named credential, keeping the others. Two additions at once both
    /// survive: each is applied to the revision it read, and a lost race reads again.
    pub async fn add_session_credential(
        &self,
        session: &SessionId,
        name: String,
        value: String,
    ) -> Result<Session, AccountError> {
        self.change_session_credentials(session, |current| {
            current?.with_entry(name.clone(), value.clone())
        })
        .await
    }

    /// Applies `change` to the credentials stored at the revision it read (or to the error that
    /// opening them gave), and writes the result only at that revision, reading again after a
    /// concurrent change.
    async fn change_session_credentials(
        &self,
        session: &SessionId,
        change: impl Fn(Result<Credentials, AccountError>) -> Result<Credentials, AccountError>,
    ) -> Result<Session, AccountError> {
        let change = &change;
        at_read_revision("session", || async move {
            let current = self
                .storage
                .sessions()
                .session(session)
                .await?
                .ok_or(AccountError::NotFound("session"))?
                .session;
            let changed = change(self.open_session_credentials(&current))?;
            let sealed = (!changed.is_empty()).then(|| {
                self.keys
                    .seal(aad_of_session(session), &changed.to_plaintext())
            });
            Ok(self
                .storage
                .sessions()
                .rotate_session_credentials(session, current.revision, sealed.as_deref())
                .await)
        })
        .await
    }

    fn open_session_credentials(&self, session: &Session) -> Result<Credentials, AccountError> {
        Credentials::unseal(
            &self.keys,
            aad_of_session(&session.id),
            session.credentials.as_deref(),
        )
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
        self.open_session_credentials(&lookup.session)
    }
}

fn aad_of_session(session: &SessionId) -> Aad<'_> {
    Aad {
        purpose: Purpose::SessionCredentials,
        row: &session.0,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use fermata_crypto::Keyring;
    use fermata_store::{Storage, StoreOptions};
    use fermata_store_testkit::memory::MemoryStorage;

    use super::*;
    use crate::throttle::{FIRST_LOCK, FREE_PER_ACCOUNT};
    use crate::{AccountSettings, KeyringHandle, retry_after_seconds};

    const PASSWORD: &str = "correct horse battery staple";

    /// A client told to retry after `Retry-After` seconds that waits exactly that long gets in:
    /// the seconds are the lock's remaining time rounded up, never down.
    #[tokio::test(start_paused = true)]
    async fn waiting_exactly_the_advertised_seconds_gets_past_a_lock() {
        let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new(StoreOptions::default()));
        let keys = Arc::new(KeyringHandle::new(Keyring::generate(), None));
        let accounts = Accounts::new(storage, keys, AccountSettings::default());
        let password = SecretToken::from_given(PASSWORD);
        accounts
            .add_user("ada", Some(password.clone()), Default::default())
            .await
            .unwrap();
        let client = LoginClient {
            address: Some(IpAddr::from([203, 0, 113, 9])),
            device_mark: None,
        };
        let wrong = SecretToken::from_given("guess guess guess");
        // The free failures, then one after each lock runs out: the last starts a lock of 4 s.
        let mut waits = vec![Duration::ZERO; FREE_PER_ACCOUNT];
        waits.extend([FIRST_LOCK, FIRST_LOCK * 2]);
        for wait in waits {
            tokio::time::advance(wait).await;
            let refused = accounts.login("ada", &wrong, client).await.unwrap_err();
            assert!(
                matches!(refused, AccountError::WrongCredentials),
                "{refused}"
            );
        }
        // The next request comes half a second later: 3.5 s of the lock remain.
        tokio::time::advance(Duration::from_millis(500)).await;
        let Err(AccountError::Throttled { retry_after }) =
            accounts.login("ada", &password, client).await
        else {
            panic!("the lock holds the right password too");
        };
        assert_eq!(retry_after, Duration::from_millis(3500));
        let advertised = retry_after_seconds(retry_after);
        assert_eq!(advertised, 4);
        tokio::time::advance(Duration::from_secs(advertised)).await;
        let logged_in = accounts.login("ada", &password, client).await;
        assert!(logged_in.is_ok(), "{:?}", logged_in.err());
    }
}
