//! The one error type of the storage port and its kinds, and how a handled error of any crate is
//! written to the operator's log with every cause ([`ErrorChain`]).
//!
//! Callers branch on [`ErrorKind`], never on text. The message is written by the adapter from
//! fixed words and safe identifiers (a lease name, a migration file name); the driver's own error
//! is kept as the `source` for operators' logs and never appears in `Display`.

use std::borrow::Cow;
use std::error::Error as StdError;
use std::fmt;

/// What went wrong, as far as a caller needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The write lost a race: an expected revision, state or uniqueness did not hold. Re-read and
    /// decide again; repeating the same write will fail the same way.
    Conflict,
    /// The row asked for does not exist.
    Missing,
    /// Stored data or schema is not what this release wrote: a row that does not decode, a
    /// changed migration, an unknown migration. Needs an operator.
    Corrupt,
    /// The database could not be reached or answered with a transient failure (connection lost,
    /// busy, serialization failure, timeout). The same call may succeed later.
    Unavailable,
    /// The write was refused because its fencing token is not the current token of a live lease:
    /// the caller has lost the lease and must stop writing.
    Fenced,
    /// The caller passed a value the store refuses (empty name, out-of-range duration).
    Invalid,
}

impl ErrorKind {
    /// Whether repeating the same call, unchanged, may succeed.
    pub fn is_retryable(self) -> bool {
        matches!(self, ErrorKind::Unavailable)
    }

    fn describe(self) -> &'static str {
        match self {
            ErrorKind::Conflict => "conflict",
            ErrorKind::Missing => "not found",
            ErrorKind::Corrupt => "stored data is corrupt",
            ErrorKind::Unavailable => "storage unavailable",
            ErrorKind::Fenced => "fenced",
            ErrorKind::Invalid => "invalid request",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// A storage failure: a kind to branch on, a safe message, and the underlying cause for logs.
#[derive(Debug)]
pub struct StoreError {
    kind: ErrorKind,
    message: Cow<'static, str>,
    source: Option<Box<dyn StdError + Send + Sync + 'static>>,
}

impl StoreError {
    /// A new error. `message` must hold only fixed words and safe identifiers.
    pub fn new(kind: ErrorKind, message: impl Into<Cow<'static, str>>) -> Self {
        StoreError {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// Keeps `source` as the cause, for logs; it never reaches `Display`.
    #[must_use]
    pub fn with_source(mut self, source: impl StdError + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    pub fn conflict(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorKind::Conflict, message)
    }

    pub fn missing(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorKind::Missing, message)
    }

    pub fn corrupt(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorKind::Corrupt, message)
    }

    pub fn unavailable(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorKind::Unavailable, message)
    }

    pub fn fenced(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorKind::Fenced, message)
    }

    pub fn invalid(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorKind::Invalid, message)
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether repeating the same call, unchanged, may succeed.
    pub fn is_retryable(&self) -> bool {
        self.kind.is_retryable()
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl StdError for StoreError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn StdError + 'static))
    }
}

/// The result of every store call.
pub type StoreResult<T> = Result<T, StoreError>;

/// A failure that means a store error of one kind, its message in fixed words and the failure
/// kept as the source: `UserName::new(text).or_corrupt("a stored user name is invalid")?`.
pub trait StoreResultExt<T> {
    /// Stored data that is not what this release wrote.
    fn or_corrupt(self, message: impl Into<Cow<'static, str>>) -> StoreResult<T>;

    /// A value the store refuses.
    fn or_invalid(self, message: impl Into<Cow<'static, str>>) -> StoreResult<T>;
}

impl<T, E> StoreResultExt<T> for Result<T, E>
where
    E: StdError + Send + Sync + 'static,
{
    fn or_corrupt(self, message: impl Into<Cow<'static, str>>) -> StoreResult<T> {
        self.map_err(|error| StoreError::corrupt(message).with_source(error))
    }

    fn or_invalid(self, message: impl Into<Cow<'static, str>>) -> StoreResult<T> {
        self.map_err(|error| StoreError::invalid(message).with_source(error))
    }
}

/// An error and every cause below it, `error: cause: cause`, for the operator's log at the place
/// where the error is handled: `tracing::warn!(error = %ErrorChain(&error), "...")`.
///
/// Redaction is for what users see and what is stored: a `Display` that reaches an answer or a
/// row never repeats its source, and the sources (driver text included) are for this log only.
/// Secrets never get into an error, so none reaches the log through its causes either.
#[derive(Debug, Clone, Copy)]
pub struct ErrorChain<'a>(pub &'a (dyn StdError + 'static));

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(error) = cause {
            write!(f, ": {error}")?;
            cause = error.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct DriverText;

    impl fmt::Display for DriverText {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("ERROR: relation \"leases\" password=hunter2")
        }
    }

    impl StdError for DriverText {}

    #[test]
    fn display_never_shows_the_source() {
        let error =
            StoreError::unavailable("renewing lease `fermata:writer`").with_source(DriverText);
        assert_eq!(
            error.to_string(),
            "storage unavailable: renewing lease `fermata:writer`"
        );
        assert!(error.source().is_some());
    }

    #[test]
    fn the_chain_shows_every_cause() {
        let error = StoreError::unavailable("renewing lease `fermata:writer`")
            .with_source(StoreError::corrupt("reading a lease").with_source(DriverText));
        assert_eq!(
            ErrorChain(&error).to_string(),
            "storage unavailable: renewing lease `fermata:writer`: stored data is corrupt: \
             reading a lease: ERROR: relation \"leases\" password=hunter2"
        );
    }

    #[test]
    fn only_unavailable_is_retryable() {
        let kinds = [
            ErrorKind::Conflict,
            ErrorKind::Missing,
            ErrorKind::Corrupt,
            ErrorKind::Unavailable,
            ErrorKind::Fenced,
            ErrorKind::Invalid,
        ];
        let retryable: Vec<_> = kinds.into_iter().filter(|k| k.is_retryable()).collect();
        assert_eq!(retryable, [ErrorKind::Unavailable]);
    }
}

/// The failures of a task that repeats (a poll, a claim loop), so that it logs a run of them
/// once: when the first fails and when one succeeds again, not at every turn while the database
/// is down.
#[derive(Debug, Default)]
pub struct FailureStreak {
    failures: u32,
}

impl FailureStreak {
    /// Counts a failure; true when it begins a streak (the one to log).
    pub fn failed(&mut self) -> bool {
        self.failures = self.failures.saturating_add(1);
        self.failures == 1
    }

    /// Ends a streak; returns how many failures it had, when there was one.
    pub fn succeeded(&mut self) -> Option<u32> {
        let failures = std::mem::take(&mut self.failures);
        (failures > 0).then_some(failures)
    }
}
