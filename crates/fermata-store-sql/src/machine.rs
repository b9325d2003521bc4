//! The SQL machine store.

use async_trait::async_trait;
use fermata_store::{
    Machine, MachineId, MachineStore, NewMachine, SecretHash, StoreError, StoreResult, UserId,
};
use sqlx::any::AnyRow;

use crate::SqlStorage;
use crate::dialect::Dialect;
use crate::error::{StoreContext, map};
use crate::row::{column, instant};

/// The machine statements, rendered for one dialect.
#[derive(Debug)]
pub(crate) struct Statements {
    insert: String,
    by_secret: String,
    by_id: String,
    of_owner: String,
    rotate: String,
    reauthorize: String,
    count_owned: String,
    revoke: String,
    with_credentials: String,
}

const COLUMNS: &str = "id, owner_id, name, created_at, authorized_at, revision, credentials";

impl Statements {
    pub(crate) fn new(dialect: Dialect) -> Self {
        Statements {
            insert: dialect.render(
                "WITH clock AS (SELECT {now} AS now) \
                 INSERT INTO machines (id, owner_id, name, secret_hash, created_at, \
                                       authorized_at, revision) \
                 SELECT $1, $2, $3, $4, clock.now, clock.now, 1 FROM clock",
            ),
            by_secret: dialect.render(&format!(
                "SELECT {COLUMNS} FROM machines WHERE secret_hash = $1"
            )),
            by_id: dialect.render(&format!("SELECT {COLUMNS} FROM machines WHERE id = $1")),
            of_owner: dialect.render(&format!(
                "SELECT {COLUMNS} FROM machines WHERE owner_id = $1 ORDER BY name, id"
            )),
            rotate: dialect.render(
                "UPDATE machines SET credentials = $3, revision = revision + 1 \
                 WHERE id = $1 AND revision = $2",
            ),
            reauthorize: dialect.render(
                "UPDATE machines SET secret_hash = $4, revision = revision + 1, \
                        authorized_at = {now} \
                 WHERE id = $1 AND owner_id = $2 AND revision = $3",
            ),
            count_owned: dialect.render(
                "SELECT count(*) FROM machines WHERE id = $1 AND ($2 = '' OR owner_id = $2)",
            ),
            revoke: dialect.render("DELETE FROM machines WHERE id = $1 AND owner_id = $2"),
            with_credentials: dialect.render(&format!(
                "SELECT {COLUMNS} FROM machines WHERE credentials IS NOT NULL ORDER BY id"
            )),
        }
    }
}

fn machine_from(row: &AnyRow, action: &str) -> StoreResult<Machine> {
    Ok(Machine {
        id: MachineId(column(row, 0, action)?),
        owner: UserId(column(row, 1, action)?),
        name: column(row, 2, action)?,
        created_at: instant(row, 3, action)?,
        authorized_at: instant(row, 4, action)?,
        revision: column(row, 5, action)?,
        credentials: column(row, 6, action)?,
    })
}

impl SqlStorage {
    /// After a conditional update matched nothing: `Conflict` when the machine (of `owner`, when
    /// given) still exists, so its revision moved; `Missing` otherwise.
    async fn machine_conflict_or_missing(
        &self,
        id: &MachineId,
        owner: Option<&UserId>,
    ) -> StoreError {
        let action = "reading a machine";
        let count = sqlx::query_scalar::<_, i64>(&self.inner.machine_sql.count_owned)
            .bind(&id.0)
            .bind(owner.map_or("", |owner| owner.0.as_str()))
            .fetch_one(&self.inner.pool)
            .await;
        match count {
            Ok(0) => fermata_store::machine::not_owners_machine(),
            Ok(_) => StoreError::conflict("the machine changed meanwhile"),
            Err(error) => map(error, action),
        }
    }
}

