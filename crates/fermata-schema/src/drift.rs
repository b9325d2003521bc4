//! Drift diffs, on request: the unified diff of every file in which a verification found a
//! database's live schema differing from its merged snapshot, and the two migration scripts
//! between them (undo: live → merged; adopt: merged → live), each as the workspace verified it.
//! [`DriftDiff::script`] picks one database's script in one direction, which the API answers as
//! text at [`ddl_path`].
//!
//! The verification's database step seals each drifted database's diffs and scripts into the
//! object store (see the artifact module's `drift`); no DDL reaches the application database,
//! whose result row lists only the differing paths. A diff is kept for `drift_retention` after its
//! verification ended, decided on the database's clock: past that it is refused with
//! `DIFF_EXPIRED`, and [`DriftDiffs::sweep`], which a serving process runs periodically,
//! deletes it (with every diff of an operation the application database no longer knows).

use std::sync::Arc;
use std::time::Duration;

use fermata_schema_core::{DatabaseName, ErrorCode, SafeError, Subject};
use fermata_store::schema::{Operation, OperationId, OperationKind, Outcome};
use fermata_store::{ErrorChain, Storage, UnixMillis};
use serde::{Deserialize, Serialize};

use crate::admin::Administrator;
use crate::artifact::ArtifactStore;
use crate::migration::{Direction, Migration, Script};
use crate::review::FileDiff;
use crate::safe_context::{SafeContext, because};

/// How long drift diffs are kept when nothing else is configured.
pub const DEFAULT_DRIFT_RETENTION: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// One drifted database: the files that differ, in path order, each with its unified diff
/// (`a/` is the merged file, `b/` the live one), and the migration scripts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DatabaseDrift {
    pub database: DatabaseName,
    pub files: Vec<FileDiff>,
    /// `None` for drift sealed before scripts were, or when the merged snapshot's model could
    /// not be read.
    pub migration: Option<Migration>,
}

/// What a drifted database's sealed object holds.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SealedDrift {
    pub(crate) files: Vec<FileDiff>,
    pub(crate) migration: Option<Migration>,
}

/// A sealed drift as read back: the scripts kept as JSON until [`read_leniently`] reads them,
/// so scripts of another format do not make the diffs unreadable.
#[derive(Deserialize)]
struct StoredDrift {
    files: Vec<FileDiff>,
    #[serde(default)]
    migration: Option<serde_json::Value>,
}

/// A sealed drift as written now, or as written before scripts were (the diffs alone).
#[derive(Deserialize)]
#[serde(untagged)]
enum Sealed {
    Current(StoredDrift),
    Diffs(Vec<FileDiff>),
}

/// `value` read as a `T`, or `None` when it does not read; logged by the error's class and place
/// only, as its text can quote what it refused (DDL, here).
pub(crate) fn read_leniently<T: serde::de::DeserializeOwned>(
    value: serde_json::Value,
    what: &'static str,
) -> Option<T> {
    match serde_json::from_value(value) {
        Ok(read) => Some(read),
        Err(error) => {
            tracing::warn!(class = ?error.classify(), line = error.line(), column = error.column(), what, "a sealed part does not read; it is left out");
            None
        }
    }
}

/// A verification's drift: every database it found changed, in selection order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriftDiff {
    pub operation: OperationId,
    /// The package commit the databases were compared with.
    pub base_commit: Option<String>,
    /// When the diffs are deleted; `None` while the verification runs.
    pub kept_until: Option<UnixMillis>,
    pub databases: Vec<DatabaseDrift>,
}

impl DriftDiff {
    /// The script of drifted database `database` that goes `direction`; `NO_MIGRATION_SCRIPT`
    /// when the verification did not find that database drifted, or its drift has no scripts.
    pub fn script(
        &self,
        database: &str,
        direction: Direction,
    ) -> Result<(&DatabaseDrift, &Script), SafeError> {
        let missing = || match DatabaseName::new(database) {
            Ok(name) => SafeError::about(ErrorCode::NoMigrationScript, Subject::Database(name)),
            // Dropped on purpose: text that is not a database name names no drifted database.
            Err(_) => SafeError::new(ErrorCode::NoMigrationScript),
        };
        let drifted = self
            .databases
            .iter()
            .find(|drifted| drifted.database.as_str() == database)
            .ok_or_else(missing)?;
        let migration = drifted.migration.as_ref().ok_or_else(missing)?;
        Ok((drifted, migration.script(direction)))
    }
}

/// The API path that answers drifted database `database`'s script going `direction`, for
/// verification `operation`: `/api/v1/schema/operations/<id>/drift/ddl?database=<name,
/// percent-encoded>&direction=<direction>`. A path only: the caller prefixes its Fermata address.
pub fn ddl_path(operation: impl std::fmt::Display, database: &str, direction: Direction) -> String {
    let mut encoded = String::with_capacity(database.len());
    for byte in database.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    format!(
        "/api/v1/schema/operations/{operation}/drift/ddl?database={encoded}&direction={}",
        direction.as_str()
    )
}

/// Reads and sweeps drift diffs.
#[derive(Clone)]
pub struct DriftDiffs {
    storage: Arc<dyn Storage>,
    artifacts: ArtifactStore,
    retention: Duration,
}

impl std::fmt::Debug for DriftDiffs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DriftDiffs")
            .field("retention", &self.retention)
            .finish_non_exhaustive()
    }
}

impl DriftDiffs {
    pub fn new(storage: Arc<dyn Storage>, artifacts: ArtifactStore, retention: Duration) -> Self {
        DriftDiffs {
            storage,
            artifacts,
            retention,
        }
    }

