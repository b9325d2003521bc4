//! The structured model of a database's schema, as read from `information_schema`: what the
//! canonical files are rendered from and what `schema.json` holds. Names are kept exactly;
//! collections are sorted by the binary order of their names' UTF-8 bytes, except columns and
//! index parts, whose order is meaningful.

use serde::{Deserialize, Serialize};

/// One database's tables and views (routines, triggers, events and sequences come later).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatabaseModel {
    pub name: String,
    pub default_charset: String,
    pub default_collation: String,
    pub tables: Vec<Table>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub views: Vec<View>,
}

/// A view. Its canonical file leaves the definer out (whoever applies the file becomes it); the
/// model keeps it, so a changed definer still changes the snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct View {
    pub name: String,
    /// The `SELECT`, as the server prints it, without this database's qualifier.
    pub definition: String,
    pub algorithm: String,
    pub security: String,
    /// `NONE`, `CASCADED` or `LOCAL`.
    pub check_option: String,
    pub definer: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Table {
    pub name: String,
    pub engine: String,
    pub charset: String,
    pub collation: String,
    /// `ROW_FORMAT=...` when it was given explicitly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_format: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub comment: String,
    pub columns: Vec<Column>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub indexes: Vec<Index>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub foreign_keys: Vec<ForeignKey>,
    /// Table-level check constraints (column-level ones belong to their column).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<Check>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Column {
    pub name: String,
    /// The type exactly as the server reports it (`bigint(20) unsigned`, `enum('a','b')`).
    #[serde(rename = "type")]
    pub column_type: String,
    pub nullable: bool,
    /// The default as an SQL expression (`NULL`, `'x'`, `0.00`, `current_timestamp()`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_update: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub auto_increment: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub invisible: bool,
    /// Character set and collation, for character columns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charset: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collation: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated: Option<Generated>,
    /// A check constraint declared on the column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub comment: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Generated {
    pub expression: String,
    pub stored: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IndexKind {
    Primary,
    Unique,
    Key,
    Fulltext,
    Spatial,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Index {
    pub name: String,
    pub kind: IndexKind,
    pub parts: Vec<IndexPart>,
    /// `USING HASH` and the like, when the server prints it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub using: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub comment: String,
    /// MariaDB's ignored indexes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ignored: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexPart {
    pub column: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<u32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub descending: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForeignKey {
    pub name: String,
    pub columns: Vec<String>,
    /// The referenced database, when it is not this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub referenced_database: Option<String>,
    pub referenced_table: String,
    pub referenced_columns: Vec<String>,
    pub on_delete: String,
    pub on_update: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    pub clause: String,
}
