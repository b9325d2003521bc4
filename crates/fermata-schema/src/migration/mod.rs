//! Migration scripts: the DDL that turns one database's schema into another's, computed from the
//! two models ([`plan`]), in the spelling of the server they were read from.
//!
//! A drifted database gets two: **undo** (live → merged snapshot, to put the server back) and
//! **adopt** (merged snapshot → live, the migration that produced the drift). A refresh's review
//! gets the same pair per changed database, the candidate standing for the live schema.
//!
//! What a plan holds, in the order it runs (see [`plan`]): a prelude that saves the session's
//! `sql_mode` and time zone and sets the introspection ones (the models' defaults and times are
//! written under them); the database's default character set; drops of the views, routines,
//! triggers and events that go or change where the server cannot replace them; sequences; per
//! table, foreign keys, checks and the generated columns in the way dropped (see `tables.rs`),
//! partitioning removed where it must be, the destructive `ALTER TABLE` (columns dropped, types
//! narrowed), new tables, the other `ALTER TABLE` (columns added, modified and moved, indexes,
//! checks, periods, options, system versioning), partitioning, tables dropped; foreign keys added
//! once every table exists; routines, views (each after the views it reads, under the
//! introspection `sql_mode`), triggers (a changed table, timing and event group dropped and
//! created again in its action order) and events, each stored program under the `sql_mode` (and
//! an event under the time zone) it was created with; and the session restored.
//!
//! Nothing is guessed: an object or a column that is in one model only is dropped or added, and
//! when a table or column is dropped beside one that is added, the script notes that a rename is
//! never guessed. A statement that loses data (a table, sequence or column dropped, a type
//! narrowed, `NOT NULL` added, system versioning dropped, a sequence replaced or restarted) is
//! marked destructive with the reason; [`Script::text`] leaves those out unless asked. The
//! workspace verifier ([`crate::snapshot::verify_script`]) runs the whole script, destructive
//! statements included, against the "from" schema and requires the "to" one back; its verdict is
//! [`Script::verification`].

mod programs;
mod tables;
mod widening;

use serde::{Deserialize, Serialize};

use crate::snapshot::model::{DatabaseModel, Flavor};
use crate::snapshot::render::identifier;
use crate::snapshot::{DatabaseSnapshot, SQL_MODE, TIME_ZONE, set_session, verify_script};
use crate::source::SourceSettings;

/// Which way a script goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Live → merged snapshot: puts the server back as the package says.
    Undo,
    /// Merged snapshot → live: the migration that produced the change.
    Adopt,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Undo => "undo",
            Direction::Adopt => "adopt",
        }
    }

    pub fn parse(text: &str) -> Option<Direction> {
        match text {
            "undo" => Some(Direction::Undo),
            "adopt" => Some(Direction::Adopt),
            _ => None,
        }
    }
}

/// One statement of a script.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Statement {
    /// The statement as shown, without a terminator.
    pub sql: String,
    /// Why it loses data, when it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive: Option<String>,
    /// The `DEFINER=...` clause `sql` holds: the workspace, whose account may not set another
    /// definer, runs the statement without it (definers are not compared there, as for a
    /// refresh).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definer_clause: Option<String>,
    /// A stored program, whose body may hold `;`: shown between `DELIMITER` lines.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub compound: bool,
}

impl Statement {
    pub(crate) fn new(sql: String) -> Statement {
        Statement {
            sql,
            destructive: None,
            definer_clause: None,
            compound: false,
        }
    }

    pub(crate) fn destructive(sql: String, reason: String) -> Statement {
        Statement {
            destructive: Some(reason),
            ..Statement::new(sql)
        }
    }

    /// The statement as the workspace runs it: without its definer clause.
    pub fn applied(&self) -> String {
        match &self.definer_clause {
            Some(clause) => self.sql.replacen(&format!("{clause} "), "", 1),
            None => self.sql.clone(),
        }
    }
}

/// What the workspace verifier said of a script.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Verification {
    /// Applied in a scratch schema holding the "from" schema, it gave the "to" one exactly.
    Verified,
    /// It did not: why (a statement the workspace refused, or what differs afterwards).
    Failed { reason: String },
    /// No workspace server is configured, or it could not be reached.
    Unverified { reason: String },
}

