//! The lint rules over one database's structured model ([`DatabaseModel`]): which rules there
//! are ([`Rule`]) and how severe their findings are ([`Severity`], [`LintSettings`]), what they
//! find ([`lint`], a list of [`Finding`]s in a stable order) and whether that fails a check
//! ([`fails`]). The rules over keys and indexes are in `keys.rs`, those over columns and
//! character sets in `columns.rs`, the one over stored programs' definers in `definers.rs`.
//!
//! A rule reads the model only: it never connects to a server, and a model that reads the same
//! gives the same findings in the same order.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::snapshot::model::{DatabaseModel, RoutineKind};
use crate::snapshot::render::identifier;

mod columns;
mod definers;
#[cfg(test)]
mod fixtures;
mod keys;

/// The character set a package uses when its configuration names none.
pub const DEFAULT_CHARSET: &str = "utf8mb4";

/// A rule's identifier, as written in configuration and output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    NoPrimaryKey,
    LegacyCharset,
    DuplicateIndex,
    ForeignKeyWithoutIndex,
    FloatForMoney,
    DefinerNotAllowed,
    ZeroDateDefault,
}

impl Rule {
    /// Every rule, in the order of their identifiers' listing.
    pub const ALL: [Rule; 7] = [
        Rule::NoPrimaryKey,
        Rule::LegacyCharset,
        Rule::DuplicateIndex,
        Rule::ForeignKeyWithoutIndex,
        Rule::FloatForMoney,
        Rule::DefinerNotAllowed,
        Rule::ZeroDateDefault,
    ];

    /// The identifier, kebab-case (`no-primary-key`), as serde writes it too.
    pub fn id(self) -> &'static str {
        match self {
            Rule::NoPrimaryKey => "no-primary-key",
            Rule::LegacyCharset => "legacy-charset",
            Rule::DuplicateIndex => "duplicate-index",
            Rule::ForeignKeyWithoutIndex => "foreign-key-without-index",
            Rule::FloatForMoney => "float-for-money",
            Rule::DefinerNotAllowed => "definer-not-allowed",
            Rule::ZeroDateDefault => "zero-date-default",
        }
    }

    /// The rule an identifier names, exactly as [`Rule::id`] writes it.
    pub fn parse(id: &str) -> Option<Rule> {
        Rule::ALL.into_iter().find(|rule| rule.id() == id)
    }

    /// The severity of the rule's findings unless the settings say otherwise.
    pub fn default_severity(self) -> Severity {
        match self {
            Rule::DefinerNotAllowed | Rule::ZeroDateDefault => Severity::Error,
            Rule::NoPrimaryKey
            | Rule::LegacyCharset
            | Rule::DuplicateIndex
            | Rule::ForeignKeyWithoutIndex
            | Rule::FloatForMoney => Severity::Warning,
        }
    }

    /// What the rule finds, in a few words.
    pub fn summary(self) -> &'static str {
        match self {
            Rule::NoPrimaryKey => "a table without a primary key",
            Rule::LegacyCharset => {
                "a utf8mb3 or latin1 character set where the package uses utf8mb4"
            }
            Rule::DuplicateIndex => "an index another index of the table duplicates or serves",
            Rule::ForeignKeyWithoutIndex => "a foreign key whose columns no index begins with",
            Rule::FloatForMoney => "a floating-point column whose name says it holds money",
            Rule::DefinerNotAllowed => {
                "a view, routine, trigger or event whose definer is not an allowed one"
            }
            Rule::ZeroDateDefault => "a date or time column whose default is a zero date",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// How much a finding matters; `Off` turns a rule off. Ordered: `Off` < `Warning` < `Error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Off,
    Warning,
    Error,
}

impl Severity {
    /// As written in configuration and output: `off`, `warning`, `error`.
    pub fn id(self) -> &'static str {
        match self {
            Severity::Off => "off",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }

