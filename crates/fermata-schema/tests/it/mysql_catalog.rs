//! Every column the MySQL flavor's catalog queries name exists in MySQL's `information_schema`
//! views, as the servers' own test results define them at the three view versions the recordings
//! hold: `I_S_VERSION` 80021 and 80030 (MySQL 8.0, from `mysql/mysql-server`) and 80400 (MySQL 8.4
//! LTS, from Percona Server, whose views are MySQL's); each fixture records its source file and
//! commit. No server is needed: the queries are read as text, each `alias.COLUMN` checked against
//! its view and each bare column against the views the query reads.

use std::collections::{BTreeMap, BTreeSet};

use fermata_schema::snapshot::mysql_catalog_queries;

/// View name → its columns. The fixture's header names the repository and file it was read from
/// and the commit.
fn views(fixture: &str) -> BTreeMap<String, BTreeSet<String>> {
    let header: Vec<&str> = fixture
        .lines()
        .filter(|line| line.starts_with('#'))
        .collect();
    assert!(
        header.iter().any(|line| line.starts_with("# source: ")
            && line.ends_with(
                " mysql-test/suite/information_schema/r/i_s_schema_definition_debug.result"
            )),
        "the fixture names its source file"
    );
    assert!(
        header.iter().any(|line| line
            .strip_prefix("# commit: ")
            .and_then(|rest| rest.get(..40))
            .is_some_and(|commit| commit.bytes().all(|b| b.is_ascii_hexdigit()))),
        "the fixture names its commit"
    );
    fixture
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let (view, columns) = line.split_once(": ").expect("VIEW: COLUMNS");
            (
                view.to_owned(),
                columns.split(' ').map(str::to_owned).collect(),
            )
        })
        .collect()
}

/// SQL words that are not columns.
const KEYWORDS: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "AND",
    "LEFT",
    "JOIN",
    "ON",
    "ORDER",
    "BY",
    "BINARY",
    "CAST",
    "AS",
    "CHAR",
    "SIGNED",
    "NULL",
    "IS",
    "NOT",
    "IN",
    "VERSION",
    "SUBSTRING",
    "CHAR_LENGTH",
    "LOCATE",
    "REVERSE",
    "CURRENT_USER",
    "COUNT",
    "UNION",
    "ALL",
    "DISTINCT",
];

/// The identifiers of `query` outside string literals, with the alias or view before a dot.
fn identifiers(query: &str) -> Vec<(Option<String>, String)> {
    let mut unquoted = String::new();
    let mut in_string = false;
    for c in query.chars() {
        if c == '\'' {
            in_string = !in_string;
            unquoted.push(' ');
        } else if !in_string {
            unquoted.push(c);
        }
    }
    let mut found = Vec::new();
    let tokens: Vec<&str> = unquoted
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .filter(|token| !token.is_empty())
        .collect();
    for token in tokens {
        match token.split_once('.') {
            Some((qualifier, column)) => {
                found.push((Some(qualifier.to_owned()), column.to_owned()))
            }
            None => found.push((None, token.to_owned())),
        }
    }
    found
}

fn check(fixture: &str, series: &str) {
    let views = views(fixture);
    let queries = mysql_catalog_queries();
    assert!(queries.len() >= 9, "{} queries", queries.len());
    for query in queries {
        // The views the query reads, by alias (and by their own name).
        let mut aliases: BTreeMap<String, String> = BTreeMap::new();
        let words: Vec<&str> = query.split_whitespace().collect();
        for (i, word) in words.iter().enumerate() {
            if let Some(view) = word.strip_prefix("information_schema.") {
                assert!(
                    views.contains_key(view),
                    "MySQL {series} has no information_schema.{view}"
                );
                aliases.insert(view.to_owned(), view.to_owned());
                if let Some(alias) = words.get(i + 1).filter(|w| {
                    w.chars().all(|c| c.is_ascii_lowercase()) && !["on", "where"].contains(w)
                }) {
                    aliases.insert((*alias).to_owned(), view.to_owned());
                }
            }
        }
        for (qualifier, column) in identifiers(query) {
            if column.chars().any(|c| c.is_ascii_lowercase())
                || column.chars().all(|c| c.is_ascii_digit())
                || KEYWORDS.contains(&column.as_str())
                || aliases.contains_key(&column)
            {
                continue;
            }
            match qualifier.as_deref() {
                Some("information_schema") => {}
                Some(alias) => {
                    let view = aliases
                        .get(alias)
                        .unwrap_or_else(|| panic!("unknown alias {alias} in {query}"));
                    assert!(
                        views[view].contains(&column),
                        "MySQL {series}'s {view} has no {column}: {query}"
                    );
                }
                None => assert!(
                    aliases.values().any(|view| views[view].contains(&column)),
                    "no view of MySQL {series} this query reads has {column}: {query}"
                ),
            }
        }
    }
}

#[test]
fn every_column_the_mysql_queries_name_exists_in_the_views_of_mysql_8_0_21() {
    check(
        include_str!("fixtures/mysql/i_s_views_80021.txt"),
        "8.0.21 to 8.0.29",
    );
}

/// The last 8.0 view definitions: `I_S_VERSION` 80030, recorded at a commit whose
/// `MYSQL_VERSION` is 8.0.35.
#[test]
fn every_column_the_mysql_queries_name_exists_in_the_views_of_mysql_8_0_30_and_later() {
    check(
        include_str!("fixtures/mysql/i_s_views_80030.txt"),
        "8.0.30 and later 8.0",
    );
}

/// MySQL 8.4 LTS: the view definitions at `I_S_VERSION` 80400, recorded by Percona Server for
/// MySQL's copy of the same test.
#[test]
fn every_column_the_mysql_queries_name_exists_in_the_views_of_mysql_8_4() {
    check(include_str!("fixtures/mysql/i_s_views_80400.txt"), "8.4");
}

/// The columns the MariaDB-only queries used to name on every server are not in MySQL's views:
/// the check would have caught the original failure.
#[test]
fn mariadb_only_columns_are_not_in_mysql() {
    for fixture in [
        include_str!("fixtures/mysql/i_s_views_80021.txt"),
        include_str!("fixtures/mysql/i_s_views_80030.txt"),
        include_str!("fixtures/mysql/i_s_views_80400.txt"),
    ] {
        let views = views(fixture);
        assert!(!views["VIEWS"].contains("ALGORITHM"));
        assert!(!views["STATISTICS"].contains("IGNORED"));
        assert!(!views["CHECK_CONSTRAINTS"].contains("TABLE_NAME"));
        assert!(!views["CHECK_CONSTRAINTS"].contains("LEVEL"));
    }
}
