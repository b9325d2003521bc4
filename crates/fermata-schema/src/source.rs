//! The MySQL source: its settings (host, port, snapshot account, password, TLS mode and CA file),
//! opening a connection with them, and what a failure of the MySQL driver means. Connection, TLS,
//! authentication and permission failures become safe errors with their stage and code.
//!
//! This is the one place outside the SQL adapter (`fermata-store-sql`) that names a sqlx type,
//! and the one true exception to that rule: the source is a MySQL or MariaDB server Fermata only
//! reads, through sqlx's MySQL driver, and nothing in it is Fermata's own storage, so it has no
//! business behind the storage port. The exception stays inside this crate: `sqlx` appears in
//! this module, the introspection modules that query the source ([`crate::inventory`],
//! [`crate::snapshot`] and the connections of a step), and nowhere in a public signature but
//! [`SourceSettings::connect`] and the functions that read through its connection.
//!
//! A driver failure is mapped by its kind and MySQL's error number, never by its text
//! ([`query_error`]), and its cause is kept as a [`DriverFailure`]: the class of failure, the
//! error number and the SQLSTATE, without the driver's or the server's text. That text names
//! the snapshot account and the host and can quote SQL, so unlike other causes it never reaches
//! even the operator's log.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use fermata_schema_core::{DatabaseName, ErrorCode, SafeError, Subject};
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection, MySqlDatabaseError, MySqlSslMode};
use sqlx::{ConnectOptions, Connection};
use zeroize::Zeroizing;

use crate::safe_context::{because, caused, safe};

/// How long opening a connection may take before the server counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// TLS to the source, with MySQL's own names for the modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsMode {
    /// Plain TCP.
    Disabled,
    /// TLS when the server offers it, plain otherwise.
    #[default]
    Preferred,
    /// TLS or nothing, without checking the certificate.
    Required,
    /// TLS with a certificate signed by the configured CA, any host name. Refused by
    /// [`SourceSettings::validate`]: see there.
    VerifyCa,
    /// TLS with a certificate for the host, signed by the configured CA or a public web root.
    VerifyIdentity,
}

impl TlsMode {
    pub const NAMES: &'static str = "disabled, preferred, required, verify_ca or verify_identity";

    fn ssl_mode(self) -> MySqlSslMode {
        match self {
            TlsMode::Disabled => MySqlSslMode::Disabled,
            TlsMode::Preferred => MySqlSslMode::Preferred,
            TlsMode::Required => MySqlSslMode::Required,
            TlsMode::VerifyCa => MySqlSslMode::VerifyCa,
            TlsMode::VerifyIdentity => MySqlSslMode::VerifyIdentity,
        }
    }

    /// Whether the mode checks the server's certificate (and so needs a CA file).
    pub fn verifies(self) -> bool {
        matches!(self, TlsMode::VerifyCa | TlsMode::VerifyIdentity)
    }
}

impl FromStr for TlsMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "disabled" => Ok(TlsMode::Disabled),
            "preferred" => Ok(TlsMode::Preferred),
            "required" => Ok(TlsMode::Required),
            "verify_ca" => Ok(TlsMode::VerifyCa),
            "verify_identity" => Ok(TlsMode::VerifyIdentity),
            _ => Err(format!("expected {}", TlsMode::NAMES)),
        }
    }
}

/// Where the snapshot account connects. `Debug` never shows the password.
#[derive(Clone)]
pub struct SourceSettings {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: Zeroizing<String>,
    pub tls: TlsMode,
    /// The CA certificate file for `verify_ca` and `verify_identity`.
    pub ca_file: Option<PathBuf>,
}

impl fmt::Debug for SourceSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceSettings")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .field("tls", &self.tls)
            .field("ca_file", &self.ca_file)
            .finish()
    }
}

