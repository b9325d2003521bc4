//! The second check of the shared connection verifier: the verification workspace. A candidate's
//! DDL files are applied, as they are, into a scratch schema of their own on a workspace server;
//! the scratch schema is introspected with [`snapshot`] like any database; and the candidate
//! passes only when that gives back its model and, byte for byte, its DDL files. So the files a
//! pull request publishes are proven to rebuild the schema they describe. The module owns the
//! scratch schemas' names, their creation, the order the files are applied in, the comparison,
//! and the scratch schemas' removal.
//!
//! It lives under `snapshot/`, beside [`verify_live`](super::verify_live) (the first check),
//! because it is built from the same pieces: [`prepare`] for the session, [`snapshot`] for the
//! introspection, the model and the files. The workspace server is configured like the source (the
//! `[schema.workspace]` table takes the keys of `[schema.source]`), so its settings are a
//! [`SourceSettings`], connected with the source's own connection and error mapping. It should
//! run the source's flavour and release series (checked: another series prints some definitions
//! differently, which would fail good candidates), and should be a server of its own: on the
//! source server, a scratch table's foreign key to another database binds to that database's
//! real table while the check runs.
//!
//! Scratch schemas are named `fermata_ws_<seconds>_<32 hex digits>`: the workspace server's Unix
//! time when the verification began and a random UUID, so two verifications never collide and a
//! name says how old its schema is. The prefix is reserved on the workspace server. The
//! workspace account needs `ALL` on `` `fermata\_ws\_%`.* `` (which also bounds what a file could
//! do), and `REFERENCES` on whatever databases candidates' foreign keys name outside themselves
//! (the server checks it even where the referenced table does not exist; without it such a
//! candidate fails with `PERMISSION_DENIED`). A scratch schema is created with the candidate's
//! default character set and collation, so the defaults its tables inherit are the source's.
//!
//! The files are applied in the order of [`DDL_FOLDERS`] (`sequences/`, `tables/`, `views/`,
//! `routines/`, `triggers/`, `events/`; folders a candidate lacks are skipped, so new kinds need
//! no change here) and by path within a folder, with `USE` of the scratch schema and
//! `foreign_key_checks = 0`, so tables may refer to each other in any order. A stored program's
//! file runs under the `sql_mode` the model says it was created with, and an event's in its
//! time zone (`creation_settings`), as the file itself cannot say them. Each file is one
//! statement, sent with the text protocol; a file that runs more than one is refused. A statement
//! that names an object not created yet (a view on a view that sorts after it, a view calling a
//! stored function) is tried again after the others, round after round while a round applies
//! something.
//!
//! What legitimately differs in a scratch schema is left out of the comparison: the database's
//! name, and every `definer` in the model (files carry none, so the workspace account becomes the
//! definer of everything it creates). The comparison is over the model's JSON, so kinds added to
//! the model later are compared with no change here. A foreign key to another database is
//! created by name alone (`foreign_key_checks = 0` means the referenced database need not exist
//! on the workspace server) and compared by name, so it verifies; a view that reads another
//! database needs that database on the workspace server, and fails verification without it.
//!
//! Failures: a candidate whose DDL does not apply, or that applies to something other than its
//! model, fails with the permanent `VERIFICATION_FAILED` naming the database; the log says which
//! file or which part of the model, with a fixed reason and the server's error number, never the
//! SQL. Connection, TLS, authentication and permission failures keep the source's safe errors,
//! so a lost connection stays retryable.
//!
//! A scratch schema never outlives its verification if anything can drop it: it is dropped on
//! success, failure and error, over a new connection when the verification's own connection
//! failed; when the verification's future is dropped first (cancelled, or unwinding from a
//! panic), its guard spawns a task on the current runtime that drops it over a new connection.
//! Only a process killed outright leaves one behind, and each verification begins by sweeping
//! those older than [`LEFTOVER_AGE_SECONDS`], by name.
//!
//! The check of migration scripts (`script_check.rs`) is built from the same pieces: [`open`],
//! [`rebuild`], [`read_back`], [`mismatch`] and the scratch guard.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use fermata_schema_core::{DatabaseName, ErrorCode, ErrorStage, SafeError, Subject};
use fermata_store::ErrorChain;
use futures::TryStreamExt;
use sqlx::mysql::MySqlConnection;
use sqlx::{Either, Executor, Row};

