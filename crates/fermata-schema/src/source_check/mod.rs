//! The source check: connects as the snapshot account and says, per kind of object, whether the
//! account can read every object of that kind in the databases an inventory would list, naming
//! each privilege it lacks. The minimum grants per flavor and kind are `needs`; they are the
//! table of `docs/schema-sources.md`.
//!
//! The check reads the account's grants ([`grants`]) instead of trying to read objects: a
//! missing `TRIGGER` or `EVENT` privilege, or a routine definition the account may not see,
//! does not fail a snapshot, it hides the objects from the catalog, so only the grants tell.
//! A routine's definer may read it without any grant; the check cannot know whether the account
//! defines every routine and names the grant regardless.
//!
//! Nothing secret is read into the result: no password, and no line of `SHOW GRANTS` beyond
//! the privileges and targets it grants.

mod grants;

use std::fmt::Write as _;

use fermata_schema_core::{DatabaseName, ErrorCode, SafeError};
use serde::Serialize;
use sqlx::mysql::MySqlConnection;
use sqlx::{Executor, Row};

use crate::filter::Filter;
use crate::inventory::{SYSTEM_DATABASES, discover};
use crate::safe_context::SafeCode;
use crate::snapshot::model::Flavor;
use crate::snapshot::render::identifier;
use crate::source::{DriverContext, SourceSettings};
use crate::view::printable;
use grants::Privileges;

/// The kinds of object the check reports on, in the order of its report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckedKind {
    /// Listing the databases (the inventory).
    Databases,
    Tables,
    Views,
    /// MariaDB's sequences.
    Sequences,
    /// Procedures and functions.
    Routines,
    Triggers,
    Events,
}

impl CheckedKind {
    pub fn name(self) -> &'static str {
        match self {
            CheckedKind::Databases => "databases",
            CheckedKind::Tables => "tables",
            CheckedKind::Views => "views",
            CheckedKind::Sequences => "sequences",
            CheckedKind::Routines => "routines",
            CheckedKind::Triggers => "triggers",
            CheckedKind::Events => "events",
        }
    }
}

/// Where a privilege is needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// On every object: `*.*`.
    Global,
    /// On each database checked: `` `db`.* ``.
    Database,
    /// On one table: `` `mysql`.`proc` ``.
    Table(&'static str, &'static str),
}

/// A privilege on a scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Grant {
    privilege: &'static str,
    scope: Scope,
}

/// One thing a kind needs: any of these grants (the first is the one to give).
type Need = &'static [Grant];

const fn on_database(privilege: &'static str) -> Grant {
    Grant {
        privilege,
        scope: Scope::Database,
    }
}

const fn global(privilege: &'static str) -> Grant {
    Grant {
        privilege,
        scope: Scope::Global,
    }
}

const SELECT: Need = &[on_database("SELECT")];
const SHOW_VIEW: Need = &[on_database("SHOW VIEW")];
const TRIGGER: Need = &[on_database("TRIGGER")];
const EVENT: Need = &[on_database("EVENT")];
const SHOW_DATABASES: Need = &[global("SHOW DATABASES")];
/// MariaDB shows a routine's definition to its definer and to whoever may read `mysql.proc`.
const MARIADB_ROUTINES: Need = &[Grant {
    privilege: "SELECT",
    scope: Scope::Table("mysql", "proc"),
}];
/// MySQL 8.0.20+ shows it to its definer and to holders of `SHOW_ROUTINE` or the global `SELECT`.
const MYSQL_ROUTINES: Need = &[global("SHOW_ROUTINE"), global("SELECT")];

/// The minimum grants of `kind` on a `flavor` server; `None` when the flavor has no such kind.
/// Listing databases needs `SHOW DATABASES` only where the server hides them
/// (`skip_show_database`); otherwise any privilege on a database shows it.
fn needs(flavor: Flavor, kind: CheckedKind, skip_show_database: bool) -> Option<Vec<Need>> {
    Some(match kind {
        CheckedKind::Databases if skip_show_database => vec![SHOW_DATABASES],
        CheckedKind::Databases => Vec::new(),
        CheckedKind::Tables => vec![SELECT],
        CheckedKind::Views => vec![SELECT, SHOW_VIEW],
        CheckedKind::Sequences => match flavor {
            Flavor::Mariadb => vec![SELECT],
            Flavor::Mysql => return None,
        },
        CheckedKind::Routines => vec![match flavor {
            Flavor::Mariadb => MARIADB_ROUTINES,
            Flavor::Mysql => MYSQL_ROUTINES,
        }],
        CheckedKind::Triggers => vec![TRIGGER],
        CheckedKind::Events => vec![EVENT],
    })
}

