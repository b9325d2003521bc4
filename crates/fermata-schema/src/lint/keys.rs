//! The rules over a table's keys: `no-primary-key`, `duplicate-index` (an index another one
//! duplicates, or a plain key a longer B-tree index serves) and `foreign-key-without-index`.

use super::{Found, Object};
use crate::snapshot::model::{DatabaseModel, ForeignKey, Index, IndexKind, Table};
use crate::snapshot::render::identifier;

/// A table without a primary key. One with a unique key over NOT NULL columns is found too:
/// InnoDB clusters its rows by that key, but replication tools and online schema change tools
/// look for a primary key.
pub(super) fn no_primary_key(model: &DatabaseModel) -> Vec<Found> {
    model
        .tables
        .iter()
        .filter(|table| !table.indexes.iter().any(|i| i.kind == IndexKind::Primary))
        .map(|table| {
            let message = match table.indexes.iter().find(|i| is_not_null_unique(table, i)) {
                Some(unique) => format!(
                    "The table has no primary key; InnoDB clusters its rows by the unique key {} \
                     over NOT NULL columns, but replication tools and online schema change need \
                     a primary key, so make that key the primary key.",
                    identifier(&unique.name)
                ),
                None => "The table has no primary key, which replication tools and online schema \
                         change need: add one."
                    .to_owned(),
            };
            Found {
                object: Object::Table(table.name.clone()),
                message,
            }
        })
        .collect()
}

/// Whether `index` is a unique key over whole NOT NULL columns, which InnoDB would cluster by.
fn is_not_null_unique(table: &Table, index: &Index) -> bool {
    index.kind == IndexKind::Unique
        && !index.parts.is_empty()
        && index.parts.iter().all(|part| {
            part.expression.is_none()
                && part.prefix.is_none()
                && table.columns.iter().any(|column| {
                    column.name.eq_ignore_ascii_case(&part.column) && !column.nullable
                })
        })
}

/// Which indexes can stand in for one another: B-tree-like keys among themselves, full-text and
/// spatial indexes each with their own kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Keys,
    Fulltext,
    Spatial,
}

fn family(index: &Index) -> Family {
    match index.kind {
        IndexKind::Primary | IndexKind::Unique | IndexKind::Key => Family::Keys,
        IndexKind::Fulltext => Family::Fulltext,
        IndexKind::Spatial => Family::Spatial,
    }
}

/// The index's access method, uppercase: `USING ...` when the server prints it, else the
/// engine's default for keys (`HASH` for a MEMORY table, else `BTREE`).
fn method(table: &Table, index: &Index) -> String {
    match &index.using {
        Some(using) => using.to_ascii_uppercase(),
        None if family(index) != Family::Keys => String::new(),
        None if ["MEMORY", "HEAP"]
            .iter()
            .any(|engine| table.engine.eq_ignore_ascii_case(engine)) =>
        {
            "HASH".to_owned()
        }
        None => "BTREE".to_owned(),
    }
}

/// Whether queries can use the index: MariaDB's ignored and MySQL's invisible indexes serve
/// none.
fn serves(index: &Index) -> bool {
    !index.ignored && !index.invisible
}

/// Which of two equal indexes is kept: one that serves queries, then the primary key, a unique
/// key, a plain one, then the first by name.
fn rank(index: &Index) -> (bool, IndexKind, &str) {
    (!serves(index), index.kind, index.name.as_str())
}

/// How a message names an index.
fn described(index: &Index) -> String {
    match index.kind {
        IndexKind::Primary => "the primary key".to_owned(),
        IndexKind::Unique => format!("the unique key {}", identifier(&index.name)),
        IndexKind::Key => format!("the key {}", identifier(&index.name)),
        IndexKind::Fulltext => format!("the full-text index {}", identifier(&index.name)),
        IndexKind::Spatial => format!("the spatial index {}", identifier(&index.name)),
    }
}

