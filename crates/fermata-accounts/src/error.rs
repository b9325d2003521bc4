//! What an account operation can fail with, in terms a caller can answer a user with.

use std::time::Duration;

use fermata_crypto::CryptoError;
use fermata_store::{ErrorKind, StoreError};

/// An account operation's failure. `Display` is safe to show: it holds no secret and no driver
/// text.
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    /// The input is not acceptable (a short password, a bad name, a malformed credential).
    #[error("{0}")]
    Invalid(String),
    /// The credentials were wrong, or the account does not exist: the two are not told apart.
    #[error("the name or password is wrong")]
    WrongCredentials,
    /// Every password check stayed busy for the whole wait: try again shortly.
    #[error(
        "the server is busy checking passwords; try again in {} seconds",
        .retry_after.as_secs().max(1)
    )]
    Busy { retry_after: Duration },
    /// Too many failed attempts for this account or address.
    #[error("too many failed attempts; try again in {} seconds", .retry_after.as_secs().max(1))]
    Throttled { retry_after: Duration },
    /// The caller is who it says, but may not do this.
    #[error("{0}")]
    NotAllowed(&'static str),
    /// A per-user cap is reached (tokens, machines).
    #[error("{0}")]
    TooMany(String),
    /// The thing does not exist, or belongs to someone else.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// A concurrent change won; read again and retry.
    #[error("{0}")]
    Conflict(String),
    /// A stored secret could not be decrypted.
    #[error("stored credentials cannot be decrypted: {0}")]
    Crypto(#[from] CryptoError),
    /// The database failed.
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for AccountError {
    fn from(error: StoreError) -> Self {
        match error.kind() {
            ErrorKind::Conflict => AccountError::Conflict(error.message().to_owned()),
            ErrorKind::Invalid => AccountError::Invalid(error.message().to_owned()),
            _ => AccountError::Store(error),
        }
    }
}