const KINDS: [CheckedKind; 7] = [
    CheckedKind::Databases,
    CheckedKind::Tables,
    CheckedKind::Views,
    CheckedKind::Sequences,
    CheckedKind::Routines,
    CheckedKind::Triggers,
    CheckedKind::Events,
];

/// A privilege the account lacks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Missing {
    /// As `GRANT` spells it (`SHOW VIEW`).
    pub privilege: &'static str,
    /// The target as `GRANT ... ON` spells it (`` `shop`.* ``, `*.*`, `` `mysql`.`proc` ``).
    pub on: String,
    /// The database it is missing on, for a database-level privilege.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database: Option<DatabaseName>,
}

/// What the check found for one kind of object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KindReport {
    pub kind: CheckedKind,
    /// Whether the account can read every object of the kind in every database checked.
    pub readable: bool,
    pub missing: Vec<Missing>,
}

/// The source check's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceCheck {
    /// `VERSION()`.
    pub server_version: String,
    pub flavor: Flavor,
    /// `CURRENT_USER()`: the account the server authenticated.
    pub account: String,
    /// The databases checked: those an inventory would list (visible, not a system database,
    /// not left out by `ignore_databases`), or, where the server will not list databases to the
    /// account, those its grants name exactly.
    pub databases: Vec<DatabaseName>,
    /// Whether the account can read everything the snapshots need.
    pub complete: bool,
    pub kinds: Vec<KindReport>,
}

impl SourceCheck {
    /// How many privileges are missing, over every kind.
    pub fn missing_count(&self) -> usize {
        self.kinds.iter().map(|kind| kind.missing.len()).sum()
    }

    /// The report for people: the server and account, then a line per kind.
    pub fn to_text(&self) -> String {
        let flavor = match self.flavor {
            Flavor::Mariadb => "MariaDB",
            Flavor::Mysql => "MySQL",
        };
        let mut text = format!(
            "server   {} ({flavor})\naccount  {}\n",
            printable(&self.server_version),
            printable(&self.account)
        );
        let names: Vec<String> = self
            .databases
            .iter()
            .map(|name| printable(&identifier(name.as_str())))
            .collect();
        let _ = writeln!(
            text,
            "checked  {} database{}{}{}",
            names.len(),
            if names.len() == 1 { "" } else { "s" },
            if names.is_empty() { "" } else { ": " },
            names.join(", ")
        );
        for kind in &self.kinds {
            let _ = write!(text, "{:<10}", kind.kind.name());
            if kind.readable {
                text.push_str("readable\n");
                continue;
            }
            let missing: Vec<String> = kind
                .missing
                .iter()
                .map(|missing| format!("{} ON {}", missing.privilege, printable(&missing.on)))
                .collect();
            let _ = write!(text, "missing {}", missing.join(", "));
            if kind.kind == CheckedKind::Routines {
                text.push_str(" (unless the account defines every routine)");
            }
            text.push('\n');
        }
        text
    }
}

/// Checks what the account of `source` can read, over the databases `filter` keeps.
pub async fn check_source(
    source: &SourceSettings,
    filter: &Filter,
) -> Result<SourceCheck, SafeError> {
    let mut connection = source.connect().await?;
    let result = check(&mut connection, filter).await;
    drop(connection);
    result
}

