//! The package, read side, against real git repositories made in temporary folders, bare and
//! with a work tree: the base commit, the registry and each database's merged files read back
//! exactly and from commits only; broken packages are safe `github`-stage errors; the registry's
//! canonical form round-trips byte for byte.

use crate::git_support;

use std::collections::BTreeMap;
use std::path::Path;

use fermata_schema::names;
use fermata_schema::package::{
    BaseSnapshot, Package, PackageSettings, REGISTRY_FILE, RegisteredSnapshot, Registry,
};
use fermata_store::schema::{DatabaseName, ErrorCode, ErrorStage, OperationId, SafeError};
use git_support::TestRepository;
use git2::FileMode;

/// A registry of two databases, one with uppercase and non-ASCII in its name, in canonical form.
const TWO_DATABASES: &str = r#"{
  "databases": {
    "Ventes Été": {
      "folder": "^ventes%20%C3%89t%C3%A9",
      "generator_version": "0.1.0",
      "object_counts": {
        "tables": 2,
        "views": 1
      },
      "operation_id": "00000000-0000-4000-8000-000000000002",
      "snapshot_hash": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
    },
    "shop": {
      "folder": "shop",
      "generator_version": "0.1.0+build.7",
      "object_counts": {
        "tables": 1
      },
      "operation_id": "00000000-0000-4000-8000-000000000001",
      "snapshot_hash": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    }
  },
  "format": 1
}
"#;

const SALES: &str = "Ventes Été";
const SALES_FOLDER: &str = "^ventes%20%C3%89t%C3%A9";

fn database(name: &str) -> DatabaseName {
    DatabaseName::new(name).unwrap()
}

fn files(entries: &[(&str, &[u8])]) -> BTreeMap<String, Vec<u8>> {
    entries
        .iter()
        .map(|(path, content)| ((*path).to_owned(), content.to_vec()))
        .collect()
}

/// The merged files of `shop`, relative to its folder.
fn shop_files() -> BTreeMap<String, Vec<u8>> {
    files(&[
        ("manifest.json", b"{\"shop\": true}\n"),
        ("schema.json", b"{}\n"),
        ("tables/^orders.sql", b"CREATE TABLE `Orders` (`id` int);\n"),
    ])
}

/// The merged files of `Ventes Été`, relative to its folder.
fn sales_files() -> BTreeMap<String, Vec<u8>> {
    files(&[
        ("manifest.json", b"{\"sales\": true}\n"),
        ("schema.json", "{\"naïve\": 1}\n".as_bytes()),
        (
            "tables/^lignes%20de%20commande.sql",
            b"CREATE TABLE `Lignes de commande` (`id` int);\n",
        ),
        (
            "tables/clients.sql",
            b"CREATE TABLE `clients` (`id` int);\n",
        ),
        (
            "views/na%C3%AFve.sql",
            b"CREATE VIEW `na\xC3\xAFve` AS SELECT 1;\n",
        ),
        ("empty.txt", b""),
    ])
}

/// `files` placed under `folder/`.
fn under(folder: &str, inner: &BTreeMap<String, Vec<u8>>) -> BTreeMap<String, Vec<u8>> {
    inner
        .iter()
        .map(|(path, content)| (format!("{folder}/{path}"), content.clone()))
        .collect()
}

/// A package at `package_path` with the two-database registry and both folders.
fn two_database_package(package_path: &str) -> BTreeMap<String, Vec<u8>> {
    let mut tree = files(&[("README.md", b"The schema package.\n")]);
    tree.insert(
        format!("{package_path}/{REGISTRY_FILE}"),
        TWO_DATABASES.as_bytes().to_vec(),
    );
    tree.extend(under(&format!("{package_path}/shop"), &shop_files()));
    tree.extend(under(
        &format!("{package_path}/{SALES_FOLDER}"),
        &sales_files(),
    ));
    tree
}

fn assert_github_failed(result: Result<impl std::fmt::Debug, SafeError>, case: &str) {
    match result {
        Err(error) => {
            assert_eq!(error.code(), ErrorCode::GithubFailed, "{case}: {error}");
            assert_eq!(error.stage(), ErrorStage::Github, "{case}");
            assert_eq!(
                error.message(),
                "the pull request could not be published",
                "{case}"
            );
        }
        Ok(value) => panic!("{case}: read {value:?}"),
    }
}