impl Verification {
    /// The verdict in words, the reason after it: `verified`, `NOT verified: <reason>` or
    /// `unverified: <reason>`.
    pub fn describe(&self) -> String {
        match self {
            Verification::Verified => "verified".to_owned(),
            Verification::Failed { reason } => format!("NOT verified: {reason}"),
            Verification::Unverified { reason } => format!("unverified: {reason}"),
        }
    }
}

/// The DDL from one schema to another, and what the workspace said of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Script {
    pub direction: Direction,
    pub flavor: Flavor,
    /// Every statement, destructive ones included, in the order they run; none when the two
    /// schemas are the same.
    pub statements: Vec<Statement>,
    /// What the reader should know: renames that were not guessed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    pub verification: Verification,
}

/// Both scripts between a database's live schema (or a refresh's candidate) and its merged
/// snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Migration {
    /// Live → merged.
    pub undo: Script,
    /// Merged → live.
    pub adopt: Script,
}

impl Migration {
    /// The script that goes `direction`.
    pub fn script(&self, direction: Direction) -> &Script {
        match direction {
            Direction::Undo => &self.undo,
            Direction::Adopt => &self.adopt,
        }
    }

    /// Both scripts between `live` and `merged`, each verified in `workspace` when one is
    /// configured (an empty script needs no workspace), the two at once. `source_version` is `VERSION()` of the
    /// server `live` was read from.
    pub async fn verified(
        live: &DatabaseSnapshot,
        merged: &DatabaseSnapshot,
        workspace: Option<&SourceSettings>,
        source_version: &str,
    ) -> Migration {
        let mut undo = plan(&live.model, &merged.model, Direction::Undo);
        let mut adopt = plan(&merged.model, &live.model, Direction::Adopt);
        let verify = |script, from, to| async move {
            match workspace {
                _ if Script::is_empty(script) => Verification::Verified,
                None => Verification::Unverified {
                    reason: "no verification workspace is configured ([schema.workspace])"
                        .to_owned(),
                },
                Some(workspace) => verify_script(workspace, from, script, to, source_version).await,
            }
        };
        // Each in a scratch schema of its own, at once.
        let (undone, adopted) =
            tokio::join!(verify(&undo, live, merged), verify(&adopt, merged, live));
        (undo.verification, adopt.verification) = (undone, adopted);
        Migration { undo, adopt }
    }
}

/// The statements of one phase of a plan, in order.
type Phase = Vec<Statement>;

/// The script that turns `from` into `to` (one database's two models, of one flavor),
/// unverified.
pub fn plan(from: &DatabaseModel, to: &DatabaseModel, direction: Direction) -> Script {
    let flavor = to.flavor;
    let mut notes = Vec::new();
    let tables = tables::plan(from, to, flavor, &mut notes);
    let programs = programs::plan(from, to, flavor);
    let mut body: Phase = Vec::new();
    if (&from.default_charset, &from.default_collation)
        != (&to.default_charset, &to.default_collation)
    {
        body.push(Statement::new(format!(
            "ALTER DATABASE CHARACTER SET {} COLLATE {}",
            to.default_charset, to.default_collation
        )));
    }
    for phase in [
        programs.drops,
        programs.sequences,
        tables.constraint_drops,
        tables.unpartitioned,
        tables.destructive,
        tables.created,
        tables.altered,
        tables.partitioned,
        tables.dropped,
        programs.sequence_drops,
        tables.foreign_key_adds,
        programs.creates,
    ] {
        body.extend(phase);
    }
    let mut statements = Vec::new();
    if !body.is_empty() {
        statements.push(Statement::new(
            "SET @fermata_sql_mode = @@SESSION.sql_mode, @fermata_time_zone = @@SESSION.time_zone"
                .to_owned(),
        ));
        statements.push(Statement::new(set_session(SQL_MODE, TIME_ZONE)));
        if tables.alters_versioned {
            statements.push(Statement::new(
                "SET SESSION system_versioning_alter_history = KEEP".to_owned(),
            ));
        }
        statements.extend(body);
        statements.push(Statement::new(
            "SET SESSION sql_mode = @fermata_sql_mode, time_zone = @fermata_time_zone".to_owned(),
        ));
    }
    Script {
        direction,
        flavor,
        statements,
        notes,
        verification: Verification::Unverified {
            reason: "not verified yet".to_owned(),
        },
    }
}

impl Script {
    /// Whether the two schemas were the same.
    pub fn is_empty(&self) -> bool {
        self.statements.is_empty()
    }

