//! What a safe error's message may name: a database, an operation, or an object of a database
//! with the fixed reason it is named. Names are kept exactly as the server gave them and shown in
//! backticks; reasons are fixed words, so nothing the server says gets into a message.

use std::fmt;

use serde::{Deserialize, Serialize};

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
    pub(crate) fn detail(&self) -> String {
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
