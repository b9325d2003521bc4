//! The snapshot account's privileges as `SHOW GRANTS` states them, and the server's own rules for
//! whether they cover a privilege on a database or a table.
//!
//! The `information_schema` privilege views leave out what roles bring, so the grants are read
//! from `SHOW GRANTS`: MariaDB lists the account's grants and those of its current role (and the
//! roles granted to that role); MySQL merges its active roles' grants in when asked `USING`
//! them. Only the part before ` TO ` of each line is read; what follows (the grantee's name, and
//! on MariaDB the password hash) is never kept beyond telling grantees apart.
//!
//! The server applies database grants the way it sorts them: for one grantee, the first database
//! grant whose name or pattern matches is the one that counts (`GRANT SELECT ON ``shop``.*`
//! shadows `GRANT ALL ON ``s%``.*`), and `SHOW GRANTS` lists them in that order. Grantees (the
//! account and each of its roles) add up.

use std::collections::BTreeSet;

use crate::wildcard::Syntax;

/// What one grant line applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// `*.*`
    Global,
    /// `` `db`.* ``: a database name, or a pattern with `%` and `_` (escaped with `\`).
    Database(String),
    /// `` `db`.`table` ``
    Table(String, String),
    /// A routine, a proxy or anything else the check does not need.
    Other,
}

/// One line of `SHOW GRANTS`: privileges granted on a target to a grantee.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grant {
    /// Uppercase names (`SELECT`, `SHOW VIEW`, `SHOW_ROUTINE`); `ALL PRIVILEGES` stands for
    /// every privilege of its level. Privileges granted on some columns only are left out.
    pub(crate) privileges: BTreeSet<String>,
    pub(crate) target: Target,
    /// Who holds it, as the line names it (the account or a role).
    pub(crate) grantee: String,
}

/// The privileges `ALL PRIVILEGES` does not include.
const NOT_IN_ALL: &[&str] = &["GRANT OPTION", "PROXY", "USAGE"];

impl Grant {
    fn holds(&self, privilege: &str) -> bool {
        self.privileges.contains(privilege)
            || (self.privileges.contains("ALL PRIVILEGES") && !NOT_IN_ALL.contains(&privilege))
    }
}

/// The grants of every line of `SHOW GRANTS`; lines that grant roles or say anything else
/// (`SET DEFAULT ROLE`) are left out.
pub(crate) fn parse(lines: &[String]) -> Vec<Grant> {
    lines.iter().filter_map(|line| parse_line(line)).collect()
}

/// One `GRANT privileges ON target TO grantee ...` line; `None` for a role grant or another
/// statement.
fn parse_line(line: &str) -> Option<Grant> {
    let rest = line.strip_prefix("GRANT ")?;
    let on = find_outside_quotes(rest, " ON ")?;
    let (privileges, rest) = (&rest[..on], &rest[on + " ON ".len()..]);
    let to = find_outside_quotes(rest, " TO ")?;
    let (target, grantee) = (&rest[..to], &rest[to + " TO ".len()..]);
    let grantee_end = find_outside_quotes(grantee, " ").unwrap_or(grantee.len());
    Some(Grant {
        privileges: split_privileges(privileges),
        target: parse_target(target),
        grantee: grantee[..grantee_end].to_owned(),
    })
}

/// Where `needle` starts in `text`, outside backquoted names, string literals and parentheses.
fn find_outside_quotes(text: &str, needle: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut quote: Option<u8> = None;
    let mut depth = 0usize;
    let mut at = 0;
    while at < bytes.len() {
        let byte = bytes[at];
        match quote {
            Some(open) if byte == open => {
                // A doubled quote is one quote character inside the name or string.
                if bytes.get(at + 1) == Some(&open) {
                    at += 1;
                } else {
                    quote = None;
                }
            }
            Some(_) => {}
            None => match byte {
                b'`' | b'\'' | b'"' => quote = Some(byte),
                b'(' => depth += 1,
                b')' => depth = depth.saturating_sub(1),
                _ if depth == 0 && text[at..].starts_with(needle) => return Some(at),
                _ => {}
            },
        }
        at += 1;
    }
    None
}

