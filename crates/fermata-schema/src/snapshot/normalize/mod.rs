//! The server's own `SHOW CREATE` text brought into canonical form, so it can be compared with
//! what [`super::render`] makes of the model: the definer taken out wherever the server puts it,
//! this database's qualifier removed, counters dropped, keys, constraints and table options put
//! in the canonical order, a column's collation clause written one way. A MariaDB text also
//! gets the spelling differences between MariaDB releases evened out ([`mysql`]); a MySQL text
//! keeps MySQL's own spelling (`int`, `CURRENT_TIMESTAMP`, its version comments). Each function
//! returns `None` when the text does not have the shape it expects; the caller then refuses the
//! object.

pub mod mysql;

use fermata_schema_core::Reason;

use super::model::{Flavor, Index, Period, Routine, RoutineKind, Table};
use super::render::{identifier, option_rank};
use super::scan::{Token, Tokens, closing_paren, quoted_end, split_top_level};

/// `text` without its `DEFINER=user@host` clause, wherever the server puts it in the head
/// (`CREATE DEFINER=...`, `CREATE ALGORITHM=... DEFINER=... SQL SECURITY ...`). A MariaDB role
/// has no host.
pub fn strip_definer(text: &str) -> Option<String> {
    let start = text.find(" DEFINER=")?;
    let mut tokens = Tokens::new(&text[start..]);
    tokens.skip_definer()?;
    Some(format!("{}{}", &text[..start], tokens.rest()))
}

/// The server's `SHOW CREATE VIEW` text in canonical form: the definer taken out, and the
/// qualifier of the view's own database (which the server prints when asked from outside it)
/// removed, as the model has it.
pub fn view(text: &str, database: &str) -> Option<String> {
    let text = strip_definer(text)?;
    Some(text.replace(&format!("{}.", identifier(database)), ""))
}

/// The algorithm `SHOW CREATE VIEW` names (`CREATE ALGORITHM=MERGE ...`): MySQL's `VIEWS` has no
/// `ALGORITHM` column, so both flavors read it here.
pub fn view_algorithm(text: &str) -> Option<String> {
    let rest = text.strip_prefix("CREATE ALGORITHM=")?;
    let end = rest.find(' ')?;
    let algorithm = &rest[..end];
    ["UNDEFINED", "MERGE", "TEMPTABLE"]
        .contains(&algorithm)
        .then(|| algorithm.to_owned())
}

/// The server's `SHOW CREATE SEQUENCE` text in canonical form (MariaDB prints it that way).
pub fn sequence(text: &str) -> Option<String> {
    text.starts_with("CREATE SEQUENCE ")
        .then(|| text.to_owned())
}

/// The server's `SHOW CREATE EVENT` text in canonical form: the definer taken out.
/// MySQL 8.0.22+ says `DISABLE ON REPLICA` where MariaDB says `DISABLE ON SLAVE`.
pub fn event(text: &str) -> Option<String> {
    let text = strip_definer(text)?;
    Some(text.replacen(" DISABLE ON REPLICA ", " DISABLE ON SLAVE ", 1))
}

/// The server's `SHOW CREATE TRIGGER` statement in canonical form. MariaDB keeps the head as
/// it was written (any case, spacing, quoting and qualifier), so it is read token by token and
/// written out again; the body after `FOR EACH ROW` (and after a `FOLLOWS` or `PRECEDES` clause,
/// which the file renders from the model) stays exactly as the server keeps it.
pub fn trigger(text: &str, database: &str, sql_mode: &str) -> Option<String> {
    let mut tokens = Tokens::under(text, sql_mode);
    tokens.expect(&["CREATE"])?;
    tokens.skip_definer()?;
    tokens.expect(&["TRIGGER"])?;
    let name = tokens.object_name(database)?;
    let timing = tokens.next_token()?;
    let event = tokens.next_token()?;
    let (Token::Word(timing), Token::Word(event)) = (timing, event) else {
        return None;
    };
    tokens.expect(&["ON"])?;
    let table = tokens.object_name(database)?;
    tokens.expect(&["FOR", "EACH", "ROW"])?;
    let mut body = tokens.rest();
    let mut order = Tokens::under(body, sql_mode);
    if order
        .next_token()
        .is_some_and(|token| token.is("FOLLOWS") || token.is("PRECEDES"))
    {
        order.next_token()?.identifier()?;
        body = order.rest();
    }
    Some(format!(
        "CREATE TRIGGER {} {} {} ON {} FOR EACH ROW {}",
        identifier(&name),
        timing.to_ascii_uppercase(),
        event.to_ascii_uppercase(),
        identifier(&table),
        body.trim_start()
    ))
}

