//! The shape of the workspace, checked: the crate graph against the layering in ARCHITECTURE.md,
//! a `//!` doc at the top of every source file, one module-file style (`name/mod.rs`, never
//! `name.rs` beside a `name/` folder), no ignored or panic-expecting tests, the contract
//! suite's case list against the cases it defines, that every warning and error that logs an
//! error logs its whole cause chain. What the docs name is checked in `doc_references.rs`.
//!
//! The layering speaks of what ships: normal dependencies. Tests may name a driver (to tamper
//! with a stored row on purpose) or a web framework (to stand up a fake forge).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Each workspace crate and the workspace crates it may depend on. A new crate, or a new edge,
/// is a decision to write down here and in ARCHITECTURE.md.
const LAYERS: &[(&str, &[&str])] = &[
    ("fermata-crypto", &[]),
    ("fermata-media", &[]),
    ("fermata-schema-core", &[]),
    ("fermata-store", &["fermata-schema-core"]),
    ("fermata-store-sql", &["fermata-store"]),
    ("fermata-store-testkit", &["fermata-store"]),
    ("fermata-docs", &["fermata-store"]),
    ("fermata-workflow", &["fermata-metrics", "fermata-store"]),
    ("fermata-forge", &[]),
    ("fermata-metrics", &[]),
    ("fermata-threads", &[]),
    (
        "fermata-accounts",
        &["fermata-crypto", "fermata-store", "fermata-threads"],
    ),
    (
        "fermata-collab",
        &[
            "fermata-docs",
            "fermata-media",
            "fermata-metrics",
            "fermata-store",
            "fermata-threads",
        ],
    ),
    (
        "fermata-schema",
        &[
            "fermata-accounts",
            "fermata-crypto",
            "fermata-forge",
            "fermata-schema-core",
            "fermata-store",
            "fermata-workflow",
        ],
    ),
    (
        "fermata-http",
        &[
            "fermata-accounts",
            "fermata-collab",
            "fermata-crypto",
            "fermata-media",
            "fermata-metrics",
            "fermata-schema",
            "fermata-store",
        ],
    ),
    (
        "fermata",
        &[
            "fermata-accounts",
            "fermata-collab",
            "fermata-crypto",
            "fermata-forge",
            "fermata-http",
            "fermata-metrics",
            "fermata-schema",
            "fermata-store",
            "fermata-store-sql",
            "fermata-workflow",
        ],
    ),
];

/// Outside crates that only some workspace crates may depend on, and which.
const CONFINED: &[(&str, &[&str])] = &[
    // The SQL adapter, and the MySQL source: the one reader of a database that is not ours.
    ("sqlx", &["fermata-store-sql", "fermata-schema"]),
    ("axum", &["fermata-http", "fermata"]),
    ("axum-extra", &["fermata-http"]),
    ("maud", &["fermata-http"]),
    // The registry and its handles; every other crate records through `fermata-metrics`.
    ("prometheus-client", &["fermata-metrics"]),
];

/// One declared dependency of a workspace crate.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Edge {
    from: String,
    to: String,
    /// Only normal dependencies ship; dev- and build-dependencies are not checked.
    normal: bool,
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The workspace's crates and their declared dependencies, from `cargo metadata`.
fn declared_edges() -> (BTreeSet<String>, Vec<Edge>) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .arg("--manifest-path")
        .arg(workspace_root().join("Cargo.toml"))
        .output()
        .expect("run cargo metadata");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
    let mut crates = BTreeSet::new();
    let mut edges = Vec::new();
    for package in metadata["packages"].as_array().expect("a package list") {
        let from = package["name"].as_str().expect("a package name").to_owned();
        for dependency in package["dependencies"].as_array().expect("dependencies") {
            let to = dependency["name"].as_str().expect("a dependency name");
            if to == from {
                continue;
            }
            edges.push(Edge {
                from: from.clone(),
                to: to.to_owned(),
                normal: dependency["kind"].is_null(),
            });
        }
        crates.insert(from);
    }
    (crates, edges)
}

/// Every way `edges` breaks the layering, as sentences.
fn layering_violations(crates: &BTreeSet<String>, edges: &[Edge]) -> Vec<String> {
    let layers: BTreeMap<&str, &[&str]> = LAYERS.iter().copied().collect();
    let mut violations = Vec::new();
    for name in crates {
        if !layers.contains_key(name.as_str()) {
            violations.push(format!("crate {name} has no place in the layering"));
        }
    }
    for edge in edges.iter().filter(|edge| edge.normal) {
        let (from, to) = (edge.from.as_str(), edge.to.as_str());
        if crates.contains(to) {
            let allowed = layers.get(from).copied().unwrap_or_default();
            if !allowed.contains(&to) {
                violations.push(format!("{from} may not depend on {to}"));
            }
        }
        for (confined, users) in CONFINED {
            if to == *confined && !users.contains(&from) {
                violations.push(format!("{from} may not depend on {to} (only {users:?})"));
            }
        }
    }
    violations
}

