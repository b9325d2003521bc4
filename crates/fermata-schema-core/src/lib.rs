//! The values every part of a schema operation shares and the store persists with it: the one
//! safe error (`{stage, code, retryable, message}`) and the database names it may name. Pure
//! types, no IO: the store keeps them in its schema rows, the schema crate makes them, and the
//! HTTP surface and the command line show them.

mod error;

pub use error::{
    DatabaseName, ErrorCode, ErrorStage, InvalidDatabaseName, ObjectKind, ObjectName,
    ObjectSubject, Reason, SafeError, Subject, UnreadableSafeError,
};
