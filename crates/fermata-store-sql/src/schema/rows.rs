//! Encoding the schema store's values into columns and reading them back out of rows. Every
//! stored enum is its `as_str` text, every safe error its JSON, every ID its hyphenated UUID.

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

use fermata_store::schema::{
    Artifact, AuditEvent, CleanupGrant, CleanupKind, DatabaseCheck, DatabaseName, DatabaseReport,
    DatabaseResult, FileDifference, Inventory, NewArtifact, Operation, OperationId, OperationStep,
    PullRequest, RequestKey, Review, SafeError, SchemaLease, StepKey,
};
use fermata_store::{StoreError, StoreResult, StoreResultExt, UserId};
use sqlx::any::AnyRow;

use crate::row::{column, flag, instant, optional_instant};

/// Parses stored text that this release wrote.
pub(super) fn parsed<T: FromStr>(text: &str, what: &str) -> StoreResult<T> {
    // Dropped on purpose: not every `FromStr` error is an error type, and the message names
    // what did not parse.
    text.parse()
        .map_err(|_| StoreError::corrupt(format!("a stored {what} does not parse")))
}

fn text(row: &AnyRow, index: usize, action: &str) -> StoreResult<String> {
    column(row, index, action)
}

fn optional_text(row: &AnyRow, index: usize, action: &str) -> StoreResult<Option<String>> {
    column(row, index, action)
}

fn optional_error(row: &AnyRow, index: usize, action: &str) -> StoreResult<Option<SafeError>> {
    optional_text(row, index, action)?
        .map(|json| Ok(SafeError::from_json(&json)?))
        .transpose()
}

pub(super) fn error_text(error: Option<&SafeError>) -> Option<String> {
    error.map(SafeError::to_json)
}

fn database(row: &AnyRow, index: usize, action: &str) -> StoreResult<DatabaseName> {
    DatabaseName::new(text(row, index, action)?).or_corrupt("a stored database name is not valid")
}

fn count(row: &AnyRow, index: usize, action: &str) -> StoreResult<u32> {
    u32::try_from(column::<i64>(row, index, action)?).or_corrupt("a stored count is out of range")
}

pub(super) const OPERATION_COLUMNS: &str = "id, kind, state, actor, request_key, inventory_id, \
     workflow_run_id, reviewed_base_commit, pull_request, error, created_at, updated_at, finished_at, \
     remove_missing";

pub(super) fn operation(row: &AnyRow, action: &str) -> StoreResult<Operation> {
    let pull_request = optional_text(row, 8, action)?
        .map(|json| {
            serde_json::from_str::<PullRequest>(&json)
                .or_corrupt("stored pull-request data does not parse")
        })
        .transpose()?;
    Ok(Operation {
        id: parsed(&text(row, 0, action)?, "operation ID")?,
        kind: parsed(&text(row, 1, action)?, "operation kind")?,
        state: parsed(&text(row, 2, action)?, "operation state")?,
        actor: UserId(text(row, 3, action)?),
        request_key: RequestKey::new(text(row, 4, action)?)
            .or_corrupt("a stored request key is not valid")?,
        inventory: optional_text(row, 5, action)?
            .map(|id| parsed(&id, "inventory ID"))
            .transpose()?,
        run_id: optional_text(row, 6, action)?,
        reviewed_base_commit: optional_text(row, 7, action)?,
        pull_request,
        error: optional_error(row, 9, action)?,
        created_at: instant(row, 10, action)?,
        updated_at: instant(row, 11, action)?,
        finished_at: optional_instant(row, 12, action)?,
        remove_missing: flag(row, 13, action)?,
    })
}

pub(super) const INVENTORY_COLUMNS: &str =
    "id, operation_id, actor, server_version, discovered_at, expires_at, ignored_databases";

