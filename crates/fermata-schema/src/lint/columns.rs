//! The rules over columns and character sets: `legacy-charset` (the database's, a table's or a
//! column's character set is utf8mb3 or latin1 where the package uses utf8mb4),
//! `float-for-money` (a floating-point column named as money) and `zero-date-default` (a date or
//! time column whose default is a zero date).

use super::{Found, Object};
use crate::snapshot::model::{Column, DatabaseModel, Table};

/// The character sets `legacy-charset` finds: MySQL's three-byte UTF-8 by both its names, and
/// latin1.
const LEGACY_CHARSETS: [&str; 3] = ["utf8mb3", "utf8", "latin1"];

/// The words of a column's name that say it holds money; a word matches as written or with a
/// plural `s` or `es`.
const MONEY_WORDS: [&str; 17] = [
    "price", "amount", "cost", "total", "balance", "money", "fee", "salary", "tax", "payment",
    "charge", "revenue", "discount", "subtotal", "wage", "credit", "debit",
];

fn is_legacy(charset: &str) -> bool {
    LEGACY_CHARSETS
        .iter()
        .any(|legacy| charset.eq_ignore_ascii_case(legacy))
}

fn column_object(table: &Table, column: &Column) -> Object {
    Object::Column {
        table: table.name.clone(),
        column: column.name.clone(),
    }
}

/// When the package's character set is utf8mb4: the database's default, each table's default
/// and each column's character set that is a legacy one. A column is found only when its
/// character set differs from its table's, so a legacy table is one finding, not one per
/// column.
pub(super) fn legacy_charset(model: &DatabaseModel, package_charset: &str) -> Vec<Found> {
    if !package_charset.eq_ignore_ascii_case("utf8mb4") {
        return Vec::new();
    }
    let mut found = Vec::new();
    if is_legacy(&model.default_charset) {
        found.push(Found {
            object: Object::Database,
            message: format!(
                "The database's default character set is {}, not {package_charset}: change it \
                 with ALTER DATABASE ... CHARACTER SET {package_charset}, so new tables use it.",
                model.default_charset
            ),
        });
    }
    for table in &model.tables {
        if is_legacy(&table.charset) {
            found.push(Found {
                object: Object::Table(table.name.clone()),
                message: format!(
                    "The table's default character set is {}, not {package_charset}: convert \
                     it with ALTER TABLE ... CONVERT TO CHARACTER SET {package_charset}.",
                    table.charset
                ),
            });
        }
        for column in &table.columns {
            let Some(charset) = &column.charset else {
                continue;
            };
            if is_legacy(charset) && !charset.eq_ignore_ascii_case(&table.charset) {
                found.push(Found {
                    object: column_object(table, column),
                    message: format!(
                        "The column's character set is {charset}, not {package_charset}: \
                         change the column to CHARACTER SET {package_charset}."
                    ),
                });
            }
        }
    }
    found
}

/// The type's name without its length, precision or attributes (`double` of
/// `double(10,2) unsigned`), lowercase.
fn base_type(column_type: &str) -> String {
    column_type
        .split(['(', ' '])
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase()
}

/// The words of a name, lowercase: split at every character that is neither a letter nor a
/// digit (`_`, `-`), where a lowercase letter is followed by an uppercase one (`unitPrice`),
/// before the last capital of a run followed by a lowercase letter (`HTMLPrice`), and between
/// letters and digits.
fn words(name: &str) -> Vec<String> {
    let chars: Vec<char> = name.chars().collect();
    let mut words = Vec::new();
    let mut word = String::new();
    for (at, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            continue;
        }
        if let Some(&previous) = at.checked_sub(1).and_then(|before| chars.get(before)) {
            let next_is_lower = chars.get(at + 1).is_some_and(|next| next.is_lowercase());
            let boundary = previous.is_alphanumeric()
                && ((previous.is_lowercase() && c.is_uppercase())
                    || (previous.is_uppercase() && c.is_uppercase() && next_is_lower)
                    || (previous.is_numeric() != c.is_numeric()));
            if boundary && !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
        }
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// The money word among the words of `name`, if any.
fn money_word(name: &str) -> Option<&'static str> {
    words(name).iter().find_map(|word| {
        MONEY_WORDS.into_iter().find(|money| {
            word.strip_prefix(money)
                .is_some_and(|rest| matches!(rest, "" | "s" | "es"))
        })
    })
}

