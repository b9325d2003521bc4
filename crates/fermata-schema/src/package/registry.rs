//! The package registry, `registry.json`: the databases with merged snapshots, each with its
//! snapshot hash, object counts, generator version and the operation that merged it.
//!
//! The file is versioned and written in one canonical form, so that publication writes the same
//! bytes for the same registry and a pull request touches only the entries that changed:
//!
//! ```json
//! {
//!   "databases": {
//!     "Shop": {
//!       "folder": "^shop",
//!       "generator_version": "0.1.0",
//!       "object_counts": {
//!         "tables": 12,
//!         "views": 2
//!       },
//!       "operation_id": "6f1c0b8e-3d2a-4c56-9a0e-5b7d1e2f3a4b",
//!       "snapshot_hash": "<64 lowercase hexadecimal digits>"
//!     }
//!   },
//!   "format": 1
//! }
//! ```
//!
//! Keys are sorted by their UTF-8 bytes at every level, indentation is two spaces, non-ASCII is
//! written as it is (not `\u` escaped) and the file ends with one newline. A database's key is its
//! exact name; `folder` repeats the name's [encoding](crate::names) so the file can be read
//! without the rule, and must equal it. Reading accepts any JSON layout of the same content but
//! refuses unknown keys, repeated keys and any other `format`, so nothing in the file is dropped
//! when publication writes it back.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use fermata_schema_core::{DatabaseName, ErrorCode, SafeError, Subject};
use fermata_store::schema::OperationId;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::names;
use crate::safe_context::{SafeCode, because};

/// The registry's file name inside the package folder.
pub const REGISTRY_FILE: &str = "registry.json";

/// The registry format this version reads and writes.
pub const REGISTRY_FORMAT: u64 = 1;

/// The merged snapshots of a package, by database.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Registry {
    databases: BTreeMap<DatabaseName, RegisteredSnapshot>,
}

/// One database's merged snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredSnapshot {
    /// The snapshot hash over the canonical manifest: 64 lowercase hexadecimal digits.
    pub snapshot_hash: String,
    /// Objects per category (`tables`, `views`, ...): 1 to 64 of `[a-z0-9_]` each.
    pub object_counts: BTreeMap<String, u64>,
    /// The version of the generator that wrote the files: 1 to 64 of `[0-9A-Za-z.+-]`.
    pub generator_version: String,
    /// The operation whose pull request merged the snapshot.
    pub operation_id: OperationId,
}

/// The file's top level. Fields are declared in sorted order because that is the order serde
/// writes them in.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RegistryFile {
    #[serde(deserialize_with = "unique_keys")]
    databases: BTreeMap<String, EntryFile>,
    format: u64,
}

/// One entry of the file, fields in sorted order.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryFile {
    folder: String,
    generator_version: String,
    #[serde(deserialize_with = "unique_keys")]
    object_counts: BTreeMap<String, u64>,
    operation_id: String,
    snapshot_hash: String,
}

/// Just the version, read first so that a newer file is told apart from a broken one.
#[derive(Deserialize)]
struct FormatOnly {
    format: u64,
}

impl Registry {
    /// Reads `registry.json`. Anything that does not parse or breaks a rule of the module
    /// documentation is the `github`-stage failure of the forge, with a cause in fixed words.
    pub fn parse(bytes: &[u8]) -> Result<Registry, SafeError> {
        let format = match serde_json::from_slice::<FormatOnly>(bytes) {
            Ok(found) => found.format,
            Err(error) => return Err(unreadable(&error)),
        };
        if format != REGISTRY_FORMAT {
            return Err(because(
                ErrorCode::GithubFailed,
                format!(
                    "the package registry has format {format}, which this version does not read"
                ),
            ));
        }
        let file = match serde_json::from_slice::<RegistryFile>(bytes) {
            Ok(file) => file,
            Err(error) => return Err(unreadable(&error)),
        };
        let mut databases = BTreeMap::new();
        for (name, entry) in file.databases {
            let name = DatabaseName::new(name).or_code(
                ErrorCode::GithubFailed,
                "read a database name in the package registry",
            )?;
            if names::file_name(name.as_str()).as_deref() != Ok(entry.folder.as_str()) {
                return Err(because(
                    ErrorCode::GithubFailed,
                    "a database folder in the package registry does not match its name",
                ));
            }
            let operation_id = uuid::Uuid::parse_str(&entry.operation_id)
                .ok()
                .filter(|id| id.hyphenated().to_string() == entry.operation_id);
            let Some(operation_id) = operation_id else {
                return Err(because(
                    ErrorCode::GithubFailed,
                    "an operation ID in the package registry is not a lowercase hyphenated UUID",
                ));
            };
            let snapshot = RegisteredSnapshot {
                snapshot_hash: entry.snapshot_hash,
                object_counts: entry.object_counts,
                generator_version: entry.generator_version,
                operation_id: OperationId(operation_id),
            };
            if let Err(rule) = snapshot.check() {
                return Err(because(
                    ErrorCode::GithubFailed,
                    format!("an entry of the package registry breaks a rule: {rule}"),
                ));
            }
            databases.insert(name, snapshot);
        }
        Ok(Registry { databases })
    }

