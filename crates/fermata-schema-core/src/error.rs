//! The one safe error of schema operations: `{stage, code, retryable, message}`.
//!
//! Nothing but fixed words and safe identifiers can get into it, by construction: a `SafeError`
//! is made from an [`ErrorCode`] (which fixes the stage, whether it is retryable, and the message
//! template) and at most one [`Subject`] (an operation ID, a database name, or an object of a database), and its
//! message is rendered from the template. There is no constructor that takes free text, so raw
//! SQL, driver errors, credentials, connection URLs and tokens cannot reach a stored row, an API
//! response or a page through it. Stored rows keep the code and subject and render the message
//! again when read.
//!
//! What caused it may ride along as its `source` ([`SafeError::with_source`]), for the log of
//! whoever handles the error: the cause is never rendered, stored or sent, and two safe errors
//! with the same code and subject are equal whatever their causes.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::code::{ErrorCode, ErrorStage};
use crate::subject::Subject;

/// A safe error: see the module documentation.
#[derive(Clone)]
pub struct SafeError {
    code: ErrorCode,
    subject: Option<Subject>,
    /// What caused it, for the operator's log only. Shared, so a safe error stays cheap to copy
    /// into the rows and reports that record it.
    cause: Option<Arc<dyn StdError + Send + Sync + 'static>>,
}

impl PartialEq for SafeError {
    fn eq(&self, other: &Self) -> bool {
        (self.code, &self.subject) == (other.code, &other.subject)
    }
}

impl Eq for SafeError {}

/// Without the cause: a `Debug` can end up anywhere a value is printed.
impl fmt::Debug for SafeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SafeError")
            .field("code", &self.code)
            .field("subject", &self.subject)
            .finish_non_exhaustive()
    }
}

/// The form a safe error is stored and sent in.
#[derive(Debug, Serialize, Deserialize)]
struct Wire {
    stage: ErrorStage,
    code: ErrorCode,
    retryable: bool,
    message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    subject: Option<Subject>,
}

impl SafeError {
    pub fn new(code: ErrorCode) -> Self {
        SafeError {
            code,
            subject: None,
            cause: None,
        }
    }

    pub fn about(code: ErrorCode, subject: Subject) -> Self {
        SafeError {
            code,
            subject: Some(subject),
            cause: None,
        }
    }

    /// Keeps `cause` as the source, for the log of whoever handles the error; it is never
    /// rendered, stored or sent.
    #[must_use]
    pub fn with_source(mut self, cause: impl StdError + Send + Sync + 'static) -> Self {
        self.cause = Some(Arc::new(cause));
        self
    }

    pub fn code(&self) -> ErrorCode {
        self.code
    }

    pub fn stage(&self) -> ErrorStage {
        self.code.stage()
    }

    pub fn retryable(&self) -> bool {
        self.code.retryable()
    }

    pub fn subject(&self) -> Option<&Subject> {
        self.subject.as_ref()
    }

    /// The message, rendered from the code's template and the subject.
    pub fn message(&self) -> String {
        let message = self.message_without_object();
        match &self.subject {
            Some(Subject::Object(object)) => format!("{message}: {}", object.detail()),
            _ => message,
        }
    }

    fn message_without_object(&self) -> String {
        let template = self.code.template();
        match (&self.subject, self.code) {
            (Some(subject), ErrorCode::PermissionDenied) => {
                template.replace("{}", &format!(" on {subject}"))
            }
            (Some(subject), _) => template.replace("{}", &subject.to_string()),
            (None, ErrorCode::PermissionDenied) => template.replace("{}", ""),
            (None, _) => template
                .replace(" ({})", "")
                .replace(" {}", "")
                .replace("{}", ""),
        }
    }

    /// The JSON form: `{"stage", "code", "retryable", "message"}` (and the subject, for reading
    /// it back).
    pub fn to_json(&self) -> String {
        serde_json::to_string(&Wire {
            stage: self.stage(),
            code: self.code,
            retryable: self.retryable(),
            message: self.message(),
            subject: self.subject.clone(),
        })
        .expect("a safe error serializes")
    }

    /// Reads the JSON form back; the message is rendered again, never taken from the text.
    pub fn from_json(text: &str) -> Result<Self, UnreadableSafeError> {
        let wire: Wire = serde_json::from_str(text).map_err(UnreadableSafeError)?;
        Ok(SafeError {
            code: wire.code,
            subject: wire.subject,
            cause: None,
        })
    }
}

/// Stored text that is not the JSON form of a safe error.
#[derive(Debug, thiserror::Error)]
#[error("a stored operation error does not parse")]
pub struct UnreadableSafeError(#[source] pub serde_json::Error);

impl fmt::Display for SafeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.message())
    }
}

