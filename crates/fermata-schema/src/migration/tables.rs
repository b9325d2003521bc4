//! The tables' part of a migration: which tables are created, dropped and altered, and each
//! `ALTER TABLE`, split so that what loses data stands alone (see [`super`] for the phases).
//!
//! A changed table gets, each only when it has something to say, in this order across tables:
//! `DROP FOREIGN KEY` for the keys that go or change (and for those on, or referring to, a column
//! whose type changes, which the server refuses to change under a key; they are added again at
//! the end) with `DROP CONSTRAINT` (`DROP CHECK`) for the checks that go or change, before any
//! column goes; `REMOVE PARTITIONING` when the
//! partitioning goes, or changes together with a primary or unique key (which a partitioned
//! table's keys constrain); the destructive statement (`DROP SYSTEM VERSIONING`, the indexes on
//! columns it drops, `DROP COLUMN`, narrowing `MODIFY COLUMN`); the main statement (indexes,
//! checks and periods that go, computed columns dropped, columns added, modified and moved with
//! `FIRST`/`AFTER`, periods, indexes and checks added, table options, `ADD SYSTEM VERSIONING`);
//! `PARTITION BY`; and `ADD CONSTRAINT ... FOREIGN KEY` once every table exists. A new table is
//! created without its foreign keys, which are added in that last phase, so tables may refer to
//! each other in any order. Column definitions always name their character set and collation, so
//! they do not depend on the table default changed in the same statement.

use std::collections::{BTreeMap, BTreeSet};

use super::{Statement, widening};
use crate::snapshot::model::{
    Column, DatabaseModel, Flavor, ForeignKey, Index, IndexKind, Period, Table,
};
use crate::snapshot::render::{
    check_line, column_line, foreign_key_line, identifier, index_line, literal, partition_clause,
    render_table,
};

/// Every table statement of a plan, by phase.
#[derive(Default)]
pub(super) struct TablePlan {
    /// Foreign keys and checks that go or change, before any column does.
    pub(super) constraint_drops: Vec<Statement>,
    pub(super) unpartitioned: Vec<Statement>,
    pub(super) destructive: Vec<Statement>,
    pub(super) created: Vec<Statement>,
    pub(super) altered: Vec<Statement>,
    pub(super) partitioned: Vec<Statement>,
    pub(super) dropped: Vec<Statement>,
    pub(super) foreign_key_adds: Vec<Statement>,
    /// Whether a system-versioned table is altered (MariaDB refuses it unless the session
    /// allows it).
    pub(super) alters_versioned: bool,
}

pub(super) fn plan(
    from: &DatabaseModel,
    to: &DatabaseModel,
    flavor: Flavor,
    notes: &mut Vec<String>,
) -> TablePlan {
    let old: BTreeMap<&str, &Table> = from.tables.iter().map(|t| (t.name.as_str(), t)).collect();
    let new: BTreeMap<&str, &Table> = to.tables.iter().map(|t| (t.name.as_str(), t)).collect();
    let mut plan = TablePlan::default();
    let gone: Vec<&Table> = from
        .tables
        .iter()
        .filter(|t| !new.contains_key(t.name.as_str()))
        .collect();
    let added: Vec<&Table> = to
        .tables
        .iter()
        .filter(|t| !old.contains_key(t.name.as_str()))
        .collect();
    if !gone.is_empty() && !added.is_empty() {
        notes.push(format!(
            "{} dropped and {} created; a rename is never guessed: if one is the other renamed, `RENAME TABLE` keeps its rows",
            named("table", &gone.iter().map(|t| t.name.as_str()).collect::<Vec<_>>()),
            named("table", &added.iter().map(|t| t.name.as_str()).collect::<Vec<_>>()),
        ));
    }
    for table in &added {
        let without_keys = Table {
            foreign_keys: Vec::new(),
            ..(*table).clone()
        };
        plan.created
            .push(Statement::new(render_table(&without_keys, flavor)));
        plan.foreign_key_adds
            .extend(add_foreign_keys(&table.name, &table.foreign_keys));
    }
    let retyped = retyped_columns(from, to);
    for table in &to.tables {
        let Some(before) = old.get(table.name.as_str()) else {
            continue;
        };
        let (drops, adds) = foreign_key_changes(before, table, &retyped);
        plan.foreign_key_adds
            .extend(add_foreign_keys(&table.name, &adds));
        if *before != table {
            alter(before, table, flavor, drops, &mut plan, notes);
        } else if !drops.is_empty() {
            plan.constraint_drops
                .push(alter_statement(&table.name, &drops));
        }
    }
    for table in drop_order(&gone) {
        plan.dropped.push(Statement::destructive(
            format!("DROP TABLE {}", identifier(&table.name)),
            format!("drops table {} and its rows", identifier(&table.name)),
        ));
    }
    plan
}