use super::model::DatabaseModel;
use super::{DatabaseSnapshot, creation_settings, prepare, render, snapshot_filtered};
use crate::safe_context::{SafeCode, safe};
use crate::source::{
    DriverContext, DriverFailure, SourceSettings, mysql_error_number, query_code, query_error,
};

/// What every scratch schema's name starts with.
const PREFIX: &str = "fermata_ws_";

/// A scratch schema older than this (by the time in its name, on the workspace server's clock)
/// was left by a verification whose process was killed. No verification takes nearly this
/// long, so a concurrent one (of another deployment sharing the workspace) is never swept.
const LEFTOVER_AGE_SECONDS: u64 = 60 * 60;

/// How long the task that drops a cancelled verification's scratch schema may take.
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(60);

/// The folders of DDL files, in the order they are applied.
const DDL_FOLDERS: [&str; 6] = [
    "sequences",
    "tables",
    "views",
    "routines",
    "triggers",
    "events",
];

/// ER_NO_SUCH_TABLE, ER_SP_DOES_NOT_EXIST: the statement names a table, view or stored function
/// that a later file may create.
const MISSING_DEPENDENCY: [u16; 2] = [1146, 1305];

/// ER_SERVER_SHUTDOWN, ER_LOCK_WAIT_TIMEOUT, ER_LOCK_DEADLOCK, ER_QUERY_INTERRUPTED and MariaDB's
/// ER_CONNECTION_KILLED: refusals that are about the server's state rather than the statement,
/// and may pass when tried again.
const TRANSIENT: [u16; 5] = [1053, 1205, 1213, 1317, 1927];

/// The second check of the shared connection verifier: applies `candidate`'s DDL files into a new
/// scratch schema on the verification workspace server `workspace`, snapshots it, and requires
/// `candidate`'s model (but for the database name and definers) and exactly its DDL files back.
/// The scratch schema is dropped whatever happens; leftovers of killed runs older than an hour
/// are swept first.
///
/// `source_version` is `VERSION()` of the server the candidate was taken from: a workspace of
/// another flavour or release series is refused (`INVALID_SOURCE_CONFIGURATION`). A candidate
/// that does not apply, or does not give itself back, fails with the permanent
/// `VERIFICATION_FAILED` naming its database; connection, TLS, authentication and permission
/// failures are the source's own safe errors (a lost connection stays retryable).
pub async fn verify_in_workspace(
    workspace: &SourceSettings,
    candidate: &DatabaseSnapshot,
    source_version: &str,
) -> Result<(), SafeError> {
    let database = DatabaseName::new(candidate.model.name.clone()).or_code(
        ErrorCode::InvalidIdentifier,
        "name the candidate's database",
    )?;
    let Opened {
        mut connection,
        version,
        mut scratch,
    } = open(workspace, source_version, &database).await?;
    let verdict = check(
        &mut connection,
        &mut scratch,
        candidate,
        &database,
        &version,
    )
    .await;
    scratch.remove(&mut connection).await;
    verdict
}

/// A workspace connection ready for a check, the workspace's `VERSION()`, and the guard of the
/// check's scratch schema (not created yet).
pub(super) struct Opened {
    pub(super) connection: MySqlConnection,
    pub(super) version: String,
    pub(super) scratch: Scratch,
}