/// An index whose parts (column, prefix length, expression, order) and method equal another
/// index's of its table, the one kept being the better by [`rank`]; or a plain key whose parts
/// begin a longer B-tree key that serves queries, which serves its lookups too. A unique key
/// is never redundant because of a longer one: it says something a longer key does not.
pub(super) fn duplicate_index(model: &DatabaseModel) -> Vec<Found> {
    let mut found = Vec::new();
    for table in &model.tables {
        for index in &table.indexes {
            let same = |other: &&Index| {
                family(other) == family(index)
                    && other.parts == index.parts
                    && other.without_overlaps == index.without_overlaps
                    && method(table, other) == method(table, index)
            };
            let kept = table
                .indexes
                .iter()
                .filter(same)
                .filter(|other| rank(other) < rank(index))
                .min_by(|a, b| rank(a).cmp(&rank(b)));
            let message = if let Some(kept) = kept {
                format!(
                    "The index has the same parts as {}: drop it.",
                    described(kept)
                )
            } else if index.kind == IndexKind::Key {
                let longer = table
                    .indexes
                    .iter()
                    .filter(|other| {
                        family(other) == Family::Keys
                            && serves(other)
                            && method(table, other) == "BTREE"
                            && other.parts.len() > index.parts.len()
                            && other.parts.starts_with(&index.parts)
                    })
                    .min_by(|a, b| rank(a).cmp(&rank(b)));
                let Some(longer) = longer else { continue };
                format!(
                    "The index is redundant: {} begins with the same parts and serves its \
                     lookups, so drop it.",
                    described(longer)
                )
            } else {
                continue;
            };
            found.push(Found {
                object: Object::Index {
                    table: table.name.clone(),
                    index: index.name.clone(),
                },
                message,
            });
        }
    }
    found
}

