//! The `fermata` command: configuration, wiring and the commands (`serve`, `migrate`, `status`, `user`, `token`, `keys`, `schema`, `export`, `import`).
//!
//! `main.rs` only calls [`cli::main_with`]. Everything here is plumbing between the settings and
//! the crates that do the work: the storage port and its adapters, and the HTTP surface.

mod account_commands;
mod backup;
pub mod cli;
mod cluster;
pub mod config;
pub mod failure;
mod fault;
mod keys;
mod logging;
mod repository_files;
mod schema_commands;
mod schema_progress;
mod schema_runtime;
pub mod serve;
mod status;
mod storage;
pub mod writer_lease;