/// Connects to `workspace` with the introspection settings, refuses a workspace of another
/// flavour or release series than `source_version` (`INVALID_SOURCE_CONFIGURATION`), and sweeps
/// the leftovers of killed checks.
pub(super) async fn open(
    workspace: &SourceSettings,
    source_version: &str,
    database: &DatabaseName,
) -> Result<Opened, SafeError> {
    let mut connection = workspace.connect().await?;
    prepare(&mut connection).await?;
    let (version, now) = version_and_clock(&mut connection).await?;
    let series = release_series(&version);
    if series.is_none() || series != release_series(source_version) {
        tracing::warn!(
            database = %database,
            source_version,
            workspace_version = version,
            "the verification workspace runs another server release than the source; nothing is verified there"
        );
        return Err(SafeError::new(ErrorCode::InvalidSourceConfiguration));
    }
    sweep(&mut connection, now).await?;
    Ok(Opened {
        connection,
        version,
        scratch: Scratch::new(workspace, now),
    })
}

pub(super) fn verification_failed(database: &DatabaseName) -> SafeError {
    SafeError::about(
        ErrorCode::VerificationFailed,
        Subject::Database(database.clone()),
    )
}

/// The workspace server's `VERSION()` and Unix time.
async fn version_and_clock(connection: &mut MySqlConnection) -> Result<(String, u64), SafeError> {
    let row = sqlx::query("SELECT VERSION(), CAST(UNIX_TIMESTAMP() AS CHAR)")
        .fetch_one(&mut *connection)
        .await
        .query_context("read the workspace's version and clock")?;
    let text = |index: usize| {
        let bytes: Vec<u8> = row
            .try_get_unchecked(index)
            .or_unreadable(|| SafeError::new(ErrorCode::UnsupportedSchemaOutput))?;
        String::from_utf8(bytes).or_code(
            ErrorCode::UnsupportedSchemaOutput,
            "read the workspace's version and clock",
        )
    };
    let now = text(1)?.parse::<u64>().or_code(
        ErrorCode::UnsupportedSchemaOutput,
        "read the workspace's clock",
    )?;
    Ok((text(0)?, now))
}

/// The flavour and release series of a `VERSION()`: `(true, "10.11")` for
/// `10.11.6-MariaDB-log`, `(false, "8.0")` for `8.0.36`.
fn release_series(version: &str) -> Option<(bool, &str)> {
    let number = version.split('-').next()?;
    let mut parts = number.split('.');
    let (major, minor) = (parts.next()?, parts.next()?);
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    if !(digits(major) && digits(minor)) {
        return None;
    }
    let mariadb = version.to_ascii_lowercase().contains("mariadb");
    Some((mariadb, &number[..major.len() + 1 + minor.len()]))
}

/// The name of a scratch schema created at `now`.
fn scratch_name(now: u64) -> String {
    format!("{PREFIX}{now}_{}", uuid::Uuid::new_v4().simple())
}

/// When the scratch schema `name` was created, if `name` is a scratch schema's name.
fn created_at(name: &str) -> Option<u64> {
    let (seconds, random) = name.strip_prefix(PREFIX)?.split_once('_')?;
    let ours = !seconds.is_empty()
        && seconds.bytes().all(|b| b.is_ascii_digit())
        && random.len() == 32
        && random
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !ours {
        return None;
    }
    seconds.parse().ok()
}

