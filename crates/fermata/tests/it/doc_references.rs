//! The docs checked against the code, so they cannot drift: every repository path that
//! ARCHITECTURE.md, README.md and docs/ name in backticks exists; every source file and code item
//! (a type, a function, a macro) that ARCHITECTURE.md and docs/ name in backticks exists, in the
//! crate and the file the same line or paragraph names; and every key the configuration file
//! accepts (asked of the real binary) is in docs/configuration.md, and every key that page lists
//! is accepted.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The text of `path` relative to the workspace root.
fn read(relative: &str) -> String {
    std::fs::read_to_string(workspace_root().join(relative)).unwrap()
}

/// ARCHITECTURE.md and every page of docs/, as paths relative to the root.
fn architecture_and_docs() -> Vec<String> {
    let mut docs: Vec<String> = std::fs::read_dir(workspace_root().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "md"))
        .map(|path| format!("docs/{}", path.file_name().unwrap().to_string_lossy()))
        .collect();
    docs.sort();
    docs.insert(0, "ARCHITECTURE.md".to_owned());
    docs
}

/// The backticked spans of one line of Markdown (single backticks; a double-backtick span, used
/// to quote a backtick, is skipped).
fn quoted(line: &str) -> Vec<&str> {
    if line.contains("``") {
        return Vec::new();
    }
    line.split('`').skip(1).step_by(2).collect()
}

/// The lines of a Markdown text outside fenced code blocks, numbered from 1.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            lines.push((index + 1, line));
        }
    }
    lines
}

// Paths from the workspace root.

/// Where a path from the workspace root starts.
const ROOTS: [&str; 5] = ["crates/", "docs/", "scripts/", "tests/", "web/"];

/// The repository paths (from the workspace root: `crates/...`, `docs/...`, `scripts/...`,
/// `tests/...`, `web/...`) that `text` names in backticks, with a line number each; a path may
/// end in `/` (a folder) or `:LINE`.
fn named_paths(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        for quoted in line.split('`').skip(1).step_by(2) {
            let looks_like_a_path = ROOTS.iter().any(|root| quoted.starts_with(root))
                && !quoted.contains([' ', '*', '{', '<', '$']);
            if looks_like_a_path {
                let path = quoted.split(':').next().unwrap_or(quoted);
                found.push((number + 1, path.to_owned()));
            }
        }
    }
    found
}