    /// The diffs of every database verification `id` found changed, decrypted here for an
    /// administrator and never stored.
    pub async fn diff(
        &self,
        _admin: &Administrator,
        id: OperationId,
    ) -> Result<DriftDiff, SafeError> {
        let schema = self.storage.schema();
        let about = Subject::Operation(id.0);
        let operation = schema
            .operation(id)
            .await
            .context("load the operation")?
            .ok_or_else(|| SafeError::about(ErrorCode::OperationMissing, about.clone()))?;
        if operation.kind != OperationKind::Verification {
            return Err(SafeError::about(ErrorCode::OperationMissing, about));
        }
        let now = schema.clock().await.context("read the database's clock")?;
        let kept_until = self.kept_until(&operation);
        if kept_until.is_some_and(|until| until <= now) {
            return Err(SafeError::about(ErrorCode::DiffExpired, about));
        }
        let results = schema
            .database_results(id)
            .await
            .context("load the database results")?;
        let mut databases = Vec::new();
        for row in results {
            let drifted = row
                .report
                .as_ref()
                .is_some_and(|report| report.outcome == Outcome::Changed);
            if !drifted {
                continue;
            }
            let sealed = self
                .artifacts
                .open_drift(id, row.position)
                .await?
                .ok_or_else(|| SafeError::about(ErrorCode::DiffExpired, about.clone()))?;
            // The error's text could quote the diffs: a fixed reason only.
            let sealed: Sealed = serde_json::from_slice(&sealed).map_err(|_| {
                because(ErrorCode::ArtifactUnavailable, "a drift diff does not read")
            })?;
            let (files, migration) = match sealed {
                Sealed::Current(StoredDrift { files, migration }) => (
                    files,
                    migration.and_then(|value| read_leniently(value, "migration scripts")),
                ),
                Sealed::Diffs(files) => (files, None),
            };
            databases.push(DatabaseDrift {
                database: row.database,
                files,
                migration,
            });
        }
        Ok(DriftDiff {
            operation: id,
            base_commit: operation.reviewed_base_commit,
            kept_until,
            databases,
        })
    }

    /// Deletes the drift diffs of every verification that ended more than the retention ago,
    /// and of operations the application database does not know; returns how many operations'
    /// diffs went. A failure for one operation is logged and the next one is swept.
    pub async fn sweep(&self) -> Result<usize, SafeError> {
        let schema = self.storage.schema();
        let now = schema.clock().await.context("read the database's clock")?;
        let mut swept = 0;
        for folder in self.artifacts.drift_operations().await? {
            let operation = match folder.parse::<OperationId>() {
                Ok(id) => schema.operation(id).await.context("load the operation")?,
                Err(_) => None,
            };
            let expired = match &operation {
                Some(operation) => self.kept_until(operation).is_some_and(|until| until <= now),
                None => true,
            };
            if !expired {
                continue;
            }
            match self.artifacts.delete_drift(&folder).await {
                Ok(_) => swept += 1,
                Err(error) => {
                    tracing::warn!(operation = %folder, error = %ErrorChain(&error), "an expired drift diff could not be deleted");
                }
            }
        }
        if swept > 0 {
            tracing::info!(operations = swept, "deleted expired drift diffs");
        }
        Ok(swept)
    }

    /// When `operation`'s diffs expire: the retention after it ended.
    fn kept_until(&self, operation: &Operation) -> Option<UnixMillis> {
        let retention = i64::try_from(self.retention.as_millis()).unwrap_or(i64::MAX);
        operation
            .finished_at
            .map(|ended| UnixMillis(ended.0.saturating_add(retention)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::migration::Verification;
    use crate::snapshot::model::Flavor;

    fn script(direction: Direction) -> Script {
        Script {
            direction,
            flavor: Flavor::Mariadb,
            statements: Vec::new(),
            notes: Vec::new(),
            verification: Verification::Verified,
        }
    }

    #[test]
    fn a_script_is_found_by_its_database_and_direction_or_refused() {
        let drift = DriftDiff {
            operation: OperationId::generate(),
            base_commit: None,
            kept_until: None,
            databases: vec![
                DatabaseDrift {
                    database: DatabaseName::new("app").unwrap(),
                    files: Vec::new(),
                    migration: Some(Migration {
                        undo: script(Direction::Undo),
                        adopt: script(Direction::Adopt),
                    }),
                },
                DatabaseDrift {
                    database: DatabaseName::new("old").unwrap(),
                    files: Vec::new(),
                    migration: None,
                },
            ],
        };
        let (found, adopt) = drift.script("app", Direction::Adopt).unwrap();
        assert_eq!(found.database.as_str(), "app");
        assert_eq!(adopt.direction, Direction::Adopt);
        for (name, message) in [
            (
                "old",
                "the drift holds no migration script for database `old`",
            ),
            (
                "crm",
                "the drift holds no migration script for database `crm`",
            ),
            ("", "the drift holds no migration script for database"),
        ] {
            let refused = drift.script(name, Direction::Undo).unwrap_err();
            assert_eq!(refused.code(), ErrorCode::NoMigrationScript);
            assert_eq!(refused.message(), message);
        }
    }

    #[test]
    fn the_script_path_percent_encodes_the_name() {
        assert_eq!(
            ddl_path("op-1", "app <&>/é", Direction::Undo),
            "/api/v1/schema/operations/op-1/drift/ddl?database=app%20%3C%26%3E%2F%C3%A9&direction=undo"
        );
    }
}