/// `SELECT, SHOW VIEW, INSERT (`a`)` as the privileges granted on the whole target.
fn split_privileges(text: &str) -> BTreeSet<String> {
    let mut privileges = BTreeSet::new();
    let mut rest = text;
    loop {
        let end = find_outside_quotes(rest, ",").unwrap_or(rest.len());
        let item = rest[..end].trim();
        // A privilege with a column list holds on those columns only.
        if !item.is_empty() && !item.contains('(') {
            privileges.insert(item.to_ascii_uppercase());
        }
        if end == rest.len() {
            break;
        }
        rest = &rest[end + 1..];
    }
    privileges
}

/// `` `name` `` unquoted, or a bare word as it is.
fn unquote(text: &str) -> Option<(String, &str)> {
    if let Some(rest) = text.strip_prefix('`') {
        let mut name = String::new();
        let mut chars = rest.char_indices();
        while let Some((at, c)) = chars.next() {
            if c == '`' {
                if rest[at + 1..].starts_with('`') {
                    name.push('`');
                    chars.next();
                } else {
                    return Some((name, &rest[at + 1..]));
                }
            } else {
                name.push(c);
            }
        }
        None
    } else {
        // A bare name is a plain identifier; anything else (`PROCEDURE ...`) is not a name.
        let end = text.find('.').unwrap_or(text.len());
        let name = &text[..end];
        (!name.is_empty()
            && name
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '$'))
        .then(|| (name.to_owned(), &text[end..]))
    }
}

fn parse_target(text: &str) -> Target {
    if text == "*.*" {
        return Target::Global;
    }
    let Some((database, rest)) = unquote(text) else {
        return Target::Other;
    };
    let Some(rest) = rest.strip_prefix('.') else {
        return Target::Other;
    };
    if rest == "*" {
        return Target::Database(database);
    }
    match unquote(rest) {
        Some((table, "")) => Target::Table(database, table),
        _ => Target::Other,
    }
}

/// Everything the account holds, from all its grantees' lines.
#[derive(Debug, Clone, Default)]
pub(crate) struct Privileges {
    grants: Vec<Grant>,
}

impl Privileges {
    pub(crate) fn new(grants: Vec<Grant>) -> Self {
        Privileges { grants }
    }

    fn grantees(&self) -> BTreeSet<&str> {
        self.grants
            .iter()
            .map(|grant| grant.grantee.as_str())
            .collect()
    }

    /// Whether `privilege` is held on every object (`*.*`).
    pub(crate) fn global(&self, privilege: &str) -> bool {
        self.grants
            .iter()
            .any(|grant| grant.target == Target::Global && grant.holds(privilege))
    }

    /// Whether `privilege` is held on the whole database `database`: globally, or by the first
    /// database grant of some grantee that matches it.
    pub(crate) fn on_database(&self, privilege: &str, database: &str) -> bool {
        if self.global(privilege) {
            return true;
        }
        self.grantees().into_iter().any(|grantee| {
            self.grants
                .iter()
                .filter(|grant| grant.grantee == grantee)
                .find(|grant| match &grant.target {
                    Target::Database(pattern) => Syntax::Grant.matches(pattern, database),
                    _ => false,
                })
                .is_some_and(|grant| grant.holds(privilege))
        })
    }

    /// Whether `privilege` is held on the table `database`.`table`, by a grant on it or on a
    /// level above it.
    pub(crate) fn on_table(&self, privilege: &str, database: &str, table: &str) -> bool {
        self.on_database(privilege, database)
            || self.grants.iter().any(|grant| {
                grant.target == Target::Table(database.to_owned(), table.to_owned())
                    && grant.holds(privilege)
            })
    }