/// Drops the scratch schemas that were created more than [`LEFTOVER_AGE_SECONDS`] before `now`.
/// A schema that cannot be dropped is logged and left for the next sweep.
async fn sweep(connection: &mut MySqlConnection, now: u64) -> Result<(), SafeError> {
    let rows =
        sqlx::query("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ?")
            .bind(format!("{}%", PREFIX.replace('_', "\\_")))
            .fetch_all(&mut *connection)
            .await
            .query_context("list leftover scratch schemas")?;
    for row in rows {
        let name: Vec<u8> = row
            .try_get_unchecked(0)
            .or_unreadable(|| SafeError::new(ErrorCode::UnsupportedSchemaOutput))?;
        let Ok(name) = String::from_utf8(name) else {
            continue;
        };
        let Some(created) = created_at(&name) else {
            continue;
        };
        if now.saturating_sub(created) <= LEFTOVER_AGE_SECONDS {
            continue;
        }
        let Ok(name) = DatabaseName::new(name) else {
            continue;
        };
        match drop_schema(connection, &name).await {
            Ok(()) => {
                tracing::info!(scratch = %name, "swept a scratch schema an earlier verification left")
            }
            Err(error) => {
                tracing::warn!(scratch = %name, error = %ErrorChain(&error), "a leftover scratch schema could not be swept")
            }
        }
    }
    Ok(())
}

async fn drop_schema(
    connection: &mut MySqlConnection,
    name: &DatabaseName,
) -> Result<(), SafeError> {
    connection
        .execute(
            format!(
                "DROP DATABASE IF EXISTS {}",
                render::identifier(name.as_str())
            )
            .as_str(),
        )
        .await
        .map(|_| ())
        .query_context("drop a scratch schema")
}

/// Drops the scratch schema `name` over a new connection; when that fails too, the sweep of a
/// later verification will.
async fn drop_over_new_connection(workspace: &SourceSettings, name: &DatabaseName) {
    let dropped = async {
        let mut connection = workspace.connect().await?;
        drop_schema(&mut connection, name).await
    };
    match tokio::time::timeout(CLEANUP_TIMEOUT, dropped).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => {
            tracing::warn!(scratch = %name, error = %ErrorChain(&error), "a scratch schema could not be dropped; a later verification sweeps it");
        }
        Err(_) => {
            tracing::warn!(scratch = %name, "dropping a scratch schema timed out; a later verification sweeps it");
        }
    }
}

/// One verification's scratch schema, and the promise to drop it: [`Scratch::remove`] when the
/// verification ends, or, when the guard is dropped first (the future was cancelled, or is
/// unwinding from a panic), a task spawned on the current runtime.
pub(super) struct Scratch {
    /// The scratch schema's name.
    pub(super) name: DatabaseName,
    /// The workspace, to reconnect to for the drop; `None` once the schema is dropped.
    pending: Option<SourceSettings>,
}

impl Scratch {
    /// The guard of a new scratch schema, made before the schema is, so that a cancellation
    /// while it is being created still drops it.
    fn new(workspace: &SourceSettings, now: u64) -> Scratch {
        Scratch {
            name: DatabaseName::new(scratch_name(now))
                .expect("a scratch name has 44 to 64 ASCII characters"),
            pending: Some(workspace.clone()),
        }
    }

    /// Creates the scratch schema with `model`'s default character set and collation. When the
    /// server refuses, there is nothing to drop.
    pub(super) async fn create(
        &mut self,
        connection: &mut MySqlConnection,
        model: &DatabaseModel,
        database: &DatabaseName,
    ) -> Result<(), SafeError> {
        let create = format!(
            "CREATE DATABASE {} CHARACTER SET {} COLLATE {}",
            render::identifier(self.name.as_str()),
            render::literal(&model.default_charset),
            render::literal(&model.default_collation)
        );
        let Err(error) = connection.execute(create.as_str()).await else {
            return Ok(());
        };
        if mysql_error_number(&error).is_some() {
            self.pending = None;
        }
        Err(match Refusal::of(&error) {
            Refusal::Workspace(error) => error,
            Refusal::MissingDependency | Refusal::Candidate(..) => {
                tracing::warn!(
                    database = %database,
                    mysql_error = mysql_error_number(&error),
                    "the workspace refused the database's default character set or collation"
                );
                verification_failed(database)
            }
        })
    }