#[async_trait]
impl MachineStore for SqlStorage {
    async fn pair_machine(&self, machine: &NewMachine) -> StoreResult<Machine> {
        let action = "pairing a machine";
        let mut tx = self.inner.begin_write(action).await?;
        sqlx::query(&self.inner.machine_sql.insert)
            .bind(&machine.id.0)
            .bind(&machine.owner.0)
            .bind(&machine.name)
            .bind(machine.secret_hash.0.to_vec())
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        self.machine(&machine.id)
            .await?
            .ok_or_else(|| StoreError::unavailable("the new machine vanished"))
    }

    async fn machine_by_secret(&self, hash: &SecretHash) -> StoreResult<Option<Machine>> {
        let action = "reading a machine";
        let row = sqlx::query(&self.inner.machine_sql.by_secret)
            .bind(hash.0.to_vec())
            .fetch_optional(&self.inner.pool)
            .await
            .context(action)?;
        row.map(|row| machine_from(&row, action)).transpose()
    }

    async fn machine(&self, id: &MachineId) -> StoreResult<Option<Machine>> {
        let action = "reading a machine";
        let row = sqlx::query(&self.inner.machine_sql.by_id)
            .bind(&id.0)
            .fetch_optional(&self.inner.pool)
            .await
            .context(action)?;
        row.map(|row| machine_from(&row, action)).transpose()
    }

    async fn machines_of(&self, owner: &UserId) -> StoreResult<Vec<Machine>> {
        let action = "listing machines";
        let rows = sqlx::query(&self.inner.machine_sql.of_owner)
            .bind(&owner.0)
            .fetch_all(&self.inner.pool)
            .await
            .context(action)?;
        rows.iter().map(|row| machine_from(row, action)).collect()
    }

    async fn rotate_machine_credentials(
        &self,
        id: &MachineId,
        expected_revision: i64,
        credentials: Option<&[u8]>,
    ) -> StoreResult<Machine> {
        let action = "rotating machine credentials";
        let mut tx = self.inner.begin_write(action).await?;
        let done = sqlx::query(&self.inner.machine_sql.rotate)
            .bind(&id.0)
            .bind(expected_revision)
            .bind(credentials.map(<[u8]>::to_vec))
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        if done.rows_affected() == 0 {
            return Err(self.machine_conflict_or_missing(id, None).await);
        }
        self.machine(id)
            .await?
            .ok_or_else(fermata_store::machine::not_owners_machine)
    }

    async fn reauthorize_machine(
        &self,
        id: &MachineId,
        owner: &UserId,
        expected_revision: i64,
        secret_hash: &SecretHash,
    ) -> StoreResult<Machine> {
        let action = "re-authorizing a machine";
        let mut tx = self.inner.begin_write(action).await?;
        let done = sqlx::query(&self.inner.machine_sql.reauthorize)
            .bind(&id.0)
            .bind(&owner.0)
            .bind(expected_revision)
            .bind(secret_hash.0.to_vec())
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        if done.rows_affected() == 0 {
            return Err(self.machine_conflict_or_missing(id, Some(owner)).await);
        }
        self.machine(id)
            .await?
            .ok_or_else(fermata_store::machine::not_owners_machine)
    }

    async fn revoke_machine(&self, id: &MachineId, owner: &UserId) -> StoreResult<()> {
        let action = "revoking a machine";
        let mut tx = self.inner.begin_write(action).await?;
        let done = sqlx::query(&self.inner.machine_sql.revoke)
            .bind(&id.0)
            .bind(&owner.0)
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        if done.rows_affected() == 0 {
            return Err(fermata_store::machine::not_owners_machine());
        }
        Ok(())
    }

    async fn machines_with_credentials(&self) -> StoreResult<Vec<Machine>> {
        let action = "listing machines with credentials";
        let rows = sqlx::query(&self.inner.machine_sql.with_credentials)
            .fetch_all(&self.inner.pool)
            .await
            .context(action)?;
        rows.iter().map(|row| machine_from(row, action)).collect()
    }
}
