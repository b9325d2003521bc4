//! The tables' part of a migration: which tables are created, dropped and altered, and each
//! `ALTER TABLE`, split so that what loses data stands alone (see [`super`] for the phases).
//!
//! A changed table gets, each only when it has something to say, in this order across tables:
//! a first statement, before any column goes, with `DROP FOREIGN KEY` for the keys that go or
//! change (and for those on, or referring to, a column whose type changes, which the server
//! refuses to change under a key; they are added again at the end), `DROP CONSTRAINT`
//! (`DROP CHECK`) for the checks that go or change, and the generated columns that go or must be
//! built again (those that read a column that goes, and those that become or stop being virtual,
//! which the server does not change in place) with the indexes on them, and `DROP DEFAULT` for a
//! default that reads a column that goes; `REMOVE PARTITIONING` when the partitioning goes, or
//! changes together with a primary or unique key (which a partitioned table's keys constrain) or
//! with a column its expression reads, or when system versioning is dropped from a table
//! partitioned by `SYSTEM_TIME`; the destructive statement (`DROP SYSTEM VERSIONING` with the
//! named row columns and their period, the indexes on columns it drops, `DROP COLUMN`, narrowing
//! `MODIFY COLUMN`, a stored column made virtual dropped and added at once); the main statement
//! (indexes, checks and periods that go, computed columns dropped, columns added, modified and
//! moved with `FIRST`/`AFTER`, periods, indexes and checks added, table options,
//! `ADD SYSTEM VERSIONING`), with, when the engine changes, the engine-defined options that go
//! reset before it and the others after it; `PARTITION BY`; and `ADD CONSTRAINT ... FOREIGN KEY`
//! once every table exists. A new table is created without its foreign keys, which are added in
//! that last phase, so tables may refer to each other in any order; a table that goes loses first
//! its keys to the tables that stay and change, and to the tables that go with it and refer back
//! to it. Column definitions always name their character set and collation, so they do not
//! depend on the table default changed in the same statement.

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
    /// Foreign keys and checks that go or change, generated columns that go or are built again
    /// and defaults that read a column that goes: before any column goes.
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
    let (order, mut cut) = drop_order(&gone);
    // A table that goes first loses its foreign keys to the tables that stay and change, whose
    // columns and indexes the server would not change under them.
    for table in &gone {
        for key in &table.foreign_keys {
            let changes = key.referenced_database.is_none()
                && old
                    .get(key.referenced_table.as_str())
                    .zip(new.get(key.referenced_table.as_str()))
                    .is_some_and(|(before, after)| before != after);
            if changes {
                cut.entry(table.name.as_str()).or_default().push(key);
            }
        }
    }
    for (table, keys) in cut {
        let clauses: Vec<String> = keys
            .iter()
            .map(|key| format!("DROP FOREIGN KEY {}", identifier(&key.name)))
            .collect();
        plan.constraint_drops.push(alter_statement(table, &clauses));
    }
    for table in order {
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

/// Foreign keys, by the name of their table.
type KeysByTable<'a> = BTreeMap<&'a str, Vec<&'a ForeignKey>>;

/// The tables to drop, each before the tables it refers to, so the server's foreign key checks
/// pass (a table may refer to itself); and, where the tables that go refer to each other in a
/// cycle, which the server refuses to drop in any order, the foreign keys to drop first, by
/// table: those that refer to the first table of the cycle by name, which then goes first.
fn drop_order<'a>(gone: &[&'a Table]) -> (Vec<&'a Table>, KeysByTable<'a>) {
    let mut keys = GoneKeys::between(gone);
    let mut ordered: Vec<&Table> = Vec::with_capacity(gone.len());
    let mut cut = KeysByTable::new();
    // Each step takes the first table (in `gone`'s order) that no other table still there refers
    // to by a key not cut; the count of such keys is kept per table, so thousands of tables cost
    // what their keys do, not the square of their count.
    let mut left: BTreeSet<usize> = (0..gone.len()).collect();
    let mut free: BTreeSet<usize> = left
        .iter()
        .copied()
        .filter(|&at| keys.referrers[at] == 0)
        .collect();
    while let Some(&first) = left.first() {
        let next = match free.pop_first() {
            Some(next) => next,
            None => {
                // A cycle: the first table goes first, once the keys that refer to it are cut.
                for key in keys.cut_referring(first, &left) {
                    cut.entry(gone[key.from].name.as_str())
                        .or_default()
                        .push(key.key);
                }
                first
            }
        };
        left.remove(&next);
        ordered.push(gone[next]);
        for to in keys.released_by(next) {
            if left.contains(&to) && keys.referrers[to] == 0 {
                free.insert(to);
            }
        }
    }
    (ordered, cut)
}