    /// The canonical bytes of `registry.json` (see the module documentation).
    pub fn to_canonical_json(&self) -> Vec<u8> {
        let file = RegistryFile {
            databases: self
                .databases
                .iter()
                .map(|(name, snapshot)| {
                    let entry = EntryFile {
                        folder: names::encode(name.as_str()),
                        generator_version: snapshot.generator_version.clone(),
                        object_counts: snapshot.object_counts.clone(),
                        operation_id: snapshot.operation_id.0.hyphenated().to_string(),
                        snapshot_hash: snapshot.snapshot_hash.clone(),
                    };
                    (name.as_str().to_owned(), entry)
                })
                .collect(),
            format: REGISTRY_FORMAT,
        };
        let mut bytes = serde_json::to_vec_pretty(&file).expect("the registry serializes");
        bytes.push(b'\n');
        bytes
    }

    /// Adds or replaces a database's merged snapshot and returns the one it replaced, so that the
    /// registry always serializes to a file that parses: a name without a file name is refused as
    /// an invalid identifier, and a snapshot that breaks a rule of the module documentation as
    /// output that cannot be captured faithfully.
    pub fn register(
        &mut self,
        database: DatabaseName,
        snapshot: RegisteredSnapshot,
    ) -> Result<Option<RegisteredSnapshot>, SafeError> {
        names::file_name(database.as_str())?;
        if let Err(rule) = snapshot.check() {
            let error = SafeError::about(
                ErrorCode::UnsupportedSchemaOutput,
                Subject::Database(database),
            );
            return Err(error.with_source(RuleBroken(rule)));
        }
        Ok(self.databases.insert(database, snapshot))
    }

    /// Removes a database's merged snapshot and returns it, when it had one.
    pub fn unregister(&mut self, database: &DatabaseName) -> Option<RegisteredSnapshot> {
        self.databases.remove(database)
    }

    /// The database's merged snapshot, when it has one.
    pub fn get(&self, database: &DatabaseName) -> Option<&RegisteredSnapshot> {
        self.databases.get(database)
    }

    /// Every registered database, in the order of their names' UTF-8 bytes.
    pub fn databases(&self) -> &BTreeMap<DatabaseName, RegisteredSnapshot> {
        &self.databases
    }
}

impl RegisteredSnapshot {
    /// The first rule the snapshot breaks, in fixed words.
    fn check(&self) -> Result<(), &'static str> {
        let hash = self.snapshot_hash.as_bytes();
        if hash.len() != 64
            || !hash
                .iter()
                .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'))
        {
            return Err("a snapshot hash has 64 lowercase hexadecimal digits");
        }
        let version = self.generator_version.as_bytes();
        if version.is_empty()
            || version.len() > 64
            || !version
                .iter()
                .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'+' | b'-'))
        {
            return Err("a generator version has 1 to 64 of [0-9A-Za-z.+-]");
        }
        for category in self.object_counts.keys() {
            let category = category.as_bytes();
            if category.is_empty()
                || category.len() > 64
                || !category
                    .iter()
                    .all(|byte| matches!(byte, b'a'..=b'z' | b'0'..=b'9' | b'_'))
            {
                return Err("an object category has 1 to 64 of [a-z0-9_]");
            }
        }
        Ok(())
    }
}

/// Why the registry did not parse, by position only (the file's text stays out of logs).
fn unreadable(error: &serde_json::Error) -> SafeError {
    because(
        ErrorCode::GithubFailed,
        format!(
            "the package registry does not parse (line {}, column {})",
            error.line(),
            error.column()
        ),
    )
}

/// A rule of the package registry a merged snapshot breaks.
#[derive(Debug, thiserror::Error)]
#[error("a merged snapshot breaks a rule of the package registry: {0}")]
struct RuleBroken(&'static str);

/// Reads a JSON object into a map, refusing a key that appears twice (serde's maps would keep
/// the last one silently).
fn unique_keys<'de, D, V>(deserializer: D) -> Result<BTreeMap<String, V>, D::Error>
where
    D: Deserializer<'de>,
    V: Deserialize<'de>,
{
    struct UniqueKeys<V>(PhantomData<V>);

    impl<'de, V: Deserialize<'de>> Visitor<'de> for UniqueKeys<V> {
        type Value = BTreeMap<String, V>;

        fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
            formatter.write_str("an object without repeated keys")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
            let mut map = BTreeMap::new();
            while let Some((key, value)) = access.next_entry::<String, V>()? {
                if map.contains_key(&key) {
                    return Err(serde::de::Error::custom("a key is repeated"));
                }
                map.insert(key, value);
            }
            Ok(map)
        }
    }

    deserializer.deserialize_map(UniqueKeys(PhantomData))
}