async fn check(
    connection: &mut MySqlConnection,
    filter: &Filter,
) -> Result<SourceCheck, SafeError> {
    let unreadable = || SafeError::new(ErrorCode::UnsupportedSchemaOutput);
    let row = sqlx::query(
        "SELECT VERSION(), CURRENT_USER(), CAST(@@GLOBAL.skip_show_database AS SIGNED), \
         CAST(CURRENT_ROLE() AS CHAR)",
    )
    .fetch_one(&mut *connection)
    .await
    .query_context("read the server and the account")?;
    let text = |index: usize| -> Result<Option<String>, SafeError> {
        let bytes: Option<Vec<u8>> = row.try_get_unchecked(index).or_unreadable(unreadable)?;
        bytes
            .map(|bytes| String::from_utf8(bytes).or_safe(unreadable))
            .transpose()
    };
    let server_version = text(0)?.ok_or_else(unreadable)?;
    let account = text(1)?.ok_or_else(unreadable)?;
    let skip_show_database = row.try_get::<i64, _>(2).or_unreadable(unreadable)? != 0;
    let roles = text(3)?;
    let flavor = Flavor::of_version(&server_version);

    let privileges = Privileges::new(grants::parse(
        &read_grants(connection, flavor, roles.as_deref()).await?,
    ));

    let visible = match discover(connection).await {
        Ok(discovery) => discovery.databases,
        // A server that hides databases from the account: check those its grants name.
        Err(error) if error.code() == ErrorCode::PermissionDenied => privileges
            .named_databases()
            .into_iter()
            .filter(|name| !SYSTEM_DATABASES.contains(&name.as_str()))
            .filter_map(|name| DatabaseName::new(name).ok())
            .collect(),
        Err(error) => return Err(error),
    };
    let databases: Vec<DatabaseName> = visible
        .into_iter()
        .filter(|name| !filter.ignores_database(name.as_str()))
        .collect();

    let mut kinds = Vec::new();
    for kind in KINDS {
        let Some(needs) = needs(flavor, kind, skip_show_database) else {
            continue;
        };
        let mut missing = Vec::new();
        for need in needs {
            missing.extend(unmet(&privileges, need, &databases));
        }
        if kind == CheckedKind::Databases && databases.is_empty() {
            // Nothing to snapshot: every kind below is vacuously readable, which says nothing.
            missing.push(Missing {
                privilege: "SELECT",
                on: "each database to snapshot".to_owned(),
                database: None,
            });
        }
        kinds.push(KindReport {
            kind,
            readable: missing.is_empty(),
            missing,
        });
    }
    Ok(SourceCheck {
        server_version,
        flavor,
        account,
        complete: kinds.iter().all(|kind| kind.readable),
        databases,
        kinds,
    })
}

/// The grants `need` lacks: none when any of its grants is held (on every database, for a
/// database-level one); else its first grant, on each database it is missing on.
fn unmet(privileges: &Privileges, need: Need, databases: &[DatabaseName]) -> Vec<Missing> {
    let held = |grant: &Grant, database: Option<&DatabaseName>| match (grant.scope, database) {
        (Scope::Global, _) => privileges.global(grant.privilege),
        (Scope::Table(database, table), _) => privileges.on_table(grant.privilege, database, table),
        (Scope::Database, Some(database)) => {
            privileges.on_database(grant.privilege, database.as_str())
        }
        (Scope::Database, None) => true,
    };
    let Some(first) = need.first() else {
        return Vec::new();
    };
    match first.scope {
        Scope::Database => databases
            .iter()
            .filter(|database| !need.iter().any(|grant| held(grant, Some(database))))
            .map(|database| Missing {
                privilege: first.privilege,
                on: format!("{}.*", identifier(database.as_str())),
                database: Some(database.clone()),
            })
            .collect(),
        Scope::Global | Scope::Table(..) => {
            if need.iter().any(|grant| held(grant, None)) {
                Vec::new()
            } else {
                vec![Missing {
                    privilege: first.privilege,
                    on: match first.scope {
                        Scope::Table(database, table) => {
                            format!("{}.{}", identifier(database), identifier(table))
                        }
                        _ => "*.*".to_owned(),
                    },
                    database: None,
                }]
            }
        }
    }
}