/// A routine's `SHOW CREATE` text in canonical form and the parameter list it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutineText {
    pub canonical: String,
    /// Between the parentheses, exactly as the server keeps it.
    pub parameter_list: String,
}

/// The server's `SHOW CREATE PROCEDURE` or `SHOW CREATE FUNCTION` text in canonical form: the
/// definer taken out, the name quoted, the return type in its flavor's spelling (with the
/// collation of the model's return type where the server leaves it implicit).
pub fn routine(
    text: &str,
    routine: &Routine,
    database: &str,
    flavor: Flavor,
) -> Option<RoutineText> {
    let mut tokens = Tokens::under(text, &routine.sql_mode);
    tokens.expect(&["CREATE"])?;
    tokens.skip_definer()?;
    tokens.expect(&[routine.kind.keyword()])?;
    let name = tokens.object_name(database)?;
    let rest = tokens.rest();
    let after = closing_paren(rest, rest.find('(')?)?;
    let parameter_list = rest[rest.find('(')? + 1..after - 1].to_owned();
    let mut rest = rest[after..].to_owned();
    if routine.kind == RoutineKind::Function {
        let returns = rest.strip_prefix(" RETURNS ")?;
        let end = returns.find('\n').unwrap_or(returns.len());
        let mut spelled = match flavor {
            Flavor::Mariadb => mysql::utf8mb3_text(&mysql::display_width(&returns[..end])),
            Flavor::Mysql => returns[..end].to_owned(),
        };
        if let Some(expected) = &routine.returns
            && spelled.contains(" CHARSET ")
            && !spelled.contains(" COLLATE ")
            && let Some(at) = expected.find(" COLLATE ")
        {
            spelled.push_str(&expected[at..]);
        }
        rest = format!(" RETURNS {spelled}{}", &returns[end..]);
    }
    Some(RoutineText {
        canonical: format!(
            "CREATE {} {}({parameter_list}){rest}",
            routine.kind.keyword(),
            identifier(&name)
        ),
        parameter_list,
    })
}

/// Whether a parameter list as the server keeps it declares `routine`'s parameters (as
/// `information_schema.PARAMETERS` has them): the same number, each with the same mode (`IN`
/// when a procedure's parameter names none; a function's are all `IN`) and the same name. Types are not compared: the list
/// keeps them as written (`INTEGER`, `BOOL`), the catalog as the server resolved them.
pub fn parameters_match(routine: &Routine, parameter_list: &str) -> bool {
    let Some(items) = split_top_level(parameter_list) else {
        return false;
    };
    let items: Vec<&str> = if parameter_list.trim().is_empty() {
        Vec::new()
    } else {
        items
    };
    items.len() == routine.parameters.len()
        && items
            .iter()
            .zip(&routine.parameters)
            .all(|(item, parameter)| {
                let mut tokens = Tokens::under(item, &routine.sql_mode);
                let Some(first) = tokens.next_token() else {
                    return false;
                };
                let mode = ["IN", "OUT", "INOUT"]
                    .into_iter()
                    .find(|mode| first.is(mode) && routine.kind == RoutineKind::Procedure);
                let name = match mode {
                    Some(_) => tokens.next_token(),
                    None => Some(first),
                };
                // A function's parameters are `IN` for MariaDB and have no mode for MySQL.
                let mode_matches = match routine.kind {
                    RoutineKind::Procedure => {
                        parameter.mode.as_deref() == Some(mode.unwrap_or("IN"))
                    }
                    RoutineKind::Function => matches!(parameter.mode.as_deref(), None | Some("IN")),
                };
                mode_matches
                    && name.as_ref().and_then(Token::identifier) == Some(parameter.name.as_str())
            })
}

