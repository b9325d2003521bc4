//! The registry as an administrator reads it: every database registered in the package at the
//! head of its base branch, with its merged snapshot, its last verification and its freshness.
//!
//! Freshness comes from the latest finished result of the database, in a refresh or a
//! verification, that holds a snapshot hash to compare with the registry's current one (a failed
//! result has none): `fresh` when that check's live snapshot had the registered hash, `stale`
//! when it had another, `unknown` when no such result is among the database's latest hundred
//! results. A snapshot merged after a refresh reads fresh from that refresh's own
//! result, since the live snapshot it took is the one that was merged. Whatever its results
//! say, a registered database the latest inventory neither lists nor left out by
//! `ignore_databases` is `missing`: dropped, renamed, or no longer visible to the snapshot
//! account, so no check of it can be trusted as current.

use std::sync::Arc;

use fermata_schema_core::{DatabaseName, ErrorCode, SafeError};
use fermata_store::Storage;
use fermata_store::schema::{DatabaseCheck, OperationKind};
use serde::Serialize;

use crate::package::{Package, RegisteredSnapshot};
use crate::safe_context::SafeContext;

/// How many of a database's latest results are looked at.
const HISTORY: u32 = 100;

/// Whether a registered snapshot still matches the live schema, as far as is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RegistryFreshness {
    Fresh,
    Stale,
    Unknown,
    Missing,
}

impl RegistryFreshness {
    pub fn as_str(self) -> &'static str {
        match self {
            RegistryFreshness::Fresh => "fresh",
            RegistryFreshness::Stale => "stale",
            RegistryFreshness::Unknown => "unknown",
            RegistryFreshness::Missing => "missing",
        }
    }
}

/// One registered database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredDatabase {
    pub database: DatabaseName,
    /// The merged snapshot the registry holds.
    pub snapshot: RegisteredSnapshot,
    /// The database's latest verification result, whatever its outcome.
    pub last_verification: Option<DatabaseCheck>,
    pub freshness: RegistryFreshness,
    /// The result freshness was read from, when there is one.
    pub checked: Option<DatabaseCheck>,
}

/// The registry at the base branch's head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryReport {
    pub base_commit: String,
    /// In the order of the names' UTF-8 bytes.
    pub databases: Vec<RegisteredDatabase>,
}

/// The registry view service.
#[derive(Clone)]
pub struct RegistryReports {
    storage: Arc<dyn Storage>,
    package: Option<Package>,
}

impl std::fmt::Debug for RegistryReports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryReports")
            .field("package", &self.package)
            .finish_non_exhaustive()
    }
}

impl RegistryReports {
    pub fn new(storage: Arc<dyn Storage>, package: Option<Package>) -> Self {
        RegistryReports { storage, package }
    }

    /// Every registered database at the base branch's head, with its last verification and its
    /// freshness.
    pub async fn registry_view(&self) -> Result<RegistryReport, SafeError> {
        let package = self
            .package
            .as_ref()
            .ok_or_else(|| SafeError::new(ErrorCode::PackageNotConfigured))?;
        let base = package.base_snapshot().await?;
        let schema = self.storage.schema();
        let inventory = schema
            .latest_inventory()
            .await
            .context("load the latest inventory")?;
        let on_server = |database: &DatabaseName| {
            inventory.as_ref().is_none_or(|inventory| {
                inventory.databases.contains(database) || inventory.ignored.contains(database)
            })
        };
        let mut databases = Vec::with_capacity(base.registry.databases().len());
        for (database, snapshot) in base.registry.databases() {
            let history = schema
                .database_history(database, HISTORY)
                .await
                .context("load a database's history")?;
            let last_verification = history
                .iter()
                .find(|check| check.kind == OperationKind::Verification)
                .cloned();
            let checked = history.into_iter().find(|check| live_hash(check).is_some());
            let freshness = match checked.as_ref().and_then(live_hash) {
                _ if !on_server(database) => RegistryFreshness::Missing,
                Some(hash) if hash == snapshot.snapshot_hash => RegistryFreshness::Fresh,
                Some(_) => RegistryFreshness::Stale,
                None => RegistryFreshness::Unknown,
            };
            databases.push(RegisteredDatabase {
                database: database.clone(),
                snapshot: snapshot.clone(),
                last_verification,
                freshness,
                checked,
            });
        }
        Ok(RegistryReport {
            base_commit: base.commit,
            databases,
        })
    }
}

/// The hash of the live snapshot a result took, if it took one.
fn live_hash(check: &DatabaseCheck) -> Option<&str> {
    check.result.report.as_ref()?.snapshot_hash.as_deref()
}
