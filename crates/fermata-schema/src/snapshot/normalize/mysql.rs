//! What MySQL 8 and the MariaDB releases print differently for the same schema.
//!
//! A MariaDB text is brought into the canonical MariaDB 10.11 spelling, and each rule applies to
//! the server's text and, where the catalog shows the same difference, to the catalog's values,
//! so both sides meet:
//!
//! - version comments around clauses of `SHOW CREATE TABLE` lose their markers
//!   ([`unwrap_version_comments`]);
//! - integer display widths are written out where a release leaves them out ([`display_width`]);
//! - `utf8`: MariaDB before 10.6 says `utf8` for `utf8mb3` ([`utf8mb3`], [`utf8mb3_text`]);
//! - a column's `COLLATE x` without `CHARACTER SET`: the character set, the collation's prefix,
//!   is written out;
//! - `CURRENT_TIMESTAMP` is `current_timestamp()`, and an expression default is in parentheses
//!   ([`crate::snapshot::render::canonical_default`]);
//! - partition names are quoted.
//!
//! A MySQL text keeps MySQL's own spelling: `int` without a display width, `CURRENT_TIMESTAMP`,
//! expression defaults as MySQL parenthesizes them, its version comments (`/*!80023
//! INVISIBLE */`, `/*!80003 SRID 4326 */`, `/*!80000 INVISIBLE */`, `/*!80016 NOT ENFORCED */`,
//! `/*!50100 PARTITION BY ... */`) and its partition names, bare or quoted as it prints them
//! (which it quotes, and its `KEY` and `COLUMNS` column lists, are read from the text by
//! [`super::table_facts`]). Only a column's collation clause is written one way
//! ([`mysql_column_line`]): MySQL prints it by rules the catalog does not expose (whether a
//! collation is its character set's default, whether it was given explicitly).
//!
//! On both flavors, foreign keys (whose order MySQL 8 does not keep) and table options are put
//! in the canonical order by the table normalization itself, and the definer is taken out
//! wherever the server puts it (`super::strip_definer`). `COLLATE=` after the table's character
//! set is written out where a server leaves it implicit.

use crate::snapshot::model::Table;
use crate::snapshot::render::canonical_default;
use crate::snapshot::scan::{closing_paren, find_top_level, quoted_end};

/// `text` with each `/*!NNNNN clause */` replaced by its clause.
pub fn unwrap_version_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("/*!") {
        let digits = rest[at + 3..]
            .chars()
            .take_while(char::is_ascii_digit)
            .count();
        let Some(end) = rest[at..].find("*/") else {
            break;
        };
        let inner = rest[at + 3 + digits..at + end].trim();
        out.push_str(&rest[..at]);
        // The clause is separated by one space, which is also the space MariaDB puts at the
        // start of a `PARTITION BY` line.
        if !out.ends_with(' ') {
            out.push(' ');
        }
        out.push_str(inner);
        rest = &rest[at + end + 2..];
    }
    out.push_str(rest);
    out
}

/// `utf8` and `utf8_*` as `utf8mb3` and `utf8mb3_*`.
pub fn utf8mb3(name: &str) -> String {
    match name.strip_prefix("utf8") {
        Some("") => "utf8mb3".to_owned(),
        Some(rest) if rest.starts_with('_') => format!("utf8mb3{rest}"),
        _ => name.to_owned(),
    }
}