/// A foreign key whose columns, in order, begin no primary, unique or plain key of its table
/// (over whole columns: a prefix length or an expression does not serve it).
pub(super) fn foreign_key_without_index(model: &DatabaseModel) -> Vec<Found> {
    model
        .tables
        .iter()
        .flat_map(|table| {
            table
                .foreign_keys
                .iter()
                .filter(|key| !table.indexes.iter().any(|index| begins(index, key)))
                .map(|key| Found {
                    object: Object::ForeignKey {
                        table: table.name.clone(),
                        key: key.name.clone(),
                    },
                    message: format!(
                        "No index of the table begins with the foreign key's columns ({}): add \
                         one, or every change to the referenced rows scans this table.",
                        key.columns
                            .iter()
                            .map(|column| identifier(column))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                })
        })
        .collect()
}

/// Whether `index` begins with `key`'s columns, in order, each whole.
fn begins(index: &Index, key: &ForeignKey) -> bool {
    family(index) == Family::Keys
        && index.parts.len() >= key.columns.len()
        && index.parts.iter().zip(&key.columns).all(|(part, column)| {
            part.expression.is_none()
                && part.prefix.is_none()
                && part.column.eq_ignore_ascii_case(column)
        })
}

#[cfg(test)]
mod tests {
    use super::super::Rule;
    use super::super::fixtures::{column, found, index, model, objects, table};
    use crate::snapshot::model::{ForeignKey, Index, IndexKind, IndexPart, Table};

    #[test]
    fn a_table_without_a_primary_key_is_found() {
        let mut nullable = column("code", "varchar(10)");
        nullable.nullable = true;
        let shop = model(vec![
            table(
                "keyed",
                vec![column("id", "int(11)")],
                vec![index("PRIMARY", IndexKind::Primary, &["id"])],
            ),
            table("bare", vec![column("id", "int(11)")], vec![]),
            table(
                "clustered",
                vec![column("id", "int(11)"), column("n", "int(11)")],
                vec![
                    index("k_n", IndexKind::Key, &["n"]),
                    index("u_id", IndexKind::Unique, &["id"]),
                ],
            ),
            table(
                "nullable",
                vec![nullable],
                vec![index("u_code", IndexKind::Unique, &["code"])],
            ),
        ]);
        let findings = found(&shop, Rule::NoPrimaryKey, &[]);
        let shown: Vec<&str> = findings.iter().map(|(object, _)| object.as_str()).collect();
        assert_eq!(
            shown,
            ["table `bare`", "table `clustered`", "table `nullable`"]
        );
        assert!(findings[0].1.contains("add one"), "{}", findings[0].1);
        // The NOT NULL unique key is named, and why it is not enough is said.
        assert!(
            findings[1].1.contains("unique key `u_id`")
                && findings[1].1.contains("replication tools"),
            "{}",
            findings[1].1
        );
        assert!(!findings[2].1.contains("u_code"), "{}", findings[2].1);
    }

    fn part(column: &str, prefix: Option<u32>, descending: bool) -> IndexPart {
        IndexPart {
            column: column.to_owned(),
            expression: None,
            prefix,
            descending,
        }
    }

    fn with_parts(mut index: Index, parts: Vec<IndexPart>) -> Index {
        index.parts = parts;
        index
    }

    fn indexed(indexes: Vec<Index>) -> Vec<(String, String)> {
        let columns = ["a", "b", "c"]
            .iter()
            .map(|name| column(name, "int(11)"))
            .collect();
        found(
            &model(vec![table("t", columns, indexes)]),
            Rule::DuplicateIndex,
            &[],
        )
    }

    #[test]
    fn an_index_equal_to_another_is_a_duplicate_of_the_better_one() {
        let findings = indexed(vec![
            index("PRIMARY", IndexKind::Primary, &["a"]),
            index("k_a", IndexKind::Key, &["a"]),
            index("u_a", IndexKind::Unique, &["a"]),
            index("k_b1", IndexKind::Key, &["b", "c"]),
            index("k_b2", IndexKind::Key, &["b", "c"]),
            index("u_c", IndexKind::Unique, &["c"]),
            index("u_c2", IndexKind::Unique, &["c"]),
        ]);
        assert_eq!(
            findings,
            [
                (
                    "index `t`.`k_a`".to_owned(),
                    "The index has the same parts as the primary key: drop it.".to_owned()
                ),
                (
                    "index `t`.`k_b2`".to_owned(),
                    "The index has the same parts as the key `k_b1`: drop it.".to_owned()
                ),
                (
                    "index `t`.`u_a`".to_owned(),
                    "The index has the same parts as the primary key: drop it.".to_owned()
                ),
                (
                    "index `t`.`u_c2`".to_owned(),
                    "The index has the same parts as the unique key `u_c`: drop it.".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn parts_differ_by_prefix_order_method_or_kind_family() {
        let key = |name| index(name, IndexKind::Key, &[]);
        let mut hash = index("k_hash", IndexKind::Key, &["c"]);
        hash.using = Some("HASH".to_owned());
        let findings = indexed(vec![
            with_parts(key("k1"), vec![part("a", Some(10), false)]),
            with_parts(key("k2"), vec![part("a", Some(20), false)]),
            with_parts(key("k3"), vec![part("b", None, true)]),
            with_parts(key("k4"), vec![part("b", None, false)]),
            index("ft", IndexKind::Fulltext, &["c"]),
            hash,
            index("k_c", IndexKind::Key, &["c"]),
        ]);
        assert!(findings.is_empty(), "{findings:?}");
        let findings = indexed(vec![
            index("ft1", IndexKind::Fulltext, &["c"]),
            index("ft2", IndexKind::Fulltext, &["c"]),
            index("ft_long", IndexKind::Fulltext, &["c", "b"]),
        ]);
        let shown: Vec<&str> = findings.iter().map(|(object, _)| object.as_str()).collect();
        assert_eq!(shown, ["index `t`.`ft2`"]);
        assert!(findings[0].1.contains("full-text index `ft1`"));
    }

    #[test]
    fn a_plain_key_that_begins_a_longer_btree_index_is_redundant() {
        let mut invisible = index("k_abc_hidden", IndexKind::Key, &["a", "b", "c"]);
        invisible.invisible = true;
        let findings = indexed(vec![
            index("PRIMARY", IndexKind::Primary, &["a", "b"]),
            index("k_a", IndexKind::Key, &["a"]),
            // A unique key is never redundant because of a longer one.
            index("u_b", IndexKind::Unique, &["b"]),
            index("k_bc", IndexKind::Key, &["b", "c"]),
            invisible,
        ]);
        let invisible_c = {
            let mut k = index("k_ca", IndexKind::Key, &["c", "a"]);
            k.ignored = true;
            k
        };
        assert_eq!(
            findings,
            [(
                "index `t`.`k_a`".to_owned(),
                "The index is redundant: the primary key begins with the same parts and serves \
                 its lookups, so drop it."
                    .to_owned()
            ),]
        );
        // A longer HASH index serves no prefix, and an ignored one no query.
        let mut hash = index("k_ab", IndexKind::Key, &["a", "b"]);
        hash.using = Some("HASH".to_owned());
        assert!(indexed(vec![index("k_a", IndexKind::Key, &["a"]), hash]).is_empty());
        assert!(indexed(vec![index("k_c", IndexKind::Key, &["c"]), invisible_c]).is_empty());
        // A key redundant because of a longer unique key names it.
        let findings = indexed(vec![
            index("k_b", IndexKind::Key, &["b"]),
            index("u_bc", IndexKind::Unique, &["b", "c"]),
        ]);
        assert_eq!(findings.len(), 1);
        assert!(findings[0].1.contains("the unique key `u_bc`"));
    }

    #[test]
    fn memory_tables_index_by_hash_unless_told() {
        let mut btree = index("k_btree", IndexKind::Key, &["a"]);
        btree.using = Some("BTREE".to_owned());
        let innodb = table(
            "m",
            vec![column("a", "int(11)")],
            vec![index("k_a", IndexKind::Key, &["a"]), btree],
        );
        assert_eq!(
            objects(&model(vec![innodb.clone()]), Rule::DuplicateIndex),
            ["index `m`.`k_btree`"]
        );
        let memory = Table {
            engine: "MEMORY".to_owned(),
            ..innodb
        };
        assert!(objects(&model(vec![memory]), Rule::DuplicateIndex).is_empty());
    }

    fn foreign_key(name: &str, columns: &[&str]) -> ForeignKey {
        ForeignKey {
            name: name.to_owned(),
            columns: columns.iter().map(|column| (*column).to_owned()).collect(),
            referenced_database: None,
            referenced_table: "customers".to_owned(),
            referenced_columns: columns.iter().map(|column| (*column).to_owned()).collect(),
            on_delete: "RESTRICT".to_owned(),
            on_update: "RESTRICT".to_owned(),
        }
    }

    #[test]
    fn a_foreign_key_needs_an_index_that_begins_with_its_columns() {
        let columns = ["id", "a", "b", "c", "d"]
            .iter()
            .map(|name| column(name, "varchar(20)"))
            .collect();
        let mut orders = table(
            "orders",
            columns,
            vec![
                index("PRIMARY", IndexKind::Primary, &["id"]),
                index("k_ab", IndexKind::Key, &["a", "b"]),
                with_parts(
                    index("k_c", IndexKind::Key, &[]),
                    vec![part("c", Some(5), false)],
                ),
                index("ft_d", IndexKind::Fulltext, &["d"]),
            ],
        );
        orders.foreign_keys = vec![
            foreign_key("fk_a", &["a"]),
            foreign_key("fk_ab", &["A", "B"]),
            foreign_key("fk_b", &["b"]),
            foreign_key("fk_ba", &["b", "a"]),
            foreign_key("fk_c", &["c"]),
            foreign_key("fk_d", &["d"]),
            foreign_key("fk_id", &["id"]),
        ];
        let findings = found(&model(vec![orders]), Rule::ForeignKeyWithoutIndex, &[]);
        let shown: Vec<&str> = findings.iter().map(|(object, _)| object.as_str()).collect();
        assert_eq!(
            shown,
            [
                "foreign key `orders`.`fk_b`",
                "foreign key `orders`.`fk_ba`",
                "foreign key `orders`.`fk_c`",
                "foreign key `orders`.`fk_d`",
            ]
        );
        assert!(
            findings[1].1.contains("(`b`, `a`)") && findings[1].1.contains("add one"),
            "{}",
            findings[1].1
        );
    }
}
