//! The one safe error of schema operations: `{stage, code, retryable, message}`.
//!
//! Nothing but fixed words and safe identifiers can get into it, by construction: a `SafeError`
//! is made from an [`ErrorCode`] (which fixes the stage, whether it is retryable, and the message
//! template) and at most one [`Subject`] (an operation ID, a database name, or a count), and its
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

/// Where in an operation the failure happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorStage {
    Authorization,
    Lock,
    Configuration,
    Connection,
    Tls,
    Permission,
    Generation,
    Metadata,
    Verification,
    Artifact,
    Review,
    Github,
    /// Posting an event to a webhook.
    Notification,
    Timeout,
    /// Fermata's own application database.
    Storage,
}

/// Every failure an operation reports, with its stage, retryability and message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// The caller is not a system administrator, or their session is not fresh.
    AccessDenied,
    /// Another refresh or verification holds the schema lease (subject: its operation).
    LeaseHeld,
    /// An administrator cleared this operation's expired lease.
    LeaseCleared,
    /// The lease expired while the operation still needed it.
    LeaseExpired,
    /// Another operation's lease expired without being released; an administrator must clear it
    /// (subject: that operation).
    LeaseNeedsClearing,
    /// The clear action named an operation that holds no lease (subject: the operation).
    LeaseNotHeld,
    /// The clear action met a lease that has not expired (subject: its operation).
    LeaseNotExpired,
    /// The clear action met a workflow run that is still active (subject: its operation).
    RunStillActive,
    /// The operation named does not exist (subject: the operation).
    OperationMissing,
    /// A request key is empty, too long or not printable ASCII.
    InvalidRequestKey,
    /// The request key was used before for a different request (subject: that operation).
    RequestKeyReused,
    /// The operation's workflow run ended or vanished before the operation did.
    RunLost,
    /// The workflow run's stored state cannot be read.
    RunUnreadable,
    /// A refresh waits while an earlier pull request is open (subject: that operation).
    PullRequestOpen,
    /// The operation published no pull request the forge knows (subject: the operation).
    PullRequestMissing,
    /// The inventory a request names is older than 24 hours.
    InventoryExpired,
    /// The inventory a request names does not exist.
    InventoryMissing,
    /// A selected database is not in the inventory (subject: the name).
    DatabaseNotInInventory,
    /// A selected database is no longer visible to the snapshot account (subject: the name).
    DatabaseNoLongerVisible,
    /// A database to verify has no merged snapshot in the package (subject: the name).
    DatabaseNotRegistered,
    /// The selection names no database.
    EmptySelection,
    /// A name is not a valid MySQL identifier.
    InvalidIdentifier,
    /// No MySQL source is configured.
    SourceNotConfigured,
    /// No package (target repository) is configured for snapshots.
    PackageNotConfigured,
    /// The configured source or its TLS settings cannot be used.
    InvalidSourceConfiguration,
    /// The server could not be reached.
    ConnectionRefused,
    /// The connection dropped or an answer never came.
    ConnectionLost,
    /// TLS negotiation or certificate verification failed.
    TlsFailed,
    /// The snapshot account's credentials were refused.
    AuthenticationFailed,
    /// The snapshot account lacks a privilege it needs (subject: the database, when one).
    PermissionDenied,
    /// The server's output cannot be represented faithfully (subject: the database).
    UnsupportedSchemaOutput,
    /// The server refused a catalog query for good: it names a column or table this server's
    /// `information_schema` does not have (subject: the database). Not retried.
    MetadataUnreadable,
    /// The server refused a catalog query with an error no other code describes (subject: the
    /// database); its number is logged. Not retried.
    QueryRefused,
    /// A query waited too long for a lock (MySQL error 1205).
    LockWaitTimeout,
    /// A query was chosen as a deadlock victim (MySQL error 1213).
    Deadlock,
    /// A query was interrupted, by `KILL QUERY` or a server shutting down (MySQL error 1317).
    QueryInterrupted,
    /// A query ran past the server's execution time limit (MySQL 3024, MariaDB 1969).
    QueryTimedOut,
    /// The snapshot differs from the live server (subject: the database).
    VerificationFailed,
    /// The schema changed while it was being snapshotted (subject: the database); trying again
    /// takes a new snapshot.
    SchemaChanged,
    /// The review artifact could not be written, read or decrypted.
    ArtifactUnavailable,
    /// A verification's drift diff is past its retention window and deleted (subject: the
    /// operation).
    DiffExpired,
    /// The review decision window passed.
    ReviewExpired,
    /// The review was rejected.
    ReviewRejected,
    /// A review decision named an operation that is not awaiting one (subject: the operation).
    ReviewNotPending,
    /// The forge refused or failed a request.
    GithubFailed,
    /// The forge asked to wait (rate limit).
    GithubRateLimited,
    /// The forge refused a request for good (credentials, permissions, a missing object, an
    /// invalid request); trying again unchanged will not help.
    GithubRefused,
    /// The forge holds a branch or pull request of this operation that is not the one
    /// publication would write.
    PublicationConflict,
    /// The base branch moved and changed what the pull request touches; the artifact is kept for
    /// a new refresh.
    BaseChanged,
    /// A re-publication named an operation whose publication has not failed (subject: the
    /// operation).
    NothingToPublish,
    /// The workflow could not be started.
    StartFailed,
    /// Whether the workflow started is unknown.
    StartUnknown,
    /// A step took longer than its limit.
    StepTimedOut,
    /// A webhook could not be reached, or answered 429 or a 5xx status.
    NotificationFailed,
    /// A webhook answered with a status that trying again will not change (a 3xx or a 4xx but
    /// 429).
    NotificationRefused,
    /// Fermata's application database could not be used for now.
    StorageUnavailable,
}

