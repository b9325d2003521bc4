//! Canonical DDL rendered from the model, in the `SHOW CREATE` style of the server it was read
//! from (MariaDB 10.11's spelling for MariaDB, MySQL 8's for MySQL): tables, views and sequences
//! in [`table`], routines, triggers and events in [`program`]. A canonical statement has no definer, no database qualifier for this database's
//! objects, no `AUTO_INCREMENT=` counter and no sequence value, so it applies as-is, with the
//! text protocol, in another, empty database. [`super::normalize`] brings the server's own text
//! into the same form, so the two can be compared.

mod program;
mod table;

pub use program::{render_event, render_routine, render_trigger, trigger_order};
pub use table::{canonical_default, option_rank, render_sequence, render_table, render_view};
pub(crate) use table::{check_line, column_line, foreign_key_line, index_line, partition_clause};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_literals_are_quoted_as_the_server_quotes_them() {
        assert_eq!(literal("it's a \\ test"), "'it''s a \\\\ test'");
        assert_eq!(identifier("a`b"), "`a``b`");
    }
}