    /// The severity `text` names, exactly as [`Severity::id`] writes it.
    pub fn parse(text: &str) -> Option<Severity> {
        [Severity::Off, Severity::Warning, Severity::Error]
            .into_iter()
            .find(|severity| severity.id() == text)
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// What the rules check against, and how severe each rule's findings are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LintSettings {
    /// The character set the package says character data uses; `utf8mb4` by default.
    pub charset: String,
    /// `user@host` patterns a definer must match (`%` and `_` wildcards as in MySQL host
    /// patterns, on the host part and user part); empty: the definer rule finds nothing.
    pub allowed_definers: Vec<String>,
    /// Severities that differ from the rules' defaults.
    pub severities: BTreeMap<Rule, Severity>,
}

impl Default for LintSettings {
    fn default() -> Self {
        LintSettings {
            charset: DEFAULT_CHARSET.to_owned(),
            allowed_definers: Vec::new(),
            severities: BTreeMap::new(),
        }
    }
}

impl LintSettings {
    /// The severity of `rule`'s findings: the configured one, else the rule's default.
    pub fn severity(&self, rule: Rule) -> Severity {
        self.severities
            .get(&rule)
            .copied()
            .unwrap_or_else(|| rule.default_severity())
    }
}

/// One thing a rule found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub rule: Rule,
    /// Never `Off`: a rule turned off finds nothing.
    pub severity: Severity,
    /// The object: "table `orders`", "column `orders`.`price`", "index `orders`.`k1`",
    /// "foreign key `orders`.`fk_customer`", "view `v`", "function `f`", "procedure `p`",
    /// "trigger `t`", "event `e`", "database".
    pub object: String,
    /// One sentence saying what is wrong and what to do.
    pub message: String,
}

/// What a finding is about. The variants' order is the order findings are listed in: by kind,
/// then by name (the binary order of the names' UTF-8 bytes, a column or an index by its
/// table's name first).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Object {
    Database,
    Table(String),
    Column { table: String, column: String },
    Index { table: String, index: String },
    ForeignKey { table: String, key: String },
    View(String),
    Routine(RoutineKind, String),
    Trigger(String),
    Event(String),
}

impl fmt::Display for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Object::Database => f.write_str("database"),
            Object::Table(name) => write!(f, "table {}", identifier(name)),
            Object::Column { table, column } => {
                write!(f, "column {}.{}", identifier(table), identifier(column))
            }
            Object::Index { table, index } => {
                write!(f, "index {}.{}", identifier(table), identifier(index))
            }
            Object::ForeignKey { table, key } => {
                write!(f, "foreign key {}.{}", identifier(table), identifier(key))
            }
            Object::View(name) => write!(f, "view {}", identifier(name)),
            Object::Routine(RoutineKind::Function, name) => {
                write!(f, "function {}", identifier(name))
            }
            Object::Routine(RoutineKind::Procedure, name) => {
                write!(f, "procedure {}", identifier(name))
            }
            Object::Trigger(name) => write!(f, "trigger {}", identifier(name)),
            Object::Event(name) => write!(f, "event {}", identifier(name)),
        }
    }
}

/// What one rule found about one object, before it is given its severity.
#[derive(Debug)]
struct Found {
    object: Object,
    message: String,
}

/// What `rule` finds in `model`, in any order.
fn check(rule: Rule, model: &DatabaseModel, settings: &LintSettings) -> Vec<Found> {
    match rule {
        Rule::NoPrimaryKey => keys::no_primary_key(model),
        Rule::LegacyCharset => columns::legacy_charset(model, &settings.charset),
        Rule::DuplicateIndex => keys::duplicate_index(model),
        Rule::ForeignKeyWithoutIndex => keys::foreign_key_without_index(model),
        Rule::FloatForMoney => columns::float_for_money(model),
        Rule::DefinerNotAllowed => definers::definer_not_allowed(model, &settings.allowed_definers),
        Rule::ZeroDateDefault => columns::zero_date_default(model),
    }
}

/// Every finding of `settings`' enabled rules in `model`, in a stable order (by object kind,
/// name, rule).
pub fn lint(model: &DatabaseModel, settings: &LintSettings) -> Vec<Finding> {
    let mut found: Vec<(Object, Rule, Severity, String)> = Vec::new();
    for rule in Rule::ALL {
        let severity = settings.severity(rule);
        if severity == Severity::Off {
            continue;
        }
        found.extend(
            check(rule, model, settings)
                .into_iter()
                .map(|one| (one.object, rule, severity, one.message)),
        );
    }
    found.sort_by(|a, b| (&a.0, a.1, &a.3).cmp(&(&b.0, b.1, &b.3)));
    found
        .into_iter()
        .map(|(object, rule, severity, message)| Finding {
            rule,
            severity,
            object: object.to_string(),
            message,
        })
        .collect()
}

