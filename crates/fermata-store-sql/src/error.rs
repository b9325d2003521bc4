//! Mapping driver errors onto the port's error kinds, by kind and code, never by message, and
//! the one way a driver call names its action ([`StoreContext`]).

use fermata_store::{ErrorKind, StoreError, StoreResult};
use sqlx::error::ErrorKind as DbErrorKind;

/// Names the action a driver call was part of (fixed words, safe identifiers: `reading a lease`)
/// and keeps the driver's error as the source, its kind mapped by [`map`].
pub(crate) trait StoreContext<T> {
    fn context(self, action: &str) -> StoreResult<T>;
}

impl<T> StoreContext<T> for Result<T, sqlx::Error> {
    fn context(self, action: &str) -> StoreResult<T> {
        self.map_err(|error| map(error, action))
    }
}

/// Maps a driver error met while doing `action` (fixed words, safe identifiers) to a store error
/// that keeps the driver error only as its source.
pub(crate) fn map(error: sqlx::Error, action: &str) -> StoreError {
    StoreError::new(kind_of(&error), action.to_owned()).with_source(error)
}

fn kind_of(error: &sqlx::Error) -> ErrorKind {
    match error {
        sqlx::Error::Database(db) => database_kind(db.as_ref()),
        sqlx::Error::RowNotFound => ErrorKind::Missing,
        sqlx::Error::ColumnDecode { .. }
        | sqlx::Error::Decode(_)
        | sqlx::Error::ColumnNotFound(_)
        | sqlx::Error::ColumnIndexOutOfBounds { .. }
        | sqlx::Error::TypeNotFound { .. } => ErrorKind::Corrupt,
        sqlx::Error::Migrate(_) => ErrorKind::Corrupt,
        // Connection trouble, pool exhaustion and protocol faults are all "try again later".
        _ => ErrorKind::Unavailable,
    }
}

fn database_kind(db: &dyn sqlx::error::DatabaseError) -> ErrorKind {
    match db.kind() {
        DbErrorKind::UniqueViolation => return ErrorKind::Conflict,
        DbErrorKind::ForeignKeyViolation
        | DbErrorKind::NotNullViolation
        | DbErrorKind::CheckViolation => return ErrorKind::Invalid,
        _ => {}
    }
    let code = db.code();
    let code = code.as_deref().unwrap_or_default();
    if db
        .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
        .is_some()
    {
        postgres_kind(code)
    } else {
        sqlite_kind(code)
    }
}

/// By SQLSTATE class: a data exception or an integrity violation is a value the store refused; a syntax or access-rule
/// violation (an undefined table or column) means the schema is not this release's; everything
/// else (connection exceptions, insufficient resources, operator intervention, system errors,
/// serialization failures, deadlocks, lock timeouts) is transient.
fn postgres_kind(sqlstate: &str) -> ErrorKind {
    match sqlstate.get(..2) {
        // Class 23 beyond the kinds above: a trigger refusing to change an immutable row.
        Some("22" | "23") => ErrorKind::Invalid,
        Some("42") => ErrorKind::Corrupt,
        _ => ErrorKind::Unavailable,
    }
}

/// By primary result code: CORRUPT and NOTADB mean the file is damaged; CONSTRAINT beyond the
/// kinds above is a trigger refusing to change an immutable row; BUSY, LOCKED, FULL and IOERR
/// are transient.
fn sqlite_kind(code: &str) -> ErrorKind {
    match sqlite_primary(code) {
        Some(11 | 26) => ErrorKind::Corrupt,
        Some(19) => ErrorKind::Invalid,
        _ => ErrorKind::Unavailable,
    }
}

/// SQLite reports its numeric result code as text; the primary code is the low byte.
fn sqlite_primary(code: &str) -> Option<i64> {
    code.parse::<i64>().ok().map(|extended| extended & 0xff)
}