/// Where a body line of `SHOW CREATE TABLE` goes in the canonical order: MariaDB's order, with
/// the keys and constraints sorted by name.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Clause {
    Column(usize),
    ApplicationPeriod,
    Primary,
    Key(Vec<u8>),
    ForeignKey(Vec<u8>),
    Check(Vec<u8>),
    SystemPeriod,
}

/// `PERIOD FOR name (`start`, `end`)` of a body line, with `SYSTEM_TIME` as the system period's
/// name.
fn period_line(line: &str) -> Option<Period> {
    let rest = line.trim_start().strip_prefix("PERIOD FOR ")?;
    let (name, rest) = match rest.strip_prefix("SYSTEM_TIME ") {
        Some(rest) => ("SYSTEM_TIME".to_owned(), rest),
        None => {
            let end = quoted_end(rest, 0).filter(|_| rest.starts_with('`'))?;
            (
                rest[1..end - 1].replace("``", "`"),
                rest[end..].strip_prefix(' ')?,
            )
        }
    };
    let inner = rest.strip_prefix('(')?.strip_suffix(')')?;
    let columns = split_top_level(inner)?;
    let [start, end] = columns.as_slice() else {
        return None;
    };
    let unquote = |text: &str| {
        let text = text.trim();
        (text.starts_with('`') && quoted_end(text, 0) == Some(text.len()))
            .then(|| text[1..text.len() - 1].replace("``", "`"))
    };
    Some(Period {
        name,
        start: unquote(start)?,
        end: unquote(end)?,
    })
}

