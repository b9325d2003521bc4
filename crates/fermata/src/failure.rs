//! How a command fails: a safe message for the operator and the process exit code.

use std::process::ExitCode;

use fermata_store::StoreError;

/// A command's failure. The message is safe to print: it never holds driver text or secrets.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    pub message: String,
    pub exit: Exit,
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
    pub fn runtime(message: impl Into<String>) -> Self {
        Failure {
            message: message.into(),
            exit: Exit::Runtime,
        }
    }

    pub fn config(message: impl Into<String>) -> Self {
        Failure {
            message: message.into(),
            exit: Exit::Config,
        }
    }

    /// A store error met while doing `doing`. The driver's cause is logged at debug level only.
    pub fn store(doing: &str, error: &StoreError) -> Self {
        if let Some(cause) = std::error::Error::source(error) {
            tracing::debug!(cause = %cause, "{doing}");
        }
        Failure::runtime(format!("{doing}: {error}"))
    }

    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(self.exit as u8)
    }
}