/// `table `a`` or `tables `a`, `b``.
fn named(kind: &str, names: &[&str]) -> String {
    let list: Vec<String> = names.iter().map(|name| identifier(name)).collect();
    let plural = if names.len() == 1 { "" } else { "s" };
    let verb = if names.len() == 1 { "is" } else { "are" };
    format!("{kind}{plural} {} {verb}", list.join(", "))
}

/// The tables to drop, each before the tables it refers to, so the server's foreign key checks
/// pass (a cycle is left in name order).
fn drop_order<'a>(gone: &[&'a Table]) -> Vec<&'a Table> {
    let names: BTreeSet<&str> = gone.iter().map(|t| t.name.as_str()).collect();
    let mut ordered: Vec<&Table> = Vec::new();
    let mut placed: BTreeSet<&str> = BTreeSet::new();
    let mut remaining: Vec<&Table> = gone.to_vec();
    while !remaining.is_empty() {
        // A table no remaining table refers to goes first.
        let referred: BTreeSet<&str> = remaining
            .iter()
            .flat_map(|t| t.foreign_keys.iter())
            .filter(|key| key.referenced_database.is_none())
            .map(|key| key.referenced_table.as_str())
            .filter(|name| names.contains(name))
            .collect();
        let next = remaining
            .iter()
            .position(|t| !referred.contains(t.name.as_str()) || placed.contains(t.name.as_str()))
            .unwrap_or(0);
        let table = remaining.remove(next);
        placed.insert(table.name.as_str());
        ordered.push(table);
    }
    ordered
}

/// The columns, by table, whose type, character set or collation changes: a foreign key on one
/// (or referring to one) must be dropped while it changes, as the server refuses to change a
/// column a foreign key holds.
fn retyped_columns<'a>(
    from: &'a DatabaseModel,
    to: &DatabaseModel,
) -> BTreeSet<(&'a str, &'a str)> {
    let new: BTreeMap<(&str, &str), &Column> = to
        .tables
        .iter()
        .flat_map(|t| {
            t.columns
                .iter()
                .map(move |c| ((t.name.as_str(), c.name.as_str()), c))
        })
        .collect();
    from.tables
        .iter()
        .flat_map(|t| t.columns.iter().map(move |c| (t.name.as_str(), c)))
        .filter(|(table, column)| {
            new.get(&(*table, column.name.as_str()))
                .is_some_and(|after| {
                    (&after.column_type, &after.charset, &after.collation)
                        != (&column.column_type, &column.charset, &column.collation)
                })
        })
        .map(|(table, column)| (table, column.name.as_str()))
        .collect()
}