    /// Drops the scratch schema over `connection`, or over a new connection when that fails.
    pub(super) async fn remove(mut self, connection: &mut MySqlConnection) {
        let Some(workspace) = &self.pending else {
            return;
        };
        if let Err(error) = drop_schema(connection, &self.name).await {
            tracing::debug!(scratch = %self.name, error = %ErrorChain(&error), "dropping the scratch schema failed; trying over a new connection");
            drop_over_new_connection(workspace, &self.name).await;
        }
        // Only now: a cancellation before this point leaves the drop to `Drop`.
        self.pending = None;
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let Some(workspace) = self.pending.take() else {
            return;
        };
        let name = self.name.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move { drop_over_new_connection(&workspace, &name).await });
            }
            Err(_) => {
                tracing::warn!(scratch = %name, "a scratch schema was left without a runtime to drop it; a later verification sweeps it")
            }
        }
    }
}

/// Why the workspace refused a statement.
pub(super) enum Refusal {
    /// It names an object that a later file may create.
    MissingDependency,
    /// The candidate is at fault: the reason for the log, and the server's error number.
    Candidate(&'static str, Option<u16>),
    /// The connection, the server or the account is at fault: what to report.
    Workspace(SafeError),
}

impl Refusal {
    pub(super) fn of(error: &sqlx::Error) -> Refusal {
        const ACTION: &str = "apply a statement in the workspace";
        let Some(number) = mysql_error_number(error) else {
            return Refusal::Workspace(query_error(error, ACTION));
        };
        if MISSING_DEPENDENCY.contains(&number) {
            return Refusal::MissingDependency;
        }
        if TRANSIENT.contains(&number) {
            return Refusal::Workspace(safe(
                ErrorCode::ConnectionLost,
                ACTION,
                DriverFailure::of(error),
            ));
        }
        match query_code(error) {
            account if account.stage() == ErrorStage::Permission => {
                Refusal::Workspace(query_error(error, ACTION))
            }
            _ => Refusal::Candidate("the workspace refused the statement", Some(number)),
        }
    }
}

/// Creates the scratch schema, applies `candidate`'s DDL into it, introspects it and compares
/// the two.
async fn check(
    connection: &mut MySqlConnection,
    scratch: &mut Scratch,
    candidate: &DatabaseSnapshot,
    database: &DatabaseName,
    workspace_version: &str,
) -> Result<(), SafeError> {
    rebuild(connection, scratch, candidate, database).await?;
    let rebuilt = read_back(
        connection,
        &scratch.name,
        workspace_version,
        candidate,
        database,
    )
    .await?;
    compare(candidate, &rebuilt, database)
}

/// Creates the scratch schema, uses it (with `foreign_key_checks = 0`) and applies `snapshot`'s
/// DDL files into it.
pub(super) async fn rebuild(
    connection: &mut MySqlConnection,
    scratch: &mut Scratch,
    snapshot: &DatabaseSnapshot,
    database: &DatabaseName,
) -> Result<(), SafeError> {
    scratch
        .create(connection, &snapshot.model, database)
        .await?;
    let session = format!(
        "USE {}; SET SESSION foreign_key_checks = 0",
        render::identifier(scratch.name.as_str())
    );
    connection
        .execute(session.as_str())
        .await
        .query_context("use the scratch schema")?;
    apply(connection, snapshot, database).await
}

/// The snapshot of the scratch schema `scratch`, with `expected`'s filter. A scratch schema that
/// cannot be snapshotted fails `database`'s verification.
pub(super) async fn read_back(
    connection: &mut MySqlConnection,
    scratch: &DatabaseName,
    workspace_version: &str,
    expected: &DatabaseSnapshot,
    database: &DatabaseName,
) -> Result<DatabaseSnapshot, SafeError> {
    snapshot_filtered(
        std::slice::from_mut(connection),
        scratch,
        workspace_version,
        &expected.filter,
    )
    .await
    .map_err(|error| {
        if error.subject() == Some(&Subject::Database(scratch.clone())) {
            tracing::warn!(database = %database, code = %error.code().name(), error = %ErrorChain(&error), "the database's DDL, applied in the workspace, cannot be snapshotted");
            verification_failed(database)
        } else {
            error
        }
    })
}

/// The DDL files of `candidate` in the order they are applied: by folder, then by path.
fn ddl_files<'a>(
    candidate: &'a DatabaseSnapshot,
    database: &DatabaseName,
) -> Result<Vec<(&'a str, &'a str)>, SafeError> {
    let mut files = Vec::new();
    for (path, content) in &candidate.files {
        if !path.ends_with(".sql") {
            continue;
        }
        let folder = path
            .split_once('/')
            .filter(|(_, name)| !name.contains('/'))
            .and_then(|(folder, _)| DDL_FOLDERS.iter().position(|known| *known == folder));
        let (Some(folder), Ok(text)) = (folder, std::str::from_utf8(content)) else {
            tracing::warn!(database = %database, file = %path, "a DDL file is outside the known folders or not UTF-8");
            return Err(verification_failed(database));
        };
        files.push((folder, path.as_str(), text));
    }
    // Stable: paths keep their order within a folder.
    files.sort_by_key(|(folder, _, _)| *folder);
    Ok(files
        .into_iter()
        .map(|(_, path, text)| (path, text))
        .collect())
}

