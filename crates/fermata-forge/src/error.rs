//! The forge's one error: a kind the caller branches on (whether trying again may help, a rate
//! limit with the forge's hint of how long to wait, a refusal, a conflict with what the forge
//! holds), what the adapter was doing in fixed words, the HTTP status when the forge answered,
//! and the underlying error as the source, for the operator's log.
//!
//! `Display` holds only those fixed words and numbers: never a URL, a response body or the
//! token. The source may hold the HTTP client's or libgit2's own text (without the URL, which
//! the adapter strips); it is for the log of whoever handles the error, never for a user.

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

/// What kind of failure a forge call met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForgeErrorKind {
    /// The forge failed the request or could not be reached, or the adapter could not use what
    /// it answered; the same call may succeed later.
    Failed,
    /// The forge asked to wait before more requests.
    RateLimited {
        /// How long the forge asked to wait (its `retry-after`, in whole seconds).
        retry_after: Option<Duration>,
        /// When the limit resets, in seconds since the Unix epoch (`x-ratelimit-reset`).
        reset: Option<u64>,
    },
    /// The forge refused the request for good (credentials, permissions, a missing object, an
    /// invalid request); trying again unchanged will not help.
    Refused,
    /// The forge holds a branch of that name that points at another commit.
    Conflict,
}

/// A failed forge call: see the module documentation.
#[derive(Debug)]
pub struct ForgeError {
    kind: ForgeErrorKind,
    /// What the adapter was doing, or what it found wrong, in fixed words.
    context: &'static str,
    /// The HTTP status of the forge's answer, when there was one.
    status: Option<u16>,
    source: Option<Box<dyn StdError + Send + Sync + 'static>>,
}

impl ForgeError {
    pub fn new(kind: ForgeErrorKind, context: &'static str) -> Self {
        ForgeError {
            kind,
            context,
            status: None,
            source: None,
        }
    }

    /// A [`ForgeErrorKind::Failed`] error.
    pub fn failed(context: &'static str) -> Self {
        Self::new(ForgeErrorKind::Failed, context)
    }

    #[must_use]
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    /// Keeps `source` as the cause, for the log; it never reaches `Display`.
    #[must_use]
    pub fn with_source(
        mut self,
        source: impl Into<Box<dyn StdError + Send + Sync + 'static>>,
    ) -> Self {
        self.source = Some(source.into());
        self
    }

    pub fn kind(&self) -> ForgeErrorKind {
        self.kind
    }

    pub fn context(&self) -> &'static str {
        self.context
    }

    pub fn status(&self) -> Option<u16> {
        self.status
    }

    /// Whether trying again, unchanged, may succeed: a failure or a rate limit.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.kind,
            ForgeErrorKind::Failed | ForgeErrorKind::RateLimited { .. }
        )
    }
}

impl fmt::Display for ForgeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            ForgeErrorKind::Failed => "the forge failed",
            ForgeErrorKind::RateLimited { .. } => "the forge's rate limit was reached",
            ForgeErrorKind::Refused => "the forge refused the request",
            ForgeErrorKind::Conflict => "the forge holds a conflicting branch",
        };
        write!(f, "{kind}: {}", self.context)?;
        if let Some(status) = self.status {
            write!(f, " (status {status})")?;
        }
        if let ForgeErrorKind::RateLimited { retry_after, reset } = self.kind {
            if let Some(wait) = retry_after {
                write!(f, ", retry after {} s", wait.as_secs())?;
            }
            if let Some(reset) = reset {
                write!(f, ", resets at {reset}")?;
            }
        }
        Ok(())
    }
}

impl StdError for ForgeError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn StdError + 'static))
    }
}

/// Names the action a failing call was part of, keeping its error as the source: the one way
/// the adapters turn libgit2, file and client errors into a [`ForgeErrorKind::Failed`].
pub(crate) trait ForgeContext<T> {
    fn context(self, action: &'static str) -> Result<T, ForgeError>;
}

impl<T, E> ForgeContext<T> for Result<T, E>
where
    E: StdError + Send + Sync + 'static,
{
    fn context(self, action: &'static str) -> Result<T, ForgeError> {
        self.map_err(|error| ForgeError::failed(action).with_source(error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_has_fixed_words_and_numbers_only() {
        let limited = ForgeError::new(
            ForgeErrorKind::RateLimited {
                retry_after: Some(Duration::from_secs(60)),
                reset: Some(1_767_225_600),
            },
            "read a branch",
        )
        .with_status(403)
        .with_source(std::io::Error::other("secondary rate limit exceeded"));
        assert_eq!(
            limited.to_string(),
            "the forge's rate limit was reached: read a branch (status 403), retry after 60 s, \
             resets at 1767225600"
        );
        assert!(limited.is_retryable());
        assert!(limited.source().is_some());
        let refused = ForgeError::new(ForgeErrorKind::Refused, "read a branch").with_status(401);
        assert_eq!(
            refused.to_string(),
            "the forge refused the request: read a branch (status 401)"
        );
        assert!(!refused.is_retryable());
        assert!(!ForgeError::new(ForgeErrorKind::Conflict, "create the branch").is_retryable());
    }
}
