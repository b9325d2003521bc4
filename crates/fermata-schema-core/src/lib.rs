//! The values every part of a schema operation shares and the store persists with it: the one
//! safe error (`{stage, code, retryable, message}`), the table of its codes, and the database
//! names it may name. Pure types, no IO: the store keeps them in its schema rows, the schema crate
//! makes them, and the HTTP surface and the command line show them.

mod code;
mod error;
mod subject;

pub use code::{ErrorCode, ErrorStage};
pub use error::{SafeError, UnreadableSafeError};
pub use subject::{
    DatabaseName, InvalidDatabaseName, ObjectKind, ObjectName, ObjectSubject, Reason, Subject,
};
