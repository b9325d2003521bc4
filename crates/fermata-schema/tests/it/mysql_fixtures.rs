//! MySQL's own recorded `SHOW CREATE TABLE` and `SHOW CREATE VIEW` outputs, copied from the
//! test results of the public `mysql/mysql-server` repository (MySQL 8.0) and of Percona Server
//! for MySQL (`percona/percona-server`, a build of MySQL that prints MySQL's output) into
//! `fixtures/mysql/show_create/` (each file names its source file, commit and release, and says
//! which of its lines are recorded and which are ours). For each, the model is built from the
//! catalog rows the way the catalog reader builds it, and the test requires, byte for byte:
//! the normalized recording equals the model's rendering in MySQL's spelling, that text equals
//! the recording itself (or the recording with what normalization documents: no counter, keys
//! in name order, the collation spelled out), and the model read back from its JSON renders the
//! same. No server is needed.

use std::collections::BTreeMap;
use std::path::Path;

use fermata_schema::snapshot::model::{
    Check, Flavor, IndexKind, Partition, Partitioning, Table, View,
};
use fermata_schema::snapshot::{ColumnRow, IndexRow, add_index_row, column_from_catalog};
use fermata_schema::snapshot::{normalize, render};

/// A fixture: its header comment and its sections, by name (`show create table` → its lines).
pub(crate) struct Fixture {
    pub(crate) name: String,
    header: Vec<String>,
    sections: BTreeMap<String, (String, Vec<String>)>,
}

impl Fixture {
    fn read(path: &Path) -> Fixture {
        let text = std::fs::read_to_string(path).unwrap();
        let mut fixture = Fixture {
            name: path.file_name().unwrap().to_string_lossy().into_owned(),
            header: Vec::new(),
            sections: BTreeMap::new(),
        };
        let mut current: Option<String> = None;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix('[') {
                let (name, argument) = rest.split_once(']').expect("a section header");
                fixture.sections.insert(
                    name.to_owned(),
                    (argument.trim_start().to_owned(), Vec::new()),
                );
                current = Some(name.to_owned());
                continue;
            }
            match &current {
                None => fixture.header.push(line.to_owned()),
                Some(section) => fixture
                    .sections
                    .get_mut(section)
                    .unwrap()
                    .1
                    .push(line.to_owned()),
            }
        }
        fixture
    }

    fn argument(&self, section: &str) -> Option<&str> {
        self.sections
            .get(section)
            .map(|(argument, _)| argument.as_str())
    }

    fn lines(&self, section: &str) -> &[String] {
        self.sections
            .get(section)
            .map(|(_, lines)| lines.as_slice())
            .unwrap_or_default()
    }

    pub(crate) fn text(&self, section: &str) -> Option<String> {
        self.sections
            .get(section)
            .map(|(_, lines)| lines.join("\n"))
    }

    /// Rows of a tab-separated section whose first line is its header, by column name.
    fn rows(&self, section: &str) -> Vec<BTreeMap<String, String>> {
        let lines = self.lines(section);
        let Some((header, rows)) = lines.split_first() else {
            return Vec::new();
        };
        let names: Vec<&str> = header.split('\t').collect();
        rows.iter()
            .map(|row| {
                names
                    .iter()
                    .zip(row.split('\t'))
                    .map(|(name, value)| ((*name).to_owned(), value.to_owned()))
                    .collect()
            })
            .collect()
    }
}

/// `NULL` as the test results print SQL NULL.
fn value(row: &BTreeMap<String, String>, names: &[&str]) -> Option<String> {
    names
        .iter()
        .find_map(|name| row.get(*name))
        .filter(|value| value.as_str() != "NULL")
        .cloned()
}

const STRING_TYPES: &[&str] = &[
    "char",
    "varchar",
    "tinytext",
    "text",
    "mediumtext",
    "longtext",
    "enum",
    "set",
];

