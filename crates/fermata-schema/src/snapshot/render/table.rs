//! Tables, views and sequences rendered from the model, each in its server's own spelling. A
//! table's clauses come in one stable order: columns in their order, then the primary key, the
//! other keys by name, foreign keys by name, checks by name; then `ENGINE`,
//! `DEFAULT CHARSET=... COLLATE=...` always spelled out, the other options in the order of
//! [`option_rank`], and the partitioning.
//!
//! A MariaDB table is written as MariaDB 10.11 prints it (`int(11)`, `current_timestamp()`,
//! `REF_SYSTEM_ID=4326`, ` INVISIBLE` before the default); an expression default is written in
//! parentheses ([`canonical_default`]). A MySQL table is written as MySQL 8 prints it: the
//! column type as its catalog gives it (`int`), `CURRENT_TIMESTAMP`, expression defaults in the
//! parentheses MySQL adds around the stored expression, `/*!80003 SRID n */` after the
//! nullability, `/*!80023 INVISIBLE */` before the comment, `/*!80000 INVISIBLE */` on keys,
//! `/*!80016 NOT ENFORCED */` on checks, and the partitioning in its `/*!50100 ... */` comment
//! with partition names bare unless MySQL quotes them. Either way a column whose collation
//! differs from the table's names it, with its character set when that differs too.

use super::{identifier, literal};
use crate::snapshot::model::{
    Check, Column, Flavor, ForeignKey, Index, IndexKind, Partition, Partitioning, RowPeriod,
    Sequence, Table, View,
};

/// A column's line in a `CREATE TABLE`, with its two leading spaces; `table` decides which
/// character set and collation go without saying.
pub(crate) fn column_line(table: &Table, column: &Column, flavor: Flavor) -> String {
    match flavor {
        Flavor::Mariadb => mariadb_column_line(table, column),
        Flavor::Mysql => mysql_column_line(table, column),
    }
}

/// ` CHARACTER SET cs COLLATE coll`, or ` COLLATE coll` when the character set is the
/// table's, for a column whose collation is not the table's; nothing otherwise.
fn mysql_collation(table: &Table, column: &Column) -> String {
    match (&column.charset, &column.collation) {
        (Some(charset), Some(collation)) if collation != &table.collation => {
            if charset == &table.charset {
                format!(" COLLATE {collation}")
            } else {
                format!(" CHARACTER SET {charset} COLLATE {collation}")
            }
        }
        _ => String::new(),
    }
}

/// A column as MySQL 8 prints it: type, collation, generation, nullability, SRID, default,
/// `ON UPDATE`, `AUTO_INCREMENT`, visibility, comment.
fn mysql_column_line(table: &Table, column: &Column) -> String {
    let mut line = format!("  {} {}", identifier(&column.name), column.column_type);
    line.push_str(&mysql_collation(table, column));
    if let Some(generated) = &column.generated {
        let kind = if generated.stored {
            "STORED"
        } else {
            "VIRTUAL"
        };
        line.push_str(&format!(
            " GENERATED ALWAYS AS ({}) {kind}",
            generated.expression
        ));
    }
    if !column.nullable {
        line.push_str(" NOT NULL");
    } else if column.column_type.starts_with("timestamp") && column.generated.is_none() {
        line.push_str(" NULL");
    }
    if let Some(srid) = column.srid {
        line.push_str(&format!(" /*!80003 SRID {srid} */"));
    }
    if let Some(default) = &column.default {
        line.push_str(&format!(" DEFAULT {default}"));
    }
    if let Some(on_update) = &column.on_update {
        line.push_str(&format!(" ON UPDATE {on_update}"));
    }
    if column.auto_increment {
        line.push_str(" AUTO_INCREMENT");
    }
    if column.invisible {
        line.push_str(" /*!80023 INVISIBLE */");
    }
    if !column.comment.is_empty() {
        line.push_str(&format!(" COMMENT {}", literal(&column.comment)));
    }
    line
}

