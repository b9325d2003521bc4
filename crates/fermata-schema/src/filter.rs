//! Which databases and tables schema operations leave out: `[schema] ignore_databases` and
//! `ignore_tables`, each a list of name patterns where `*` stands for any run of characters and
//! `?` for one character, matched against the whole exact name. The default ignores no database
//! and the shadow tables online schema change tools make while they copy a table (gh-ost's
//! `_<table>_gho`, `_<table>_ghc` and `_<table>_del`, pt-online-schema-change's `_<table>_new`
//! and `_<table>_old`): they come and go while a busy table is altered, and would otherwise turn
//! every snapshot of it into a `SCHEMA_CHANGED` retry loop.
//!
//! A snapshot leaves out the tables the filter ignores, with their triggers, and its manifest
//! records the filter (it is part of the snapshot hash), so two snapshots compare equal only
//! when they were taken with the same filter.

use serde::{Deserialize, Serialize};

use crate::wildcard::Syntax;

/// The shadow tables of gh-ost and pt-online-schema-change.
pub const DEFAULT_IGNORED_TABLES: [&str; 5] = ["_*_gho", "_*_ghc", "_*_del", "_*_new", "_*_old"];

/// A name pattern: `*` is any run of characters, `?` one character, anything else itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Pattern(String);

impl Pattern {
    /// A pattern of 1 to 256 characters.
    pub fn new(pattern: impl Into<String>) -> Result<Self, String> {
        let pattern = pattern.into();
        let length = pattern.chars().count();
        if length == 0 || length > 256 {
            return Err("a pattern has 1 to 256 characters".to_owned());
        }
        Ok(Pattern(pattern))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `name`, whole, matches the pattern.
    pub fn matches(&self, name: &str) -> bool {
        Syntax::Glob.matches(&self.0, name)
    }
}

/// What schema operations leave out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Filter {
    /// Databases an inventory leaves out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore_databases: Vec<Pattern>,
    /// Tables a snapshot leaves out, with their triggers.
    pub ignore_tables: Vec<Pattern>,
}

impl Default for Filter {
    fn default() -> Self {
        Filter {
            ignore_databases: Vec::new(),
            ignore_tables: DEFAULT_IGNORED_TABLES
                .iter()
                .map(|pattern| Pattern((*pattern).to_owned()))
                .collect(),
        }
    }
}

impl Filter {
    pub fn ignores_database(&self, name: &str) -> bool {
        self.ignore_databases
            .iter()
            .any(|pattern| pattern.matches(name))
    }

    pub fn ignores_table(&self, name: &str) -> bool {
        self.ignore_tables
            .iter()
            .any(|pattern| pattern.matches(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_whole_names() {
        let filter = Filter::default();
        for shadow in [
            "_orders_gho",
            "_orders_ghc",
            "_orders_del",
            "_a_b_new",
            "__old",
        ] {
            assert!(filter.ignores_table(shadow), "{shadow}");
        }
        for kept in [
            "orders",
            "_orders_gho2",
            "orders_gho",
            "_gho",
            "x_orders_new",
        ] {
            assert!(!filter.ignores_table(kept), "{kept}");
        }
        let pattern = Pattern::new("tmp?_*").unwrap();
        assert!(pattern.matches("tmp1_x"));
        assert!(!pattern.matches("tmp_x"));
        assert!(Pattern::new("").is_err());
        assert!(Pattern::new("x".repeat(256)).is_ok());
        assert!(Pattern::new("x".repeat(257)).is_err());
        assert!(!filter.ignores_database("anything"));
    }
}