/// The name a value is serialized under (`CONNECTION_LOST`, `connection`).
fn serialized_name(value: impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        _ => unreachable!("unit variants serialize as strings"),
    }
}

impl ErrorStage {
    /// The stage's name, as sent and stored (`connection`).
    pub fn name(self) -> String {
        serialized_name(self)
    }
}

impl ErrorCode {
    /// Every code, in declaration order (`docs/schema-operations.md`'s table lists them all).
    pub const ALL: [ErrorCode; 56] = [
        ErrorCode::AccessDenied,
        ErrorCode::LeaseHeld,
        ErrorCode::LeaseCleared,
        ErrorCode::LeaseExpired,
        ErrorCode::LeaseNeedsClearing,
        ErrorCode::LeaseNotHeld,
        ErrorCode::LeaseNotExpired,
        ErrorCode::RunStillActive,
        ErrorCode::OperationMissing,
        ErrorCode::InvalidRequestKey,
        ErrorCode::RequestKeyReused,
        ErrorCode::RunLost,
        ErrorCode::RunUnreadable,
        ErrorCode::PullRequestOpen,
        ErrorCode::PullRequestMissing,
        ErrorCode::InventoryExpired,
        ErrorCode::InventoryMissing,
        ErrorCode::DatabaseNotInInventory,
        ErrorCode::DatabaseNoLongerVisible,
        ErrorCode::DatabaseNotRegistered,
        ErrorCode::EmptySelection,
        ErrorCode::InvalidIdentifier,
        ErrorCode::SourceNotConfigured,
        ErrorCode::PackageNotConfigured,
        ErrorCode::InvalidSourceConfiguration,
        ErrorCode::ConnectionRefused,
        ErrorCode::ConnectionLost,
        ErrorCode::TlsFailed,
        ErrorCode::AuthenticationFailed,
        ErrorCode::PermissionDenied,
        ErrorCode::UnsupportedSchemaOutput,
        ErrorCode::MetadataUnreadable,
        ErrorCode::QueryRefused,
        ErrorCode::LockWaitTimeout,
        ErrorCode::Deadlock,
        ErrorCode::QueryInterrupted,
        ErrorCode::QueryTimedOut,
        ErrorCode::VerificationFailed,
        ErrorCode::SchemaChanged,
        ErrorCode::ArtifactUnavailable,
        ErrorCode::DiffExpired,
        ErrorCode::ReviewExpired,
        ErrorCode::ReviewRejected,
        ErrorCode::ReviewNotPending,
        ErrorCode::GithubFailed,
        ErrorCode::GithubRateLimited,
        ErrorCode::GithubRefused,
        ErrorCode::PublicationConflict,
        ErrorCode::BaseChanged,
        ErrorCode::NothingToPublish,
        ErrorCode::StartFailed,
        ErrorCode::StartUnknown,
        ErrorCode::StepTimedOut,
        ErrorCode::NotificationFailed,
        ErrorCode::NotificationRefused,
        ErrorCode::StorageUnavailable,
    ];