fn mariadb_column_line(table: &Table, column: &Column) -> String {
    let mut line = format!("  {} {}", identifier(&column.name), column.column_type);
    if let Some(srid) = column.srid {
        line.push_str(&format!(" REF_SYSTEM_ID={srid}"));
    }
    if let (Some(charset), Some(collation)) = (&column.charset, &column.collation)
        && collation != &table.collation
    {
        line.push_str(&format!(" CHARACTER SET {charset} COLLATE {collation}"));
    }
    if let Some(row_period) = column.row_period {
        line.push_str(match row_period {
            RowPeriod::Start => " GENERATED ALWAYS AS ROW START",
            RowPeriod::End => " GENERATED ALWAYS AS ROW END",
        });
        if column.invisible {
            line.push_str(" INVISIBLE");
        }
    } else if let Some(generated) = &column.generated {
        let kind = if generated.stored {
            "STORED"
        } else {
            "VIRTUAL"
        };
        line.push_str(&format!(
            " GENERATED ALWAYS AS ({}) {kind}",
            generated.expression
        ));
        if column.invisible {
            line.push_str(" INVISIBLE");
        }
    } else {
        if !column.nullable {
            line.push_str(" NOT NULL");
        } else if column.column_type.starts_with("timestamp") {
            line.push_str(" NULL");
        }
        if column.invisible {
            line.push_str(" INVISIBLE");
        }
        if let Some(default) = &column.default {
            line.push_str(&format!(" DEFAULT {}", canonical_default(default)));
        }
        if let Some(on_update) = &column.on_update {
            line.push_str(&format!(" ON UPDATE {on_update}"));
        }
        if column.auto_increment {
            line.push_str(" AUTO_INCREMENT");
        }
    }
    if column.without_system_versioning {
        line.push_str(" WITHOUT SYSTEM VERSIONING");
    }
    if !column.comment.is_empty() {
        line.push_str(&format!(" COMMENT {}", literal(&column.comment)));
    }
    if let Some(check) = &column.check {
        line.push_str(&format!(" CHECK ({check})"));
    }
    line
}

/// An index's line in a `CREATE TABLE`, with its two leading spaces.
pub(crate) fn index_line(index: &Index, flavor: Flavor) -> String {
    let parts: Vec<String> = index
        .parts
        .iter()
        .map(|part| {
            let mut text = match &part.expression {
                Some(expression) => format!("({expression})"),
                None => identifier(&part.column),
            };
            if let Some(prefix) = part.prefix {
                text.push_str(&format!("({prefix})"));
            }
            if part.descending {
                text.push_str(" DESC");
            }
            text
        })
        .chain(
            index
                .without_overlaps
                .iter()
                .map(|period| format!("{} WITHOUT OVERLAPS", identifier(period))),
        )
        .collect();
    let head = match index.kind {
        IndexKind::Primary => "PRIMARY KEY".to_owned(),
        IndexKind::Unique => format!("UNIQUE KEY {}", identifier(&index.name)),
        IndexKind::Key => format!("KEY {}", identifier(&index.name)),
        IndexKind::Fulltext => format!("FULLTEXT KEY {}", identifier(&index.name)),
        IndexKind::Spatial => format!("SPATIAL KEY {}", identifier(&index.name)),
    };
    let mut line = format!("  {head} ({})", parts.join(","));
    if let Some(using) = &index.using {
        line.push_str(&format!(" USING {using}"));
    }
    if !index.comment.is_empty() {
        line.push_str(&format!(" COMMENT {}", literal(&index.comment)));
    }
    if index.ignored {
        line.push_str(" IGNORED");
    }
    if index.invisible {
        line.push_str(match flavor {
            Flavor::Mariadb => " INVISIBLE",
            Flavor::Mysql => " /*!80000 INVISIBLE */",
        });
    }
    line
}

/// A foreign key's line in a `CREATE TABLE`, with its two leading spaces.
pub(crate) fn foreign_key_line(key: &ForeignKey) -> String {
    let list = |names: &[String]| {
        names
            .iter()
            .map(|name| identifier(name))
            .collect::<Vec<_>>()
            .join(",")
    };
    let target = match &key.referenced_database {
        Some(database) => format!(
            "{}.{}",
            identifier(database),
            identifier(&key.referenced_table)
        ),
        None => identifier(&key.referenced_table),
    };
    let mut line = format!(
        "  CONSTRAINT {} FOREIGN KEY ({}) REFERENCES {target} ({})",
        identifier(&key.name),
        list(&key.columns),
        list(&key.referenced_columns)
    );
    for (event, action) in [("DELETE", &key.on_delete), ("UPDATE", &key.on_update)] {
        if action != "RESTRICT" {
            line.push_str(&format!(" ON {event} {action}"));
        }
    }
    line
}