/// An inventory header row with its names (read separately, in order).
pub(super) fn inventory(row: &AnyRow, names: &[AnyRow], action: &str) -> StoreResult<Inventory> {
    Ok(Inventory {
        id: parsed(&text(row, 0, action)?, "inventory ID")?,
        operation: parsed(&text(row, 1, action)?, "operation ID")?,
        actor: UserId(text(row, 2, action)?),
        server_version: text(row, 3, action)?,
        discovered_at: instant(row, 4, action)?,
        expires_at: instant(row, 5, action)?,
        databases: names
            .iter()
            .map(|name| database(name, 0, action))
            .collect::<StoreResult<_>>()?,
        ignored: match optional_text(row, 6, action)? {
            Some(json) => serde_json::from_str::<Vec<DatabaseName>>(&json)
                .or_corrupt("stored ignored databases do not parse")?,
            None => Vec::new(),
        },
    })
}

/// The JSON the `ignored_databases` column keeps; NULL for none.
pub(super) fn ignored_json(ignored: &[DatabaseName]) -> StoreResult<Option<String>> {
    if ignored.is_empty() {
        return Ok(None);
    }
    serde_json::to_string(ignored)
        .map(Some)
        .or_invalid("the ignored databases do not serialize")
}

pub(super) const RESULT_COLUMNS: &str = "operation_id, database_name, position, outcome, \
     freshness, object_counts, snapshot_hash, merged_hash, error, started_at, finished_at, \
     differences";

pub(super) fn database_result(row: &AnyRow, action: &str) -> StoreResult<DatabaseResult> {
    let outcome = optional_text(row, 3, action)?;
    let freshness = optional_text(row, 4, action)?;
    let report = match (outcome, freshness) {
        (Some(outcome), Some(freshness)) => {
            let counts = optional_text(row, 5, action)?.unwrap_or_else(|| "{}".to_owned());
            Some(DatabaseReport {
                outcome: parsed(&outcome, "database outcome")?,
                freshness: parsed(&freshness, "database freshness")?,
                object_counts: serde_json::from_str::<BTreeMap<String, u64>>(&counts)
                    .or_corrupt("stored object counts do not parse")?,
                snapshot_hash: optional_text(row, 6, action)?,
                merged_hash: optional_text(row, 7, action)?,
                differences: match optional_text(row, 11, action)? {
                    Some(json) => serde_json::from_str::<Vec<FileDifference>>(&json)
                        .or_corrupt("stored file differences do not parse")?,
                    None => Vec::new(),
                },
                error: optional_error(row, 8, action)?,
            })
        }
        (None, None) => None,
        _ => return Err(StoreError::corrupt("a database result is half written")),
    };
    Ok(DatabaseResult {
        operation: parsed(&text(row, 0, action)?, "operation ID")?,
        database: database(row, 1, action)?,
        position: count(row, 2, action)?,
        started_at: optional_instant(row, 9, action)?,
        finished_at: optional_instant(row, 10, action)?,
        report,
    })
}

/// A result row with its operation's kind after [`RESULT_COLUMNS`].
pub(super) fn database_check(row: &AnyRow, action: &str) -> StoreResult<DatabaseCheck> {
    Ok(DatabaseCheck {
        kind: parsed(&text(row, 12, action)?, "operation kind")?,
        result: database_result(row, action)?,
    })
}

pub(super) fn counts_text(report: &DatabaseReport) -> String {
    serde_json::to_string(&report.object_counts).expect("object counts serialize")
}

/// The differing files as JSON, or nothing when there are none.
pub(super) fn differences_text(report: &DatabaseReport) -> Option<String> {
    (!report.differences.is_empty())
        .then(|| serde_json::to_string(&report.differences).expect("file differences serialize"))
}

pub(super) const STEP_COLUMNS: &str =
    "operation_id, step_key, state, attempts, started_at, heartbeat_at, error, terminal_at";

pub(super) fn step(row: &AnyRow, action: &str) -> StoreResult<OperationStep> {
    Ok(OperationStep {
        operation: parsed(&text(row, 0, action)?, "operation ID")?,
        key: StepKey::new(text(row, 1, action)?).or_corrupt("a stored step key is not valid")?,
        state: parsed(&text(row, 2, action)?, "step state")?,
        attempts: count(row, 3, action)?,
        started_at: instant(row, 4, action)?,
        heartbeat_at: instant(row, 5, action)?,
        error: optional_error(row, 6, action)?,
        terminal_at: optional_instant(row, 7, action)?,
    })
}

