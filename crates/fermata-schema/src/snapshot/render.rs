//! Canonical DDL: a table rendered from the model in the server's own `SHOW CREATE TABLE` style
//! (MariaDB 10.11 spelling), with one stable clause order: columns in their order, then the
//! primary key, the other keys by name, foreign keys by name, checks by name; no
//! `AUTO_INCREMENT=` counter; `DEFAULT CHARSET=... COLLATE=...` always spelled out.
//!
//! [`canonical_show_create`] brings the server's own text into the same form, so the two can be
//! compared: a table whose model does not render to exactly what the server says is not
//! snapshotted (the model would be lossy).

use super::model::{Column, ForeignKey, Index, IndexKind, Table, View};

/// `name` as a quoted identifier.
pub fn identifier(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// `text` as a string literal, as the server prints one.
pub fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        match c {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            '\0' => out.push_str("\\0"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\u{1a}' => out.push_str("\\Z"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

fn column_line(table: &Table, column: &Column) -> String {
    let mut line = format!("  {} {}", identifier(&column.name), column.column_type);
    if let (Some(charset), Some(collation)) = (&column.charset, &column.collation)
        && collation != &table.collation
    {
        line.push_str(&format!(" CHARACTER SET {charset} COLLATE {collation}"));
    }
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
            line.push_str(&format!(" DEFAULT {default}"));
        }
        if let Some(on_update) = &column.on_update {
            line.push_str(&format!(" ON UPDATE {on_update}"));
        }
        if column.auto_increment {
            line.push_str(" AUTO_INCREMENT");
        }
    }
    if !column.comment.is_empty() {
        line.push_str(&format!(" COMMENT {}", literal(&column.comment)));
    }
    if let Some(check) = &column.check {
        line.push_str(&format!(" CHECK ({check})"));
    }
    line
}

fn index_line(index: &Index) -> String {
    let parts: Vec<String> = index
        .parts
        .iter()
        .map(|part| {
            let mut text = identifier(&part.column);
            if let Some(prefix) = part.prefix {
                text.push_str(&format!("({prefix})"));
            }
            if part.descending {
                text.push_str(" DESC");
            }
            text
        })
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
    line
}

fn foreign_key_line(key: &ForeignKey) -> String {
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

/// The canonical `CREATE TABLE` of `table`, without a trailing newline.
pub fn render_table(table: &Table) -> String {
    let mut lines: Vec<String> = table
        .columns
        .iter()
        .map(|column| column_line(table, column))
        .collect();
    lines.extend(table.indexes.iter().map(index_line));
    lines.extend(table.foreign_keys.iter().map(foreign_key_line));
    lines.extend(table.checks.iter().map(|check| {
        format!(
            "  CONSTRAINT {} CHECK ({})",
            identifier(&check.name),
            check.clause
        )
    }));
    let mut options = format!(
        ") ENGINE={} DEFAULT CHARSET={} COLLATE={}",
        table.engine, table.charset, table.collation
    );
    if let Some(row_format) = &table.row_format {
        options.push_str(&format!(" ROW_FORMAT={row_format}"));
    }
    if !table.comment.is_empty() {
        options.push_str(&format!(" COMMENT={}", literal(&table.comment)));
    }
    format!(
        "CREATE TABLE {} (\n{}\n{options}",
        identifier(&table.name),
        lines.join(",\n")
    )
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

/// The server's `SHOW CREATE VIEW` text in canonical form: the `DEFINER=` clause taken out, and
/// the qualifier of the view's own database (which the server prints when asked from outside
/// it) removed, as the model has it.
pub fn canonical_show_create_view(text: &str, database: &str) -> Option<String> {
    let start = text.find(" DEFINER=")?;
    let end = start + text[start..].find(" SQL SECURITY ")?;
    let qualifier = format!("{}.", identifier(database));
    Some(format!("{}{}", &text[..start], &text[end..]).replace(&qualifier, ""))
}

/// Where a body line of `SHOW CREATE TABLE` goes in the canonical order.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Clause {
    Column(usize),
    Primary,
    Key(Vec<u8>),
    ForeignKey(Vec<u8>),
    Check(Vec<u8>),
}

/// The first quoted identifier in `text` after `after`, unquoted.
fn quoted_after(text: &str, after: &str) -> Option<String> {
    let rest = &text[text.find(after)? + after.len()..];
    let rest = rest.strip_prefix('`')?;
    let mut name = String::new();
    let mut chars = rest.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '`' {
            if chars.peek() == Some(&'`') {
                chars.next();
                name.push('`');
            } else {
                return Some(name);
            }
        } else {
            name.push(c);
        }
    }
    None
}

/// The server's `SHOW CREATE TABLE` text in canonical form: key and constraint lines in the
/// canonical order, the `AUTO_INCREMENT=` counter removed, and `COLLATE=` spelled out where an
/// older server leaves the default collation implicit. `None` when the text does not have the
/// shape of a `CREATE TABLE`.
pub fn canonical_show_create(text: &str, table: &Table) -> Option<String> {
    let mut lines = text.lines();
    let head = lines.next()?;
    if head != format!("CREATE TABLE {} (", identifier(&table.name)) {
        return None;
    }
    let mut body = Vec::new();
    let mut footer = None;
    for line in lines {
        if line.starts_with(')') {
            footer = Some(line);
            break;
        }
        body.push(line.strip_suffix(',').unwrap_or(line));
    }
    let mut clauses = Vec::with_capacity(body.len());
    for (position, line) in body.iter().enumerate() {
        let clause = if line.starts_with("  `") {
            Clause::Column(position)
        } else if line.starts_with("  PRIMARY KEY ") {
            Clause::Primary
        } else if line.starts_with("  CONSTRAINT ") && line.contains(" FOREIGN KEY ") {
            Clause::ForeignKey(quoted_after(line, "CONSTRAINT ")?.into_bytes())
        } else if line.starts_with("  CONSTRAINT ") {
            Clause::Check(quoted_after(line, "CONSTRAINT ")?.into_bytes())
        } else if line.contains("KEY `") {
            Clause::Key(quoted_after(line, "KEY ")?.into_bytes())
        } else {
            return None;
        };
        clauses.push((clause, *line));
    }
    clauses.sort_by(|a, b| a.0.cmp(&b.0));
    let mut footer = remove_auto_increment(footer?);
    let charset = format!(" DEFAULT CHARSET={}", table.charset);
    if !footer.contains(" COLLATE=")
        && let Some(at) = footer.find(&charset)
    {
        footer.insert_str(at + charset.len(), &format!(" COLLATE={}", table.collation));
    }
    let body: Vec<&str> = clauses.iter().map(|(_, line)| *line).collect();
    Some(format!("{head}\n{}\n{footer}", body.join(",\n")))
}

/// The table options without ` AUTO_INCREMENT=<n>`.
fn remove_auto_increment(footer: &str) -> String {
    let Some(at) = footer.find(" AUTO_INCREMENT=") else {
        return footer.to_owned();
    };
    let digits = footer[at + " AUTO_INCREMENT=".len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .count();
    let end = at + " AUTO_INCREMENT=".len() + digits;
    format!("{}{}", &footer[..at], &footer[end..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_key_order_do_not_matter() {
        let table = Table {
            name: "t".to_owned(),
            engine: "InnoDB".to_owned(),
            charset: "utf8mb4".to_owned(),
            collation: "utf8mb4_general_ci".to_owned(),
            row_format: None,
            comment: String::new(),
            columns: Vec::new(),
            indexes: Vec::new(),
            foreign_keys: Vec::new(),
            checks: Vec::new(),
        };
        let server = "CREATE TABLE `t` (\n  `id` int(11) NOT NULL,\n  `b` int(11) DEFAULT NULL,\n  KEY `zz` (`b`),\n  PRIMARY KEY (`id`),\n  KEY `a``b` (`b`)\n) ENGINE=InnoDB AUTO_INCREMENT=42 DEFAULT CHARSET=utf8mb4";
        assert_eq!(
            canonical_show_create(server, &table).unwrap(),
            "CREATE TABLE `t` (\n  `id` int(11) NOT NULL,\n  `b` int(11) DEFAULT NULL,\n  PRIMARY KEY (`id`),\n  KEY `a``b` (`b`),\n  KEY `zz` (`b`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"
        );
        assert_eq!(literal("it's a \\ test"), "'it''s a \\\\ test'");
        assert_eq!(identifier("a`b"), "`a``b`");
    }
}