#[test]
fn every_path_the_docs_name_exists() {
    let root = workspace_root();
    let mut documents = architecture_and_docs();
    documents.insert(1, "README.md".to_owned());
    let mut missing = Vec::new();
    for document in documents {
        for (line, path) in named_paths(&read(&document)) {
            if !root.join(&path).exists() {
                missing.push(format!("{document}:{line}: {path}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "paths the docs name that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn a_missing_path_is_found_where_it_is_named() {
    let text = "See `crates/fermata/src/cli.rs:40` and `docs/gone.md`,\n\
        not `crates/*/tests` nor `fermata serve` nor `scripts/test -p x`.";
    assert_eq!(
        named_paths(text),
        [
            (1, "crates/fermata/src/cli.rs".to_owned()),
            (1, "docs/gone.md".to_owned())
        ]
    );
}

// Source files and code items, where the docs say they are.

/// What a backticked span names in the code.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Named {
    /// A workspace crate, `fermata-...`: the place the names after it are in.
    Crate(String),
    /// A source file or module folder, as a file name or a path inside a crate (`room.rs`,
    /// `config/`, `src/snapshot/`).
    File(String),
    /// A type, trait or variant (`StoreError`), a function (`is_retryable()`), a macro
    /// (`impl_storage!`), or a path to one (`cli::main_with`, `Flow::Stop`): the last segment is
    /// what must be defined.
    Item(String),
}

/// Names the docs give in backticks that look like code of ours but belong to other projects: a
/// product and a PostgreSQL function.
const OTHER_PROJECTS: [&str; 2] = ["GitHub", "clock_timestamp"];

/// Whether `word` is written as Rust types are: two or more capitalised parts, never two capitals
/// in a row (`StoreError`, not `ETag` or `PostgreSQL`).
fn is_type_name(word: &str) -> bool {
    let starts_upper = word.chars().next().is_some_and(|c| c.is_ascii_uppercase());
    let humps = word.chars().filter(char::is_ascii_uppercase).count();
    let capitals_in_a_row = word
        .as_bytes()
        .windows(2)
        .any(|pair| pair[0].is_ascii_uppercase() && pair[1].is_ascii_uppercase());
    starts_upper
        && humps >= 2
        && !capitals_in_a_row
        && word.chars().all(|c| c.is_ascii_alphanumeric())
}

fn is_identifier(word: &str) -> bool {
    word.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// What one backticked span names, if it looks like a file or an item of the code.
fn classify(span: &str) -> Option<Named> {
    const SOURCE_ENDINGS: [&str; 4] = [".rs", ".mjs", ".js", ".c"];
    if let Some(name) = span.strip_prefix("fermata-")
        && name.chars().all(|c| c.is_ascii_lowercase() || c == '-')
    {
        return Some(Named::Crate(span.to_owned()));
    }
    if ROOTS.iter().any(|root| span.starts_with(root)) {
        // A path from the root: `every_path_the_docs_name_exists` checks it.
        return None;
    }
    let path_like = !span.is_empty()
        && span
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
        && !span.starts_with(['/', '.']);
    if path_like && SOURCE_ENDINGS.iter().any(|ending| span.ends_with(ending)) {
        return Some(Named::File(span.to_owned()));
    }
    if path_like && span.ends_with('/') && span.contains(|c: char| c.is_ascii_lowercase()) {
        return Some(Named::File(span.to_owned()));
    }
    let item = span.strip_suffix("()").unwrap_or(span);
    if OTHER_PROJECTS.contains(&item) {
        return None;
    }
    if let Some(name) = span.strip_suffix('!') {
        return is_identifier(name).then(|| Named::Item(span.to_owned()));
    }
    if item.contains("::") {
        let segments: Vec<&str> = item.split("::").collect();
        return segments
            .iter()
            .all(|segment| is_identifier(segment))
            .then(|| Named::Item(item.to_owned()));
    }
    if span.ends_with("()") && is_identifier(item) {
        return Some(Named::Item(item.to_owned()));
    }
    is_type_name(span).then(|| Named::Item(span.to_owned()))
}

/// One name the docs give, with where it is given and the crate and file around it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reference {
    line: usize,
    named: Named,
    /// The crate the paragraph last named, if any.
    krate: Option<String>,
    /// For an item: the file the same line named before it, if any.
    file: Option<String>,
}

/// The files and items `text` names in backticks, each with the crate its paragraph last named
/// and, for an item, the file its line named before it.
fn references(text: &str) -> Vec<Reference> {
    let mut found = Vec::new();
    let mut krate: Option<String> = None;
    let mut previous_line = 0;
    for (number, line) in prose_lines(text) {
        // A paragraph, a list item and a table row each start afresh.
        let trimmed = line.trim_start();
        let starts_a_part = trimmed.is_empty()
            || trimmed.starts_with(['#', '|'])
            || trimmed.starts_with("- ")
            || trimmed.starts_with("* ")
            || trimmed.split_once(". ").is_some_and(|(number, _)| {
                !number.is_empty() && number.chars().all(|c| c.is_ascii_digit())
            });
        if starts_a_part || number != previous_line + 1 {
            krate = None;
        }
        previous_line = number;
        let mut file: Option<String> = None;
        for (index, part) in line.split('`').enumerate() {
            if index % 2 == 0 {
                // A sentence or a clause that ends takes the file it named with it.
                if part.contains([';', '.']) {
                    file = None;
                }
                continue;
            }
            if line.contains("``") {
                break;
            }
            let span = part;
            match classify(span) {
                Some(Named::Crate(name)) => {
                    krate = Some(name);
                    file = None;
                }
                Some(Named::File(name)) => {
                    found.push(Reference {
                        line: number,
                        named: Named::File(name.clone()),
                        krate: krate.clone(),
                        file: None,
                    });
                    file = Some(name);
                }
                Some(item @ Named::Item(_)) => found.push(Reference {
                    line: number,
                    named: item,
                    krate: krate.clone(),
                    file: file.clone(),
                }),
                None => {}
            }
        }
    }
    found
}

/// Every file under `folder`, recursively, relative to the workspace root.
fn files_under(folder: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name == "node_modules" || name == "target" || name.starts_with('.') {
            continue;
        }
        if path.is_dir() {
            files.push(path.clone());
            files_under(&path, files);
        } else {
            files.push(path);
        }
    }
}

/// The workspace's files and folders under `crates/`, `web/`, `tests/` and `scripts/`, and the
/// items each Rust file defines.
struct Workspace {
    /// Paths relative to the root; folders end in `/`.
    paths: Vec<String>,
    /// Item name → the Rust files that define it.
    items: BTreeMap<String, BTreeSet<String>>,
}

impl Workspace {
    fn read() -> Workspace {
        let root = workspace_root();
        let mut files = Vec::new();
        for folder in ["crates", "web", "tests", "scripts", "bench"] {
            files_under(&root.join(folder), &mut files);
        }
        let mut paths = Vec::new();
        let mut items: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for file in files {
            let relative = file
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if file.is_dir() {
                paths.push(format!("{relative}/"));
                continue;
            }
            if relative.ends_with(".rs") {
                for name in defined_items(&std::fs::read_to_string(&file).unwrap()) {
                    items.entry(name).or_default().insert(relative.clone());
                }
            }
            paths.push(relative);
        }
        Workspace { paths, items }
    }

    /// The paths a file reference can mean: those ending in `/name`, inside `krate` when given.
    fn files_named(&self, name: &str, krate: Option<&str>) -> Vec<&str> {
        let inside = krate.map(|krate| format!("crates/{krate}/"));
        self.paths
            .iter()
            .filter(|path| *path == name || path.ends_with(&format!("/{name}")))
            .filter(|path| {
                inside
                    .as_ref()
                    .is_none_or(|inside| path.starts_with(inside))
            })
            .map(String::as_str)
            .collect()
    }

    /// What is wrong with one reference, if anything.
    fn problem(&self, reference: &Reference) -> Option<String> {
        let krate = reference.krate.as_deref();
        let within = krate.map_or(String::new(), |krate| format!(" in `{krate}`"));
        match &reference.named {
            Named::Crate(_) => None,
            // A folder is a module folder only where a crate is named: elsewhere `tables/` or
            // `tmp/` are folders of a package or of the data folder.
            Named::File(name) if name.ends_with('/') && krate.is_none() => None,
            Named::File(name) => self
                .files_named(name, krate)
                .is_empty()
                .then(|| format!("no file `{name}`{within}")),
            Named::Item(path) if self.is_external(path) => None,
            Named::Item(path) => {
                let name = path.trim_end_matches('!').rsplit("::").next().unwrap();
                let Some(definitions) = self.items.get(name) else {
                    return Some(format!("`{path}` is not defined anywhere"));
                };
                let in_place = |definition: &String| match &reference.file {
                    // In the file, in the folder, or in the module folder beside `name.rs`.
                    Some(file) => self.files_named(file, krate).iter().any(|place| {
                        definition == place
                            || (place.ends_with('/') && definition.starts_with(place))
                            || definition
                                .starts_with(&format!("{}/", place.trim_end_matches(".rs")))
                    }),
                    // Without a file, the crate a paragraph is about may well name items of the
                    // crates it builds on: anywhere will do.
                    None => true,
                };
                if definitions.iter().any(in_place) {
                    return None;
                }
                let file = reference.file.as_deref().unwrap_or_default();
                Some(format!("`{path}` is not defined in `{file}`{within}"))
            }
        }
    }
}

impl Workspace {
    /// Whether `path` starts in a crate that is not ours (`tempfile::TempDir`): its first segment
    /// is lowercase, no module of ours, and no `fermata_` crate.
    fn is_external(&self, path: &str) -> bool {
        let Some((first, _)) = path.split_once("::") else {
            return false;
        };
        first.starts_with(|c: char| c.is_ascii_lowercase())
            && !first.starts_with("fermata_")
            && !matches!(first, "crate" | "self" | "super")
            && !self.items.contains_key(first)
    }
}

/// The names a Rust source defines: types, traits, functions, constants, modules, macros, and
/// enum variants (a capitalised name opening a line inside braces).
fn defined_items(source: &str) -> BTreeSet<String> {
    const KEYWORDS: [&str; 9] = [
        "struct", "enum", "trait", "type", "fn", "const", "static", "mod", "union",
    ];
    let mut names = BTreeSet::new();
    for line in source.lines() {
        let words: Vec<&str> = line
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '!'))
            .filter(|word| !word.is_empty())
            .collect();
        for pair in words.windows(2) {
            if KEYWORDS.contains(&pair[0]) || pair[0] == "macro_rules!" {
                names.insert(pair[1].trim_end_matches('!').to_owned());
            }
        }
        let trimmed = line.trim_start();
        if trimmed.starts_with("pub use ") || trimmed.starts_with("pub(crate) use ") {
            // A re-export is defined where it is exported too.
            let exported = trimmed.rsplit("::").next().unwrap_or_default();
            names.extend(
                exported
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .filter(|word| !word.is_empty() && *word != "self")
                    .map(str::to_owned),
            );
        }
        let first: String = trimmed
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let rest = trimmed[first.len()..].trim_start();
        let variant_like = first.chars().next().is_some_and(|c| c.is_ascii_uppercase())
            && (rest.is_empty() || rest.starts_with([',', '(', '{', '=']));
        if variant_like {
            names.insert(first);
        }
    }
    names
}

#[test]
fn every_file_and_item_the_docs_name_is_where_they_say() {
    let workspace = Workspace::read();
    let mut problems = Vec::new();
    for document in architecture_and_docs() {
        for reference in references(&read(&document)) {
            if let Some(problem) = workspace.problem(&reference) {
                problems.push(format!("{document}:{}: {problem}", reference.line));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "names the docs give that the code does not have where they say:\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_misplaced_or_missing_name_is_found() {
    let text = "**`fermata-store`**: `error.rs` holds `StoreError` and `is_retryable()`.\n\
        `lease.rs` has `StoreError` too, and `Gone::Away`.\n\
        \n\
        `room.rs` refuses with an `EditError` (`collab_flow!`), not `keys.toml` or `My Text`.\n";
    let found = references(text);
    let described: Vec<(usize, Named, Option<&str>, Option<&str>)> = found
        .iter()
        .map(|r| {
            (
                r.line,
                r.named.clone(),
                r.krate.as_deref(),
                r.file.as_deref(),
            )
        })
        .collect();
    let store = Some("fermata-store");
    assert_eq!(
        described,
        [
            (1, Named::File("error.rs".into()), store, None),
            (1, Named::Item("StoreError".into()), store, Some("error.rs")),
            (
                1,
                Named::Item("is_retryable".into()),
                store,
                Some("error.rs")
            ),
            (2, Named::File("lease.rs".into()), store, None),
            (2, Named::Item("StoreError".into()), store, Some("lease.rs")),
            (2, Named::Item("Gone::Away".into()), store, Some("lease.rs")),
            (4, Named::File("room.rs".into()), None, None),
            (4, Named::Item("EditError".into()), None, Some("room.rs")),
            (4, Named::Item("collab_flow!".into()), None, Some("room.rs")),
        ]
    );
    let workspace = Workspace::read();
    assert_eq!(workspace.problem(&found[1]), None);
    assert_eq!(
        workspace.problem(&found[4]).as_deref(),
        Some("`StoreError` is not defined in `lease.rs` in `fermata-store`")
    );
    assert_eq!(
        workspace.problem(&found[5]).as_deref(),
        Some("`Gone::Away` is not defined anywhere")
    );
    assert_eq!(workspace.problem(&found[7]), None);
}

// Configuration keys, both ways.

/// What the real binary says of a configuration file holding `text`.
fn refusal_of(text: &str) -> String {
    let folder = tempfile::tempdir().unwrap();
    let file = folder.path().join("fermata.toml");
    std::fs::write(&file, text).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_fermata"))
        .arg("status")
        .arg("--config")
        .arg(&file)
        .arg("--data-dir")
        .arg(folder.path().join("data"))
        .env_remove("FERMATA_CONFIG")
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The keys a table of the configuration file accepts, as the parser lists them when it refuses
/// an unknown one: "unknown field `x`, expected one of `a`, `b`".
fn accepted_keys(table: &str) -> Option<Vec<String>> {
    let text = if table.is_empty() {
        "zz_probe = 1\n".to_owned()
    } else {
        format!("[{table}]\nzz_probe = 1\n")
    };
    let refusal = refusal_of(&text);
    let listed = refusal.split("unknown field `zz_probe`").nth(1)?;
    let listed = listed.lines().next().unwrap_or_default();
    Some(
        listed
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect(),
    )
}

/// Every key the configuration file accepts, as dotted paths (`schema.source.host`), asked of
/// the real binary table by table: a key whose own table refuses an unknown key is a table.
fn configuration_keys() -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let mut tables = vec![String::new()];
    while let Some(table) = tables.pop() {
        let accepted = accepted_keys(&table)
            .unwrap_or_else(|| panic!("the binary lists no keys for table `{table}`"));
        for key in accepted {
            let path = if table.is_empty() {
                key
            } else {
                format!("{table}.{key}")
            };
            if accepted_keys(&path).is_some() {
                tables.push(path);
            } else {
                keys.insert(path);
            }
        }
    }
    keys
}

/// The keys docs/configuration.md documents, as dotted paths: the first column of each table under
/// a heading that names one or more `[tables]` (the top level when it names none).
fn documented_keys(text: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let mut tables = vec![String::new()];
    for (_, line) in prose_lines(text) {
        if line.starts_with('#') {
            tables = quoted(line)
                .into_iter()
                .filter_map(|span| span.strip_prefix('[')?.strip_suffix(']'))
                .map(str::to_owned)
                .collect();
            if tables.is_empty() {
                tables.push(String::new());
            }
            continue;
        }
        let Some(first_cell) = line.strip_prefix('|').and_then(|row| row.split('|').next()) else {
            continue;
        };
        let Some(key) = quoted(first_cell).into_iter().next() else {
            continue;
        };
        for table in &tables {
            keys.insert(if table.is_empty() {
                key.to_owned()
            } else {
                format!("{table}.{key}")
            });
        }
    }
    keys
}

#[test]
fn every_configuration_key_is_documented_and_every_documented_key_accepted() {
    let accepted = configuration_keys();
    let documented = documented_keys(&read("docs/configuration.md"));
    assert!(
        accepted.len() > 40,
        "the probe found too few keys: {accepted:?}"
    );
    let undocumented: Vec<&String> = accepted.difference(&documented).collect();
    let unknown: Vec<&String> = documented.difference(&accepted).collect();
    assert!(
        undocumented.is_empty() && unknown.is_empty(),
        "keys the parser accepts that docs/configuration.md does not list: {undocumented:?}\n\
         keys docs/configuration.md lists that the parser refuses: {unknown:?}"
    );
}

#[test]
fn a_documented_key_is_read_from_its_tables_first_column() {
    let text = "# Configuration\n\n| file key | flag |\n|---|---|\n| `listen` | `--listen` |\n\n\
        ## `[schema.source]` and `[schema.workspace]`\n\n| key | default |\n|---|---|\n\
        | `host` | none; `port` is separate |\n\n```toml\n| `nothing` |\n```\n";
    assert_eq!(
        documented_keys(text),
        BTreeSet::from([
            "listen".to_owned(),
            "schema.source.host".to_owned(),
            "schema.workspace.host".to_owned(),
        ])
    );
}