/// The facts about a table that only its `SHOW CREATE TABLE` text gives, added to the model
/// read from the catalog: its periods (MariaDB before 11.4 has no `PERIODS` view), which
/// unique key ends `WITHOUT OVERLAPS` (the catalog lists the period's end and start columns as
/// its last parts), a key's `USING` when the server prints it, whether a `LIST` partition is
/// the `DEFAULT` one (the catalog describes it as `VALUES IN (0)`), what follows
/// `PARTITION BY SYSTEM_TIME`, and which partition and subpartition names a MySQL server quotes
/// (its keywords; MariaDB quotes every name). The period's own check (`start < end`, which the
/// catalog lists under the period's name) is taken out of the table's checks. The model then
/// renders these as the text says them, and the rest of the text is still compared with the
/// rest of the model. `Err` with the reason when the text says something the model cannot hold.
/// A model these facts were added to already (a snapshot's, which a verifier checks against the
/// text again) takes them again unchanged.
pub fn table_facts(text: &str, table: &mut Table, flavor: Flavor) -> Result<(), Reason> {
    let text = mysql::unwrap_version_comments(text);
    let mut lines = text.lines();
    lines.next();
    for line in lines.by_ref() {
        if line.starts_with(')') {
            if line.ends_with(" WITH SYSTEM VERSIONING") != table.system_versioned {
                return Err(Reason::PeriodClause);
            }
            break;
        }
        let line = line.strip_suffix(',').unwrap_or(line);
        if line.starts_with("  `") || line.starts_with("  CONSTRAINT ") {
            continue;
        }
        if line.trim_start().starts_with("PERIOD FOR ") {
            let period = period_line(line).ok_or(Reason::PeriodClause)?;
            let known = |name: &str| table.columns.iter().any(|column| column.name == name);
            if !known(&period.start) || !known(&period.end) {
                return Err(Reason::PeriodClause);
            }
            if period.name == "SYSTEM_TIME" {
                table.system_period = Some(period);
            } else {
                table.checks.retain(|check| check.name != period.name);
                table.application_period = Some(period);
            }
        } else if line.contains("KEY `") || line.starts_with("  PRIMARY KEY ") {
            let name = if line.starts_with("  PRIMARY KEY ") {
                "PRIMARY".to_owned()
            } else {
                quoted_after(line, "KEY ").ok_or(Reason::IndexKind)?
            };
            let index = table
                .indexes
                .iter_mut()
                .find(|index| index.name == name)
                .ok_or(Reason::IndexKind)?;
            key_facts(line, index, table.application_period.as_ref())?;
        }
    }
    let Some(partitioning) = &mut table.partitioning else {
        return Ok(());
    };
    for line in lines {
        let line = line.trim_start_matches([' ', '(']);
        if let Some(rest) = line.strip_prefix("PARTITION BY SYSTEM_TIME") {
            partitioning.system_time = Some(rest.trim_start().to_owned());
            continue;
        }
        if flavor == Flavor::Mysql {
            let (method, expression) = match line.strip_prefix("SUBPARTITION BY ") {
                Some(_) => (
                    partitioning.subpartition_method.as_deref(),
                    partitioning.subpartition_expression.as_mut(),
                ),
                None if line.starts_with("PARTITION BY ") => (
                    Some(partitioning.method.as_str()),
                    Some(&mut partitioning.expression),
                ),
                None => (None, None),
            };
            if let (Some(method), Some(expression)) = (method, expression)
                && (method.ends_with("KEY") || method.ends_with(" COLUMNS"))
                && let Some(printed) = printed_field_list(line, expression)
            {
                *expression = printed;
            }
        }
        let (subpartition, rest) = match line.strip_prefix("SUBPARTITION ") {
            Some(rest) => (true, rest),
            None => match line.strip_prefix("PARTITION ") {
                Some(rest) => (false, rest),
                None => continue,
            },
        };
        if rest.starts_with("BY ") {
            continue;
        }
        let quoted = rest.starts_with('`');
        let (name, after) = if quoted {
            let end = quoted_end(rest, 0).ok_or(Reason::PartitioningClause)?;
            (rest[1..end - 1].replace("``", "`"), &rest[end..])
        } else {
            let end = rest.find([' ', ',', ')']).unwrap_or(rest.len());
            (rest[..end].to_owned(), &rest[end..])
        };
        // A name the catalog does not have is left to the comparison of the whole text, which
        // then fails; only a `DEFAULT` partition must be known here.
        let mysql_quoted = quoted && flavor == Flavor::Mysql;
        let mut partitions = partitioning.partitions.iter_mut();
        if subpartition {
            if let Some(sub) = partitions
                .flat_map(|partition| partition.subpartitions.iter_mut())
                .find(|sub| sub.name == name)
            {
                sub.quoted = mysql_quoted;
            }
            continue;
        }
        let partition = partitions.find(|partition| partition.name == name);
        if after.starts_with(" DEFAULT") {
            let partition = partition.ok_or(Reason::PartitioningClause)?;
            partition.default = true;
            partition.values = None;
        } else if let Some(partition) = partition {
            partition.quoted = mysql_quoted;
        }
    }
    if partitioning.method == "SYSTEM_TIME" && partitioning.system_time.is_none() {
        return Err(Reason::PartitioningClause);
    }
    Ok(())
}