/// A table-level check's line in a `CREATE TABLE`, with its two leading spaces.
pub(crate) fn check_line(check: &Check, flavor: Flavor) -> String {
    let enforcement = if check.not_enforced && flavor == Flavor::Mysql {
        " /*!80016 NOT ENFORCED */"
    } else {
        ""
    };
    format!(
        "  CONSTRAINT {} CHECK ({}){enforcement}",
        identifier(&check.name),
        check.clause
    )
}

/// The canonical `CREATE TABLE` of `table`, read from a `flavor` server, without a trailing
/// newline.
pub fn render_table(table: &Table, flavor: Flavor) -> String {
    let mut lines: Vec<String> = table
        .columns
        .iter()
        .map(|column| column_line(table, column, flavor))
        .collect();
    lines.extend(table.application_period.iter().map(|period| {
        format!(
            "  PERIOD FOR {} ({}, {})",
            identifier(&period.name),
            identifier(&period.start),
            identifier(&period.end)
        )
    }));
    lines.extend(table.indexes.iter().map(|index| index_line(index, flavor)));
    lines.extend(table.foreign_keys.iter().map(foreign_key_line));
    lines.extend(table.checks.iter().map(|check| check_line(check, flavor)));
    lines.extend(table.system_period.iter().map(|period| {
        format!(
            "  PERIOD FOR SYSTEM_TIME ({}, {})",
            identifier(&period.start),
            identifier(&period.end)
        )
    }));
    let mut options: Vec<(String, String, bool)> = table
        .options
        .iter()
        .map(|option| {
            (
                option.name.clone(),
                option.value.clone(),
                option.engine_defined,
            )
        })
        .collect();
    if let Some(row_format) = &table.row_format {
        options.push(("ROW_FORMAT".to_owned(), row_format.clone(), false));
    }
    if !table.comment.is_empty() {
        options.push(("COMMENT".to_owned(), literal(&table.comment), false));
    }
    options.sort_by_key(|(name, _, engine_defined)| option_rank(name, *engine_defined));
    let mut footer = format!(
        ") ENGINE={} DEFAULT CHARSET={} COLLATE={}",
        table.engine, table.charset, table.collation
    );
    for (name, value, engine_defined) in &options {
        if *engine_defined {
            footer.push_str(&format!(" {}={value}", identifier(name)));
        } else {
            footer.push_str(&format!(" {name}={value}"));
        }
    }
    if table.system_versioned {
        footer.push_str(" WITH SYSTEM VERSIONING");
    }
    if let Some(partitioning) = &table.partitioning {
        footer.push_str(&partition_clause(partitioning, &table.engine, flavor));
    }
    format!(
        "CREATE TABLE {} (\n{}\n{footer}",
        identifier(&table.name),
        lines.join(",\n")
    )
}

/// Table options in the order MariaDB prints them; options this list does not name come after
/// it, engine-defined ones last, each group in the order given (the sort is stable).
const OPTION_ORDER: &[&str] = &[
    "MIN_ROWS",
    "MAX_ROWS",
    "AVG_ROW_LENGTH",
    "PACK_KEYS",
    "STATS_PERSISTENT",
    "STATS_AUTO_RECALC",
    "STATS_SAMPLE_PAGES",
    "CHECKSUM",
    "PAGE_CHECKSUM",
    "DELAY_KEY_WRITE",
    "ROW_FORMAT",
    "TRANSACTIONAL",
    "KEY_BLOCK_SIZE",
    "COMPRESSION",
    "ENCRYPTION",
    "COMMENT",
    "CONNECTION",
];

/// Where a table option goes in the canonical order: by [`OPTION_ORDER`], unknown options after
/// it, engine-defined ones last. MySQL 8 prints some options in another order than MariaDB; both
/// servers' texts are sorted by this rank before they are compared.
pub fn option_rank(name: &str, engine_defined: bool) -> usize {
    if engine_defined {
        return OPTION_ORDER.len() + 1;
    }
    OPTION_ORDER
        .iter()
        .position(|known| *known == name)
        .unwrap_or(OPTION_ORDER.len())
}