/// The table a fixture's catalog rows describe, read as the catalog reader reads a MySQL server.
pub(crate) fn model(fixture: &Fixture) -> Table {
    let table_line = fixture.argument("table").expect("a [table] line");
    let [name, engine, charset, collation] = table_line.split(' ').collect::<Vec<_>>()[..] else {
        panic!("[table] NAME ENGINE CHARSET COLLATION");
    };
    let generated: BTreeMap<String, String> = fixture
        .argument("generated")
        .map(|line| {
            let (column, expression) = line.split_once(' ').unwrap();
            BTreeMap::from([(column.to_owned(), expression.to_owned())])
        })
        .unwrap_or_default();
    // A column's own character set and collation, where they are not the table's.
    let collations: BTreeMap<String, (String, String)> = fixture
        .lines("collations")
        .iter()
        .map(|line| {
            let [column, charset, collation] = line.split('\t').collect::<Vec<_>>()[..] else {
                panic!("COLUMN\tCHARSET\tCOLLATION");
            };
            (
                column.to_owned(),
                (charset.to_owned(), collation.to_owned()),
            )
        })
        .collect();
    let srids: BTreeMap<String, u32> = fixture
        .lines("srids")
        .iter()
        .map(|line| {
            let (column, srid) = line.split_once('\t').unwrap();
            (column.to_owned(), srid.parse().unwrap())
        })
        .collect();
    let mut table = Table {
        name: name.to_owned(),
        engine: engine.to_owned(),
        charset: charset.to_owned(),
        collation: collation.to_owned(),
        ..Table::default()
    };
    for row in fixture.rows("columns") {
        let field = row["Field"].clone();
        let column_type = row["Type"].clone();
        let textual = STRING_TYPES.iter().any(|kind| {
            column_type
                .strip_prefix(kind)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('('))
        });
        let column = column_from_catalog(
            Flavor::Mysql,
            ColumnRow {
                name: field.clone(),
                column_type,
                nullable: row["Null"] == "YES",
                default: value(&row, &["Default"]),
                extra: row["Extra"].clone(),
                charset: textual.then(|| {
                    collations
                        .get(&field)
                        .map_or(charset, |(charset, _)| charset)
                        .to_owned()
                }),
                collation: textual.then(|| {
                    collations
                        .get(&field)
                        .map_or(collation, |(_, collation)| collation)
                        .to_owned()
                }),
                comment: String::new(),
                generation_expression: generated.get(&field).cloned(),
                srid: srids.get(&field).copied(),
            },
        )
        .unwrap_or_else(|reason| panic!("{}: column {field}: {reason:?}", fixture.name));
        table.columns.push(column);
    }
    for row in fixture
        .rows("keys")
        .into_iter()
        .chain(fixture.rows("statistics"))
    {
        let index = IndexRow {
            name: value(&row, &["Key_name", "INDEX_NAME"]).unwrap(),
            non_unique: value(&row, &["Non_unique", "NON_UNIQUE"]).as_deref() != Some("0"),
            column: value(&row, &["Column_name", "COLUMN_NAME"]),
            sub_part: value(&row, &["Sub_part", "SUB_PART"]),
            index_type: value(&row, &["Index_type", "INDEX_TYPE"]).unwrap(),
            collation: value(&row, &["Collation", "COLLATION"]),
            comment: value(&row, &["Index_comment", "INDEX_COMMENT"]).unwrap_or_default(),
            ignored: false,
            visible: value(&row, &["Visible", "IS_VISIBLE"]).as_deref() != Some("NO"),
            expression: value(&row, &["Expression", "EXPRESSION"]),
        };
        add_index_row(&mut table.indexes, index).unwrap();
    }
    table.indexes.sort_by(|a, b| {
        (a.kind != IndexKind::Primary, a.name.as_bytes())
            .cmp(&(b.kind != IndexKind::Primary, b.name.as_bytes()))
    });
    for line in fixture.lines("checks") {
        let [name, clause, enforced] = line.split('\t').collect::<Vec<_>>()[..] else {
            panic!("NAME\tCLAUSE\tENFORCED");
        };
        table.checks.push(Check {
            name: name.to_owned(),
            clause: clause.to_owned(),
            not_enforced: enforced == "NO",
        });
    }
    if let Some(line) = fixture.argument("partitions") {
        let (method, expression) = line.split_once('\t').unwrap();
        table.partitioning = Some(Partitioning {
            method: method.to_owned(),
            system_time: None,
            expression: expression.to_owned(),
            subpartition_method: None,
            subpartition_expression: None,
            partitions: fixture
                .lines("partitions")
                .iter()
                .map(|line| {
                    let (name, values) = line.split_once('\t').unwrap();
                    Partition {
                        name: name.to_owned(),
                        values: Some(values.to_owned()),
                        default: false,
                        comment: String::new(),
                        subpartitions: Vec::new(),
                        quoted: false,
                    }
                })
                .collect(),
        });
    }
    table
}

