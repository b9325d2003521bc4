//! Throwaway databases for tests: a SQLite file in a temporary folder, or a fresh database on the
//! PostgreSQL server that the test command provisions (`FERMATA_TEST_POSTGRES_URL`).
//!
//! A test that needs PostgreSQL fails, loudly, when the server is not there: it never passes by
//! skipping.

use std::sync::Arc;

use fermata_store::StoreOptions;
use sqlx::migrate::Migrator;
use sqlx::{AnyConnection, Connection, Executor};
use tempfile::TempDir;

use crate::{Database, SqlStorage};

pub mod bench;
pub mod planner;
pub mod search;

/// The variable the test command sets to the throwaway PostgreSQL server's admin URL.
pub const POSTGRES_URL_VAR: &str = "FERMATA_TEST_POSTGRES_URL";

impl SqlStorage {
    /// How many document commits wait to share the next fenced transaction (for tests that
    /// hold one in flight and need the rest queued behind it).
    pub fn commits_waiting(&self) -> usize {
        self.inner.commits.waiting_count()
    }

    /// Leaves a connection of the pool writes begin on as a COMMIT that failed leaves it: the
    /// database ended the transaction by itself (as SQLite does after a full disk or an I/O
    /// error), so the ROLLBACK the driver sends when the transaction is dropped is refused, and
    /// the driver still counts a transaction open on that connection.
    pub async fn strand_a_write_connection(&self) {
        let mut tx = self.inner.writes.begin().await.expect("begin");
        tx.execute("ROLLBACK")
            .await
            .expect("end the transaction behind the driver's back");
        drop(tx);
    }
}

/// A database that lives as long as this value.
#[derive(Debug)]
pub struct ScratchDatabase {
    pub database: Database,
    /// The SQLite file's folder, removed on drop.
    _folder: Option<TempDir>,
}

impl ScratchDatabase {
    /// A SQLite file in a new temporary folder.
    pub fn sqlite() -> Self {
        let folder = tempfile::tempdir().expect("create a temporary folder");
        ScratchDatabase {
            database: Database::Sqlite {
                path: folder.path().join("fermata.db"),
            },
            _folder: Some(folder),
        }
    }

    /// A new, empty database on the test PostgreSQL server.
    pub async fn postgres() -> Self {
        let admin = std::env::var(POSTGRES_URL_VAR).unwrap_or_else(|_| {
            panic!(
                "{POSTGRES_URL_VAR} is not set: run the tests with scripts/test, which starts \
                 a throwaway PostgreSQL server"
            )
        });
        sqlx::any::install_default_drivers();
        let name = format!("fermata_test_{}", uuid::Uuid::new_v4().simple());
        let mut conn = AnyConnection::connect(&admin)
            .await
            .expect("connect to the test PostgreSQL server");
        conn.execute(format!("CREATE DATABASE {name}").as_str())
            .await
            .expect("create a test database");
        conn.close().await.ok();
        ScratchDatabase {
            database: Database::Postgres {
                url: with_database(&admin, &name),
            },
            _folder: None,
        }
    }

    /// The URL of a PostgreSQL scratch database (for passing to the binary).
    pub fn postgres_url(&self) -> &str {
        match &self.database {
            Database::Postgres { url } => url,
            Database::Sqlite { .. } => panic!("not a PostgreSQL database"),
        }
    }

    /// Connects and applies this release's migrations.
    pub async fn open(self, options: StoreOptions) -> ScratchStorage {
        let storage = SqlStorage::connect(&self.database, options)
            .await
            .expect("connect to the scratch database");
        storage
            .migrate()
            .await
            .expect("migrate the scratch database");
        ScratchStorage {
            storage,
            _database: Arc::new(self),
        }
    }

    /// Connects and applies `earlier`'s migrations rather than this release's: the database an
    /// earlier release left, for an upgrade test to migrate the rest of the way.
    pub async fn open_as_earlier_release(self, earlier: &Migrator) -> ScratchStorage {
        let storage = SqlStorage::connect(&self.database, StoreOptions::default())
            .await
            .expect("connect to the scratch database");
        storage
            .migrate_with(earlier)
            .await
            .expect("migrate the scratch database as an earlier release");
        ScratchStorage {
            storage,
            _database: Arc::new(self),
        }
    }
}

/// `admin` with its database name replaced by `name`.
fn with_database(admin: &str, name: &str) -> String {
    let (base, query) = match admin.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (admin, None),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let host_end = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    let mut url = format!("{}/{name}", &base[..host_end]);
    if let Some(query) = query {
        url.push('?');
        url.push_str(query);
    }
    url
}

/// A migrated store that keeps its scratch database alive.
#[derive(Debug, Clone)]
pub struct ScratchStorage {
    pub storage: SqlStorage,
    _database: Arc<ScratchDatabase>,
}

fermata_store::impl_storage!(
    ScratchStorage,
    driver = |scratch| scratch.storage.driver(),
    stores = |scratch| &scratch.storage,
);

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn replaces_the_database_name() {
        assert_eq!(
            with_database("postgres://postgres@127.0.0.1:5432/postgres", "x"),
            "postgres://postgres@127.0.0.1:5432/x"
        );
        assert_eq!(
            with_database("postgres://u:p@h:1/db?sslmode=disable", "x"),
            "postgres://u:p@h:1/x?sslmode=disable"
        );
        assert_eq!(with_database("postgres://h:1", "x"), "postgres://h:1/x");
    }
}