/// A column default in canonical form: literals (`NULL`, numbers, strings, `b'101'`, `x'0F'`)
/// and `current_timestamp(...)` as they are; any other expression in parentheses, once.
pub fn canonical_default(default: &str) -> String {
    let is_literal = default == "NULL"
        || default.parse::<f64>().is_ok()
        || default.starts_with("current_timestamp(")
        || (default.starts_with('\'')
            && crate::snapshot::scan::quoted_end(default, 0) == Some(default.len()))
        || ["b'", "x'", "B'", "X'"]
            .iter()
            .any(|prefix| default.starts_with(prefix) && default.ends_with('\''));
    let parenthesized = default.starts_with('(')
        && crate::snapshot::scan::closing_paren(default, 0) == Some(default.len());
    if is_literal || parenthesized {
        default.to_owned()
    } else {
        format!("({default})")
    }
}

/// Whether the partitions are the ones `PARTITIONS n` creates: `HASH` or `KEY` partitions named
/// `p0`, `p1`, ... with nothing else said about them.
fn default_partitions(partitioning: &Partitioning) -> bool {
    if partitioning.method == "SYSTEM_TIME" {
        // `PARTITIONS n`: history partitions `p0`, `p1`, ... and the current one, `pn`.
        let count = partitioning.partitions.len();
        return count >= 2
            && partitioning
                .partitions
                .iter()
                .enumerate()
                .all(|(i, partition)| {
                    let (name, values) = if i + 1 == count {
                        ("pn".to_owned(), "CURRENT")
                    } else {
                        (format!("p{i}"), "HISTORY")
                    };
                    partition.name == name
                        && partition.values.as_deref() == Some(values)
                        && partition.comment.is_empty()
                        && partition.subpartitions.is_empty()
                });
    }
    (partitioning.method.ends_with("HASH") || partitioning.method.ends_with("KEY"))
        && partitioning.subpartition_method.is_none()
        && partitioning
            .partitions
            .iter()
            .enumerate()
            .all(|(i, partition)| {
                partition.name == format!("p{i}")
                    && partition.comment.is_empty()
                    && partition.values.is_none()
            })
}

/// Whether every partition has the `SUBPARTITIONS n` subpartitions: the same number, named
/// `<partition>sp0`, `<partition>sp1`, ... with no comment.
fn default_subpartitions(partitioning: &Partitioning) -> Option<usize> {
    let count = partitioning.partitions.first()?.subpartitions.len();
    let default = count > 0
        && partitioning.partitions.iter().all(|partition| {
            partition.subpartitions.len() == count
                && partition.subpartitions.iter().enumerate().all(|(i, sub)| {
                    sub.name == format!("{}sp{i}", partition.name) && sub.comment.is_empty()
                })
        });
    default.then_some(count)
}

/// `RANGE (expr)`, or `RANGE  COLUMNS(a,b)` with MariaDB's two spaces.
fn method_clause(partitioning_method: &str, expression: &str, system_time: Option<&str>) -> String {
    let method = partitioning_method;
    if method == "SYSTEM_TIME" {
        // MariaDB prints the space after `SYSTEM_TIME` even when nothing follows it.
        return format!("SYSTEM_TIME {}", system_time.unwrap_or_default());
    }
    match method.strip_suffix(" COLUMNS") {
        Some(kind) => format!("{kind}  COLUMNS({expression})"),
        None => format!("{method} ({expression})"),
    }
}

fn partition_values(method: &str, values: Option<&str>) -> String {
    match (method, values) {
        ("RANGE", Some("MAXVALUE")) => " VALUES LESS THAN MAXVALUE".to_owned(),
        ("RANGE" | "RANGE COLUMNS", Some(values)) => format!(" VALUES LESS THAN ({values})"),
        ("LIST" | "LIST COLUMNS", Some(values)) => format!(" VALUES IN ({values})"),
        ("SYSTEM_TIME", Some(values)) => format!(" {values}"),
        _ => String::new(),
    }
}

fn comment_clause(comment: &str) -> String {
    if comment.is_empty() {
        String::new()
    } else {
        format!(" COMMENT = {}", literal(comment))
    }
}

/// A partition's name: always quoted on MariaDB; on MySQL where MySQL quoted it (a keyword, see
/// [`Partition::quoted`]) and where a bare name would not read as one: MySQL's unquoted names
/// are made of ASCII letters, digits, `$`, `_` and characters from U+0080 on, and are not all
/// digits.
fn partition_name(name: &str, quoted: bool, flavor: Flavor) -> String {
    let bare = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$' || !c.is_ascii())
        && !name.chars().all(|c| c.is_ascii_digit());
    match flavor {
        Flavor::Mysql if bare && !quoted => name.to_owned(),
        _ => identifier(name),
    }
}