pub(super) const LEASE_COLUMNS: &str =
    "operation_id, kind, workflow_run_id, acquired_at, heartbeat_at, expires_at, status";

pub(super) fn lease(row: &AnyRow, action: &str) -> StoreResult<SchemaLease> {
    Ok(SchemaLease {
        operation: parsed(&text(row, 0, action)?, "operation ID")?,
        kind: parsed(&text(row, 1, action)?, "operation kind")?,
        run_id: optional_text(row, 2, action)?,
        acquired_at: instant(row, 3, action)?,
        heartbeat_at: instant(row, 4, action)?,
        expires_at: instant(row, 5, action)?,
        status: parsed(&text(row, 6, action)?, "lease status")?,
    })
}

pub(super) const REVIEW_COLUMNS: &str =
    "operation_id, state, actor, decided_at, created_at, expires_at";

pub(super) fn review(row: &AnyRow, action: &str) -> StoreResult<Review> {
    Ok(Review {
        operation: parsed(&text(row, 0, action)?, "operation ID")?,
        state: parsed(&text(row, 1, action)?, "review state")?,
        actor: optional_text(row, 2, action)?.map(UserId),
        decided_at: optional_instant(row, 3, action)?,
        created_at: instant(row, 4, action)?,
        expires_at: instant(row, 5, action)?,
    })
}

pub(super) const ARTIFACT_COLUMNS: &str = "operation_id, blob_locator, key_version, iv, \
     auth_tag, ciphertext_hash, manifest, decision_expires_at, cleanup_target, state, \
     created_at, cleanup_result";

pub(super) fn artifact(row: &AnyRow, action: &str) -> StoreResult<Artifact> {
    Ok(Artifact {
        meta: NewArtifact {
            operation: parsed(&text(row, 0, action)?, "operation ID")?,
            blob_locator: text(row, 1, action)?,
            key_version: count(row, 2, action)?,
            iv: column(row, 3, action)?,
            auth_tag: column(row, 4, action)?,
            ciphertext_hash: text(row, 5, action)?,
            manifest: text(row, 6, action)?,
            decision_expires_at: instant(row, 7, action)?,
            cleanup_target: text(row, 8, action)?,
        },
        state: parsed(&text(row, 9, action)?, "artifact state")?,
        created_at: instant(row, 10, action)?,
        cleanup_result: optional_text(row, 11, action)?
            .map(|result| parsed(&result, "cleanup result"))
            .transpose()?,
    })
}

pub(super) const GRANT_COLUMNS: &str = "operation_id, actor, expires_at, used_at, allowed";

pub(super) fn allowed_text(allowed: &BTreeSet<CleanupKind>) -> String {
    allowed
        .iter()
        .map(|kind| kind.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

pub(super) fn grant(row: &AnyRow, action: &str) -> StoreResult<CleanupGrant> {
    Ok(CleanupGrant {
        operation: parsed(&text(row, 0, action)?, "operation ID")?,
        actor: UserId(text(row, 1, action)?),
        expires_at: instant(row, 2, action)?,
        used_at: optional_instant(row, 3, action)?,
        allowed: text(row, 4, action)?
            .split(',')
            .map(|kind| parsed(kind, "cleanup kind"))
            .collect::<StoreResult<_>>()?,
    })
}

pub(super) const AUDIT_COLUMNS: &str = "operation_id, action, actor, occurred_at";

pub(super) fn audit_event(row: &AnyRow, action: &str) -> StoreResult<AuditEvent> {
    Ok(AuditEvent {
        operation: parsed::<OperationId>(&text(row, 0, action)?, "operation ID")?,
        action: parsed(&text(row, 1, action)?, "audit action")?,
        actor: UserId(text(row, 2, action)?),
        at: instant(row, 3, action)?,
    })
}