/// The column list of a MySQL `PARTITION BY KEY (...)` or `... COLUMNS(...)` line as the text
/// prints it, where it names the same columns as the catalog's list: MySQL prints each name
/// bare unless it reads as a keyword or not as a name, as it does partition names, and the
/// catalog may quote them. `None` when the lists name other columns.
fn printed_field_list(line: &str, catalog: &str) -> Option<String> {
    let open = line.find('(')?;
    let printed = &line[open + 1..closing_paren(line, open)? - 1];
    let names = |list: &str| -> Option<Vec<String>> {
        split_top_level(list)?
            .into_iter()
            .map(|name| {
                let name = name.trim();
                match name.strip_prefix('`') {
                    Some(_) => (quoted_end(name, 0) == Some(name.len()))
                        .then(|| name[1..name.len() - 1].replace("``", "`")),
                    None => Some(name.to_owned()),
                }
            })
            .collect()
    };
    (names(printed)? == names(catalog)?).then(|| printed.to_owned())
}

/// A key line's `WITHOUT OVERLAPS` and `USING`.
fn key_facts(line: &str, index: &mut Index, period: Option<&Period>) -> Result<(), Reason> {
    if line.contains(" WITHOUT OVERLAPS)") {
        let period = period.ok_or(Reason::PeriodClause)?;
        // Taken out of the parts already when the model is a snapshot's, checked again.
        if index.without_overlaps.as_ref() != Some(&period.name) {
            // The catalog lists the period's end and start after the key's own parts.
            let parts = index.parts.len();
            let tail: Vec<&str> = index.parts[parts.saturating_sub(2)..]
                .iter()
                .map(|part| part.column.as_str())
                .collect();
            if parts < 3 || tail != [period.end.as_str(), period.start.as_str()] {
                return Err(Reason::PeriodClause);
            }
            index.parts.truncate(parts - 2);
            index.without_overlaps = Some(period.name.clone());
        }
    }
    for using in ["HASH", "BTREE", "RTREE"] {
        if line.contains(&format!(") USING {using}")) {
            index.using = Some(using.to_owned());
        }
    }
    Ok(())
}

/// The first quoted identifier in `text` after `after`, unquoted.
fn quoted_after(text: &str, after: &str) -> Option<String> {
    let start = text.find(after)? + after.len();
    let end = quoted_end(text, start).filter(|_| text[start..].starts_with('`'))?;
    Some(text[start + 1..end - 1].replace("``", "`"))
}

/// A table option as `SHOW CREATE TABLE` or `CREATE_OPTIONS` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrintedOption {
    pub name: String,
    pub value: String,
    pub engine_defined: bool,
}

/// Reads `NAME=value` options separated by spaces (`DEFAULT CHARSET=x` counts as one name,
/// `` `PAGE_COMPRESSED`='1' `` is engine-defined, a value may be a quoted string); `None` when
/// something else is there. A bare word without `=` (`partitioned`) is an option with an empty
/// value.
pub fn options(text: &str) -> Option<Vec<PrintedOption>> {
    let mut options = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let (mut name, engine_defined, after) = if rest.starts_with('`') {
            let end = quoted_end(rest, 0)?;
            (rest[1..end - 1].replace("``", "`"), true, &rest[end..])
        } else {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            (rest[..end].to_owned(), false, &rest[end..])
        };
        rest = after;
        if name == "DEFAULT" {
            let next = rest.strip_prefix(' ')?;
            let end = next
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(next.len());
            name = format!("DEFAULT {}", &next[..end]);
            rest = &next[end..];
        }
        if name.is_empty() {
            return None;
        }
        let value = match rest.strip_prefix('=') {
            Some(after) => {
                let end = if after.starts_with('\'') {
                    quoted_end(after, 0)?
                } else {
                    after.find(' ').unwrap_or(after.len())
                };
                rest = &after[end..];
                after[..end].to_owned()
            }
            None => String::new(),
        };
        options.push(PrintedOption {
            name,
            value,
            engine_defined,
        });
        rest = rest.trim_start();
    }
    Some(options)
}