impl StdError for SafeError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.cause
            .as_deref()
            .map(|cause| cause as &(dyn StdError + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subject::{DatabaseName, ObjectKind, ObjectSubject, Reason};

    #[test]
    fn a_message_is_its_codes_template_with_or_without_the_subject() {
        let held = SafeError::about(
            ErrorCode::LeaseHeld,
            Subject::Operation(uuid::Uuid::from_u128(7)),
        );
        assert_eq!((held.stage(), held.retryable()), (ErrorStage::Lock, false));
        assert_eq!(
            held.message(),
            "another schema operation (00000000-0000-0000-0000-000000000007) is running"
        );
        assert_eq!(
            SafeError::new(ErrorCode::LeaseHeld).message(),
            "another schema operation is running"
        );
        for code in ErrorCode::ALL {
            let message = SafeError::new(code).message();
            assert!(!message.contains(['{', '}']), "{code:?}: {message}");
        }
    }

    #[test]
    fn odd_database_names_survive_exactly_and_render_quoted() {
        let name = DatabaseName::new("we`ird näme 🎉").unwrap();
        let error = SafeError::about(
            ErrorCode::DatabaseNoLongerVisible,
            Subject::Database(name.clone()),
        );
        assert_eq!(
            error.message(),
            "database `we``ird näme 🎉` is no longer visible to the snapshot account"
        );
        let json = error.to_json();
        let back = SafeError::from_json(&json).unwrap();
        assert_eq!(back, error);
        assert_eq!(back.subject(), Some(&Subject::Database(name)));
        let permission = SafeError::new(ErrorCode::PermissionDenied);
        assert_eq!(
            permission.message(),
            "the snapshot account lacks a privilege it needs"
        );
        for bad in ["", "a\u{0}b", &"x".repeat(65)] {
            assert!(DatabaseName::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn an_object_subject_names_the_database_the_object_and_the_reason() {
        let database = DatabaseName::new("shop").unwrap();
        let refused = SafeError::about(
            ErrorCode::UnsupportedSchemaOutput,
            Subject::Object(ObjectSubject::named(
                &database,
                ObjectKind::Table,
                "ge`o",
                Reason::IndexKind,
            )),
        );
        assert_eq!(
            refused.message(),
            "the schema of database `shop` cannot be captured faithfully: table `ge``o`: index kind"
        );
        let back = SafeError::from_json(&refused.to_json()).unwrap();
        assert_eq!(back, refused);
        assert_eq!(back.subject().and_then(Subject::database), Some(&database));
        let denied = SafeError::about(
            ErrorCode::PermissionDenied,
            Subject::Object(ObjectSubject::kind(&database, ObjectKind::Trigger)),
        );
        assert_eq!(
            denied.message(),
            "the snapshot account lacks a privilege it needs on `shop`: triggers"
        );
        assert!(!denied.retryable());
        let json: serde_json::Value = serde_json::from_str(&refused.to_json()).unwrap();
        assert_eq!(
            json["subject"],
            serde_json::json!({"kind": "object", "value": {
                "database": "shop", "kind": "table", "name": "ge`o", "reason": "index_kind"}})
        );
    }

    #[test]
    fn stored_text_cannot_smuggle_a_message() {
        let forged = r#"{"stage":"connection","code":"CONNECTION_LOST","retryable":true,"message":"password=hunter2 SELECT 1"}"#;
        let read = SafeError::from_json(forged).unwrap();
        assert_eq!(
            read.message(),
            "the connection to the MySQL server was lost"
        );
        assert!(!read.to_json().contains("hunter2"));
        assert!(SafeError::from_json(r#"{"code":"NOT_A_CODE"}"#).is_err());
    }

    #[test]
    fn a_cause_is_kept_for_the_log_and_shown_nowhere_else() {
        let cause = std::io::Error::other("password=hunter2 SELECT 1");
        let error = SafeError::new(ErrorCode::ConnectionLost).with_source(cause);
        assert_eq!(
            StdError::source(&error).map(ToString::to_string).as_deref(),
            Some("password=hunter2 SELECT 1")
        );
        for shown in [
            error.to_string(),
            error.message(),
            error.to_json(),
            format!("{error:?}"),
        ] {
            assert!(!shown.contains("hunter2"), "{shown}");
        }
        let copy = error.clone();
        assert_eq!(copy, SafeError::new(ErrorCode::ConnectionLost));
        assert!(StdError::source(&copy).is_some(), "a copy keeps the cause");
        drop(error);
    }
}