#[tokio::test]
async fn a_branch_without_a_registry_reads_as_an_empty_registry_at_its_commit() {
    for bare in [false, true] {
        let test = TestRepository::new(bare);
        let first = test.commit("main", &files(&[("README.md", b"nothing yet\n")]));
        let package = Package::open(&test.settings("main")).await.unwrap();
        let base = package.base_snapshot().await.unwrap();
        assert_eq!(
            base,
            BaseSnapshot {
                commit: first.to_string(),
                registry: Registry::default(),
            },
            "bare: {bare}"
        );
        assert_eq!(base.commit.len(), 40);
        assert_eq!(
            package
                .merged_files(&base.commit, &database("shop"))
                .await
                .unwrap(),
            None
        );

        // A package folder without `registry.json` is a fresh package too.
        let second = test.commit("main", &files(&[("schemas/shop/tables/t.sql", b"x")]));
        let base = package.base_snapshot().await.unwrap();
        assert_eq!(base.commit, second.to_string(), "bare: {bare}");
        assert!(base.registry.databases().is_empty());
        assert_eq!(
            package
                .merged_files(&base.commit, &database("shop"))
                .await
                .unwrap(),
            None,
            "an unregistered folder is not merged"
        );
    }
}

#[tokio::test]
async fn registered_databases_read_back_exactly_from_the_base_commit_only() {
    for bare in [false, true] {
        let test = TestRepository::new(bare);
        let package_path = if bare { "db/schemas" } else { "schemas" };
        let mut settings = test.settings("main");
        settings.path = package_path.to_owned();
        let merged = test.commit("main", &two_database_package(package_path));

        // Another branch changes a file, adds a database and rewrites the registry.
        let mut elsewhere = two_database_package(package_path);
        elsewhere.insert(
            format!("{package_path}/shop/tables/^orders.sql"),
            b"CREATE TABLE `Orders` (`id` bigint);\n".to_vec(),
        );
        elsewhere.insert(
            format!("{package_path}/{REGISTRY_FILE}"),
            TWO_DATABASES
                .replace("\"tables\": 1\n", "\"tables\": 1,\n        \"views\": 9\n")
                .into_bytes(),
        );
        let other = test.commit("other", &elsewhere);

        // A work tree and index that differ from every commit.
        if !bare {
            let work_tree = test.path();
            std::fs::create_dir_all(work_tree.join("schemas/shop/tables")).unwrap();
            std::fs::create_dir_all(work_tree.join("schemas/new")).unwrap();
            std::fs::write(work_tree.join("schemas/registry.json"), b"{\"format\": 1}").unwrap();
            std::fs::write(
                work_tree.join("schemas/shop/tables/^orders.sql"),
                b"changed",
            )
            .unwrap();
            std::fs::write(work_tree.join("schemas/shop/tables/extra.sql"), b"new").unwrap();
            let mut index = test.repository.index().unwrap();
            index
                .add_path(Path::new("schemas/shop/tables/extra.sql"))
                .unwrap();
            index.write().unwrap();
        }

        let package = Package::open(&settings).await.unwrap();
        let base = package.base_snapshot().await.unwrap();
        assert_eq!(base.commit, merged.to_string(), "bare: {bare}");
        assert_eq!(base.registry.to_canonical_json(), TWO_DATABASES.as_bytes());
        let registered: Vec<&str> = base
            .registry
            .databases()
            .keys()
            .map(DatabaseName::as_str)
            .collect();
        assert_eq!(registered, [SALES, "shop"]);
        let shop = base.registry.get(&database("shop")).unwrap();
        assert_eq!(
            shop,
            &RegisteredSnapshot {
                snapshot_hash: "0123456789abcdef".repeat(4),
                object_counts: BTreeMap::from([("tables".to_owned(), 1)]),
                generator_version: "0.1.0+build.7".to_owned(),
                operation_id: OperationId(uuid::Uuid::from_u128(
                    0x0000_0000_0000_4000_8000_0000_0000_0001
                )),
            }
        );
        assert_eq!(
            base.registry.get(&database(SALES)).unwrap().object_counts,
            BTreeMap::from([("tables".to_owned(), 2), ("views".to_owned(), 1)])
        );
        assert_eq!(base.registry.get(&database("Shop")), None);

        assert_eq!(
            package
                .merged_files(&base.commit, &database("shop"))
                .await
                .unwrap(),
            Some(shop_files()),
            "bare: {bare}"
        );
        assert_eq!(
            package
                .merged_files(&base.commit, &database(SALES))
                .await
                .unwrap(),
            Some(sales_files()),
            "bare: {bare}"
        );
        assert_eq!(
            package
                .merged_files(&base.commit, &database("ventes été"))
                .await
                .unwrap(),
            None,
            "names differing in case are different databases"
        );

        // The commit named is the one read: the other branch's files differ.
        let other_shop = package
            .merged_files(&other.to_string(), &database("shop"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            other_shop["tables/^orders.sql"],
            b"CREATE TABLE `Orders` (`id` bigint);\n"
        );
    }
}

#[tokio::test]
async fn broken_packages_are_safe_github_errors() {
    let registry_path = format!("schemas/{REGISTRY_FILE}");
    let cases: Vec<(&str, BTreeMap<String, Vec<u8>>)> = vec![
        (
            "a registry that does not parse",
            files(&[(registry_path.as_str(), b"{\"format\": 1, \"databases\": {")]),
        ),
        (
            "a registry that is not JSON at all",
            files(&[(registry_path.as_str(), b"\xFF\xFEnot json")]),
        ),
        (
            "a folder that does not match its name",
            BTreeMap::from([(
                registry_path.clone(),
                TWO_DATABASES
                    .replace("\"folder\": \"shop\"", "\"folder\": \"Shop\"")
                    .into_bytes(),
            )]),
        ),
        (
            "a registry of a newer format",
            files(&[(
                registry_path.as_str(),
                b"{\"format\": 2, \"databases\": {}}\n",
            )]),
        ),
        (
            "a package path that names a file",
            files(&[("schemas", b"not a folder")]),
        ),
        (
            "a registry that is a folder",
            files(&[("schemas/registry.json/inner", b"{}")]),
        ),
    ];
    for (case, tree) in cases {
        let test = TestRepository::new(true);
        test.commit("main", &tree);
        let package = Package::open(&test.settings("main")).await.unwrap();
        assert_github_failed(package.base_snapshot().await, case);
    }

    // A missing base branch, in an empty repository and in one with other branches.
    let test = TestRepository::new(false);
    let package = Package::open(&test.settings("main")).await.unwrap();
    assert_github_failed(package.base_snapshot().await, "an empty repository");
    test.commit("other", &two_database_package("schemas"));
    assert_github_failed(package.base_snapshot().await, "a missing branch");

    // Commits that cannot be read.
    let commit = test.commit("main", &two_database_package("schemas"));
    let package = Package::open(&test.settings("main")).await.unwrap();
    let shop = database("shop");
    for (case, named) in [
        ("an abbreviated commit", commit.to_string()[..12].to_owned()),
        ("an uppercase commit", commit.to_string().to_uppercase()),
        ("a commit that does not exist", "ab".repeat(20)),
        ("not a commit at all", "main".to_owned()),
        (
            "a tree instead of a commit",
            test.repository
                .find_commit(commit)
                .unwrap()
                .tree_id()
                .to_string(),
        ),
    ] {
        assert_github_failed(package.merged_files(&named, &shop).await, case);
    }

    // A registered database whose folder is missing, is a file, or holds a symbolic link.
    let mut without_folder = two_database_package("schemas");
    without_folder.retain(|path, _| !path.starts_with("schemas/shop/"));
    let mut folder_is_a_file = without_folder.clone();
    folder_is_a_file.insert("schemas/shop".to_owned(), b"a file".to_vec());
    for (case, tree) in [
        ("a registered database without its folder", without_folder),
        (
            "a registered database whose folder is a file",
            folder_is_a_file,
        ),
    ] {
        let commit = test.commit("main", &tree);
        assert_github_failed(package.merged_files(&commit.to_string(), &shop).await, case);
    }
    let mut with_link: BTreeMap<String, (FileMode, Vec<u8>)> = two_database_package("schemas")
        .into_iter()
        .map(|(path, content)| (path, (FileMode::Blob, content)))
        .collect();
    with_link.insert(
        "schemas/shop/tables/link.sql".to_owned(),
        (FileMode::Link, b"../../../../etc/passwd".to_vec()),
    );
    let commit = test.commit_entries("main", &with_link);
    assert_github_failed(
        package.merged_files(&commit.to_string(), &shop).await,
        "a symbolic link in a database folder",
    );
    // The other database of that commit still reads.
    assert_eq!(
        package
            .merged_files(&commit.to_string(), &database(SALES))
            .await
            .unwrap(),
        Some(sales_files())
    );
}

#[tokio::test]
async fn opening_refuses_what_is_not_a_usable_repository() {
    let plain_folder = tempfile::tempdir().unwrap();
    assert_github_failed(
        Package::open(&PackageSettings::new(plain_folder.path(), "main")).await,
        "a folder that is not a repository",
    );
    // A folder inside a repository's work tree is not that repository.
    let test = TestRepository::new(false);
    std::fs::create_dir(test.path().join("inner")).unwrap();
    assert_github_failed(
        Package::open(&PackageSettings::new(test.path().join("inner"), "main")).await,
        "a folder inside a work tree",
    );
    // Its git folder is.
    Package::open(&PackageSettings::new(test.path().join(".git"), "main"))
        .await
        .unwrap();
    let mut settings = test.settings("main");
    settings.path = "../elsewhere".to_owned();
    assert_github_failed(Package::open(&settings).await, "invalid settings");
}

#[test]
fn settings_name_the_setting_that_is_wrong() {
    let folder = tempfile::tempdir().unwrap();
    let valid = PackageSettings::new(folder.path(), "main");
    assert_eq!(valid.path, "schemas");
    assert_eq!(valid.validate(), Ok(()));
    for (path, ok) in [
        ("schemas", true),
        ("db/schemas", true),
        ("Schémas et vues", true),
        ("", false),
        ("/schemas", false),
        ("schemas/", false),
        ("db//schemas", false),
        (".", false),
        ("./schemas", false),
        ("..", false),
        ("db/../schemas", false),
        (".git", false),
        ("db/.GIT", false),
        ("db\\schemas", false),
        ("db\0", false),
    ] {
        let mut settings = valid.clone();
        settings.path = path.to_owned();
        let result = settings.validate();
        assert_eq!(result.is_ok(), ok, "{path:?}: {result:?}");
        if let Err(message) = result {
            assert!(message.starts_with("`path` "), "{message}");
        }
    }
    for (branch, ok) in [
        ("main", true),
        ("release/2024", true),
        ("", false),
        ("HEAD", false),
        ("-main", false),
        ("main..next", false),
        ("main.lock", false),
        ("a b", false),
        ("main/", false),
        ("ma~in", false),
        ("ma\0in", false),
    ] {
        let mut settings = valid.clone();
        settings.base_branch = branch.to_owned();
        let result = settings.validate();
        assert_eq!(result.is_ok(), ok, "{branch:?}: {result:?}");
        if let Err(message) = result {
            assert_eq!(message, "`base_branch` is not a valid git branch name");
        }
    }
    let mut missing = valid;
    missing.repository = folder.path().join("missing");
    assert_eq!(
        missing.validate(),
        Err("`repository` is not a folder".to_owned())
    );
    missing.repository = "".into();
    assert_eq!(missing.validate(), Err("`repository` is empty".to_owned()));
}

#[test]
fn the_canonical_form_round_trips_byte_for_byte() {
    let parsed = Registry::parse(TWO_DATABASES.as_bytes()).unwrap();
    assert_eq!(parsed.to_canonical_json(), TWO_DATABASES.as_bytes());

    // The same content in another layout, with `\u` escapes, is written canonically.
    let compact = r#"{"format":1,"databases":{"shop":{"snapshot_hash":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","operation_id":"00000000-0000-4000-8000-000000000001","object_counts":{"tables":1},"generator_version":"0.1.0+build.7","folder":"shop"},"Ventes \u00c9t\u00e9":{"folder":"^ventes%20%C3%89t%C3%A9","generator_version":"0.1.0","object_counts":{"views":1,"tables":2},"operation_id":"00000000-0000-4000-8000-000000000002","snapshot_hash":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}}}"#;
    let reparsed = Registry::parse(compact.as_bytes()).unwrap();
    assert_eq!(reparsed, parsed);
    assert_eq!(reparsed.to_canonical_json(), TWO_DATABASES.as_bytes());

    // Built entry by entry, as publication will, it is the same file.
    let mut built = Registry::default();
    for (name, snapshot) in parsed.databases().iter().rev() {
        assert_eq!(built.register(name.clone(), snapshot.clone()), Ok(None));
    }
    assert_eq!(built.to_canonical_json(), TWO_DATABASES.as_bytes());

    let empty = Registry::default().to_canonical_json();
    assert_eq!(empty, b"{\n  \"databases\": {},\n  \"format\": 1\n}\n");
    assert_eq!(Registry::parse(&empty).unwrap().to_canonical_json(), empty);
}

#[test]
fn registry_rules_are_enforced_on_reading() {
    let shop_entry = |field: &str, value: &str| {
        let mut entry = serde_json::json!({
            "folder": "shop",
            "generator_version": "0.1.0",
            "object_counts": {"tables": 1},
            "operation_id": "00000000-0000-4000-8000-000000000001",
            "snapshot_hash": "ab".repeat(32),
        });
        entry[field] = serde_json::Value::String(value.to_owned());
        entry
    };
    let registry_of = |name: &str, entry: serde_json::Value| {
        serde_json::json!({"format": 1, "databases": {name: entry}}).to_string()
    };
    let long_name = "x".repeat(65);
    let long_unicode = "日".repeat(29);
    let cases: Vec<(&str, String)> = vec![
        ("empty input", String::new()),
        ("a list", "[]".to_owned()),
        ("no format", r#"{"databases": {}}"#.to_owned()),
        (
            "a format as text",
            r#"{"format": "1", "databases": {}}"#.to_owned(),
        ),
        ("no databases", r#"{"format": 1}"#.to_owned()),
        (
            "an unknown top-level key",
            r#"{"format": 1, "databases": {}, "extra": 1}"#.to_owned(),
        ),
        (
            "a repeated top-level key",
            r#"{"format": 1, "databases": {}, "databases": {}}"#.to_owned(),
        ),
        (
            "a repeated database",
            format!(
                r#"{{"format": 1, "databases": {{"shop": {0}, "shop": {0}}}}}"#,
                shop_entry("folder", "shop")
            ),
        ),
        (
            "a repeated category",
            registry_of("shop", shop_entry("folder", "shop"))
                .replace(r#"{"tables":1}"#, r#"{"tables":1,"tables":2}"#),
        ),
        (
            "an unknown entry key",
            registry_of("shop", shop_entry("merged_at", "yesterday")),
        ),
        (
            "an empty database name",
            registry_of("", shop_entry("folder", "")),
        ),
        (
            "a name of 65 characters",
            registry_of(&long_name, shop_entry("folder", &names::encode(&long_name))),
        ),
        (
            "a name with NUL",
            registry_of("a\0b", shop_entry("folder", "a%00b")),
        ),
        (
            "a name whose encoding is too long for a file name",
            registry_of(
                &long_unicode,
                shop_entry("folder", &names::encode(&long_unicode)),
            ),
        ),
        (
            "a folder in another case",
            registry_of("Shop", shop_entry("folder", "shop")),
        ),
        (
            "a folder with lowercase hexadecimal",
            registry_of("a/b", shop_entry("folder", "a%2fb")),
        ),
        (
            "an uppercase hash",
            registry_of("shop", shop_entry("snapshot_hash", &"AB".repeat(32))),
        ),
        (
            "a short hash",
            registry_of("shop", shop_entry("snapshot_hash", &"ab".repeat(31))),
        ),
        (
            "an uppercase operation ID",
            registry_of(
                "shop",
                shop_entry("operation_id", "0000000A-0000-4000-8000-000000000001"),
            ),
        ),
        (
            "an operation ID without hyphens",
            registry_of(
                "shop",
                shop_entry("operation_id", "00000000000040008000000000000001"),
            ),
        ),
        (
            "a generator version with a space",
            registry_of("shop", shop_entry("generator_version", "0.1 beta")),
        ),
        (
            "an empty generator version",
            registry_of("shop", shop_entry("generator_version", "")),
        ),
        (
            "a category in uppercase",
            registry_of("shop", shop_entry("folder", "shop"))
                .replace(r#"{"tables":1}"#, r#"{"Tables":1}"#),
        ),
        (
            "a negative count",
            registry_of("shop", shop_entry("folder", "shop"))
                .replace(r#"{"tables":1}"#, r#"{"tables":-1}"#),
        ),
    ];
    assert!(Registry::parse(registry_of("shop", shop_entry("folder", "shop")).as_bytes()).is_ok());
    for (case, text) in cases {
        assert_github_failed(Registry::parse(text.as_bytes()), case);
    }
}

#[test]
fn registering_refuses_what_the_file_could_not_hold() {
    let snapshot = RegisteredSnapshot {
        snapshot_hash: "ab".repeat(32),
        object_counts: BTreeMap::from([("tables".to_owned(), 3)]),
        generator_version: "0.1.0".to_owned(),
        operation_id: OperationId(uuid::Uuid::from_u128(1)),
    };
    let mut registry = Registry::default();
    let error = registry
        .register(database(&"日".repeat(29)), snapshot.clone())
        .unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidIdentifier);
    let mut bad_hash = snapshot.clone();
    bad_hash.snapshot_hash = "not a hash".to_owned();
    let error = registry.register(database("shop"), bad_hash).unwrap_err();
    assert_eq!(error.code(), ErrorCode::UnsupportedSchemaOutput);
    assert!(registry.databases().is_empty());

    assert_eq!(
        registry.register(database("shop"), snapshot.clone()),
        Ok(None)
    );
    let mut newer = snapshot.clone();
    newer.object_counts.insert("views".to_owned(), 1);
    assert_eq!(
        registry.register(database("shop"), newer.clone()),
        Ok(Some(snapshot))
    );
    let reread = Registry::parse(&registry.to_canonical_json()).unwrap();
    assert_eq!(reread.get(&database("shop")), Some(&newer));
}
