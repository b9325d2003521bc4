//! How a command fails: a safe message for the operator, the process exit code, and the cause
//! for the log.

use std::error::Error as StdError;
use std::process::ExitCode;

use fermata_store::StoreError;

/// A command's failure. The message is safe to print: it never holds driver text or secrets.
/// The cause, when there is one, is logged (at debug level) where the command ends.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    pub message: String,
    pub exit: Exit,
    #[source]
    pub source: Option<Box<dyn StdError + Send + Sync + 'static>>,
}

/// The exit codes, documented in `fermata --help`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 1: the database or the machine failed.
    Runtime = 1,
    /// 2: a setting or argument is invalid.
    Config = 2,
    /// 3: another process holds the writer lease.
    LeaseHeld = 3,
    /// 4: the writer lease was lost while serving.
    LeaseLost = 4,
}

impl Failure {
    pub fn new(message: impl Into<String>, exit: Exit) -> Self {
        Failure {
            message: message.into(),
            exit,
            source: None,
        }
    }

    pub fn runtime(message: impl Into<String>) -> Self {
        Failure::new(message, Exit::Runtime)
    }

    pub fn config(message: impl Into<String>) -> Self {
        Failure::new(message, Exit::Config)
    }

    /// Keeps `cause` for the log; the message stays what is printed.
    #[must_use]
    pub fn with_source(mut self, cause: impl StdError + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(cause));
        self
    }

    /// A store error met while doing `doing`: its safe text is printed, and the error with the
    /// driver's cause is kept for the log.
    pub fn store(doing: &str, error: StoreError) -> Self {
        Failure::runtime(format!("{doing}: {error}")).with_source(error)
    }

    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(self.exit as u8)
    }
}