    /// The script in a few words: `3 statements, verified`, or that there is nothing to do.
    pub fn summary(&self) -> String {
        let count = self.statements.len();
        if count == 0 {
            return "nothing to do: the two schemas are the same".to_owned();
        }
        format!(
            "{count} statement{}, {}",
            plural(count),
            self.verification.describe()
        )
    }

    /// How many statements lose data.
    pub fn destructive_count(&self) -> usize {
        self.statements
            .iter()
            .filter(|statement| statement.destructive.is_some())
            .count()
    }

    /// The script as a file the `mysql`/`mariadb` client runs, for `database`: a header saying
    /// what it does and what the workspace said, its notes, a `USE` of the database, then each
    /// statement (destructive ones only when `allow_destructive`, each after a comment saying what
    /// it loses). Names and reasons in comments are made single-line ([`comment`]).
    pub fn text(&self, database: &str, allow_destructive: bool) -> String {
        let (from, to) = match self.direction {
            Direction::Undo => ("the live schema", "the merged snapshot"),
            Direction::Adopt => ("the merged snapshot", "the live schema"),
        };
        let spelling = match self.flavor {
            Flavor::Mariadb => "MariaDB",
            Flavor::Mysql => "MySQL",
        };
        let mut text = format!(
            "-- {}: turns {from} of {} into {to} ({spelling}).\n",
            self.direction.as_str(),
            comment(&identifier(database))
        );
        if self.is_empty() {
            text.push_str("-- Nothing to do: the two schemas are the same.\n");
            return text;
        }
        text.push_str(&match &self.verification {
            Verification::Verified => format!(
                "-- Verified: run in a scratch schema holding {from}, it gave {to} exactly.\n"
            ),
            Verification::Failed { reason } => {
                format!("-- NOT VERIFIED, do not run as is: {}.\n", comment(reason))
            }
            Verification::Unverified { reason } => {
                format!("-- Unverified: {}.\n", comment(reason))
            }
        });
        let destructive = self.destructive_count();
        if destructive > 0 && !allow_destructive {
            text.push_str(&format!(
                "-- Left out: {destructive} destructive statement{} (they lose data); without {} the script does not reach {to}. Ask with --allow-destructive to include {}.\n",
                plural(destructive),
                if destructive == 1 { "it" } else { "them" },
                if destructive == 1 { "it" } else { "them" },
            ));
        }
        for note in &self.notes {
            text.push_str(&format!("-- Note: {}\n", comment(note)));
        }
        if database.contains(['\n', '\r']) {
            // The client reads `USE` to the end of its line: the rest of such a name would run.
            text.push_str(
                "-- The database's name holds a line break, which the client's USE cannot take: select the database before running this.\n",
            );
        } else {
            text.push_str(&format!("USE {};\n", identifier(database)));
        }
        for statement in &self.statements {
            if let Some(reason) = &statement.destructive {
                if !allow_destructive {
                    continue;
                }
                text.push_str(&format!("-- destructive: {}\n", comment(reason)));
            }
            if statement.compound {
                // A delimiter the body does not hold.
                let delimiter = [";;", "$$", "//", "@@", "%%"]
                    .into_iter()
                    .find(|delimiter| !statement.sql.contains(delimiter))
                    .unwrap_or("$;$;$");
                text.push_str(&format!(
                    "DELIMITER {delimiter}\n{}{delimiter}\nDELIMITER ;\n",
                    statement.sql
                ));
            } else {
                text.push_str(&format!("{};\n", statement.sql));
            }
        }
        text
    }
}

/// `text` made safe inside a `--` comment line: a line break or another control character (a
/// name may hold one) would end the comment and let the rest run as SQL, so each is written as
/// its escape (`\u{a}`).
pub fn comment(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_unicode().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect()
}

/// `s` for a count other than one.
pub(crate) fn plural(count: usize) -> &'static str {
    if count == 1 { "" } else { "s" }
}

/// `DEFINER=`user`@`host``, for a definer the model keeps as `user@host` (a role has no host).
pub(crate) fn definer_clause(definer: &str) -> String {
    match definer.rsplit_once('@') {
        Some((user, host)) => format!("DEFINER={}@{}", identifier(user), identifier(host)),
        None => format!("DEFINER={}", identifier(definer)),
    }
}

#[cfg(test)]
mod tests;