impl SourceSettings {
    /// Checks what can be checked before connecting; the problem is named without any value.
    pub fn validate(&self) -> Result<(), String> {
        if self.host.trim().is_empty() {
            return Err("`host` is empty".to_owned());
        }
        if self.port == 0 {
            return Err("`port` must be 1 to 65535".to_owned());
        }
        if self.user.is_empty() || self.user.chars().count() > 80 {
            return Err("`user` must have 1 to 80 characters".to_owned());
        }
        if self.tls == TlsMode::VerifyCa {
            // The TLS stack adds the configured CA to the public web roots, and `verify_ca` does
            // not check the host name, so any publicly trusted certificate for any name would
            // pass: that is no verification at all.
            return Err(
                "`tls` verify_ca is refused: it would accept any publicly trusted certificate; use verify_identity"
                    .to_owned(),
            );
        }
        match (&self.ca_file, self.tls.verifies()) {
            (None, true) => Err("`tls` verify_ca and verify_identity need `ca_file`".to_owned()),
            (Some(path), _) if !path.is_file() => {
                Err("`ca_file` is not a readable file".to_owned())
            }
            _ => Ok(()),
        }
    }

    /// Opens a connection as the snapshot account.
    pub async fn connect(&self) -> Result<MySqlConnection, SafeError> {
        self.validate()
            .map_err(|problem| because(ErrorCode::InvalidSourceConfiguration, problem))?;
        let mut options = MySqlConnectOptions::new()
            .host(&self.host)
            .port(self.port)
            .username(&self.user)
            .password(&self.password)
            .ssl_mode(self.tls.ssl_mode())
            .charset("utf8mb4")
            .disable_statement_logging();
        if let Some(ca_file) = &self.ca_file {
            options = options.ssl_ca(ca_file);
        }
        match tokio::time::timeout(CONNECT_TIMEOUT, MySqlConnection::connect_with(&options)).await {
            Ok(Ok(connection)) => Ok(connection),
            Ok(Err(error)) => Err(safe(
                connect_code(&error),
                "connect to the source",
                DriverFailure::of(&error),
            )),
            Err(_) => Err(because(
                ErrorCode::ConnectionLost,
                "connecting to the source timed out",
            )),
        }
    }
}

/// What a failure to connect means for the operator.
fn connect_code(error: &sqlx::Error) -> ErrorCode {
    match error {
        sqlx::Error::Io(_) => ErrorCode::ConnectionRefused,
        sqlx::Error::Tls(_) => ErrorCode::TlsFailed,
        sqlx::Error::Configuration(_) => ErrorCode::InvalidSourceConfiguration,
        _ => query_code(error),
    }
}

/// The safe error a failure on an open connection is, with the driver's failure as its cause
/// (see [`query_code`]).
pub(crate) fn query_error(error: &sqlx::Error, action: &'static str) -> SafeError {
    safe(query_code(error), action, DriverFailure::of(error))
}

/// [`query_error`] about `database`.
pub(crate) fn query_error_about(
    error: &sqlx::Error,
    action: &'static str,
    database: &DatabaseName,
) -> SafeError {
    caused(
        SafeError::about(query_code(error), Subject::Database(database.clone())),
        action,
        DriverFailure::of(error),
    )
}

/// How a failure of the MySQL driver becomes a safe error, naming the action and keeping what
/// may be kept of the failure ([`DriverFailure`]) as the cause.
pub(crate) trait DriverContext<T> {
    /// A failed statement: the safe error [`query_code`] makes of it.
    fn query_context(self, action: &'static str) -> Result<T, SafeError>;

    /// A failed statement about `database`: the same code, about the database.
    fn query_context_about(
        self,
        action: &'static str,
        database: &DatabaseName,
    ) -> Result<T, SafeError>;

    /// A value the server sent that cannot be read: the safe error `error` makes (usually
    /// `UNSUPPORTED_SCHEMA_OUTPUT` about the database or the object).
    fn or_unreadable(self, error: impl FnOnce() -> SafeError) -> Result<T, SafeError>;
}

impl<T> DriverContext<T> for Result<T, sqlx::Error> {
    fn query_context(self, action: &'static str) -> Result<T, SafeError> {
        self.map_err(|error| query_error(&error, action))
    }

