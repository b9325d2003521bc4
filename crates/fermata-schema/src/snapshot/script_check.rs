//! The workspace's third check: a migration script proven, not trusted. The "from" snapshot's
//! files are applied into a scratch schema (as a candidate's are, see `workspace.rs`), the
//! script's statements run there one by one, as they are shown but without their `DEFINER`
//! clauses (definers are not compared, and the workspace account may not set another), with
//! `foreign_key_checks` on unless a foreign key names another database (which the workspace does
//! not hold), and the scratch schema is snapshotted and compared with the "to" snapshot exactly
//! as a candidate is compared with itself: the model but for name and definers, and every DDL
//! file byte for byte.
//!
//! The verdict is a [`Verification`]: `verified`; `failed` with a reason naming the statement the
//! workspace refused (its number and the server's error number, never its text) or the parts and
//! files that differ afterwards; or `unverified` when the workspace could not be used (another
//! server release, a lost connection, missing privileges), said with the safe error's code. The
//! scratch schema is dropped whatever happens.

use fermata_schema_core::{DatabaseName, ErrorCode, SafeError};
use fermata_store::ErrorChain;
use sqlx::Executor;
use sqlx::mysql::MySqlConnection;

use super::DatabaseSnapshot;
use super::prepare;
use super::workspace::{Mismatch, Opened, Refusal, mismatch, open, read_back, rebuild, statement};
use crate::migration::{Script, Verification};
use crate::safe_context::SafeCode;
use crate::source::{DriverContext, SourceSettings};

/// Runs `script` on `from` in a scratch schema of `workspace` and requires `to` back; see the
/// module documentation. `source_version` is `VERSION()` of the server both were read from.
pub async fn verify_script(
    workspace: &SourceSettings,
    from: &DatabaseSnapshot,
    script: &Script,
    to: &DatabaseSnapshot,
    source_version: &str,
) -> Verification {
    let checked = async {
        let database = DatabaseName::new(to.model.name.clone())
            .or_code(ErrorCode::InvalidIdentifier, "name the script's database")?;
        let Opened {
            mut connection,
            version,
            mut scratch,
        } = open(workspace, source_version, &database).await?;
        let verdict = run(
            &mut connection,
            &mut scratch,
            (from, script, to),
            &database,
            &version,
        )
        .await;
        scratch.remove(&mut connection).await;
        verdict
    };
    match checked.await {
        Ok(verdict) => verdict,
        Err(error) => {
            tracing::warn!(code = %error.code().name(), error = %ErrorChain(&error), "a migration script could not be verified in the workspace");
            let reason = match error.code() {
                ErrorCode::InvalidSourceConfiguration => {
                    "the workspace runs another server release than the source".to_owned()
                }
                code => format!("the workspace could not check it ({})", code.name()),
            };
            Verification::Unverified { reason }
        }
    }
}

/// Rebuilds `from`, runs the script and compares with `to`. A workspace failure is the error;
/// anything the script or the snapshots are at fault for is the verdict.
async fn run(
    connection: &mut MySqlConnection,
    scratch: &mut super::workspace::Scratch,
    (from, script, to): (&DatabaseSnapshot, &Script, &DatabaseSnapshot),
    database: &DatabaseName,
    version: &str,
) -> Result<Verification, SafeError> {
    let failed = |reason: String| Ok(Verification::Failed { reason });
    match rebuild(connection, scratch, from, database).await {
        Ok(()) => {}
        Err(error) if error.code() == ErrorCode::VerificationFailed => {
            return failed("the starting schema does not rebuild in the workspace".to_owned());
        }
        Err(error) => return Err(error),
    }
    let other_databases = to
        .model
        .tables
        .iter()
        .chain(&from.model.tables)
        .flat_map(|table| &table.foreign_keys)
        .any(|key| key.referenced_database.is_some());
    if !other_databases {
        connection
            .execute("SET SESSION foreign_key_checks = 1")
            .await
            .query_context("turn foreign key checks on")?;
    }
    let count = script.statements.len();
    for (number, each) in script.statements.iter().enumerate() {
        match statement(connection, &each.applied()).await {
            Ok(()) => {}
            Err(Refusal::Workspace(error)) => return Err(error),
            Err(Refusal::MissingDependency) => {
                return failed(format!(
                    "statement {} of {count} names an object that does not exist at that point",
                    number + 1
                ));
            }
            Err(Refusal::Candidate(_, code)) => {
                let code = code
                    .map(|code| format!(" with error {code}"))
                    .unwrap_or_default();
                return failed(format!(
                    "the workspace refused statement {} of {count}{code}",
                    number + 1
                ));
            }
        }
    }
    prepare(connection).await?;
    let rebuilt = match read_back(connection, &scratch.name, version, to, database).await {
        Ok(rebuilt) => rebuilt,
        Err(error) if error.code() == ErrorCode::VerificationFailed => {
            return failed("the result cannot be snapshotted".to_owned());
        }
        Err(error) => return Err(error),
    };
    Ok(match mismatch(to, &rebuilt) {
        None => Verification::Verified,
        Some(Mismatch { parts, files }) => {
            let mut differing: Vec<String> = files.into_iter().collect();
            differing.extend(parts.into_iter().map(|part| format!("the model's {part}")));
            let shown: Vec<&str> = differing.iter().take(5).map(String::as_str).collect();
            let more = differing.len().saturating_sub(shown.len());
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            Verification::Failed {
                reason: format!(
                    "the result differs from the target in {}{more}",
                    shown.join(", ")
                ),
            }
        }
    })
}