#[test]
fn the_crate_graph_follows_the_layering() {
    let (crates, edges) = declared_edges();
    let violations = layering_violations(&crates, &edges);
    assert!(violations.is_empty(), "{violations:#?}");
}

#[test]
fn a_forbidden_edge_is_reported() {
    let (crates, mut edges) = declared_edges();
    for (from, to) in [
        ("fermata-store", "fermata-store-testkit"),
        ("fermata-collab", "sqlx"),
        ("fermata-schema", "axum"),
        ("fermata-docs", "fermata-http"),
    ] {
        edges.push(Edge {
            from: from.to_owned(),
            to: to.to_owned(),
            normal: true,
        });
    }
    let violations = layering_violations(&crates, &edges);
    assert_eq!(violations.len(), 4, "{violations:#?}");
    let mut unplaced = crates;
    unplaced.insert("fermata-new".to_owned());
    assert_eq!(
        layering_violations(&unplaced, &[]),
        ["crate fermata-new has no place in the layering"]
    );
}

/// Every `.rs` file under `crates/`, sorted.
fn source_files() -> Vec<PathBuf> {
    fn walk(folder: &Path, files: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(folder).expect("read a source folder") {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                walk(&path, files);
            } else if path.extension().is_some_and(|extension| extension == "rs") {
                files.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&workspace_root().join("crates"), &mut files);
    files.sort();
    files
}

fn relative(path: &Path) -> String {
    path.strip_prefix(workspace_root())
        .unwrap_or(path)
        .display()
        .to_string()
}

#[test]
fn every_source_file_opens_with_a_module_doc() {
    let undocumented: Vec<String> = source_files()
        .iter()
        .filter(|path| {
            let text = std::fs::read_to_string(path).expect("read a source file");
            !text.starts_with("//!")
        })
        .map(|path| relative(path))
        .collect();
    assert!(undocumented.is_empty(), "{undocumented:#?}");
}

#[test]
fn modules_with_submodules_live_in_mod_rs() {
    let mixed: Vec<String> = source_files()
        .iter()
        .filter(|path| path.with_extension("").is_dir())
        .map(|path| relative(path))
        .collect();
    assert!(mixed.is_empty(), "use `name/mod.rs` instead: {mixed:#?}");
}

#[test]
fn no_test_is_ignored_or_expects_a_panic() {
    let offenders: Vec<String> = source_files()
        .iter()
        .filter(|path| {
            let text = std::fs::read_to_string(path).expect("read a source file");
            text.lines().any(|line| {
                let line = line.trim_start();
                line.starts_with("#[ignore") || line.starts_with("#[should_panic")
            })
        })
        .map(|path| relative(path))
        .collect();
    assert!(offenders.is_empty(), "{offenders:#?}");
}

#[test]
fn the_contract_suite_runs_every_case_it_defines() {
    let folder = workspace_root().join("crates/fermata-store-testkit/src/contract");
    let suite = std::fs::read_to_string(folder.join("mod.rs")).expect("read the suite");
    let (_, cases) = suite
        .split_once("$crate::contract_suite!(@cases $harness;")
        .expect("the suite's case list");
    let (cases, _) = cases.split_once(");").expect("the end of the case list");
    let listed: Vec<&str> = cases
        .split(',')
        .map(str::trim)
        .filter(|case| !case.is_empty())
        .collect();
    let mut defined = BTreeSet::new();
    for entry in std::fs::read_dir(&folder).expect("read the contract folder") {
        let text = std::fs::read_to_string(entry.expect("an entry").path()).expect("read a case");
        for definition in text.split("\npub async fn ").skip(1) {
            if let Some((name, signature)) = definition.split_once('(')
                && signature.trim_start().starts_with("harness: &dyn Harness")
            {
                defined.insert(name.to_owned());
            }
        }
    }
    let listed_set: BTreeSet<String> = listed.iter().map(|case| (*case).to_owned()).collect();
    assert_eq!(listed.len(), listed_set.len(), "a case is listed twice");
    let unlisted: Vec<_> = defined.difference(&listed_set).collect();
    let undefined: Vec<_> = listed_set.difference(&defined).collect();
    assert!(
        unlisted.is_empty() && undefined.is_empty(),
        "defined but never run: {unlisted:?}; listed but not defined: {undefined:?}"
    );
}

/// The field names under which a log line carries an error.
const ERROR_FIELDS: &[&str] = &["error", "err", "cause", "failure", "source"];

/// The `warn!` and `error!` calls in `text` that log an error without its cause chain: a field
/// named as in [`ERROR_FIELDS`] whose value is not `%ErrorChain(...)`, or given in shorthand
/// (`%error`). Each is its line number and the call's arguments.
fn errors_logged_without_their_chain(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for macro_name in ["warn!(", "error!("] {
        for (start, _) in text.match_indices(macro_name) {
            let before = text[..start].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let arguments = macro_arguments(&text[start + macro_name.len()..]);
            let logs_bare_error = top_level_arguments(&arguments)
                .into_iter()
                // What follows the message is its format arguments, not fields.
                .take_while(|argument| !argument.starts_with('"'))
                .any(|argument| {
                    let (name, value) = match argument.split_once('=') {
                        Some((name, value)) if !value.starts_with('=') => {
                            (name.trim(), Some(value.trim()))
                        }
                        _ => (argument.trim_start_matches(['%', '?']), None),
                    };
                    let name = name.rsplit('.').next().unwrap_or(name);
                    ERROR_FIELDS.contains(&name)
                        && !value.is_some_and(|value| value.starts_with("%ErrorChain("))
                });
            if logs_bare_error {
                let line = text[..start].matches('\n').count() + 1;
                found.push((
                    line,
                    arguments.split_whitespace().collect::<Vec<_>>().join(" "),
                ));
            }
        }
    }
    found.sort();
    found
}

/// Follows the string literals of Rust source, one character at a time.
#[derive(Default)]
struct Strings {
    inside: bool,
    escaped: bool,
}

impl Strings {
    /// Whether `c` is code: outside every string literal, and not one of its quotes.
    fn is_code(&mut self, c: char) -> bool {
        if self.inside {
            match c {
                _ if self.escaped => self.escaped = false,
                '\\' => self.escaped = true,
                '"' => self.inside = false,
                _ => {}
            }
            false
        } else {
            self.inside = c == '"';
            !self.inside
        }
    }
}

/// The text between a macro's opening parenthesis (already consumed) and its closing one.
fn macro_arguments(text: &str) -> String {
    let mut depth = 1;
    let mut strings = Strings::default();
    for (index, c) in text.char_indices() {
        match c {
            _ if !strings.is_code(c) => {}
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth == 0 {
                    return text[..index].to_owned();
                }
            }
            _ => {}
        }
    }
    text.to_owned()
}

