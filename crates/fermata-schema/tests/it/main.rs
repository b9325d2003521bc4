//! The integration tests of `fermata-schema`, as one test binary: one module per subject, the
//! shared helpers beside them. One binary links once, where a binary per file linked each.

/// Expands each test case (an `async fn` taking a [`ScratchDatabase`]) once on SQLite and once
/// on PostgreSQL; the module that calls it imports `ScratchDatabase`.
///
/// [`ScratchDatabase`]: fermata_store_sql::testing::ScratchDatabase
macro_rules! on_both_engines {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    super::$case(super::ScratchDatabase::sqlite()).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    super::$case(super::ScratchDatabase::postgres().await).await;
                }
            )*
        }
    };
}

// Publication is tested against the forge's fake GitHub too; these tests use part of it.
#[allow(dead_code)]
#[path = "../../../fermata-forge/tests/it/fake_github/mod.rs"]
mod fake_github;
mod git_support;
mod support;
mod webhook_support;
mod workflow_support;

mod artifact;
mod artifact_s3;
mod error_codes;
mod inventory;
mod inventory_workflow;
mod migration_corpus;
mod migration_corpus_demanding;
mod mysql_catalog;
mod mysql_fixtures;
mod mysql_migration;
mod mysql_output;
mod operations;
mod package;
mod refresh_workflow;
mod schedule_workflow;
mod server_errors;
mod snapshot;
mod source_check;
mod verification_workflow;
mod workspace;
