//! The integration tests of `fermata-store-sql`, as one test binary: one module per subject, the
//! shared helpers beside them. One binary links once, where a binary per file linked each.

mod contract_postgres;
mod contract_sqlite;
mod earlier_release;
mod failed_transactions;
mod group_commit;
mod lighter_commits;
mod media_checks;
mod migrations;
mod repository_upgrade;
mod schema_immutability;
mod search_upgrade;
mod shard_upgrade;