pub(crate) fn fixtures() -> Vec<Fixture> {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures/mysql/show_create");
    let mut paths: Vec<_> = std::fs::read_dir(folder)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    paths.sort();
    let fixtures: Vec<Fixture> = paths.iter().map(|path| Fixture::read(path)).collect();
    for fixture in &fixtures {
        // Every fixture says where it comes from and which release printed it.
        let header = fixture.header.join("\n");
        assert!(
            ["mysql/mysql-server", "percona/percona-server"]
                .iter()
                .any(|repository| header.contains(&format!("# source: {repository} mysql-test/"))),
            "{}",
            fixture.name
        );
        let commit = fixture
            .header
            .iter()
            .find_map(|line| line.strip_prefix("# commit: "))
            .unwrap_or_else(|| panic!("{} names no commit", fixture.name));
        assert!(
            commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()),
            "{}",
            fixture.name
        );
        assert!(header.contains("# release: MySQL "), "{}", fixture.name);
    }
    fixtures
}

#[test]
fn recorded_mysql_tables_normalize_and_render_byte_for_byte() {
    let mut tables = 0;
    for fixture in fixtures() {
        let Some(recorded) = fixture.text("show create table") else {
            continue;
        };
        tables += 1;
        let name = &fixture.name;
        let mut table = model(&fixture);
        normalize::table_facts(&recorded, &mut table, Flavor::Mysql)
            .unwrap_or_else(|reason| panic!("{name}: {reason:?}"));
        let rendered = render::render_table(&table, Flavor::Mysql);
        let canonical = normalize::table(&recorded, &table, Flavor::Mysql)
            .unwrap_or_else(|| panic!("{name}: the recording does not normalize"));
        assert_eq!(canonical, rendered, "{name}");
        let expected = fixture.text("canonical").unwrap_or(recorded.clone());
        assert_eq!(canonical, expected, "{name}");
        // The model round-trips through its JSON.
        let json = serde_json::to_string(&table).unwrap();
        let back: Table = serde_json::from_str(&json).unwrap();
        assert_eq!(back, table, "{name}");
        assert_eq!(
            render::render_table(&back, Flavor::Mysql),
            rendered,
            "{name}"
        );
    }
    assert_eq!(tables, 12);
}

#[test]
fn recorded_mysql_views_normalize_and_render_byte_for_byte() {
    let mut views = 0;
    for fixture in fixtures() {
        let Some(recorded) = fixture.text("show create view") else {
            continue;
        };
        views += 1;
        let (name, definition) = fixture.argument("view").unwrap().split_once(' ').unwrap();
        let view = View {
            name: name.to_owned(),
            definition: definition.to_owned(),
            algorithm: normalize::view_algorithm(&recorded).unwrap(),
            security: fixture.argument("security").unwrap().to_owned(),
            check_option: fixture.argument("check option").unwrap().to_owned(),
            definer: "root@localhost".to_owned(),
        };
        let canonical = normalize::view(&recorded, "test").unwrap();
        assert_eq!(canonical, render::render_view(&view), "{}", fixture.name);
        assert_eq!(
            Some(canonical),
            fixture.text("canonical"),
            "{}",
            fixture.name
        );
        let back: View = serde_json::from_str(&serde_json::to_string(&view).unwrap()).unwrap();
        assert_eq!(back, view);
    }
    assert_eq!(views, 1);
}