/// A `float`, `double` or `real` column whose name has a word that says it holds money: binary
/// floating point holds most decimal fractions only approximately.
pub(super) fn float_for_money(model: &DatabaseModel) -> Vec<Found> {
    let mut found = Vec::new();
    for table in &model.tables {
        for column in &table.columns {
            if !matches!(
                base_type(&column.column_type).as_str(),
                "float" | "double" | "real"
            ) {
                continue;
            }
            let Some(word) = money_word(&column.name) else {
                continue;
            };
            found.push(Found {
                object: column_object(table, column),
                message: format!(
                    "The column is {} and its name says it holds money ({word}), which binary \
                     floating point holds only approximately: use DECIMAL, such as \
                     DECIMAL(12,2).",
                    column.column_type
                ),
            });
        }
    }
    found
}

/// Whether a default is a zero date or has a zero part: its literal's date part (before a space
/// or a `T`) is `YYYY-MM-DD` with a zero year, month or day, or all zero digits.
fn is_zero_date(default: &str) -> bool {
    let text = default.trim();
    let literal = text
        .strip_prefix('\'')
        .and_then(|rest| rest.strip_suffix('\''))
        .unwrap_or(text);
    let date = literal.split([' ', 'T']).next().unwrap_or_default();
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    if digits(date) {
        return date.bytes().all(|b| b == b'0');
    }
    let parts: Vec<&str> = date.split('-').collect();
    parts.len() == 3
        && parts.iter().all(|part| digits(part))
        && parts.iter().any(|part| part.bytes().all(|b| b == b'0'))
}

