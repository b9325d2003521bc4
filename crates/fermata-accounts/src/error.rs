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
        retry_after_seconds(*.retry_after)
    )]
    Busy { retry_after: Duration },
    /// Too many failed attempts for this account or address.
    #[error(
        "too many failed attempts; try again in {} seconds",
        retry_after_seconds(*.retry_after)
    )]
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

/// A wait as the whole seconds a client is told to wait (a `Retry-After`): rounded up, so a
/// client that waits exactly that long finds the wait over, and never 0, which would invite it to
/// retry at once.
pub fn retry_after_seconds(wait: Duration) -> u64 {
    (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_is_told_in_whole_seconds_rounded_up() {
        for (millis, seconds) in [
            (0, 1),
            (1, 1),
            (999, 1),
            (1000, 1),
            (1001, 2),
            (3500, 4),
            (4000, 4),
        ] {
            assert_eq!(
                retry_after_seconds(Duration::from_millis(millis)),
                seconds,
                "{millis} ms"
            );
        }
        assert_eq!(retry_after_seconds(Duration::new(4, 1)), 5);
        let throttled = AccountError::Throttled {
            retry_after: Duration::from_millis(3500),
        };
        assert_eq!(
            throttled.to_string(),
            "too many failed attempts; try again in 4 seconds"
        );
    }
}