/// What the catalog says of a MySQL column becomes what MySQL prints: quoted literal defaults,
/// `b'...'` for bits, `CURRENT_TIMESTAMP` and expression defaults (MySQL's `DEFAULT_GENERATED`)
/// in the parentheses MySQL prints around the stored expression, no `DEFAULT NULL` for text and
/// blob columns, none for a generated or auto-increment column.
#[test]
fn mysql_catalog_defaults_become_mysqls_default_clauses() {
    let default = |column_type: &str, nullable: bool, value: Option<&str>, extra: &str| {
        column_from_catalog(
            Flavor::Mysql,
            ColumnRow {
                name: "c".to_owned(),
                column_type: column_type.to_owned(),
                nullable,
                default: value.map(str::to_owned),
                extra: extra.to_owned(),
                ..ColumnRow::default()
            },
        )
        .unwrap()
        .default
    };
    let some = |text: &str| Some(text.to_owned());
    assert_eq!(default("int", true, Some("0"), ""), some("'0'"));
    assert_eq!(
        default("varchar(5)", true, Some("it's"), ""),
        some("'it''s'")
    );
    assert_eq!(default("bit(3)", true, Some("b'101'"), ""), some("b'101'"));
    assert_eq!(default("int", true, None, ""), some("NULL"));
    assert_eq!(default("int", false, None, ""), None);
    assert_eq!(default("text", true, None, ""), None);
    assert_eq!(default("json", true, None, ""), some("NULL"));
    assert_eq!(
        default(
            "timestamp",
            false,
            Some("CURRENT_TIMESTAMP"),
            "DEFAULT_GENERATED on update CURRENT_TIMESTAMP"
        ),
        some("CURRENT_TIMESTAMP")
    );
    assert_eq!(
        default(
            "datetime(3)",
            true,
            Some("CURRENT_TIMESTAMP(3)"),
            "DEFAULT_GENERATED"
        ),
        some("CURRENT_TIMESTAMP(3)")
    );
    assert_eq!(
        default(
            "float",
            true,
            Some("(rand() * rand())"),
            "DEFAULT_GENERATED"
        ),
        some("((rand() * rand()))")
    );
    assert_eq!(
        default(
            "binary(16)",
            true,
            Some("uuid_to_bin(uuid())"),
            "DEFAULT_GENERATED"
        ),
        some("(uuid_to_bin(uuid()))")
    );
    assert_eq!(default("int", false, None, "auto_increment"), None);
    let column = column_from_catalog(
        Flavor::Mysql,
        ColumnRow {
            name: "ts".to_owned(),
            column_type: "timestamp(3)".to_owned(),
            nullable: false,
            default: Some("CURRENT_TIMESTAMP(3)".to_owned()),
            extra: "DEFAULT_GENERATED on update CURRENT_TIMESTAMP(3)".to_owned(),
            ..ColumnRow::default()
        },
    )
    .unwrap();
    let mut table = Table {
        name: "t".to_owned(),
        engine: "InnoDB".to_owned(),
        charset: "utf8mb4".to_owned(),
        collation: "utf8mb4_0900_ai_ci".to_owned(),
        ..Table::default()
    };
    table.columns.push(column);
    assert_eq!(
        render::render_table(&table, Flavor::Mysql),
        "CREATE TABLE `t` (\n  `ts` timestamp(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci"
    );
}