/// The foreign keys between two different tables that go (by their places in the list), and
/// how many keys not cut yet refer to each from a table still there.
struct GoneKeys<'a> {
    keys: Vec<GoneKey<'a>>,
    /// By table: its keys, as places in `keys`.
    refers: Vec<Vec<usize>>,
    /// By table: the keys that refer to it, as places in `keys`, in `gone`'s order.
    referred: Vec<Vec<usize>>,
    referrers: Vec<usize>,
}

/// A key of table `from` that refers to table `to`.
struct GoneKey<'a> {
    from: usize,
    to: usize,
    key: &'a ForeignKey,
    cut: bool,
}

impl<'a> GoneKeys<'a> {
    fn between(gone: &[&'a Table]) -> Self {
        let place: BTreeMap<&str, usize> = gone
            .iter()
            .enumerate()
            .map(|(at, table)| (table.name.as_str(), at))
            .collect();
        let mut keys = GoneKeys {
            keys: Vec::new(),
            refers: vec![Vec::new(); gone.len()],
            referred: vec![Vec::new(); gone.len()],
            referrers: vec![0; gone.len()],
        };
        for (from, table) in gone.iter().enumerate() {
            for key in table
                .foreign_keys
                .iter()
                .filter(|k| k.referenced_database.is_none())
            {
                let Some(&to) = place.get(key.referenced_table.as_str()) else {
                    continue;
                };
                if to == from {
                    continue;
                }
                keys.refers[from].push(keys.keys.len());
                keys.referred[to].push(keys.keys.len());
                keys.referrers[to] += 1;
                keys.keys.push(GoneKey {
                    from,
                    to,
                    key,
                    cut: false,
                });
            }
        }
        keys
    }

    /// Cuts the keys not cut yet that refer to table `to` from the tables `left`, and answers
    /// them.
    fn cut_referring(&mut self, to: usize, left: &BTreeSet<usize>) -> Vec<&GoneKey<'a>> {
        let mut cut = Vec::new();
        for &at in &self.referred[to] {
            let key = &mut self.keys[at];
            if !key.cut && left.contains(&key.from) {
                key.cut = true;
                self.referrers[to] -= 1;
                cut.push(at);
            }
        }
        cut.into_iter().map(|at| &self.keys[at]).collect()
    }