/// The table options line in canonical form: `ENGINE`, `DEFAULT CHARSET`, `COLLATE` (spelled
/// out with the model's collation where the server leaves it implicit), then the others by
/// [`option_rank`], without `AUTO_INCREMENT=`.
fn footer(line: &str, table: &Table, flavor: Flavor) -> Option<String> {
    let line = line.strip_prefix(") ")?;
    let (line, versioning) = match line.strip_suffix(" WITH SYSTEM VERSIONING") {
        Some(line) => (line, " WITH SYSTEM VERSIONING"),
        None => (line, ""),
    };
    let printed = match flavor {
        Flavor::Mariadb => options(&mysql::utf8mb3_text(line))?,
        Flavor::Mysql => options(line)?,
    };
    let value = |name: &str| {
        printed
            .iter()
            .find(|option| option.name == name && !option.engine_defined)
            .map(|option| option.value.clone())
    };
    let mut out = format!(
        ") ENGINE={} DEFAULT CHARSET={} COLLATE={}",
        value("ENGINE")?,
        value("DEFAULT CHARSET")?,
        value("COLLATE").unwrap_or_else(|| table.collation.clone())
    );
    let mut others: Vec<&PrintedOption> = printed
        .iter()
        .filter(|option| {
            option.engine_defined
                || !["ENGINE", "DEFAULT CHARSET", "COLLATE", "AUTO_INCREMENT"]
                    .contains(&option.name.as_str())
        })
        .collect();
    others.sort_by_key(|option| option_rank(&option.name, option.engine_defined));
    for option in others {
        if option.engine_defined {
            out.push_str(&format!(" {}={}", identifier(&option.name), option.value));
        } else {
            out.push_str(&format!(" {}={}", option.name, option.value));
        }
    }
    out.push_str(versioning);
    Some(out)
}