    /// The code's name, as sent and stored (`CONNECTION_LOST`).
    pub fn name(self) -> String {
        serialized_name(self)
    }

    /// The code called `name` (`CONNECTION_LOST`), if there is one.
    pub fn from_name(name: &str) -> Option<ErrorCode> {
        serde_json::from_value(serde_json::Value::String(name.to_owned())).ok()
    }

    /// The stage this code belongs to.
    pub fn stage(self) -> ErrorStage {
        use ErrorCode::*;
        match self {
            AccessDenied => ErrorStage::Authorization,
            LeaseHeld | LeaseCleared | LeaseExpired | LeaseNeedsClearing | LeaseNotHeld
            | LeaseNotExpired | RunStillActive | PullRequestOpen => ErrorStage::Lock,
            PullRequestMissing => ErrorStage::Github,
            InventoryExpired
            | InventoryMissing
            | DatabaseNotInInventory
            | DatabaseNotRegistered
            | EmptySelection
            | OperationMissing
            | InvalidRequestKey
            | RequestKeyReused
            | InvalidIdentifier
            | SourceNotConfigured
            | PackageNotConfigured
            | InvalidSourceConfiguration => ErrorStage::Configuration,
            ConnectionRefused | ConnectionLost | StartFailed | StartUnknown | QueryInterrupted => {
                ErrorStage::Connection
            }
            TlsFailed => ErrorStage::Tls,
            AuthenticationFailed | PermissionDenied => ErrorStage::Permission,
            UnsupportedSchemaOutput => ErrorStage::Generation,
            MetadataUnreadable | QueryRefused | Deadlock | DatabaseNoLongerVisible => {
                ErrorStage::Metadata
            }
            VerificationFailed | SchemaChanged => ErrorStage::Verification,
            ArtifactUnavailable | DiffExpired => ErrorStage::Artifact,
            ReviewExpired | ReviewRejected | ReviewNotPending => ErrorStage::Review,
            GithubFailed | GithubRateLimited | GithubRefused | PublicationConflict
            | BaseChanged | NothingToPublish => ErrorStage::Github,
            NotificationFailed | NotificationRefused => ErrorStage::Notification,
            StepTimedOut | RunLost | LockWaitTimeout | QueryTimedOut => ErrorStage::Timeout,
            StorageUnavailable | RunUnreadable => ErrorStage::Storage,
        }
    }

    /// Whether trying again, unchanged, may succeed. Authentication, permission, identifier and
    /// unsupported-output errors are permanent and never retried.
    pub fn retryable(self) -> bool {
        use ErrorCode::*;
        matches!(
            self,
            ConnectionRefused
                | ConnectionLost
                | LockWaitTimeout
                | Deadlock
                | QueryInterrupted
                | QueryTimedOut
                | ArtifactUnavailable
                | GithubFailed
                | GithubRateLimited
                | StepTimedOut
                | NotificationFailed
                | StartUnknown
                | StorageUnavailable
                | SchemaChanged
        )
    }