    /// Table `from` goes: its keys not cut no longer hold the tables they refer to. Answers
    /// those tables.
    fn released_by(&mut self, from: usize) -> Vec<usize> {
        let mut released = Vec::new();
        for &at in &self.refers[from] {
            let key = &self.keys[at];
            if !key.cut {
                self.referrers[key.to] -= 1;
                released.push(key.to);
            }
        }
        released
    }
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

/// `index` without the row end column `end` that MariaDB appends to a primary or unique key of a
/// system-versioned table that names its row columns: adding system versioning appends it, and
/// dropping it takes it out.
fn without_row_end(index: &Index, end: &str) -> Index {
    let mut index = index.clone();
    if matches!(index.kind, IndexKind::Primary | IndexKind::Unique)
        && index.parts.last().is_some_and(|part| part.column == end)
    {
        index.parts.pop();
    }
    index
}

/// The indexes of `table`, those of a system-versioned table whose versioning `changes` taken
/// without its row end column ([`without_row_end`]), which the server adds or takes out itself.
fn comparable_indexes(table: &Table, changes: bool) -> Vec<Index> {
    match &table.system_period {
        Some(period) if changes => table
            .indexes
            .iter()
            .map(|index| without_row_end(index, &period.end))
            .collect(),
        _ => table.indexes.clone(),
    }
}

/// The table's `KEY_BLOCK_SIZE`, when it has one.
fn key_block_size(table: &Table) -> Option<&str> {
    table
        .options
        .iter()
        .find(|option| option.name == "KEY_BLOCK_SIZE" && !option.engine_defined)
        .map(|option| option.value.as_str())
}

/// Whether `column` is a virtual generated column, which holds nothing of its own.
fn is_virtual(column: &Column) -> bool {
    column.generated.as_ref().is_some_and(|g| !g.stored)
}

/// Whether `expression` (a generated column's, a default's or a partitioning's, as the server
/// prints it, names quoted) names any of `columns`.
fn names_any(expression: &str, columns: &BTreeSet<&str>) -> bool {
    columns
        .iter()
        .any(|column| expression.contains(&identifier(column)))
}

/// The statements that alter `from` into `to`, added to `plan`'s phases.
/// `constraint_drops` are the foreign keys of `from` to drop first; the checks that go or change
/// are dropped in the same statement, and so are the generated columns that go or are built
/// again (the server refuses to drop a column a generated column reads, and to make a column
/// virtual or not in place; those that stay are added again by the main statement) with the
/// indexes on them, and the defaults that read a column that goes.
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
    // A versioned table whose row start and end columns change (named or not) stays versioned
    // only through dropping system versioning and adding it again: the server refuses a second
    // pair of row columns.
    let period_changes =
        from.system_versioned && to.system_versioned && from.system_period != to.system_period;
    let dropping_versioning = from.system_versioned && (!to.system_versioned || period_changes);
    let adding_versioning = to.system_versioned && (!from.system_versioned || period_changes);
    // Columns that go; with system versioning dropped, its row period columns go with it, in the
    // statement that drops it.
    let (period_gone, gone): (Vec<&Column>, Vec<&Column>) = from
        .columns
        .iter()
        .filter(|c| !new_columns.contains_key(c.name.as_str()))
        .partition(|c| dropping_versioning && c.row_period.is_some());
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
    // Generated columns that stay but read a column that goes, or that become or stop being
    // virtual (which the server does not change in place): dropped first, added again; they
    // lose nothing.
    let rebuilt: BTreeSet<&str> = from
        .columns
        .iter()
        .filter_map(|c| Some((c, new_columns.get(c.name.as_str())?)))
        .filter(|(before, after)| {
            before.generated.as_ref().is_some_and(|g| {
                names_any(&g.expression, &stored_gone_names)
                    || is_virtual(before) != is_virtual(after)
            })
        })
        .map(|(c, _)| c.name.as_str())
        .collect();
    // A stored column made virtual is dropped and added again by the destructive statement.
    let replaced = |column: &Column| {
        is_virtual(column)
            && old_columns
                .get(column.name.as_str())
                .is_some_and(|before| before.generated.is_none() && before.row_period.is_none())
    };
    let early_columns: BTreeSet<&str> = computed_gone
        .iter()
        .filter(|c| c.generated.is_some())
        .map(|c| c.name.as_str())
        .chain(rebuilt.iter().copied())
        .collect();
    let narrowed: BTreeMap<&str, String> = to
        .columns
        .iter()
        .filter(|c| !rebuilt.contains(c.name.as_str()))
        .filter_map(|c| {
            let before = old_columns.get(c.name.as_str())?;
            widening::data_loss(before, c).map(|reason| (c.name.as_str(), reason))
        })
        .collect();
    // A narrowed column that becomes the `AUTO_INCREMENT` one is narrowed without it: the key
    // it needs may come only with the main statement, which gives it.
    let gains_auto_increment = |column: &Column| {
        column.auto_increment
            && old_columns
                .get(column.name.as_str())
                .is_some_and(|before| !before.auto_increment)
    };

    // Indexes, those of a table whose system versioning comes or goes without the row end
    // column the server adds or takes out itself.
    let old_list = comparable_indexes(from, dropping_versioning);
    let new_list = comparable_indexes(to, adding_versioning);
    let old_indexes: BTreeMap<&str, &Index> =
        old_list.iter().map(|i| (i.name.as_str(), i)).collect();
    let new_indexes: BTreeMap<&str, &Index> =
        new_list.iter().map(|i| (i.name.as_str(), i)).collect();
    let touches = |index: &Index, columns: &BTreeSet<&str>| {
        index
            .parts
            .iter()
            .any(|part| columns.contains(part.column.as_str()))
    };
    // Indexes on the generated columns dropped first go with them.
    let early_indexes: BTreeSet<&str> = old_list
        .iter()
        .filter(|index| touches(index, &early_columns))
        .map(|index| index.name.as_str())
        .collect();
    // An index keeps the `KEY_BLOCK_SIZE` it was built with, which the server then prints as
    // its own: when the table's changes, every index is built again.
    let rebuild_indexes =
        key_block_size(from).is_some() && key_block_size(from) != key_block_size(to);
    let unique_keys_change = rebuild_indexes
        || old_list
            .iter()
            .chain(&new_list)
            .filter(|i| matches!(i.kind, IndexKind::Primary | IndexKind::Unique))
            .any(|i| old_indexes.get(i.name.as_str()) != new_indexes.get(i.name.as_str()));