/// Applies the DDL files of `candidate`, in rounds: see the module documentation.
pub(super) async fn apply(
    connection: &mut MySqlConnection,
    candidate: &DatabaseSnapshot,
    database: &DatabaseName,
) -> Result<(), SafeError> {
    let mut pending = ddl_files(candidate, database)?;
    let (settings, introspection) = creation_settings(&candidate.model)?;
    let mut current = introspection.as_str();
    while !pending.is_empty() {
        let mut waiting = Vec::new();
        for &(path, text) in &pending {
            let wanted = settings
                .get(path)
                .map_or(introspection.as_str(), String::as_str);
            if wanted != current {
                connection
                    .execute(wanted)
                    .await
                    .query_context("set the session a DDL file was written under")?;
                current = wanted;
            }
            match statement(connection, text).await {
                Ok(()) => {}
                Err(Refusal::MissingDependency) => waiting.push((path, text)),
                Err(Refusal::Workspace(error)) => {
                    tracing::warn!(database = %database, file = %path, code = %error.code().name(), error = %ErrorChain(&error), "the workspace could not apply a DDL file");
                    return Err(error);
                }
                Err(Refusal::Candidate(reason, number)) => {
                    tracing::warn!(database = %database, file = %path, mysql_error = number, reason);
                    return Err(verification_failed(database));
                }
            }
        }
        if waiting.len() == pending.len() {
            tracing::warn!(database = %database, file = %waiting[0].0, waiting = waiting.len(), "a DDL file names an object no file of the database creates");
            return Err(verification_failed(database));
        }
        pending = waiting;
    }
    if current != introspection {
        connection
            .execute(introspection.as_str())
            .await
            .query_context("set the introspection session again")?;
    }
    Ok(())
}

/// Runs the one statement of a DDL file. The server runs every statement of a text before its
/// results are counted, so a file with several is refused after the fact; the workspace
/// account's grants confine what they can touch.
pub(super) async fn statement(connection: &mut MySqlConnection, text: &str) -> Result<(), Refusal> {
    let mut results = connection.fetch_many(text);
    let mut statements = 0;
    while let Some(result) = results
        .try_next()
        .await
        .map_err(|error| Refusal::of(&error))?
    {
        if matches!(result, Either::Left(_)) {
            statements += 1;
        }
    }
    match statements {
        1 => Ok(()),
        _ => Err(Refusal::Candidate(
            "a DDL file does not hold exactly one statement",
            None,
        )),
    }
}