    /// The message template; `{}` is the subject.
    fn template(self) -> &'static str {
        use ErrorCode::*;
        match self {
            AccessDenied => "this needs a system administrator with a fresh session",
            LeaseHeld => "another schema operation ({}) is running",
            LeaseCleared => "an administrator cleared this operation's expired lease",
            LeaseExpired => "the operation's lease expired",
            LeaseNeedsClearing => {
                "operation {} left an expired lease; an administrator must clear it"
            }
            PullRequestOpen => "the pull request of operation {} is still open",
            PullRequestMissing => "operation {} has no pull request on the forge",
            InventoryExpired => "the inventory is older than 24 hours; discover databases again",
            InventoryMissing => "the inventory does not exist",
            DatabaseNotInInventory => "database {} is not in the inventory",
            DatabaseNoLongerVisible => "database {} is no longer visible to the snapshot account",
            DatabaseNotRegistered => {
                "database {} has no merged snapshot in the package to verify against"
            }
            EmptySelection => "select at least one database",
            InvalidIdentifier => "a database name is not a valid identifier",
            SourceNotConfigured => "no MySQL source is configured",
            PackageNotConfigured => "no schema package repository is configured",
            InvalidSourceConfiguration => "the MySQL source configuration cannot be used",
            ConnectionRefused => "the MySQL server could not be reached",
            ConnectionLost => "the connection to the MySQL server was lost",
            TlsFailed => "the TLS connection to the MySQL server failed",
            AuthenticationFailed => "the snapshot account's credentials were refused",
            PermissionDenied => "the snapshot account lacks a privilege it needs{}",
            UnsupportedSchemaOutput => "the schema of database {} cannot be captured faithfully",
            MetadataUnreadable => {
                "the catalog of database {} cannot be read on this server release"
            }
            QueryRefused => "the MySQL server refused a query about database {}",
            LockWaitTimeout => "a query on the MySQL server timed out waiting for a lock",
            Deadlock => "a query on the MySQL server was ended by a deadlock",
            QueryInterrupted => "a query on the MySQL server was interrupted",
            QueryTimedOut => "a query ran past the MySQL server's execution time limit",
            VerificationFailed => "database {} differs from its snapshot",
            SchemaChanged => "the schema of database {} changed while it was snapshotted",
            ArtifactUnavailable => "the review artifact could not be stored or read",
            DiffExpired => "the drift diff of operation {} is past its retention window",
            ReviewExpired => "the review window closed without a decision",
            ReviewRejected => "the review was rejected",
            ReviewNotPending => "operation {} is not awaiting a review decision",
            GithubFailed => "the pull request could not be published",
            GithubRateLimited => "the forge asked to wait before more requests",
            GithubRefused => {
                "the forge refused the request (credentials, permissions or a missing object)"
            }
            PublicationConflict => {
                "the forge holds a branch or pull request of this operation that differs from what would be published"
            }
            BaseChanged => {
                "the base branch changed the files this pull request would touch; refresh again"
            }
            NothingToPublish => "operation {} has no failed publication to publish again",
            StartFailed => "the operation could not be started",
            StartUnknown => "whether the operation started is unknown",
            StepTimedOut => "a step took longer than allowed",
            NotificationFailed => "the webhook could not be reached or failed; it is tried again",
            NotificationRefused => "the webhook refused the event",
            StorageUnavailable => "the application database is unavailable; try again",
            LeaseNotHeld => "operation {} holds no lease",
            LeaseNotExpired => "the lease of operation {} has not expired",
            RunStillActive => "the workflow run of operation {} is still active",
            OperationMissing => "operation {} does not exist",
            InvalidRequestKey => "a request key has 1 to 100 printable ASCII characters",
            RequestKeyReused => {
                "the request key was already used for operation {}, a different request"
            }
            RunLost => "the operation's workflow run ended or vanished before the operation did",
            RunUnreadable => "the workflow run's stored state cannot be read",
        }
    }
}

/// A MySQL database name exactly as the server gave it: 1 to 64 characters, no NUL.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct DatabaseName(String);

/// A name that cannot be a MySQL database name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a database name has 1 to 64 characters and no NUL")]
pub struct InvalidDatabaseName;

