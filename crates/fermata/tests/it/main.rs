//! The integration tests of `fermata`, as one test binary: one module per subject, the
//! shared helpers beside them. One binary links once, where a binary per file linked each.

#[path = "../../../fermata-schema/tests/it/git_support/mod.rs"]
mod git_support;
#[path = "../../../fermata-schema/tests/it/support/mod.rs"]
mod mysql;
mod support;

/// Runs each named case, `async fn case(target: Target)` of the calling module, as a test on
/// SQLite and as one on PostgreSQL (modules `sqlite` and `postgres`).
macro_rules! on_both {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Target::sqlite()).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Target::postgres().await).await;
                }
            )*
        }
    };
}

mod admin_browser;
mod backups;
mod cluster;
mod config;
mod doc_references;
mod document_browser;
mod editor_browser;
mod faults;
mod hostile_load;
mod hostile_sockets;
mod hostile_updates;
mod interop;
mod lifecycle;
mod metrics;
mod pages_browser;
mod repository_files;
mod schema;
mod secrets;
mod stop;
mod sweeps;
mod tidy;
mod writer;