fn partition_line(
    partitioning: &Partitioning,
    partition: &Partition,
    engine: &str,
    list_subpartitions: bool,
    flavor: Flavor,
) -> String {
    let values = if partition.default {
        " DEFAULT".to_owned()
    } else {
        partition_values(&partitioning.method, partition.values.as_deref())
    };
    let mut line = format!(
        "PARTITION {}{values}{}",
        partition_name(&partition.name, partition.quoted, flavor),
        comment_clause(&partition.comment)
    );
    if list_subpartitions {
        let subs: Vec<String> = partition
            .subpartitions
            .iter()
            .map(|sub| {
                format!(
                    "SUBPARTITION {}{} ENGINE = {engine}",
                    partition_name(&sub.name, sub.quoted, flavor),
                    comment_clause(&sub.comment)
                )
            })
            .collect();
        line.push_str(&format!("\n ({})", subs.join(",\n  ")));
    } else {
        line.push_str(&format!(" ENGINE = {engine}"));
    }
    line
}

/// The `PARTITION BY` lines that follow the table options: as MariaDB prints them, or, for
/// MySQL, inside the version comment MySQL prints them in (`/*!50500` for the `COLUMNS` methods,
/// `/*!50100` for the others).
pub(crate) fn partition_clause(
    partitioning: &Partitioning,
    engine: &str,
    flavor: Flavor,
) -> String {
    let (open, close) = match flavor {
        Flavor::Mariadb => ("\n PARTITION BY ".to_owned(), ""),
        Flavor::Mysql if partitioning.method.ends_with(" COLUMNS") => {
            ("\n/*!50500 PARTITION BY ".to_owned(), " */")
        }
        Flavor::Mysql => ("\n/*!50100 PARTITION BY ".to_owned(), " */"),
    };
    let mut clause = format!(
        "{open}{}",
        method_clause(
            &partitioning.method,
            &partitioning.expression,
            partitioning.system_time.as_deref()
        )
    );
    if default_partitions(partitioning) {
        clause.push_str(&format!(
            "\nPARTITIONS {}{close}",
            partitioning.partitions.len()
        ));
        return clause;
    }
    let default_subpartitions = default_subpartitions(partitioning);
    if let Some(method) = &partitioning.subpartition_method {
        clause.push_str(&format!(
            "\nSUBPARTITION BY {}",
            method_clause(
                method,
                partitioning
                    .subpartition_expression
                    .as_deref()
                    .unwrap_or_default(),
                None
            )
        ));
        if let Some(count) = default_subpartitions {
            clause.push_str(&format!("\nSUBPARTITIONS {count}"));
        }
    }
    let list_subpartitions =
        partitioning.subpartition_method.is_some() && default_subpartitions.is_none();
    let lines: Vec<String> = partitioning
        .partitions
        .iter()
        .map(|partition| {
            partition_line(partitioning, partition, engine, list_subpartitions, flavor)
        })
        .collect();
    clause.push_str(&format!("\n({}){close}", lines.join(",\n ")));
    clause
}

/// The canonical `CREATE SEQUENCE` of `sequence`, without a trailing newline.
pub fn render_sequence(sequence: &Sequence) -> String {
    let cache = if sequence.cache == "0" {
        "nocache".to_owned()
    } else {
        format!("cache {}", sequence.cache)
    };
    let mut text = format!(
        "CREATE SEQUENCE {} start with {} minvalue {} maxvalue {} increment by {} {cache} {} ENGINE={}",
        identifier(&sequence.name),
        sequence.start,
        sequence.minimum,
        sequence.maximum,
        sequence.increment,
        if sequence.cycle { "cycle" } else { "nocycle" },
        sequence.engine
    );
    if !sequence.comment.is_empty() {
        text.push_str(&format!(" COMMENT={}", literal(&sequence.comment)));
    }
    text
}

/// The canonical `CREATE VIEW` of `view`, without a definer and without a trailing newline.
pub fn render_view(view: &View) -> String {
    let mut text = format!(
        "CREATE ALGORITHM={} SQL SECURITY {} VIEW {} AS {}",
        view.algorithm,
        view.security,
        identifier(&view.name),
        view.definition
    );
    if view.check_option != "NONE" {
        text.push_str(&format!(" WITH {} CHECK OPTION", view.check_option));
    }
    text
}
