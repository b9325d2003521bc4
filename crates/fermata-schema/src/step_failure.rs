//! How a schema operation's safe error crosses the workflow runner, which knows only its neutral
//! [`StepError`]: a failing step hands the runner the safe error's code and retryability, with its
//! wire form (stage, message, subject) as the members the journal keeps; a failure that comes back
//! from the runner (now, or replayed from the journal) is the same safe error again.
//!
//! The runner's own codes (`STEP_TIMED_OUT`, `RUN_UNREADABLE`) are safe error codes too, with the
//! same retryability; a test below keeps them so.

use fermata_schema_core::{ErrorCode, SafeError, Subject};
use fermata_workflow::{RunError, StepError};
use serde_json::Value;

/// The step error `error` fails a step with. The safe error is kept whole as its source, so the
/// runner's log line has the safe error's own cause.
pub(crate) fn step_error(error: SafeError) -> StepError {
    let Ok(Value::Object(details)) = serde_json::from_str(&error.to_json()) else {
        unreachable!("a safe error's JSON form is an object")
    };
    StepError::new(error.code().name(), error.retryable())
        .with_details(details)
        .with_source(error)
}

/// Ends the run with `error`.
pub(crate) fn run_failed(error: SafeError) -> RunError {
    RunError::Failed(step_error(error))
}

/// The safe error a step failed with: the one it was made from when it is at hand, else the one
/// its code and subject name (a failure replayed from the journal, or one of the runner's own).
/// A code no safe error has means the journal is not this release's: `RUN_UNREADABLE`.
pub(crate) fn safe_error(error: &StepError) -> SafeError {
    if let Some(safe) = std::error::Error::source(error).and_then(|s| s.downcast_ref::<SafeError>())
    {
        return safe.clone();
    }
    let Some(code) = ErrorCode::from_name(error.code()) else {
        return SafeError::new(ErrorCode::RunUnreadable);
    };
    match error.details().get("subject").cloned() {
        None => SafeError::new(code),
        Some(subject) => match serde_json::from_value::<Subject>(subject) {
            Ok(subject) => SafeError::about(code, subject),
            Err(_) => SafeError::new(ErrorCode::RunUnreadable),
        },
    }
}

#[cfg(test)]
mod tests {
    use fermata_schema_core::DatabaseName;
    use fermata_store::JournaledError;

    use super::*;

    #[test]
    fn the_runners_own_codes_are_safe_error_codes() {
        for (runner, code, retryable) in [
            (StepError::TIMED_OUT, ErrorCode::StepTimedOut, true),
            (StepError::RUN_UNREADABLE, ErrorCode::RunUnreadable, false),
        ] {
            assert_eq!(runner, code.name());
            assert_eq!(retryable, code.retryable(), "{runner}");
            assert_eq!(
                safe_error(&StepError::new(runner, retryable)),
                SafeError::new(code)
            );
        }
    }

    #[test]
    fn a_replayed_failure_is_the_same_safe_error_and_journals_as_before() {
        let error = SafeError::about(
            ErrorCode::DatabaseNoLongerVisible,
            Subject::Database(DatabaseName::new("shop`eu").unwrap()),
        );
        let step = step_error(error.clone());
        assert_eq!(
            (step.code(), step.retryable()),
            ("DATABASE_NO_LONGER_VISIBLE", false)
        );
        assert_eq!(safe_error(&step), error);
        // The journal holds what it held when it stored the safe error itself.
        let journaled: Value = serde_json::from_str(&step.journaled().to_json()).unwrap();
        let wire: Value = serde_json::from_str(&error.to_json()).unwrap();
        assert_eq!(journaled, wire);
        let replayed = StepError::from(JournaledError::from_json(&error.to_json()).unwrap());
        assert_eq!(safe_error(&replayed), error);
    }

    #[test]
    fn an_unknown_code_or_subject_is_an_unreadable_run() {
        let unreadable = SafeError::new(ErrorCode::RunUnreadable);
        assert_eq!(safe_error(&StepError::new("NOT_A_CODE", true)), unreadable);
        let Value::Object(details) = serde_json::json!({"subject": {"kind": "planet"}}) else {
            unreachable!()
        };
        let odd = StepError::new("VERIFICATION_FAILED", false).with_details(details);
        assert_eq!(safe_error(&odd), unreadable);
    }
}
