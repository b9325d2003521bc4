//! What backups and restores need of the database itself: a consistent copy of a SQLite database
//! taken while a server writes to it (`VACUUM INTO`, one read transaction), the database's size
//! for a progress bar, the PostgreSQL server's major version (to pick a `pg_dump` that can dump
//! it), and whether a database holds any table of its own already (a restore never lands on
//! data unless told to).

use std::path::Path;

use fermata_store::{StoreError, StoreResult};

use crate::dialect::Dialect;
use crate::error::StoreContext;
use crate::{Inner, SqlStorage};

impl SqlStorage {
    /// Writes a consistent copy of the SQLite database into `dest`, which must not exist: the
    /// state of one read transaction, whatever commits meanwhile. Never a copy of the live file,
    /// which may be mid-write and whose write-ahead log holds the latest commits.
    pub async fn copy_sqlite_into(&self, dest: &Path) -> StoreResult<()> {
        self.inner.expect(Dialect::Sqlite, "copying the database")?;
        let dest = dest.to_str().ok_or_else(|| {
            StoreError::invalid("the backup's path is not valid UTF-8; choose another")
        })?;
        let mut conn = self
            .inner
            .pool
            .acquire()
            .await
            .context("copying the database")?;
        sqlx::query("VACUUM INTO $1")
            .bind(dest.to_owned())
            .execute(&mut *conn)
            .await
            .context("copying the database")?;
        Ok(())
    }

    /// The database's size in bytes as the engine counts it (SQLite's pages; PostgreSQL's
    /// `pg_database_size`), for a progress bar.
    pub async fn database_size(&self) -> StoreResult<u64> {
        let sql = match self.inner.dialect {
            Dialect::Sqlite => {
                "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()"
            }
            Dialect::Postgres => "SELECT pg_database_size(current_database())",
        };
        let size: i64 = sqlx::query_scalar(sql)
            .fetch_one(&self.inner.pool)
            .await
            .context("measuring the database")?;
        Ok(u64::try_from(size).unwrap_or(0))
    }

    /// The PostgreSQL server's major version (15 for 15.4).
    pub async fn server_major_version(&self) -> StoreResult<u32> {
        self.inner
            .expect(Dialect::Postgres, "reading the server's version")?;
        let number: String = sqlx::query_scalar("SHOW server_version_num")
            .fetch_one(&self.inner.pool)
            .await
            .context("reading the server's version")?;
        number
            .trim()
            .parse::<u32>()
            .map(|number| number / 10_000)
            .map_err(|_| StoreError::corrupt("the server's version number does not parse"))
    }

    /// How many tables the database holds besides the engine's own: zero for a database nothing
    /// was restored or migrated into.
    pub async fn own_table_count(&self) -> StoreResult<i64> {
        let sql = match self.inner.dialect {
            Dialect::Sqlite => {
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' \
                 AND name NOT LIKE 'sqlite_%'"
            }
            Dialect::Postgres => {
                "SELECT COUNT(*) FROM information_schema.tables \
                 WHERE table_schema NOT IN ('pg_catalog', 'information_schema')"
            }
        };
        sqlx::query_scalar(sql)
            .fetch_one(&self.inner.pool)
            .await
            .context("looking for tables")
    }
}

impl Inner {
    fn expect(&self, dialect: Dialect, action: &str) -> StoreResult<()> {
        if self.dialect == dialect {
            Ok(())
        } else {
            Err(StoreError::invalid(format!(
                "{action} needs {}, and this database is {}",
                dialect.name(),
                self.dialect.name()
            )))
        }
    }
}