/// The model as JSON without what legitimately differs in a scratch schema: the database's name
/// and every definer.
fn comparable(model: &DatabaseModel) -> serde_json::Map<String, serde_json::Value> {
    fn without_definers(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(object) => {
                object.remove("definer");
                object.values_mut().for_each(without_definers);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(without_definers),
            _ => {}
        }
    }
    let mut value = serde_json::to_value(model).expect("a model serializes: its keys are strings");
    without_definers(&mut value);
    let serde_json::Value::Object(mut object) = value else {
        unreachable!("a model serializes to an object")
    };
    object.remove("name");
    object
}

/// A snapshot's DDL files: path → content.
fn ddl(snapshot: &DatabaseSnapshot) -> BTreeMap<&str, &[u8]> {
    snapshot
        .files
        .iter()
        .filter(|(path, _)| path.ends_with(".sql"))
        .map(|(path, content)| (path.as_str(), content.as_slice()))
        .collect()
}

/// Where a scratch schema's snapshot differs from the expected one: the parts of the model (up
/// to what [`comparable`] leaves out) and the DDL files.
pub(super) struct Mismatch {
    pub(super) parts: BTreeSet<String>,
    pub(super) files: BTreeSet<String>,
}

/// How `rebuilt` differs from `expected`; `None` when it does not.
pub(super) fn mismatch(
    expected: &DatabaseSnapshot,
    rebuilt: &DatabaseSnapshot,
) -> Option<Mismatch> {
    let (model, found) = (comparable(&expected.model), comparable(&rebuilt.model));
    let parts: BTreeSet<String> = model
        .keys()
        .chain(found.keys())
        .filter(|part| model.get(*part) != found.get(*part))
        .cloned()
        .collect();
    let (files, found) = (ddl(expected), ddl(rebuilt));
    let files: BTreeSet<String> = files
        .keys()
        .chain(found.keys())
        .filter(|path| files.get(*path) != found.get(*path))
        .map(|path| (*path).to_owned())
        .collect();
    (!parts.is_empty() || !files.is_empty()).then_some(Mismatch { parts, files })
}

/// Requires `rebuilt` (the scratch schema's snapshot) to have `candidate`'s model, up to what
/// [`comparable`] leaves out, and exactly its DDL files.
fn compare(
    candidate: &DatabaseSnapshot,
    rebuilt: &DatabaseSnapshot,
    database: &DatabaseName,
) -> Result<(), SafeError> {
    let Some(Mismatch { parts, files }) = mismatch(candidate, rebuilt) else {
        return Ok(());
    };
    tracing::warn!(
        database = %database,
        model = ?parts,
        first_file = files.first().map(String::as_str),
        files = files.len(),
        "the database's DDL, applied in the workspace, gives another schema than its snapshot"
    );
    Err(verification_failed(database))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_series_and_scratch_names() {
        assert_eq!(
            release_series("10.11.6-MariaDB-0+deb12u1"),
            Some((true, "10.11"))
        );
        assert_eq!(
            release_series("10.11.19-MariaDB-log"),
            Some((true, "10.11"))
        );
        assert_eq!(release_series("8.0.36"), Some((false, "8.0")));
        assert_eq!(release_series("8.4.0-commercial"), Some((false, "8.4")));
        assert_eq!(release_series("test"), None);
        assert_eq!(release_series("10"), None);

        assert_eq!(
            created_at(&scratch_name(1_700_000_000)),
            Some(1_700_000_000)
        );
        assert_ne!(scratch_name(1), scratch_name(1));
        for other in [
            "fermata_ws_",
            "fermata_ws_1700000000",
            "fermata_ws_x_0123456789abcdef0123456789abcdef",
            "fermata_ws_1_0123456789ABCDEF0123456789ABCDEF",
            "fermata_ws_1_0123456789abcdef0123456789abcde",
            "fermata_ws_1_0123456789abcdef0123456789abcdef_",
            "other_1_0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(created_at(other), None, "{other}");
        }
    }
}