/// The lines of `SHOW GRANTS` for the account and its active roles. MariaDB includes the
/// current role's grants by itself; MySQL does when asked `USING` its active roles, which
/// `CURRENT_ROLE()` lists (`NONE` when there are none).
async fn read_grants(
    connection: &mut MySqlConnection,
    flavor: Flavor,
    roles: Option<&str>,
) -> Result<Vec<String>, SafeError> {
    let statement = match (flavor, roles) {
        (Flavor::Mysql, Some(roles)) if roles != "NONE" && is_role_list(roles) => {
            format!("SHOW GRANTS FOR CURRENT_USER() USING {roles}")
        }
        _ => "SHOW GRANTS".to_owned(),
    };
    // The text protocol: `SHOW GRANTS ... USING` cannot be prepared on every release.
    let rows = connection
        .fetch_all(statement.as_str())
        .await
        .query_context("read the account's grants")?;
    let unreadable = || SafeError::new(ErrorCode::UnsupportedSchemaOutput);
    rows.iter()
        .map(|row| {
            let bytes: Vec<u8> = row.try_get_unchecked(0).or_unreadable(unreadable)?;
            String::from_utf8(bytes).or_safe(unreadable)
        })
        .collect()
}

/// Whether `text` is a list of quoted role names as MySQL's `CURRENT_ROLE()` gives it
/// (`` `r1`@`%`,`r2`@`localhost` ``), so it can be given back in a statement as it is.
fn is_role_list(text: &str) -> bool {
    let mut rest = text;
    loop {
        for part in 0..2 {
            let Some(after) = rest.strip_prefix('`') else {
                return false;
            };
            let mut end = None;
            let bytes = after.as_bytes();
            let mut at = 0;
            while at < bytes.len() {
                if bytes[at] == b'`' {
                    if bytes.get(at + 1) == Some(&b'`') {
                        at += 2;
                        continue;
                    }
                    end = Some(at);
                    break;
                }
                at += 1;
            }
            let Some(end) = end else {
                return false;
            };
            rest = &after[end + 1..];
            if part == 0 {
                let Some(after) = rest.strip_prefix('@') else {
                    return false;
                };
                rest = after;
            }
        }
        match rest.strip_prefix(',') {
            Some(after) => rest = after,
            None => return rest.is_empty(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_lists_are_recognized_before_they_are_used() {
        assert!(is_role_list("`r1`@`%`"));
        assert!(is_role_list("`r1`@`%`,`a``b`@`localhost`"));
        assert!(!is_role_list("NONE"));
        assert!(!is_role_list("`r1`@`%`; DROP TABLE t"));
        assert!(!is_role_list("`r1`"));
        assert!(!is_role_list(""));
    }

    #[test]
    fn each_flavor_has_its_minimum_grants() {
        assert_eq!(needs(Flavor::Mysql, CheckedKind::Sequences, false), None);
        assert_eq!(
            needs(Flavor::Mariadb, CheckedKind::Databases, false),
            Some(Vec::new())
        );
        assert_eq!(
            needs(Flavor::Mariadb, CheckedKind::Databases, true),
            Some(vec![SHOW_DATABASES])
        );
        assert_eq!(
            needs(Flavor::Mysql, CheckedKind::Routines, false),
            Some(vec![MYSQL_ROUTINES])
        );
    }

    #[test]
    fn a_need_names_its_first_grant_on_each_database_it_lacks() {
        let privileges = Privileges::new(grants::parse(&[
            "GRANT SELECT ON `a`.* TO `u`@`%`".to_owned(),
            "GRANT SELECT ON *.* TO `u`@`%`".to_owned(),
        ]));
        let databases = [
            DatabaseName::new("a").unwrap(),
            DatabaseName::new("b").unwrap(),
        ];
        assert!(unmet(&privileges, SELECT, &databases).is_empty());
        let missing = unmet(&privileges, SHOW_VIEW, &databases);
        assert_eq!(
            missing.iter().map(|m| m.on.as_str()).collect::<Vec<_>>(),
            ["`a`.*", "`b`.*"]
        );
        // MySQL's routines: the global SELECT is enough.
        assert!(unmet(&privileges, MYSQL_ROUTINES, &databases).is_empty());
        assert!(unmet(&privileges, MARIADB_ROUTINES, &databases).is_empty());
        let narrow = Privileges::new(grants::parse(&[
            "GRANT SELECT ON `a`.* TO `u`@`%`".to_owned()
        ]));
        assert_eq!(
            unmet(&narrow, MYSQL_ROUTINES, &databases),
            vec![Missing {
                privilege: "SHOW_ROUTINE",
                on: "*.*".to_owned(),
                database: None
            }]
        );
        assert_eq!(
            unmet(&narrow, MARIADB_ROUTINES, &databases)[0].on,
            "`mysql`.`proc`"
        );
    }
}