/// The `DROP FOREIGN KEY` clauses of `from` and the keys of `to` to add: those that go, come or
/// change, and those on (or referring to) a column whose type changes.
fn foreign_key_changes(
    from: &Table,
    to: &Table,
    retyped: &BTreeSet<(&str, &str)>,
) -> (Vec<String>, Vec<ForeignKey>) {
    let holds_retyped = |key: &ForeignKey| {
        key.columns
            .iter()
            .any(|column| retyped.contains(&(from.name.as_str(), column.as_str())))
            || (key.referenced_database.is_none()
                && key.referenced_columns.iter().any(|column| {
                    retyped.contains(&(key.referenced_table.as_str(), column.as_str()))
                }))
    };
    let old: BTreeMap<&str, &ForeignKey> = from
        .foreign_keys
        .iter()
        .map(|k| (k.name.as_str(), k))
        .collect();
    let new: BTreeMap<&str, &ForeignKey> = to
        .foreign_keys
        .iter()
        .map(|k| (k.name.as_str(), k))
        .collect();
    let drops = from
        .foreign_keys
        .iter()
        .filter(|k| new.get(k.name.as_str()) != Some(k) || holds_retyped(k))
        .map(|k| format!("DROP FOREIGN KEY {}", identifier(&k.name)))
        .collect();
    let adds = to
        .foreign_keys
        .iter()
        .filter(|k| {
            old.get(k.name.as_str()) != Some(k)
                || (old.contains_key(k.name.as_str()) && holds_retyped(k))
        })
        .cloned()
        .collect();
    (drops, adds)
}

fn add_foreign_keys(table: &str, keys: &[ForeignKey]) -> Option<Statement> {
    if keys.is_empty() {
        return None;
    }
    let clauses: Vec<String> = keys
        .iter()
        .map(|key| format!("ADD {}", foreign_key_line(key).trim_start()))
        .collect();
    Some(alter_statement(table, &clauses))
}

fn alter_statement(table: &str, clauses: &[String]) -> Statement {
    Statement::new(format!(
        "ALTER TABLE {}\n  {}",
        identifier(table),
        clauses.join(",\n  ")
    ))
}

/// A column's definition for `ADD`/`MODIFY COLUMN`: as in a `CREATE TABLE`, its character set and
/// collation always named.
fn definition(column: &Column, flavor: Flavor) -> String {
    let bare = Table::default();
    column_line(&bare, column, flavor).trim_start().to_owned()
}

fn drop_index(index: &Index) -> String {
    match index.kind {
        IndexKind::Primary => "DROP PRIMARY KEY".to_owned(),
        _ => format!("DROP INDEX {}", identifier(&index.name)),
    }
}

/// Whether two indexes differ only in being ignored (MariaDB) or invisible (MySQL).
fn only_visibility(a: &Index, b: &Index) -> bool {
    a != b
        && Index {
            ignored: b.ignored,
            invisible: b.invisible,
            ..a.clone()
        } == *b
}

fn visibility(index: &Index, flavor: Flavor) -> String {
    let state = match flavor {
        Flavor::Mariadb if index.ignored => "IGNORED",
        Flavor::Mariadb => "NOT IGNORED",
        Flavor::Mysql if index.invisible => "INVISIBLE",
        Flavor::Mysql => "VISIBLE",
    };
    format!("ALTER INDEX {} {state}", identifier(&index.name))
}