/// A `date`, `datetime` or `timestamp` column (any fractional precision) whose default is a
/// zero date or has a zero year, month or day, which strict SQL modes refuse.
pub(super) fn zero_date_default(model: &DatabaseModel) -> Vec<Found> {
    let mut found = Vec::new();
    for table in &model.tables {
        for column in &table.columns {
            if !matches!(
                base_type(&column.column_type).as_str(),
                "date" | "datetime" | "timestamp"
            ) {
                continue;
            }
            let Some(default) = column.default.as_deref().filter(|d| is_zero_date(d)) else {
                continue;
            };
            found.push(Found {
                object: column_object(table, column),
                message: format!(
                    "The default {default} is a zero date, which the NO_ZERO_DATE and \
                     NO_ZERO_IN_DATE SQL modes refuse: give a real date, or make the column \
                     nullable with a NULL default."
                ),
            });
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{column, found, model, objects, table};
    use super::super::{LintSettings, Rule, lint};
    use super::*;

    fn text(name: &str, charset: &str) -> Column {
        Column {
            charset: Some(charset.to_owned()),
            collation: Some(format!("{charset}_general_ci")),
            ..column(name, "varchar(20)")
        }
    }

    #[test]
    fn legacy_character_sets_are_found_once_per_table_and_per_differing_column() {
        let mut legacy = table(
            "legacy",
            // Forty latin1 columns of a latin1 table are the table's one finding.
            (0..40).map(|n| text(&format!("c{n}"), "latin1")).collect(),
            vec![],
        );
        legacy.charset = "latin1".to_owned();
        legacy.columns.push(text("u", "utf8mb3"));
        legacy.columns.push(text("modern", "utf8mb4"));
        let mixed = table(
            "mixed",
            vec![
                column("id", "int(11)"),
                text("name", "utf8mb4"),
                text("old", "utf8"),
                text("code", "LATIN1"),
                text("bin", "binary"),
            ],
            vec![],
        );
        let mut shop = model(vec![legacy, mixed]);
        assert_eq!(
            objects(&shop, Rule::LegacyCharset),
            [
                "table `legacy`",
                "column `legacy`.`u`",
                "column `mixed`.`code`",
                "column `mixed`.`old`",
            ]
        );
        shop.default_charset = "utf8mb3".to_owned();
        let findings = found(&shop, Rule::LegacyCharset, &[]);
        assert_eq!(findings[0].0, "database");
        assert!(
            findings[0].1.contains("utf8mb3, not utf8mb4"),
            "{}",
            findings[0].1
        );

        // A package that says another character set leaves the rule nothing to find.
        let latin1_package = LintSettings {
            charset: "latin1".to_owned(),
            ..LintSettings::default()
        };
        assert!(
            lint(&shop, &latin1_package)
                .iter()
                .all(|f| f.rule != Rule::LegacyCharset)
        );
        let upper = LintSettings {
            charset: "UTF8MB4".to_owned(),
            ..LintSettings::default()
        };
        assert_eq!(
            lint(&shop, &upper)
                .iter()
                .filter(|f| f.rule == Rule::LegacyCharset)
                .count(),
            5
        );

        // A utf8mb4 database of utf8mb4 tables finds nothing.
        let clean = model(vec![table("t", vec![text("name", "utf8mb4")], vec![])]);
        assert!(objects(&clean, Rule::LegacyCharset).is_empty());
    }

    #[test]
    fn names_split_into_words_at_separators_case_and_digits() {
        for (name, expected) in [
            ("unit_price", vec!["unit", "price"]),
            ("unitPrice", vec!["unit", "price"]),
            ("UnitPrice", vec!["unit", "price"]),
            ("HTMLPrice", vec!["html", "price"]),
            ("total-cost", vec!["total", "cost"]),
            ("price2", vec!["price", "2"]),
            ("__fee__", vec!["fee"]),
            ("PRICE", vec!["price"]),
            ("", vec![]),
        ] {
            assert_eq!(words(name), expected, "{name}");
        }
    }

    #[test]
    fn a_floating_point_column_named_as_money_is_found() {
        let columns = [
            ("price", "double"),
            ("unitPrice", "float"),
            ("total_amount", "double(10,2) unsigned"),
            ("TaxRate", "real"),
            ("fees", "float(7,4)"),
            ("order-taxes", "DOUBLE"),
            // Not floating point, or not named as money.
            ("price_exact", "decimal(10,2)"),
            ("cost", "int(11)"),
            ("weight", "double"),
            ("priced", "double"),
            ("prices_count", "bigint(20)"),
            ("feedback", "float"),
            ("taxonomy", "double"),
        ];
        let shop = model(vec![table(
            "t",
            columns
                .iter()
                .map(|(name, column_type)| column(name, column_type))
                .collect(),
            vec![],
        )]);
        let findings = found(&shop, Rule::FloatForMoney, &[]);
        let shown: Vec<&str> = findings.iter().map(|(object, _)| object.as_str()).collect();
        assert_eq!(
            shown,
            [
                "column `t`.`TaxRate`",
                "column `t`.`fees`",
                "column `t`.`order-taxes`",
                "column `t`.`price`",
                "column `t`.`total_amount`",
                "column `t`.`unitPrice`",
            ]
        );
        assert!(
            findings
                .iter()
                .all(|(_, message)| message.contains("DECIMAL"))
        );
        assert!(findings[0].1.contains("(tax)"), "{}", findings[0].1);
    }

    #[test]
    fn zero_dates_and_dates_with_a_zero_part_are_found() {
        for (default, zero) in [
            ("'0000-00-00'", true),
            ("'0000-00-00 00:00:00'", true),
            ("'0000-00-00 00:00:00.000000'", true),
            ("'2020-00-10'", true),
            ("'2020-10-00 12:00:00'", true),
            ("'0000-01-01'", true),
            ("0", true),
            ("'2020-01-10'", false),
            ("'1970-01-01 00:00:01'", false),
            ("NULL", false),
            ("current_timestamp()", false),
            ("CURRENT_TIMESTAMP(6)", false),
            ("'2020-01'", false),
            ("''", false),
        ] {
            assert_eq!(is_zero_date(default), zero, "{default}");
        }

        let with_default = |name: &str, column_type: &str, default: &str| Column {
            default: Some(default.to_owned()),
            ..column(name, column_type)
        };
        let shop = model(vec![table(
            "t",
            vec![
                with_default("d", "date", "'0000-00-00'"),
                with_default("dt", "datetime(6)", "'0000-00-00 00:00:00.000000'"),
                with_default("ts", "timestamp", "'0000-00-00 00:00:00'"),
                with_default("half", "date", "'2020-00-10'"),
                with_default("fine", "datetime", "'2020-01-10 00:00:00'"),
                with_default("now", "timestamp(3)", "current_timestamp(3)"),
                with_default("text", "varchar(20)", "'0000-00-00'"),
                with_default("year", "year(4)", "0000"),
                column("none", "date"),
            ],
            vec![],
        )]);
        let findings = found(&shop, Rule::ZeroDateDefault, &[]);
        let shown: Vec<&str> = findings.iter().map(|(object, _)| object.as_str()).collect();
        assert_eq!(
            shown,
            [
                "column `t`.`d`",
                "column `t`.`dt`",
                "column `t`.`half`",
                "column `t`.`ts`",
            ]
        );
        assert!(
            findings[0]
                .1
                .starts_with("The default '0000-00-00' is a zero date"),
            "{}",
            findings[0].1
        );
    }
}
