//! The one way a failure from outside this crate becomes a safe error: it names the action that
//! failed and keeps the failure as the safe error's cause, for the log of whoever handles it (the
//! workflow runner for a step, the HTTP layer or the command line for a request). Nothing is
//! logged here.
//!
//! The store's and the forge's errors know which safe error they are ([`SafeContext::context`]);
//! any other error (the file system's, libgit2's, the object store's, a parser's) gets the code
//! its caller names ([`SafeCode::or_code`], [`SafeCode::or_safe`]). The MySQL driver's errors
//! have their own mapping, which keeps none of their text: [`crate::source::DriverContext`].

use std::borrow::Cow;
use std::error::Error as StdError;

use fermata_forge::{ForgeError, ForgeErrorKind};
use fermata_schema_core::{ErrorCode, SafeError};
use fermata_store::StoreError;

/// A failure and the action it ended: the cause a safe error keeps, `action: failure`.
#[derive(Debug, thiserror::Error)]
#[error("{action}")]
pub(crate) struct Failed {
    action: &'static str,
    #[source]
    source: Box<dyn StdError + Send + Sync + 'static>,
}

/// The safe error `code`, caused by `source` while doing `action`.
pub(crate) fn safe(
    code: ErrorCode,
    action: &'static str,
    source: impl Into<Box<dyn StdError + Send + Sync + 'static>>,
) -> SafeError {
    caused(SafeError::new(code), action, source)
}

/// `error` (one about a subject, say), caused by `source` while doing `action`.
pub(crate) fn caused(
    error: SafeError,
    action: &'static str,
    source: impl Into<Box<dyn StdError + Send + Sync + 'static>>,
) -> SafeError {
    error.with_source(Failed {
        action,
        source: source.into(),
    })
}

/// The safe error `code`, caused by what `reason` says in fixed words (a fact found wrong, not
/// another error).
pub(crate) fn because(code: ErrorCode, reason: impl Into<Cow<'static, str>>) -> SafeError {
    SafeError::new(code).with_source(Reason(reason.into()))
}

/// A fact found wrong, as a cause.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Reason(Cow<'static, str>);

/// The safe error a store or forge failure is.
pub(crate) trait SafeContext<T> {
    /// Names `action` (fixed words: `load the operation`) and keeps the failure as the cause.
    fn context(self, action: &'static str) -> Result<T, SafeError>;
}

/// Every failure of Fermata's own database is `STORAGE_UNAVAILABLE` to an operation: its kind
/// (conflict, corrupt, unavailable) is for the operator, who reads it in the cause.
impl<T> SafeContext<T> for Result<T, StoreError> {
    fn context(self, action: &'static str) -> Result<T, SafeError> {
        self.map_err(|error| safe(ErrorCode::StorageUnavailable, action, error))
    }
}

impl<T> SafeContext<T> for Result<T, ForgeError> {
    fn context(self, action: &'static str) -> Result<T, SafeError> {
        self.map_err(|error| safe(forge_code(&error), action, error))
    }
}

/// The safe error code of a forge failure; each is a `github`-stage code, retryable exactly when
/// the forge's error is.
pub(crate) fn forge_code(error: &ForgeError) -> ErrorCode {
    match error.kind() {
        ForgeErrorKind::Failed => ErrorCode::GithubFailed,
        ForgeErrorKind::RateLimited { .. } => ErrorCode::GithubRateLimited,
        ForgeErrorKind::Refused => ErrorCode::GithubRefused,
        ForgeErrorKind::Conflict => ErrorCode::PublicationConflict,
    }
}

/// The safe error any other failure is, by the code its caller names.
pub(crate) trait SafeCode<T> {
    /// The safe error `code`, naming `action` and keeping the failure as the cause.
    fn or_code(self, code: ErrorCode, action: &'static str) -> Result<T, SafeError>;

    /// The safe error `error` makes (one about a subject, say), keeping the failure as the cause.
    fn or_safe(self, error: impl FnOnce() -> SafeError) -> Result<T, SafeError>;
}

/// For the errors listed: the ones whose text may reach the operator's log. `sqlx::Error` is not
/// among them on purpose.
macro_rules! safe_code {
    ($($error:ty),* $(,)?) => {$(
        impl<T> SafeCode<T> for Result<T, $error> {
            fn or_code(self, code: ErrorCode, action: &'static str) -> Result<T, SafeError> {
                self.map_err(|error| safe(code, action, error))
            }

            fn or_safe(self, error: impl FnOnce() -> SafeError) -> Result<T, SafeError> {
                self.map_err(|cause| error().with_source(cause))
            }
        }
    )*};
}

safe_code!(
    std::io::Error,
    std::num::ParseIntError,
    std::str::Utf8Error,
    std::string::FromUtf8Error,
    serde_json::Error,
    object_store::Error,
    tokio::task::JoinError,
    fermata_crypto::CryptoError,
    lz4_flex::frame::Error,
    fermata_schema_core::InvalidDatabaseName,
    fermata_store::StoreError,
);

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use fermata_schema_core::ErrorStage;
    use fermata_store::ErrorChain;

    use super::*;

    #[test]
    fn forge_failures_are_github_codes_retryable_as_the_forge_says() {
        let kinds = [
            ForgeErrorKind::Failed,
            ForgeErrorKind::RateLimited {
                retry_after: Some(Duration::from_secs(60)),
                reset: None,
            },
            ForgeErrorKind::Refused,
            ForgeErrorKind::Conflict,
        ];
        let codes = kinds.map(|kind| {
            let forge = ForgeError::new(kind, "read a branch");
            let code = forge_code(&forge);
            assert_eq!(code.stage(), ErrorStage::Github, "{kind:?}");
            assert_eq!(code.retryable(), forge.is_retryable(), "{kind:?}");
            code
        });
        assert_eq!(
            codes,
            [
                ErrorCode::GithubFailed,
                ErrorCode::GithubRateLimited,
                ErrorCode::GithubRefused,
                ErrorCode::PublicationConflict,
            ]
        );
    }

    #[test]
    fn the_cause_names_the_action_and_keeps_the_failure() {
        let failed: Result<(), StoreError> = Err(StoreError::unavailable("reading an operation")
            .with_source(std::io::Error::other("connection reset")));
        let error = failed.context("load the operation").unwrap_err();
        assert_eq!(error, SafeError::new(ErrorCode::StorageUnavailable));
        assert_eq!(
            ErrorChain(&error).to_string(),
            "the application database is unavailable; try again: load the operation: \
             storage unavailable: reading an operation: connection reset"
        );
    }
}