/// `arguments` split at the commas outside brackets and strings, each trimmed.
fn top_level_arguments(arguments: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut depth = 0;
    let mut strings = Strings::default();
    for c in arguments.chars() {
        match c {
            _ if !strings.is_code(c) => {}
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(String::new());
                continue;
            }
            _ => {}
        }
        parts.last_mut().expect("a part").push(c);
    }
    parts
        .into_iter()
        .map(|part| part.trim().to_owned())
        .filter(|part| !part.is_empty())
        .collect()
}

#[test]
fn warnings_and_errors_log_the_whole_cause_chain() {
    let mut offenders = Vec::new();
    for path in source_files() {
        let shipped = path
            .components()
            .any(|component| component.as_os_str() == "src");
        if !shipped {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read a source file");
        for (line, call) in errors_logged_without_their_chain(&text) {
            offenders.push(format!("{}:{line}: {call}", relative(&path)));
        }
    }
    assert!(
        offenders.is_empty(),
        "log the error as `error = %ErrorChain(&error)`:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn an_error_logged_without_its_chain_is_reported() {
    let text = r#"
        tracing::warn!(error = %ErrorChain(&error), "kept");
        tracing::warn!(error = %error, "top only");
        tracing::error!(
            document = %id,
            %error,
            "shorthand"
        );
        warn!(run = %run, err = ?err, "debug form");
        tracing::warn!(document = %id, "no error at all: {}", error);
        tracing::info!(error = %error, "not a warning");
        tracing::error!(path = "a, b", status, error = %ErrorChain(&*failure), "quoted commas");
        tracing::warn!(reason = error.as_str(), "another name");
    "#;
    let lines: Vec<usize> = errors_logged_without_their_chain(text)
        .into_iter()
        .map(|(line, _)| line)
        .collect();
    assert_eq!(lines, [3, 4, 9]);
}