impl DatabaseName {
    pub fn new(name: impl Into<String>) -> Result<Self, InvalidDatabaseName> {
        let name = name.into();
        let length = name.chars().count();
        if length == 0 || length > 64 || name.contains('\u{0}') {
            return Err(InvalidDatabaseName);
        }
        Ok(DatabaseName(name))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for DatabaseName {
    type Error = InvalidDatabaseName;

    fn try_from(name: String) -> Result<Self, InvalidDatabaseName> {
        DatabaseName::new(name)
    }
}

impl From<DatabaseName> for String {
    fn from(name: DatabaseName) -> String {
        name.0
    }
}

impl fmt::Display for DatabaseName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An object name exactly as the server gave it (a table's, a routine's, a column's): 1 to 64
/// characters, no NUL, shown in backticks.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ObjectName(String);

impl ObjectName {
    pub fn new(name: impl Into<String>) -> Result<Self, InvalidDatabaseName> {
        DatabaseName::new(name).map(|name| ObjectName(name.0))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for ObjectName {
    type Error = InvalidDatabaseName;

    fn try_from(name: String) -> Result<Self, InvalidDatabaseName> {
        ObjectName::new(name)
    }
}

impl From<ObjectName> for String {
    fn from(name: ObjectName) -> String {
        name.0
    }
}

/// `name` in backticks, a backtick in it doubled.
fn quoted(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// The kinds of schema object a message may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectKind {
    Table,
    View,
    Sequence,
    Function,
    Procedure,
    Trigger,
    Event,
}

impl ObjectKind {
    /// The kind as a message writes it (`table`).
    pub fn name(self) -> &'static str {
        match self {
            ObjectKind::Table => "table",
            ObjectKind::View => "view",
            ObjectKind::Sequence => "sequence",
            ObjectKind::Function => "function",
            ObjectKind::Procedure => "procedure",
            ObjectKind::Trigger => "trigger",
            ObjectKind::Event => "event",
        }
    }

    /// The kind in the plural, as a message names the whole kind (`tables`).
    pub fn plural(self) -> &'static str {
        match self {
            ObjectKind::Table => "tables",
            ObjectKind::View => "views",
            ObjectKind::Sequence => "sequences",
            ObjectKind::Function => "functions",
            ObjectKind::Procedure => "procedures",
            ObjectKind::Trigger => "triggers",
            ObjectKind::Event => "events",
        }
    }
}

/// Why an object is refused or cannot be read: a fixed list, so a message never carries text
/// from the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// A table type the model does not hold (a temporary or other kind of table).
    TableType,
    /// A column attribute the model does not hold.
    ColumnAttribute,
    /// A column type the model does not hold.
    ColumnType,
    /// A check constraint the catalog does not attach to a known column.
    CheckConstraint,
    /// An index the model does not hold (a vector index, a `USING HASH` long unique key).
    IndexKind,
    /// A partitioning method the model does not hold.
    PartitioningMethod,
    /// A partitioning clause the model does not hold.
    PartitioningClause,
    /// A period or versioning clause the model does not hold.
    PeriodClause,
    /// A stored program written in a language other than SQL.
    ExternalLanguage,
    /// A trigger that is not `FOR EACH ROW`.
    StatementTrigger,
    /// An event status the model does not hold.
    EventStatus,
    /// A definition that is not UTF-8 or that the catalog describes incompletely.
    UnreadableDefinition,
    /// The server's `SHOW CREATE` text says something the catalog's model does not render to.
    DefinitionMismatch,
}

impl Reason {
    /// The fixed words a message gives for the reason.
    pub fn words(self) -> &'static str {
        match self {
            Reason::TableType => "table type",
            Reason::ColumnAttribute => "column attribute",
            Reason::ColumnType => "column type",
            Reason::CheckConstraint => "check constraint",
            Reason::IndexKind => "index kind",
            Reason::PartitioningMethod => "partitioning method",
            Reason::PartitioningClause => "partitioning clause",
            Reason::PeriodClause => "period clause",
            Reason::ExternalLanguage => "body in a language other than SQL",
            Reason::StatementTrigger => "statement-level trigger",
            Reason::EventStatus => "event status",
            Reason::UnreadableDefinition => "unreadable definition",
            Reason::DefinitionMismatch => "definition the catalog does not describe exactly",
        }
    }
}

/// An object of a database, or a whole kind of them, with what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectSubject {
    pub database: DatabaseName,
    pub kind: ObjectKind,
    /// The object; none when the message is about the whole kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<ObjectName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
}