/// The columns of `to`, in order, that keep their place relative to each other: the longest
/// common subsequence of the two orders of the columns both tables have.
fn unmoved<'a>(from: &'a [Column], to: &'a [Column], kept: &BTreeSet<&str>) -> BTreeSet<&'a str> {
    let a: Vec<&str> = from
        .iter()
        .map(|c| c.name.as_str())
        .filter(|n| kept.contains(n))
        .collect();
    let b: Vec<&str> = to
        .iter()
        .map(|c| c.name.as_str())
        .filter(|n| kept.contains(n))
        .collect();
    let mut lengths = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lengths[i][j] = if a[i] == b[j] {
                lengths[i + 1][j + 1] + 1
            } else {
                lengths[i + 1][j].max(lengths[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut common) = (0, 0, BTreeSet::new());
    while i < a.len() && j < b.len() {
        if a[i] == b[j] {
            common.insert(a[i]);
            i += 1;
            j += 1;
        } else if lengths[i + 1][j] >= lengths[i][j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    common
}

fn position(previous: Option<&str>) -> String {
    match previous {
        Some(name) => format!(" AFTER {}", identifier(name)),
        None => " FIRST".to_owned(),
    }
}

fn period(period: &Period) -> String {
    format!(
        "PERIOD FOR {} ({}, {})",
        identifier(&period.name),
        identifier(&period.start),
        identifier(&period.end)
    )
}

/// The statements that alter `from` into `to`, added to `plan`'s phases.
/// `constraint_drops` are the foreign keys of `from` to drop first; the checks that go or change
/// are dropped in the same statement.
fn alter(
    from: &Table,
    to: &Table,
    flavor: Flavor,
    mut constraint_drops: Vec<String>,
    plan: &mut TablePlan,
    notes: &mut Vec<String>,
) {
    let name = to.name.as_str();
    if from.system_versioned {
        plan.alters_versioned = true;
    }
    let old_columns: BTreeMap<&str, &Column> =
        from.columns.iter().map(|c| (c.name.as_str(), c)).collect();
    let new_columns: BTreeMap<&str, &Column> =
        to.columns.iter().map(|c| (c.name.as_str(), c)).collect();
    let dropping_versioning = from.system_versioned && !to.system_versioned;
    // Columns that go; with system versioning dropped, its row period columns go with it.
    let gone: Vec<&Column> = from
        .columns
        .iter()
        .filter(|c| !new_columns.contains_key(c.name.as_str()))
        .filter(|c| !(dropping_versioning && c.row_period.is_some()))
        .collect();
    let added: Vec<&str> = to
        .columns
        .iter()
        .map(|c| c.name.as_str())
        .filter(|n| !old_columns.contains_key(n))
        .collect();
    if !gone.is_empty() && !added.is_empty() {
        notes.push(format!(
            "in table {}, {} dropped and {} added; a rename is never guessed: if one is the other renamed, `RENAME COLUMN` keeps its values",
            identifier(name),
            named("column", &gone.iter().map(|c| c.name.as_str()).collect::<Vec<_>>()),
            named("column", &added),
        ));
    }
    // Dropping a computed column loses nothing; any other loses its values.
    let (computed_gone, stored_gone): (Vec<&Column>, Vec<&Column>) = gone
        .iter()
        .partition(|c| c.generated.is_some() || c.row_period.is_some());
    let stored_gone_names: BTreeSet<&str> = stored_gone.iter().map(|c| c.name.as_str()).collect();
    let narrowed: BTreeMap<&str, String> = to
        .columns
        .iter()
        .filter_map(|c| {
            let before = old_columns.get(c.name.as_str())?;
            widening::data_loss(before, c).map(|reason| (c.name.as_str(), reason))
        })
        .collect();

    // Indexes.
    let old_indexes: BTreeMap<&str, &Index> =
        from.indexes.iter().map(|i| (i.name.as_str(), i)).collect();
    let new_indexes: BTreeMap<&str, &Index> =
        to.indexes.iter().map(|i| (i.name.as_str(), i)).collect();
    let unique_keys_change = from
        .indexes
        .iter()
        .chain(&to.indexes)
        .filter(|i| matches!(i.kind, IndexKind::Primary | IndexKind::Unique))
        .any(|i| old_indexes.get(i.name.as_str()) != new_indexes.get(i.name.as_str()));

    // Partitioning that goes, or changes together with a unique key, goes first.
    let repartition = from.partitioning != to.partitioning;
    let unpartition_first = from.partitioning.is_some()
        && repartition
        && (to.partitioning.is_none() || unique_keys_change);
    if unpartition_first {
        plan.unpartitioned
            .push(alter_statement(name, &["REMOVE PARTITIONING".to_owned()]));
    }

    // The destructive statement.
    let mut destructive = Vec::new();
    let mut reasons = Vec::new();
    if dropping_versioning {
        destructive.push("DROP SYSTEM VERSIONING".to_owned());
        reasons.push("drops system versioning and the history rows".to_owned());
    }
    // A period whose columns go is dropped before them.
    let period_goes_first = |period: &Period| {
        stored_gone_names.contains(period.start.as_str())
            || stored_gone_names.contains(period.end.as_str())
    };
    let application_period_goes = from
        .application_period
        .as_ref()
        .filter(|old| to.application_period.as_ref() != Some(*old));
    if let Some(old) = application_period_goes.filter(|old| period_goes_first(old)) {
        destructive.push(format!("DROP PERIOD FOR {}", identifier(&old.name)));
    }
    let mut dropped_indexes: BTreeSet<&str> = BTreeSet::new();
    for index in &from.indexes {
        let touches = index
            .parts
            .iter()
            .any(|part| stored_gone_names.contains(part.column.as_str()));
        if touches && new_indexes.get(index.name.as_str()) != Some(&index) {
            destructive.push(drop_index(index));
            dropped_indexes.insert(index.name.as_str());
        }
    }
    for column in &stored_gone {
        destructive.push(format!("DROP COLUMN {}", identifier(&column.name)));
        reasons.push(format!(
            "drops column {} and its values",
            identifier(&column.name)
        ));
    }
    // A narrowed column that also moves is placed after the nearest column before it that
    // already exists; the main statement places the added columns around it.
    let unmoved = unmoved(&from.columns, &to.columns, &{
        new_columns
            .keys()
            .copied()
            .filter(|n| old_columns.contains_key(n))
            .collect()
    });
    for (index, column) in to.columns.iter().enumerate() {
        let Some(reason) = narrowed.get(column.name.as_str()) else {
            continue;
        };
        let place = if unmoved.contains(column.name.as_str()) {
            String::new()
        } else {
            let before = to.columns[..index]
                .iter()
                .rev()
                .find(|c| old_columns.contains_key(c.name.as_str()))
                .map(|c| c.name.as_str());
            position(before)
        };
        destructive.push(format!(
            "MODIFY COLUMN {}{place}",
            definition(column, flavor)
        ));
        reasons.push(format!(
            "changes column {}: {reason}",
            identifier(&column.name)
        ));
    }
    if !destructive.is_empty() {
        let mut statement = alter_statement(name, &destructive);
        statement.destructive = Some(reasons.join("; "));
        plan.destructive.push(statement);
    }

    // The main statement.
    let mut clauses: Vec<String> = Vec::new();
    for index in &from.indexes {
        let target = new_indexes.get(index.name.as_str());
        let changed = target != Some(&index);
        let visibility_only = target.is_some_and(|t| only_visibility(index, t));
        if changed && !visibility_only && !dropped_indexes.contains(index.name.as_str()) {
            clauses.push(drop_index(index));
        }
    }
    let new_checks: BTreeMap<&str, _> = to.checks.iter().map(|c| (c.name.as_str(), c)).collect();
    let old_checks: BTreeMap<&str, _> = from.checks.iter().map(|c| (c.name.as_str(), c)).collect();
    for check in &from.checks {
        if new_checks.get(check.name.as_str()) != Some(&check) {
            constraint_drops.push(match flavor {
                Flavor::Mariadb => format!("DROP CONSTRAINT {}", identifier(&check.name)),
                Flavor::Mysql => format!("DROP CHECK {}", identifier(&check.name)),
            });
        }
    }
    if !constraint_drops.is_empty() {
        plan.constraint_drops
            .push(alter_statement(name, &constraint_drops));
    }
    if let Some(old) = application_period_goes.filter(|old| !period_goes_first(old)) {
        clauses.push(format!("DROP PERIOD FOR {}", identifier(&old.name)));
    }
    if from.system_period.is_some() && to.system_period.is_none() && !dropping_versioning {
        clauses.push("DROP PERIOD FOR SYSTEM_TIME".to_owned());
    }
    for column in &computed_gone {
        clauses.push(format!("DROP COLUMN {}", identifier(&column.name)));
    }
    for (index, column) in to.columns.iter().enumerate() {
        let previous = index.checked_sub(1).map(|i| to.columns[i].name.as_str());
        match old_columns.get(column.name.as_str()) {
            None => clauses.push(format!(
                "ADD COLUMN {}{}",
                definition(column, flavor),
                position(previous)
            )),
            Some(_) if narrowed.contains_key(column.name.as_str()) => {}
            Some(before) => {
                let moved = !unmoved.contains(column.name.as_str());
                if moved || *before != column {
                    let place = if moved {
                        position(previous)
                    } else {
                        String::new()
                    };
                    clauses.push(format!(
                        "MODIFY COLUMN {}{place}",
                        definition(column, flavor)
                    ));
                }
            }
        }
    }
    if let Some(new) = &to.application_period
        && from.application_period.as_ref() != Some(new)
    {
        clauses.push(format!("ADD {}", period(new)));
    }
    if let Some(new) = &to.system_period
        && from.system_period.as_ref() != Some(new)
    {
        clauses.push(format!(
            "ADD PERIOD FOR SYSTEM_TIME ({}, {})",
            identifier(&new.start),
            identifier(&new.end)
        ));
    }
    let mut added_indexes: Vec<&Index> = to
        .indexes
        .iter()
        .filter(|i| {
            let before = old_indexes.get(i.name.as_str());
            before != Some(i) && !before.is_some_and(|b| only_visibility(b, i))
        })
        .collect();
    added_indexes.sort_by_key(|i| i.kind != IndexKind::Primary);
    for index in added_indexes {
        clauses.push(format!("ADD {}", index_line(index, flavor).trim_start()));
    }
    for index in &to.indexes {
        if old_indexes
            .get(index.name.as_str())
            .is_some_and(|before| only_visibility(before, index))
        {
            clauses.push(visibility(index, flavor));
        }
    }
    for check in &to.checks {
        if old_checks.get(check.name.as_str()) != Some(&check) {
            clauses.push(format!("ADD {}", check_line(check, flavor).trim_start()));
        }
    }
    clauses.extend(option_changes(from, to));
    if to.system_versioned && !from.system_versioned {
        clauses.push("ADD SYSTEM VERSIONING".to_owned());
    }
    if !clauses.is_empty() {
        plan.altered.push(alter_statement(name, &clauses));
    }

    if repartition && let Some(partitioning) = &to.partitioning {
        plan.partitioned.push(Statement::new(format!(
            "ALTER TABLE {}{}",
            identifier(name),
            partition_clause(partitioning, &to.engine, flavor)
        )));
    } else if repartition && !unpartition_first {
        plan.partitioned
            .push(alter_statement(name, &["REMOVE PARTITIONING".to_owned()]));
    }
}

/// The table options that change, each as an `ALTER TABLE` clause; an option that goes is set
/// back to its default.
fn option_changes(from: &Table, to: &Table) -> Vec<String> {
    let mut clauses = Vec::new();
    if from.engine != to.engine {
        clauses.push(format!("ENGINE={}", to.engine));
    }
    if (&from.charset, &from.collation) != (&to.charset, &to.collation) {
        clauses.push(format!(
            "DEFAULT CHARSET={} COLLATE={}",
            to.charset, to.collation
        ));
    }
    if from.row_format != to.row_format {
        clauses.push(format!(
            "ROW_FORMAT={}",
            to.row_format.as_deref().unwrap_or("DEFAULT")
        ));
    }
    if from.comment != to.comment {
        clauses.push(format!("COMMENT={}", literal(&to.comment)));
    }
    let option_name = |name: &str, engine_defined: bool| {
        if engine_defined {
            identifier(name)
        } else {
            name.to_owned()
        }
    };
    for option in &to.options {
        if !from.options.contains(option) {
            clauses.push(format!(
                "{}={}",
                option_name(&option.name, option.engine_defined),
                option.value
            ));
        }
    }
    for option in &from.options {
        if !to.options.iter().any(|o| o.name == option.name) {
            let default = if option.name == "KEY_BLOCK_SIZE" {
                "0"
            } else {
                "DEFAULT"
            };
            clauses.push(format!(
                "{}={default}",
                option_name(&option.name, option.engine_defined)
            ));
        }
    }
    clauses
}