/// The `SHOW CREATE TABLE` text of a `flavor` server in canonical form: column lines in
/// canonical spelling, key and constraint lines in the canonical order, the options line in
/// canonical form, and the partitioning after it (MariaDB's with quoted names, MySQL's as MySQL
/// prints it). `None` when the text does not have the shape of a `CREATE TABLE`.
pub fn table(text: &str, table: &Table, flavor: Flavor) -> Option<String> {
    let text = match flavor {
        Flavor::Mariadb => mysql::unwrap_version_comments(text),
        Flavor::Mysql => text.to_owned(),
    };
    let mut lines = text.lines();
    let head = lines.next()?;
    if head != format!("CREATE TABLE {} (", identifier(&table.name)) {
        return None;
    }
    let mut body = Vec::new();
    let mut footer_line = None;
    for line in lines.by_ref() {
        if line.starts_with(')') {
            footer_line = Some(line);
            break;
        }
        body.push(line.strip_suffix(',').unwrap_or(line));
    }
    let mut clauses = Vec::with_capacity(body.len());
    for (position, line) in body.iter().enumerate() {
        let clause = if line.starts_with("  `") {
            let line = match flavor {
                Flavor::Mariadb => mysql::column_line(line, table)?,
                Flavor::Mysql => mysql::mysql_column_line(line, table)?,
            };
            (Clause::Column(position), line)
        } else if line.starts_with("  PERIOD FOR SYSTEM_TIME ") {
            (Clause::SystemPeriod, (*line).to_owned())
        } else if line.starts_with("  PERIOD FOR ") {
            (Clause::ApplicationPeriod, (*line).to_owned())
        } else if line.starts_with("  PRIMARY KEY ") {
            (Clause::Primary, (*line).to_owned())
        } else if line.starts_with("  CONSTRAINT ") && line.contains(" FOREIGN KEY ") {
            let name = quoted_after(line, "CONSTRAINT ")?;
            (Clause::ForeignKey(name.into_bytes()), (*line).to_owned())
        } else if line.starts_with("  CONSTRAINT ") {
            let name = quoted_after(line, "CONSTRAINT ")?;
            (Clause::Check(name.into_bytes()), (*line).to_owned())
        } else if line.contains("KEY `") {
            let name = quoted_after(line, "KEY ")?;
            (Clause::Key(name.into_bytes()), (*line).to_owned())
        } else {
            return None;
        };
        clauses.push(clause);
    }
    clauses.sort_by(|a, b| a.0.cmp(&b.0));
    let mut canonical = format!(
        "{head}\n{}\n{}",
        clauses
            .iter()
            .map(|(_, line)| line.as_str())
            .collect::<Vec<_>>()
            .join(",\n"),
        footer(footer_line?, table, flavor)?
    );
    for line in lines {
        canonical.push('\n');
        match flavor {
            Flavor::Mariadb => canonical.push_str(&mysql::partition_line(line)),
            Flavor::Mysql => canonical.push_str(line),
        }
    }
    Some(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bare_table() -> Table {
        Table {
            name: "t".to_owned(),
            engine: "InnoDB".to_owned(),
            charset: "utf8mb4".to_owned(),
            collation: "utf8mb4_general_ci".to_owned(),
            row_format: None,
            options: Vec::new(),
            comment: String::new(),
            columns: Vec::new(),
            indexes: Vec::new(),
            foreign_keys: Vec::new(),
            checks: Vec::new(),
            partitioning: None,
            ..Table::default()
        }
    }

    #[test]
    fn counters_and_key_order_do_not_matter() {
        let server = "CREATE TABLE `t` (\n  `id` int(11) NOT NULL,\n  `b` int(11) DEFAULT NULL,\n  KEY `zz` (`b`),\n  PRIMARY KEY (`id`),\n  KEY `a``b` (`b`)\n) ENGINE=InnoDB AUTO_INCREMENT=42 DEFAULT CHARSET=utf8mb4";
        assert_eq!(
            table(server, &bare_table(), Flavor::Mariadb).unwrap(),
            "CREATE TABLE `t` (\n  `id` int(11) NOT NULL,\n  `b` int(11) DEFAULT NULL,\n  PRIMARY KEY (`id`),\n  KEY `a``b` (`b`),\n  KEY `zz` (`b`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"
        );
    }

    #[test]
    fn options_are_read_with_quotes_and_engine_defined_names() {
        let read = options("ENGINE=InnoDB DEFAULT CHARSET=latin1 COMMENT='a b''c' `PAGE_COMPRESSED`='1' partitioned").unwrap();
        let names: Vec<(&str, &str, bool)> = read
            .iter()
            .map(|o| (o.name.as_str(), o.value.as_str(), o.engine_defined))
            .collect();
        assert_eq!(
            names,
            [
                ("ENGINE", "InnoDB", false),
                ("DEFAULT CHARSET", "latin1", false),
                ("COMMENT", "'a b''c'", false),
                ("PAGE_COMPRESSED", "'1'", true),
                ("partitioned", "", false),
            ]
        );
    }

    #[test]
    fn trigger_heads_are_rewritten_and_bodies_kept() {
        assert_eq!(
            trigger(
                "CREATE DEFINER=`a`@`%` trigger db.tr3 after   update on `db`.t for each row follows x set @x=1",
                "db",
                ""
            )
            .unwrap(),
            "CREATE TRIGGER `tr3` AFTER UPDATE ON `t` FOR EACH ROW set @x=1"
        );
        // Another database's qualifier is not this trigger's.
        assert_eq!(
            trigger(
                "CREATE DEFINER=`a`@`%` TRIGGER other.tr BEFORE INSERT ON t FOR EACH ROW SET @x = 1",
                "db",
                ""
            ),
            None
        );
        // Under `ANSI_QUOTES` the server quotes the head's names with `"`; the body is kept.
        assert_eq!(
            trigger(
                r#"CREATE DEFINER="a"@"%" TRIGGER "t r" BEFORE INSERT ON "t" FOR EACH ROW SET NEW.a = "b""#,
                "db",
                "ANSI_QUOTES"
            )
            .unwrap(),
            r#"CREATE TRIGGER `t r` BEFORE INSERT ON `t` FOR EACH ROW SET NEW.a = "b""#
        );
    }
}