    // Partitioning that goes, or changes together with a unique key or with a column its
    // expression reads that goes or changes type, goes first; so does partitioning by
    // `SYSTEM_TIME` while system versioning is dropped (the server refuses it there).
    let by_system_time = |table: &Table| {
        table
            .partitioning
            .as_ref()
            .is_some_and(|partitioning| partitioning.method == "SYSTEM_TIME")
    };
    let versioning_partitioned = dropping_versioning && by_system_time(from);
    let repartition = from.partitioning != to.partitioning || versioning_partitioned;
    let changed_type: BTreeSet<&str> = to
        .columns
        .iter()
        .filter(|c| {
            old_columns.get(c.name.as_str()).is_some_and(|before| {
                (&before.column_type, &before.charset, &before.collation)
                    != (&c.column_type, &c.charset, &c.collation)
            })
        })
        .map(|c| c.name.as_str())
        .chain(stored_gone_names.iter().copied())
        .collect();
    let reads_changed = from.partitioning.as_ref().is_some_and(|partitioning| {
        names_any(&partitioning.expression, &changed_type)
            || partitioning
                .subpartition_expression
                .as_deref()
                .is_some_and(|expression| names_any(expression, &changed_type))
    });
    let unpartition_first = from.partitioning.is_some()
        && repartition
        && (to.partitioning.is_none()
            || unique_keys_change
            || reads_changed
            || versioning_partitioned);
    if unpartition_first {
        plan.unpartitioned
            .push(alter_statement(name, &["REMOVE PARTITIONING".to_owned()]));
    }