    /// The databases named exactly (without a wildcard) by a database or table grant, for a
    /// server that will not list its databases.
    pub(crate) fn named_databases(&self) -> BTreeSet<String> {
        self.grants
            .iter()
            .filter_map(|grant| match &grant.target {
                Target::Database(name) | Target::Table(name, _) => Some(name),
                _ => None,
            })
            .filter_map(|name| Syntax::Grant.exact_name(name))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn privileges(lines: &[&str]) -> Privileges {
        Privileges::new(parse(
            &lines
                .iter()
                .map(|line| (*line).to_owned())
                .collect::<Vec<_>>(),
        ))
    }

    #[test]
    fn grant_lines_are_read_up_to_the_grantee() {
        let grants = parse(&[
            "GRANT USAGE ON *.* TO `snap`@`127.0.0.1` IDENTIFIED BY PASSWORD '*D8218'".to_owned(),
            "GRANT SELECT, SHOW VIEW ON `sh``op`.* TO `snap`@`127.0.0.1`".to_owned(),
            "GRANT SELECT (`a`, `b`), INSERT ON `shop`.`t` TO `snap`@`127.0.0.1`".to_owned(),
            "GRANT EXECUTE ON PROCEDURE `shop`.`p` TO `snap`@`127.0.0.1`".to_owned(),
            "GRANT `r1` TO `snap`@`127.0.0.1`".to_owned(),
            "SET DEFAULT ROLE `r1` FOR `snap`@`127.0.0.1`".to_owned(),
            "GRANT EVENT, TRIGGER ON `shop`.* TO `r1`".to_owned(),
        ]);
        assert_eq!(grants.len(), 5);
        assert_eq!(grants[0].target, Target::Global);
        assert_eq!(grants[0].grantee, "`snap`@`127.0.0.1`");
        assert_eq!(grants[1].target, Target::Database("sh`op".to_owned()));
        assert_eq!(
            grants[1].privileges,
            BTreeSet::from(["SELECT".to_owned(), "SHOW VIEW".to_owned()])
        );
        assert_eq!(
            grants[2].target,
            Target::Table("shop".to_owned(), "t".to_owned())
        );
        assert_eq!(grants[2].privileges, BTreeSet::from(["INSERT".to_owned()]));
        assert_eq!(grants[3].target, Target::Other);
        assert_eq!(grants[4].grantee, "`r1`");
    }

    #[test]
    fn privileges_follow_the_servers_rules() {
        let held = privileges(&[
            "GRANT USAGE ON *.* TO `u`@`%`",
            "GRANT SELECT ON `shop`.* TO `u`@`%`",
            "GRANT ALL PRIVILEGES ON `s%`.* TO `u`@`%`",
            "GRANT SELECT, SHOW VIEW ON `fm\\_%`.* TO `u`@`%`",
            "GRANT SELECT ON `mysql`.`proc` TO `u`@`%`",
            "GRANT TRIGGER ON `shop`.* TO `role`",
            "GRANT SHOW_ROUTINE ON *.* TO `u`@`%`",
        ]);
        // The first matching database grant of a grantee counts: `shop` has SELECT only from
        // the account, TRIGGER from the role.
        assert!(held.on_database("SELECT", "shop"));
        assert!(held.on_database("TRIGGER", "shop"));
        assert!(!held.on_database("EVENT", "shop"));
        assert!(held.on_database("EVENT", "store"));
        assert!(!held.on_database("GRANT OPTION", "store"));
        assert!(held.on_database("SHOW VIEW", "fm_a"));
        assert!(!held.on_database("SHOW VIEW", "fmxa"));
        assert!(held.on_table("SELECT", "mysql", "proc"));
        assert!(!held.on_table("SELECT", "mysql", "user"));
        assert!(held.global("SHOW_ROUTINE"));
        assert!(!held.global("SELECT"));
        assert_eq!(
            held.named_databases(),
            BTreeSet::from(["shop".to_owned(), "mysql".to_owned()])
        );
        let everything =
            privileges(&["GRANT ALL PRIVILEGES ON *.* TO `root`@`%` WITH GRANT OPTION"]);
        assert!(everything.on_table("SELECT", "mysql", "proc"));
        assert!(everything.global("SHOW DATABASES"));
    }
}
