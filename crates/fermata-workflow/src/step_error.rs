//! The error a step (and so a run) fails with: what the runner branches on (a stable code and
//! whether trying again may help), what the journal keeps of it, and its cause for the log.
//!
//! The runner knows no workflow's codes but its own two ([`StepError::TIMED_OUT`] and
//! [`StepError::RUN_UNREADABLE`]); a workflow maps its own errors to and from this one (the schema
//! workflows do it with their safe error). The cause never reaches the journal: a failure replayed
//! from the journal has the code and members it was recorded with, and no cause.

use std::error::Error as StdError;
use std::fmt;

use fermata_store::JournaledError;
use serde_json::{Map, Value};

/// Why a step failed: see the module documentation.
#[derive(Debug)]
pub struct StepError {
    journaled: JournaledError,
    /// The underlying error, for the operator's log only.
    source: Option<Box<dyn StdError + Send + Sync + 'static>>,
}

impl StepError {
    /// A step whose tries ran out without a recorded outcome (their workers died), or a hook wait
    /// that timed out. Retryable, as a timeout is: a new run may get through.
    pub const TIMED_OUT: &'static str = "STEP_TIMED_OUT";
    /// A run whose stored state (its input, a journaled value) cannot be read; it fails for good.
    pub const RUN_UNREADABLE: &'static str = "RUN_UNREADABLE";

    /// An error with a stable code (`SCREAMING_SNAKE_CASE` by convention).
    pub fn new(code: impl Into<String>, retryable: bool) -> Self {
        StepError {
            journaled: JournaledError::new(code, retryable),
            source: None,
        }
    }

    /// Keeps `details` in the journal with the code: what the workflow needs to give back the same
    /// failure when the step is replayed. `code` and `retryable` are the error's own and are not
    /// taken from `details`.
    #[must_use]
    pub fn with_details(mut self, mut details: Map<String, Value>) -> Self {
        details.remove("code");
        details.remove("retryable");
        self.journaled.details = details;
        self
    }

    /// Keeps `source` as the cause, for the log; it is never journaled.
    #[must_use]
    pub fn with_source(
        mut self,
        source: impl Into<Box<dyn StdError + Send + Sync + 'static>>,
    ) -> Self {
        self.source = Some(source.into());
        self
    }

    pub fn code(&self) -> &str {
        &self.journaled.code
    }

    /// Whether trying again, unchanged, may succeed: the runner retries only these.
    pub fn retryable(&self) -> bool {
        self.journaled.retryable
    }

    /// The members the workflow keeps with the code.
    pub fn details(&self) -> &Map<String, Value> {
        &self.journaled.details
    }

    /// What the journal keeps of this error.
    pub fn journaled(&self) -> &JournaledError {
        &self.journaled
    }
}

/// A failure read back from the journal: no cause.
impl From<JournaledError> for StepError {
    fn from(journaled: JournaledError) -> Self {
        StepError {
            journaled,
            source: None,
        }
    }
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the step failed with {}", self.code())
    }
}

impl StdError for StepError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn StdError + 'static))
    }
}

#[cfg(test)]
mod tests {
    use fermata_store::ErrorChain;
    use serde_json::json;

    use super::*;

    #[test]
    fn the_journal_keeps_code_and_details_and_never_the_cause() {
        let Value::Object(details) =
            json!({"subject": "shop", "code": "NOT_THIS", "retryable": true})
        else {
            unreachable!()
        };
        let error = StepError::new("VERIFICATION_FAILED", false)
            .with_details(details)
            .with_source(std::io::Error::other("driver text"));
        assert_eq!(
            ErrorChain(&error).to_string(),
            "the step failed with VERIFICATION_FAILED: driver text"
        );
        let journaled = error.journaled().to_json();
        assert_eq!(
            journaled,
            r#"{"code":"VERIFICATION_FAILED","retryable":false,"subject":"shop"}"#
        );
        let replayed = StepError::from(JournaledError::from_json(&journaled).unwrap());
        assert_eq!(replayed.journaled(), error.journaled());
        assert!(replayed.source().is_none());
    }
}