    // The destructive statement.
    let mut destructive = Vec::new();
    let mut reasons = Vec::new();
    if dropping_versioning {
        destructive.push("DROP SYSTEM VERSIONING".to_owned());
        if from.system_period.is_some() {
            destructive.push("DROP PERIOD FOR SYSTEM_TIME".to_owned());
        }
        for column in &period_gone {
            destructive.push(format!("DROP COLUMN {}", identifier(&column.name)));
        }
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
    for index in &old_list {
        if touches(index, &stored_gone_names)
            && !early_indexes.contains(index.name.as_str())
            && new_indexes.get(index.name.as_str()) != Some(&index)
        {
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
    // The columns that keep their order, `unmoved`, stay in it through every statement. A
    // narrowed column that moves is placed, in the order of `to`, after the nearest column
    // before it that keeps its order or is narrowed too: those are then in the order of `to`,
    // and the main statement places each moved or added column after the one before it.
    let unmoved = unmoved(&from.columns, &to.columns, &{
        to.columns
            .iter()
            .filter(|c| {
                old_columns.contains_key(c.name.as_str())
                    && !rebuilt.contains(c.name.as_str())
                    && !replaced(c)
            })
            .map(|c| c.name.as_str())
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
                .map(|c| c.name.as_str())
                .find(|c| unmoved.contains(c) || narrowed.contains_key(c));
            position(before)
        };
        let narrowed_to = if gains_auto_increment(column) {
            Column {
                auto_increment: false,
                ..column.clone()
            }
        } else {
            column.clone()
        };
        if replaced(column) {
            destructive.push(format!("DROP COLUMN {}", identifier(&column.name)));
            destructive.push(format!(
                "ADD COLUMN {}{place}",
                definition(&narrowed_to, flavor)
            ));
        } else {
            destructive.push(format!(
                "MODIFY COLUMN {}{place}",
                definition(&narrowed_to, flavor)
            ));
        }
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
    for index in &old_list {
        let target = new_indexes.get(index.name.as_str());
        let changed = rebuild_indexes || target != Some(&index);
        let visibility_only = !rebuild_indexes && target.is_some_and(|t| only_visibility(index, t));
        let gone_before = dropped_indexes.contains(index.name.as_str())
            || early_indexes.contains(index.name.as_str());
        if changed && !visibility_only && !gone_before {
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
    for index in &old_list {
        if early_indexes.contains(index.name.as_str()) {
            constraint_drops.push(drop_index(index));
        }
    }
    for column in &from.columns {
        if early_columns.contains(column.name.as_str()) {
            constraint_drops.push(format!("DROP COLUMN {}", identifier(&column.name)));
        }
    }
    // A column that stays loses a default that reads a column that goes (which the server
    // refuses to drop under it); it gets its own back with the rest of its definition.
    let default_dropped: BTreeSet<&str> = from
        .columns
        .iter()
        .filter(|c| new_columns.contains_key(c.name.as_str()))
        .filter(|c| {
            c.default
                .as_deref()
                .is_some_and(|default| names_any(default, &stored_gone_names))
        })
        .map(|c| c.name.as_str())
        .collect();
    for column in &from.columns {
        if default_dropped.contains(column.name.as_str()) {
            constraint_drops.push(format!(
                "ALTER COLUMN {} DROP DEFAULT",
                identifier(&column.name)
            ));
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
        if !early_columns.contains(column.name.as_str()) {
            clauses.push(format!("DROP COLUMN {}", identifier(&column.name)));
        }
    }
    for (index, column) in to.columns.iter().enumerate() {
        let previous = index.checked_sub(1).map(|i| to.columns[i].name.as_str());
        let existing = old_columns
            .get(column.name.as_str())
            .filter(|_| !rebuilt.contains(column.name.as_str()));
        match existing {
            None => clauses.push(format!(
                "ADD COLUMN {}{}",
                definition(column, flavor),
                position(previous)
            )),
            Some(_) if narrowed.contains_key(column.name.as_str()) => {
                if gains_auto_increment(column) {
                    clauses.push(format!("MODIFY COLUMN {}", definition(column, flavor)));
                }
            }
            Some(before) => {
                let moved = !unmoved.contains(column.name.as_str());
                if moved || *before != column || default_dropped.contains(column.name.as_str()) {
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
    let built_again =
        |index: &Index| rebuild_indexes || early_indexes.contains(index.name.as_str());
    let mut added_indexes: Vec<&Index> = new_list
        .iter()
        .filter(|i| {
            let before = old_indexes.get(i.name.as_str());
            built_again(i) || (before != Some(i) && !before.is_some_and(|b| only_visibility(b, i)))
        })
        .collect();
    added_indexes.sort_by_key(|i| i.kind != IndexKind::Primary);
    for index in added_indexes {
        clauses.push(format!("ADD {}", index_line(index, flavor).trim_start()));
    }
    for index in &new_list {
        if !built_again(index)
            && old_indexes
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
    // With the engine changed, an option that goes is set back to its default by a statement
    // of its own: an engine-defined one before, while the old engine knows it, any other after,
    // as the old engine would fill in its own value.
    let options = option_changes(from, to);
    let (before_main, after_main) = if from.engine == to.engine {
        clauses.extend(options.engine_defined_reset);
        clauses.extend(options.reset);
        (Vec::new(), Vec::new())
    } else {
        (options.engine_defined_reset, options.reset)
    };
    clauses.extend(options.set);
    if adding_versioning {
        clauses.push("ADD SYSTEM VERSIONING".to_owned());
    }
    for statement in [before_main, clauses, after_main] {
        if !statement.is_empty() {
            plan.altered.push(alter_statement(name, &statement));
        }
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

/// The numeric table options whose default the server takes as `0` only: it refuses `DEFAULT`
/// for them.
const ZERO_DEFAULT: &[&str] = &[
    "MIN_ROWS",
    "MAX_ROWS",
    "AVG_ROW_LENGTH",
    "CHECKSUM",
    "DELAY_KEY_WRITE",
    "KEY_BLOCK_SIZE",
];

/// The table options that change, as `ALTER TABLE` clauses; an option that goes is set back to
/// its default (`0` for those of [`ZERO_DEFAULT`]).
struct OptionChanges {
    /// The options that come or change, with the engine, character set, row format and comment.
    set: Vec<String>,
    /// The engine-defined options that go.
    engine_defined_reset: Vec<String>,
    /// The other options that go.
    reset: Vec<String>,
}

fn option_changes(from: &Table, to: &Table) -> OptionChanges {
    let mut set = Vec::new();
    if from.engine != to.engine {
        set.push(format!("ENGINE={}", to.engine));
    }
    if (&from.charset, &from.collation) != (&to.charset, &to.collation) {
        set.push(format!(
            "DEFAULT CHARSET={} COLLATE={}",
            to.charset, to.collation
        ));
    }
    if from.row_format != to.row_format {
        set.push(format!(
            "ROW_FORMAT={}",
            to.row_format.as_deref().unwrap_or("DEFAULT")
        ));
    }
    if from.comment != to.comment {
        set.push(format!("COMMENT={}", literal(&to.comment)));
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
            set.push(format!(
                "{}={}",
                option_name(&option.name, option.engine_defined),
                option.value
            ));
        }
    }
    let (mut engine_defined_reset, mut reset) = (Vec::new(), Vec::new());
    for option in &from.options {
        if !to.options.iter().any(|o| o.name == option.name) {
            let default = if !option.engine_defined && ZERO_DEFAULT.contains(&option.name.as_str())
            {
                "0"
            } else {
                "DEFAULT"
            };
            let clause = format!(
                "{}={default}",
                option_name(&option.name, option.engine_defined)
            );
            if option.engine_defined {
                engine_defined_reset.push(clause);
            } else {
                reset.push(clause);
            }
        }
    }
    OptionChanges {
        set,
        engine_defined_reset,
        reset,
    }
}