    fn query_context_about(
        self,
        action: &'static str,
        database: &DatabaseName,
    ) -> Result<T, SafeError> {
        self.map_err(|error| query_error_about(&error, action, database))
    }

    fn or_unreadable(self, error: impl FnOnce() -> SafeError) -> Result<T, SafeError> {
        self.map_err(|driver| error().with_source(DriverFailure::of(&driver)))
    }
}

/// What the log may know of a MySQL driver error: its class, and MySQL's error number and the
/// SQLSTATE when the server answered. Never its text (see the module documentation).
#[derive(Debug)]
pub(crate) struct DriverFailure {
    class: &'static str,
    number: Option<u16>,
    sqlstate: Option<String>,
    io: Option<std::io::ErrorKind>,
}

impl DriverFailure {
    pub(crate) fn of(error: &sqlx::Error) -> Self {
        let class = match error {
            sqlx::Error::Configuration(_) => "its configuration was refused",
            sqlx::Error::Database(_) => "the server refused a statement",
            sqlx::Error::Io(_) => "the connection failed",
            sqlx::Error::Tls(_) => "TLS failed",
            sqlx::Error::Protocol(_) => "the server broke the protocol",
            sqlx::Error::RowNotFound => "no row came back",
            sqlx::Error::ColumnIndexOutOfBounds { .. } | sqlx::Error::ColumnNotFound(_) => {
                "a column is missing"
            }
            sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => {
                "a value could not be decoded"
            }
            _ => "it failed",
        };
        DriverFailure {
            class,
            number: mysql_error_number(error),
            sqlstate: error
                .as_database_error()
                .and_then(|database| database.code())
                .map(|code| {
                    code.chars()
                        .filter(char::is_ascii_alphanumeric)
                        .take(5)
                        .collect()
                }),
            io: match error {
                sqlx::Error::Io(io) => Some(io.kind()),
                _ => None,
            },
        }
    }
}

impl fmt::Display for DriverFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the MySQL driver: {}", self.class)?;
        if let Some(number) = self.number {
            write!(f, " (MySQL error {number})")?;
        }
        if let Some(sqlstate) = &self.sqlstate {
            write!(f, " (SQLSTATE {sqlstate})")?;
        }
        if let Some(io) = self.io {
            write!(f, " ({io})")?;
        }
        Ok(())
    }
}

impl std::error::Error for DriverFailure {}

/// What a failure on an open connection means. A server error goes by its number, one by one
/// ([`server_error_code`]), and an unknown number is the permanent `QUERY_REFUSED` (never a lost
/// connection, which would be retried); a driver error goes by its kind: output that does not
/// decode is unsupported, a broken or closed connection is lost (and may be retried).
pub(crate) fn query_code(error: &sqlx::Error) -> ErrorCode {
    if let Some(number) = mysql_error_number(error) {
        return server_error_code(number);
    }
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => ErrorCode::ConnectionLost,
        sqlx::Error::Tls(_) => ErrorCode::TlsFailed,
        sqlx::Error::Configuration(_) => ErrorCode::InvalidSourceConfiguration,
        sqlx::Error::RowNotFound
        | sqlx::Error::TypeNotFound { .. }
        | sqlx::Error::ColumnIndexOutOfBounds { .. }
        | sqlx::Error::ColumnNotFound(_)
        | sqlx::Error::ColumnDecode { .. }
        | sqlx::Error::Decode(_) => ErrorCode::UnsupportedSchemaOutput,
        _ => ErrorCode::QueryRefused,
    }
}

