//! Discovery: which databases the snapshot account can see. System databases are removed and
//! the rest sorted by one stable rule, the binary order of the names' UTF-8 bytes (so `Zeta`
//! sorts before `alpha`, and the order never depends on a collation or a locale).

use fermata_schema_core::{DatabaseName, ErrorCode, SafeError};
use sqlx::Row;
use sqlx::mysql::MySqlConnection;

use crate::safe_context::SafeCode;
use crate::source::DriverContext;

/// The server's own databases, never part of an inventory.
pub const SYSTEM_DATABASES: [&str; 4] =
    ["information_schema", "mysql", "performance_schema", "sys"];

/// What one discovery found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovery {
    /// `VERSION()` as the server reports it.
    pub server_version: String,
    /// The visible user databases, in binary order of their UTF-8 bytes.
    pub databases: Vec<DatabaseName>,
}

/// Lists the databases `connection`'s account can see.
pub async fn discover(connection: &mut MySqlConnection) -> Result<Discovery, SafeError> {
    let version: Vec<u8> = sqlx::query_scalar("SELECT VERSION()")
        .fetch_one(&mut *connection)
        .await
        .query_context("read the server version")?;
    let server_version = String::from_utf8(version).or_code(
        ErrorCode::UnsupportedSchemaOutput,
        "read the server version",
    )?;
    let rows = sqlx::query("SHOW DATABASES")
        .fetch_all(&mut *connection)
        .await
        .query_context("list the visible databases")?;
    let mut databases = Vec::with_capacity(rows.len());
    for row in rows {
        let bytes: Vec<u8> = row
            .try_get_unchecked(0)
            .or_unreadable(|| SafeError::new(ErrorCode::UnsupportedSchemaOutput))?;
        let name = String::from_utf8(bytes)
            .or_code(ErrorCode::UnsupportedSchemaOutput, "read a database name")?;
        if SYSTEM_DATABASES.contains(&name.as_str()) {
            continue;
        }
        databases.push(
            DatabaseName::new(name)
                .or_code(ErrorCode::InvalidIdentifier, "read a database name")?,
        );
    }
    // `String`'s order is the order of its UTF-8 bytes.
    databases.sort_by(|a, b| a.as_str().as_bytes().cmp(b.as_str().as_bytes()));
    Ok(Discovery {
        server_version,
        databases,
    })
}
