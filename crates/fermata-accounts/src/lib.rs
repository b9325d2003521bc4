//! Accounts: users and roles, login sessions, API tokens, paired machines, the encrypted
//! credentials sessions and machines hold, and document-scoped client tokens sealed by the
//! keyring.
//!
//! This is the one place that turns secrets into what the database may keep: passwords into
//! argon2id hashes, cookie and token secrets into SHA-256 hashes, credentials into envelopes
//! sealed by the keyring and bound to their row. The HTTP layer and the command line both go
//! through [`Accounts`]; neither touches a store that holds secrets directly.

mod access_watch;
mod client_tokens;
mod credentials;
mod error;
mod keyring_handle;
mod machines;
mod password_checks;
mod planner_credentials;
mod revision;
mod rotation;
mod sealed_cookies;
mod sessions;
pub mod throttle;
mod tokens;
mod users;

use std::sync::Arc;
use std::time::Duration;

use fermata_crypto::SecretToken;
use fermata_store::{ApiToken, Session, Storage, UnixMillis, User};

pub use access_watch::{AccessWatch, POLL_EVERY, Recheck, Watching};
pub use client_tokens::{
    CLIENT_TOKEN_PREFIX, ClientAccess, ClientGrant, ClientTokenError, MAX_CLIENT_TOKEN_TTL,
    MintedClientToken,
};
pub use credentials::Credentials;
pub use error::{AccountError, retry_after_seconds};
pub use keyring_handle::{KeyringHandle, Reload};
pub use password_checks::QUEUE_WAIT as PASSWORD_QUEUE_WAIT;
pub use rotation::{Reencrypted, SealedCheck};
pub use sessions::{LoggedIn, LoginClient, Reauthenticated};
pub use throttle::{LoginCounts, LoginThrottle};
pub use tokens::TokenScope;

/// How long after entering a password a session counts as fresh.
pub const FRESH_FOR: Duration = Duration::from_secs(10 * 60);

/// The prefixes of the secrets Fermata hands out, so a leaked one is recognised.
pub const SESSION_SECRET_PREFIX: &str = "fmts_";
pub const API_TOKEN_PREFIX: &str = "fmta_";
/// The prefix of an API token made with the `tokens` scope: it may also create API tokens and
/// pair or re-authorize machines. The scope is part of the secret, so it cannot be changed
/// without changing the hash the token is found by.
pub const MINTING_TOKEN_PREFIX: &str = "fmtk_";
pub const MACHINE_TOKEN_PREFIX: &str = "fmtm_";
pub const PLANNER_CREDENTIAL_PREFIX: &str = "fmtp_";

/// Settings of the account layer.
#[derive(Debug, Clone, Copy)]
pub struct AccountSettings {
    /// How long a login session lives.
    pub session_ttl: Duration,
    /// The most unrevoked API tokens one user holds.
    pub max_api_tokens: usize,
    /// The most paired machines one user holds.
    pub max_machines: usize,
    /// The most password checks running at once (each takes 19 MiB and one core).
    pub password_concurrency: usize,
}

impl Default for AccountSettings {
    fn default() -> Self {
        AccountSettings {
            session_ttl: Duration::from_secs(7 * 24 * 60 * 60),
            max_api_tokens: 50,
            max_machines: 20,
            password_concurrency: std::thread::available_parallelism()
                .map_or(2, std::num::NonZeroUsize::get),
        }
    }
}

/// The account service.
#[derive(Debug)]
pub struct Accounts {
    storage: Arc<dyn Storage>,
    keys: Arc<KeyringHandle>,
    throttle: LoginThrottle,
    settings: AccountSettings,
    /// The live connections to re-check when someone's access changes.
    watch: AccessWatch,
    /// Held while a token or a machine is counted and made, so requests at the same moment
    /// cannot all pass the cap.
    issuing: tokio::sync::Mutex<()>,
    /// Where logins and re-authentications check passwords, a bounded few at once.
    passwords: password_checks::PasswordChecks,
}

/// Who made a request, and how they proved it.
#[derive(Debug, Clone)]
pub struct Principal {
    pub user: User,
    pub via: Via,
    /// May create API tokens and pair or re-authorize machines: a browser session, or an API
    /// token made with the `tokens` scope.
    pub may_issue_credentials: bool,
}

/// How a principal authenticated.
#[derive(Debug, Clone)]
pub enum Via {
    /// A browser login session (the cookie's secret is kept for CSRF checks).
    Session(SessionContext),
    /// A program's API token.
    ApiToken(ApiToken),
}

/// A live login session, as presented by its cookie.
#[derive(Debug, Clone)]
pub struct SessionContext {
    pub session: Session,
    pub secret: SecretToken,
    /// The database's clock when the session was read.
    pub now: UnixMillis,
}

impl Principal {
    /// Fresh means a browser session whose password was entered within [`FRESH_FOR`]. An API
    /// token is never fresh: it cannot re-authenticate.
    pub fn is_fresh(&self) -> bool {
        match &self.via {
            Via::Session(context) => {
                context.now >= context.session.authenticated_at
                    && context.now.since(context.session.authenticated_at) < FRESH_FOR
            }
            Via::ApiToken(_) => false,
        }
    }

    /// Refuses a principal that may not create tokens or machines.
    pub fn require_issuing(&self) -> Result<(), AccountError> {
        if self.may_issue_credentials {
            Ok(())
        } else {
            Err(AccountError::NotAllowed(
                "this API token may not create tokens or machines: make one with the `tokens` scope",
            ))
        }
    }

    pub fn session(&self) -> Option<&SessionContext> {
        match &self.via {
            Via::Session(context) => Some(context),
            Via::ApiToken(_) => None,
        }
    }
}

impl Accounts {
    pub fn new(
        storage: Arc<dyn Storage>,
        keys: Arc<KeyringHandle>,
        settings: AccountSettings,
    ) -> Self {
        Accounts {
            watch: AccessWatch::new(Arc::clone(&storage)),
            storage,
            keys,
            throttle: LoginThrottle::default(),
            issuing: tokio::sync::Mutex::new(()),
            passwords: password_checks::PasswordChecks::start(settings.password_concurrency),
            settings,
        }
    }

    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    pub fn keys(&self) -> &KeyringHandle {
        &self.keys
    }

    pub fn settings(&self) -> AccountSettings {
        self.settings
    }

    /// The live connections, asked to re-check when someone's access changes.
    pub fn access_watch(&self) -> &AccessWatch {
        &self.watch
    }

    /// Failed logins, locks and refusals so far, for metrics.
    pub fn login_counts(&self) -> LoginCounts {
        self.throttle.counts()
    }
}

/// A new random ID for a row.
fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Runs CPU-heavy password work off the async threads.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(work)
        .await
        .expect("password hashing does not panic")
}

/// Checks a name people give to a token or a machine: 1 to 100 printable characters, trimmed.
fn check_label<'a>(text: &'a str, what: &str) -> Result<&'a str, AccountError> {
    let text = text.trim();
    if text.is_empty() || text.chars().count() > 100 || text.chars().any(char::is_control) {
        return Err(AccountError::Invalid(format!(
            "a {what} has 1 to 100 printable characters"
        )));
    }
    Ok(text)
}