/// `utf8` as `utf8mb3` after each `CHARSET=`, `CHARACTER SET `, `COLLATE=` and `COLLATE ` of a
/// line of `SHOW CREATE` output.
pub fn utf8mb3_text(text: &str) -> String {
    let mut out = text.to_owned();
    for marker in [
        "CHARSET=",
        "CHARACTER SET ",
        "COLLATE=",
        "COLLATE ",
        "CHARSET ",
    ] {
        let mut from = 0;
        while let Some(found) = out[from..].find(marker) {
            let start = from + found + marker.len();
            let end = out[start..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(out.len(), |end| start + end);
            let replaced = utf8mb3(&out[start..end]);
            out.replace_range(start..end, &replaced);
            from = start + replaced.len();
        }
    }
    out
}

/// The display width each integer type has by default, signed and unsigned.
const INTEGER_WIDTHS: &[(&str, u8, u8)] = &[
    ("tinyint", 4, 3),
    ("smallint", 6, 5),
    ("mediumint", 9, 8),
    ("int", 11, 10),
    ("bigint", 20, 20),
];

/// A column type with the default display width written out when an integer type has none
/// (`int unsigned` → `int(10) unsigned`).
pub fn display_width(column_type: &str) -> String {
    let word_end = column_type
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(column_type.len());
    let (word, rest) = column_type.split_at(word_end);
    let Some((_, signed, unsigned)) = INTEGER_WIDTHS.iter().find(|(name, ..)| *name == word) else {
        return column_type.to_owned();
    };
    if rest.starts_with('(') {
        return column_type.to_owned();
    }
    let width = if rest.starts_with(" unsigned") {
        unsigned
    } else {
        signed
    };
    format!("{word}({width}){rest}")
}

/// MySQL's `CURRENT_TIMESTAMP` and `CURRENT_TIMESTAMP(n)` as MariaDB's `current_timestamp()`
/// and `current_timestamp(n)`.
pub fn current_timestamp(expression: &str) -> String {
    match expression.strip_prefix("CURRENT_TIMESTAMP") {
        Some("") => "current_timestamp()".to_owned(),
        Some(rest) if rest.starts_with('(') => format!("current_timestamp{rest}"),
        _ => expression.to_owned(),
    }
}

/// The end of the single term `text` starts with: a quoted string, a parenthesized expression,
/// or a word or number with the argument list of a call after it.
fn term_end(text: &str) -> Option<usize> {
    match text.chars().next()? {
        '\'' | '"' => quoted_end(text, 0),
        '(' => closing_paren(text, 0),
        _ => {
            let end = text
                .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '.' | '-' | '+')))
                .unwrap_or(text.len());
            match text[end..].chars().next() {
                Some('(') => closing_paren(text, end),
                Some('\'') if end == 1 => quoted_end(text, end),
                _ => Some(end),
            }
        }
    }
}

/// One column line of `SHOW CREATE TABLE` in canonical form. MariaDB does not print a spatial
/// column's `REF_SYSTEM_ID`; the model's (from `GEOMETRY_COLUMNS`) is written after the type,
/// where the file gives it.
pub(super) fn column_line(line: &str, table: &Table) -> Option<String> {
    let name_end = quoted_end(line, 2)?;
    let (name, rest) = line.split_at(name_end);
    let column_name = line[3..name_end - 1].replace("``", "`");
    let srid = table
        .columns
        .iter()
        .find(|column| column.name == column_name)
        .and_then(|column| column.srid);
    let with_srid;
    let rest = match srid {
        Some(srid) if !rest.contains(" REF_SYSTEM_ID=") && !rest.contains(" SRID ") => {
            let type_end = rest[1..].find(' ').map_or(rest.len(), |end| end + 1);
            with_srid = format!(
                "{} REF_SYSTEM_ID={srid}{}",
                &rest[..type_end],
                &rest[type_end..]
            );
            with_srid.as_str()
        }
        _ => rest,
    };
    let rest = utf8mb3_text(rest);
    let rest = rest.strip_prefix(' ')?;
    let mut rest = format!(" {}", display_width(rest));
    if let Some(at) = find_top_level(&rest, " COLLATE ")
        && find_top_level(&rest[..at], " CHARACTER SET ").is_none()
    {
        let collation = &rest[at + " COLLATE ".len()..];
        let charset = collation.split(['_', ' ']).next().unwrap_or(collation);
        rest.insert_str(at, &format!(" CHARACTER SET {charset}"));
    }
    for marker in [" DEFAULT ", " ON UPDATE "] {
        if let Some(at) = find_top_level(&rest, marker) {
            let start = at + marker.len();
            let end = start + term_end(&rest[start..])?;
            let term = current_timestamp(&rest[start..end]);
            let term = if marker == " DEFAULT " {
                canonical_default(&term)
            } else {
                term
            };
            rest.replace_range(start..end, &term);
        }
    }
    Some(format!("{name}{rest}"))
}

