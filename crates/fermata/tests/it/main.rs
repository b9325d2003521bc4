//! The integration tests of `fermata`, as one test binary: one module per subject, the
//! shared helpers beside them. One binary links once, where a binary per file linked each.

#[path = "../../../fermata-schema/tests/it/git_support/mod.rs"]
mod git_support;
#[path = "../../../fermata-schema/tests/it/support/mod.rs"]
mod mysql;
mod support;

mod admin_browser;
mod config;
mod editor_browser;
mod hostile_load;
mod interop;
mod lifecycle;
mod metrics;
mod schema;
mod secrets;
mod stop;
mod sweeps;
mod tidy;
mod writer;