/// Whether `findings` hold one at `threshold` or above (for `--fail-on warning|error`); with
/// `Off`, whether they hold any.
pub fn fails(findings: &[Finding], threshold: Severity) -> bool {
    findings.iter().any(|finding| finding.severity >= threshold)
}

#[cfg(test)]
mod tests {
    use super::fixtures::{column, index, model, table};
    use super::*;
    use crate::snapshot::model::{IndexKind, View};
    use crate::test_models::routine;

    #[test]
    fn rule_ids_are_kebab_case_in_serde_and_parse_back() {
        let ids: Vec<&str> = Rule::ALL.iter().map(|rule| rule.id()).collect();
        assert_eq!(
            ids,
            [
                "no-primary-key",
                "legacy-charset",
                "duplicate-index",
                "foreign-key-without-index",
                "float-for-money",
                "definer-not-allowed",
                "zero-date-default",
            ]
        );
        for rule in Rule::ALL {
            assert_eq!(
                serde_json::to_value(rule).unwrap(),
                serde_json::Value::from(rule.id())
            );
            assert_eq!(
                serde_json::from_value::<Rule>(rule.id().into()).unwrap(),
                rule
            );
            assert_eq!(Rule::parse(rule.id()), Some(rule));
            assert_eq!(rule.to_string(), rule.id());
            assert!(!rule.summary().is_empty());
        }
        assert_eq!(Rule::parse("No-Primary-Key"), None);
        assert_eq!(Rule::parse("no_primary_key"), None);
        assert_eq!(Rule::parse(""), None);
    }

    #[test]
    fn severities_parse_order_and_default() {
        for (text, severity) in [
            ("off", Severity::Off),
            ("warning", Severity::Warning),
            ("error", Severity::Error),
        ] {
            assert_eq!(Severity::parse(text), Some(severity));
            assert_eq!(severity.id(), text);
            assert_eq!(
                serde_json::to_value(severity).unwrap(),
                serde_json::Value::from(text)
            );
        }
        assert_eq!(Severity::parse("Error"), None);
        assert_eq!(Severity::parse("fatal"), None);
        assert!(Severity::Off < Severity::Warning && Severity::Warning < Severity::Error);

        let defaults = LintSettings::default();
        assert_eq!(defaults.charset, "utf8mb4");
        assert!(defaults.allowed_definers.is_empty());
        let errors: Vec<Rule> = Rule::ALL
            .into_iter()
            .filter(|rule| defaults.severity(*rule) == Severity::Error)
            .collect();
        assert_eq!(errors, [Rule::DefinerNotAllowed, Rule::ZeroDateDefault]);
    }

    /// A model with something for most rules: a table without a primary key, a latin1
    /// database, a float price and a zero date, and a view by a definer no one allowed.
    fn flawed() -> DatabaseModel {
        let mut price = column("price", "double");
        price.nullable = true;
        let mut since = column("since", "date");
        since.default = Some("'0000-00-00'".to_owned());
        let mut model = model(vec![
            table(
                "orders",
                vec![column("id", "int(11)"), price, since],
                vec![],
            ),
            table(
                "customers",
                vec![column("id", "int(11)")],
                vec![index("PRIMARY", IndexKind::Primary, &["id"])],
            ),
        ]);
        model.default_charset = "latin1".to_owned();
        model.views.push(View {
            name: "v".to_owned(),
            definition: "select 1 AS `1`".to_owned(),
            algorithm: "UNDEFINED".to_owned(),
            security: "DEFINER".to_owned(),
            check_option: "NONE".to_owned(),
            definer: "root@localhost".to_owned(),
        });
        model
            .routines
            .push(routine("p", RoutineKind::Procedure, "app@%"));
        model
    }

    fn listed(findings: &[Finding]) -> Vec<(Rule, Severity, &str)> {
        findings
            .iter()
            .map(|finding| (finding.rule, finding.severity, finding.object.as_str()))
            .collect()
    }