/// A `PARTITION p0` or `SUBPARTITION s0` line with its name quoted, as MariaDB prints it.
pub(super) fn partition_line(line: &str) -> String {
    for keyword in ["PARTITION ", "SUBPARTITION "] {
        let trimmed = line.trim_start_matches([' ', '(']);
        if let Some(rest) = trimmed.strip_prefix(keyword)
            && !rest.starts_with('`')
            && !rest.starts_with("BY ")
        {
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
                .unwrap_or(rest.len());
            let prefix = &line[..line.len() - trimmed.len()];
            return format!("{prefix}{keyword}`{}`{}", &rest[..end], &rest[end..]);
        }
    }
    line.to_owned()
}

/// One column line of a MySQL `SHOW CREATE TABLE` in canonical form: its collation clause,
/// which MySQL prints after the type, written as the renderer writes it (none when the
/// collation is the table's; `COLLATE x` when only the collation differs; `CHARACTER SET c
/// COLLATE x` when the character set differs too). `None` when the clause names another
/// character set or collation than the model's column, or when the model's column needs a clause
/// the text does not have (the text would then describe another column).
pub(super) fn mysql_column_line(line: &str, table: &Table) -> Option<String> {
    let name_end = quoted_end(line, 2)?;
    let column_name = line[3..name_end - 1].replace("``", "`");
    let column = table
        .columns
        .iter()
        .find(|column| column.name == column_name)?;
    let rest = &line[name_end..];
    let charset_at = find_top_level(rest, " CHARACTER SET ");
    let collate_at = find_top_level(rest, " COLLATE ");
    // The clause follows the type; a later `CHARACTER SET` or `COLLATE` (in a comment, say) is
    // quoted or parenthesized and not found here.
    let word_after = |at: usize, keyword: &str| {
        let start = at + keyword.len();
        let end = rest[start..]
            .find(' ')
            .map_or(rest.len(), |end| start + end);
        (rest[start..end].to_owned(), end)
    };
    let stated_charset = charset_at.map(|at| word_after(at, " CHARACTER SET "));
    let stated_collation = collate_at.map(|at| word_after(at, " COLLATE "));
    if let Some((charset, _)) = &stated_charset
        && column.charset.as_ref() != Some(charset)
    {
        return None;
    }
    if let Some((collation, _)) = &stated_collation
        && column.collation.as_ref() != Some(collation)
    {
        return None;
    }
    let canonical = match (&column.charset, &column.collation) {
        (Some(charset), Some(collation)) if collation != &table.collation => {
            if charset == &table.charset {
                format!(" COLLATE {collation}")
            } else {
                format!(" CHARACTER SET {charset} COLLATE {collation}")
            }
        }
        _ => String::new(),
    };
    let clause = match (charset_at, collate_at) {
        (None, None) if canonical.is_empty() => return Some(line.to_owned()),
        (None, None) => return None,
        (Some(start), Some(_)) => {
            let end = stated_collation.as_ref().map(|(_, end)| *end)?;
            (start, end)
        }
        (Some(start), None) => (start, stated_charset.as_ref().map(|(_, end)| *end)?),
        (None, Some(start)) => (start, stated_collation.as_ref().map(|(_, end)| *end)?),
    };
    Some(format!(
        "{}{}{canonical}{}",
        &line[..name_end],
        &rest[..clause.0],
        &rest[clause.1..]
    ))
}