impl ObjectSubject {
    /// The object `kind` `name` of `database`, refused or unreadable for `reason`. A name that is
    /// not an identifier (which the server never gives) names the kind alone.
    pub fn named(database: &DatabaseName, kind: ObjectKind, name: &str, reason: Reason) -> Self {
        ObjectSubject {
            database: database.clone(),
            kind,
            name: ObjectName::new(name).ok(),
            reason: Some(reason),
        }
    }

    /// Every object of `kind` in `database`.
    pub fn kind(database: &DatabaseName, kind: ObjectKind) -> Self {
        ObjectSubject {
            database: database.clone(),
            kind,
            name: None,
            reason: None,
        }
    }

    /// `table `geo`: spatial index`, or `triggers` for a whole kind.
    fn detail(&self) -> String {
        let mut detail = match &self.name {
            Some(name) => format!("{} {}", self.kind.name(), quoted(name.as_str())),
            None => self.kind.plural().to_owned(),
        };
        if let Some(reason) = self.reason {
            detail.push_str(": ");
            detail.push_str(reason.words());
        }
        detail
    }
}

/// The one value a message may name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum Subject {
    /// An operation, by its UUID.
    Operation(uuid::Uuid),
    /// A database, by its exact name (shown in backticks).
    Database(DatabaseName),
    /// An object of a database (or a whole kind of them) and the fixed reason it is named: the
    /// message names the database where a database subject would, then the object and reason
    /// (``database `shop`: table `geo`: period clause``).
    Object(ObjectSubject),
}

impl Subject {
    /// The database the subject is about, if it is about one.
    pub fn database(&self) -> Option<&DatabaseName> {
        match self {
            Subject::Operation(_) => None,
            Subject::Database(name) => Some(name),
            Subject::Object(object) => Some(&object.database),
        }
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Subject::Operation(id) => write!(f, "{id}"),
            Subject::Database(name) => f.write_str(&quoted(name.as_str())),
            Subject::Object(object) => f.write_str(&quoted(object.database.as_str())),
        }
    }
}

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

    #[test]
    fn codes_fix_stage_retryability_and_message() {
        let held = SafeError::about(
            ErrorCode::LeaseHeld,
            Subject::Operation(uuid::Uuid::from_u128(7)),
        );
        assert_eq!(held.stage(), ErrorStage::Lock);
        assert!(!held.retryable());
        assert_eq!(
            held.message(),
            "another schema operation (00000000-0000-0000-0000-000000000007) is running"
        );
        let lost = SafeError::new(ErrorCode::ConnectionLost);
        assert!(lost.retryable());
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_name(&code.name()), Some(code));
        }
        assert_eq!(ErrorCode::from_name("connection_lost"), None);
        assert_eq!(
            SafeError::new(ErrorCode::LeaseHeld).message(),
            "another schema operation is running"
        );
        for permanent in [
            ErrorCode::AuthenticationFailed,
            ErrorCode::PermissionDenied,
            ErrorCode::InvalidIdentifier,
            ErrorCode::UnsupportedSchemaOutput,
        ] {
            assert!(!permanent.retryable(), "{permanent:?} is retried");
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
    fn server_refusals_have_their_own_codes() {
        for (code, stage, retryable) in [
            (ErrorCode::MetadataUnreadable, ErrorStage::Metadata, false),
            (ErrorCode::QueryRefused, ErrorStage::Metadata, false),
            (ErrorCode::LockWaitTimeout, ErrorStage::Timeout, true),
            (ErrorCode::Deadlock, ErrorStage::Metadata, true),
            (ErrorCode::QueryInterrupted, ErrorStage::Connection, true),
            (ErrorCode::QueryTimedOut, ErrorStage::Timeout, true),
        ] {
            assert_eq!(
                (code.stage(), code.retryable()),
                (stage, retryable),
                "{code:?}"
            );
        }
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