    #[test]
    fn findings_come_by_object_kind_then_name_then_rule() {
        let settings = LintSettings {
            allowed_definers: vec!["app@%".to_owned()],
            ..LintSettings::default()
        };
        let findings = lint(&flawed(), &settings);
        assert_eq!(
            listed(&findings),
            [
                (Rule::LegacyCharset, Severity::Warning, "database"),
                (Rule::NoPrimaryKey, Severity::Warning, "table `orders`"),
                (
                    Rule::FloatForMoney,
                    Severity::Warning,
                    "column `orders`.`price`"
                ),
                (
                    Rule::ZeroDateDefault,
                    Severity::Error,
                    "column `orders`.`since`"
                ),
                (Rule::DefinerNotAllowed, Severity::Error, "view `v`"),
            ]
        );
        assert!(
            findings
                .iter()
                .all(|finding| finding.message.ends_with('.'))
        );
        // The same model gives the same list, whatever the order of its collections.
        let mut shuffled = flawed();
        shuffled.tables.reverse();
        assert_eq!(lint(&shuffled, &settings), findings);
    }

    #[test]
    fn configured_severities_replace_the_defaults_and_off_finds_nothing() {
        let settings = LintSettings {
            allowed_definers: vec!["app@%".to_owned()],
            severities: BTreeMap::from([
                (Rule::NoPrimaryKey, Severity::Error),
                (Rule::ZeroDateDefault, Severity::Warning),
                (Rule::FloatForMoney, Severity::Off),
                (Rule::LegacyCharset, Severity::Off),
                (Rule::DefinerNotAllowed, Severity::Off),
            ]),
            ..LintSettings::default()
        };
        assert_eq!(settings.severity(Rule::NoPrimaryKey), Severity::Error);
        assert_eq!(settings.severity(Rule::DuplicateIndex), Severity::Warning);
        let findings = lint(&flawed(), &settings);
        assert_eq!(
            listed(&findings),
            [
                (Rule::NoPrimaryKey, Severity::Error, "table `orders`"),
                (
                    Rule::ZeroDateDefault,
                    Severity::Warning,
                    "column `orders`.`since`"
                ),
            ]
        );
        let all_off = LintSettings {
            severities: Rule::ALL.map(|rule| (rule, Severity::Off)).into(),
            ..settings
        };
        assert!(lint(&flawed(), &all_off).is_empty());
    }

    #[test]
    fn a_check_fails_on_a_finding_at_its_threshold_or_above() {
        let finding = |severity| Finding {
            rule: Rule::NoPrimaryKey,
            severity,
            object: "table `t`".to_owned(),
            message: "m.".to_owned(),
        };
        let warning = [finding(Severity::Warning)];
        let both = [finding(Severity::Warning), finding(Severity::Error)];
        assert!(fails(&warning, Severity::Warning));
        assert!(!fails(&warning, Severity::Error));
        assert!(fails(&both, Severity::Error));
        assert!(fails(&warning, Severity::Off));
        for threshold in [Severity::Off, Severity::Warning, Severity::Error] {
            assert!(!fails(&[], threshold));
        }
    }

    #[test]
    fn objects_are_named_by_kind_with_their_names_identifier() {
        for (object, shown) in [
            (Object::Database, "database"),
            (Object::Table("a`b".to_owned()), "table `a``b`"),
            (
                Object::Column {
                    table: "orders".to_owned(),
                    column: "price".to_owned(),
                },
                "column `orders`.`price`",
            ),
            (
                Object::Index {
                    table: "orders".to_owned(),
                    index: "k1".to_owned(),
                },
                "index `orders`.`k1`",
            ),
            (
                Object::ForeignKey {
                    table: "orders".to_owned(),
                    key: "fk".to_owned(),
                },
                "foreign key `orders`.`fk`",
            ),
            (Object::View("v".to_owned()), "view `v`"),
            (
                Object::Routine(RoutineKind::Function, "f".to_owned()),
                "function `f`",
            ),
            (
                Object::Routine(RoutineKind::Procedure, "p".to_owned()),
                "procedure `p`",
            ),
            (Object::Trigger("t".to_owned()), "trigger `t`"),
            (Object::Event("e".to_owned()), "event `e`"),
        ] {
            assert_eq!(object.to_string(), shown);
        }
    }
}