/// The code of the server error `number` (the numbers of MySQL and MariaDB agree where both have
/// one).
pub(crate) fn server_error_code(number: u16) -> ErrorCode {
    match number {
        // ER_ACCESS_DENIED_ERROR, ER_ACCESS_DENIED_NO_PASSWORD_ERROR, ER_HOST_NOT_PRIVILEGED,
        // ER_HOST_IS_BLOCKED, ER_NOT_SUPPORTED_AUTH_MODE, ER_MUST_CHANGE_PASSWORD,
        // ER_MUST_CHANGE_PASSWORD_LOGIN, ER_ACCOUNT_HAS_BEEN_LOCKED (MySQL 3118, MariaDB 4151):
        // the account cannot log in, and trying again will not change that.
        1045 | 1698 | 1130 | 1129 | 1251 | 1820 | 1862 | 3118 | 4151 => {
            ErrorCode::AuthenticationFailed
        }
        // ER_CON_COUNT_ERROR, ER_TOO_MANY_USER_CONNECTIONS: the server is full for now.
        1040 | 1203 => ErrorCode::ConnectionRefused,
        // ER_DBACCESS_DENIED_ERROR, ER_TABLEACCESS_DENIED_ERROR, ER_COLUMNACCESS_DENIED_ERROR,
        // ER_SPECIFIC_ACCESS_DENIED_ERROR, ER_PROCACCESS_DENIED_ERROR, ER_VIEW_NO_EXPLAIN (a view
        // over tables the account may not read)
        1044 | 1142 | 1143 | 1227 | 1370 | 1345 => ErrorCode::PermissionDenied,
        // ER_BAD_FIELD_ERROR, ER_NO_SUCH_TABLE, ER_UNKNOWN_TABLE: the query names a column or
        // table this server does not have; asking again gets the same answer.
        1054 | 1146 | 1109 => ErrorCode::MetadataUnreadable,
        // ER_LOCK_WAIT_TIMEOUT
        1205 => ErrorCode::LockWaitTimeout,
        // ER_LOCK_DEADLOCK
        1213 => ErrorCode::Deadlock,
        // ER_QUERY_INTERRUPTED
        1317 => ErrorCode::QueryInterrupted,
        // MySQL's ER_QUERY_TIMEOUT (max_execution_time), MariaDB's ER_STATEMENT_TIMEOUT
        // (max_statement_time)
        3024 | 1969 => ErrorCode::QueryTimedOut,
        // ER_SERVER_SHUTDOWN, ER_ABORTING_CONNECTION, ER_NET_READ_ERROR, ER_NET_READ_INTERRUPTED,
        // ER_NET_ERROR_ON_WRITE, ER_NET_WRITE_INTERRUPTED, MariaDB's ER_CONNECTION_KILLED, MySQL's
        // ER_CLIENT_INTERACTION_TIMEOUT: the connection is going or gone.
        1053 | 1152 | 1158 | 1159 | 1160 | 1161 | 1927 | 4031 => ErrorCode::ConnectionLost,
        _ => ErrorCode::QueryRefused,
    }
}

/// The number of the error the server answered with (`1146`), when it answered with one.
pub(crate) fn mysql_error_number(error: &sqlx::Error) -> Option<u16> {
    error
        .as_database_error()
        .and_then(|database| database.try_downcast_ref::<MySqlDatabaseError>())
        .map(MySqlDatabaseError::number)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_are_mapped_by_number() {
        for (number, code) in [
            (1054, ErrorCode::MetadataUnreadable),
            (1146, ErrorCode::MetadataUnreadable),
            (1109, ErrorCode::MetadataUnreadable),
            (1205, ErrorCode::LockWaitTimeout),
            (1213, ErrorCode::Deadlock),
            (1317, ErrorCode::QueryInterrupted),
            (3024, ErrorCode::QueryTimedOut),
            (1969, ErrorCode::QueryTimedOut),
            (1142, ErrorCode::PermissionDenied),
            (1370, ErrorCode::PermissionDenied),
            (1045, ErrorCode::AuthenticationFailed),
            (1927, ErrorCode::ConnectionLost),
            (1064, ErrorCode::QueryRefused),
            (9999, ErrorCode::QueryRefused),
        ] {
            assert_eq!(server_error_code(number), code, "{number}");
        }
        for number in [1054, 1146, 1109] {
            let code = server_error_code(number);
            assert!(!code.retryable());
            assert_ne!(code.stage(), fermata_schema_core::ErrorStage::Connection);
        }
    }
}
