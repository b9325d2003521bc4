//! The SQL machine choice store: `machine_choices`, `machine_favorites` and `machines.shared_at`.
//! Revoking a machine removes its choices and favorites by foreign key; unsharing removes
//! teammates' here, in the same fenced transaction.

use async_trait::async_trait;
use fermata_store::{ChannelId, Fence, MachineChoiceStore, MachineId, StoreResult, UserId};

use crate::SqlStorage;
use crate::dialect::Dialect;
use crate::error::StoreContext;

/// The machine choice statements, rendered for one dialect.
#[derive(Debug)]
pub(crate) struct Statements {
    share: String,
    unshare: String,
    drop_teammates_choices: String,
    drop_teammates_favorites: String,
    shared: String,
    choose: String,
    unchoose: String,
    choice: String,
    favor: String,
    unfavor: String,
    favorite: String,
}

/// The machines `$1` (a user) may use: their own and shared ones.
const USABLE: &str = "m.id = $MACHINE AND (m.owner_id = $1 OR m.shared_at IS NOT NULL)";

impl Statements {
    pub(crate) fn new(dialect: Dialect) -> Self {
        Statements {
            share: dialect.render(
                "UPDATE machines SET shared_at = coalesce(shared_at, $3) \
                 WHERE id = $1 AND owner_id = $2",
            ),
            unshare: dialect
                .render("UPDATE machines SET shared_at = NULL WHERE id = $1 AND owner_id = $2"),
            drop_teammates_choices: dialect
                .render("DELETE FROM machine_choices WHERE machine_id = $1 AND user_id <> $2"),
            drop_teammates_favorites: dialect
                .render("DELETE FROM machine_favorites WHERE machine_id = $1 AND user_id <> $2"),
            shared: dialect.render(
                "SELECT CASE WHEN shared_at IS NULL THEN 0 ELSE 1 END FROM machines WHERE id = $1",
            ),
            choose: dialect.render(&format!(
                "INSERT INTO machine_choices (user_id, channel_id, machine_id, chosen_at) \
                 SELECT $1, $2, m.id, $4 FROM machines m WHERE {} \
                 ON CONFLICT (user_id, channel_id) DO UPDATE SET \
                 machine_id = excluded.machine_id, chosen_at = excluded.chosen_at",
                USABLE.replace("$MACHINE", "$3")
            )),
            unchoose: dialect
                .render("DELETE FROM machine_choices WHERE user_id = $1 AND channel_id = $2"),
            choice: dialect.render(
                "SELECT machine_id FROM machine_choices WHERE user_id = $1 AND channel_id = $2",
            ),
            favor: dialect.render(&format!(
                "INSERT INTO machine_favorites (user_id, machine_id, chosen_at) \
                 SELECT $1, m.id, $3 FROM machines m WHERE {} \
                 ON CONFLICT (user_id) DO UPDATE SET \
                 machine_id = excluded.machine_id, chosen_at = excluded.chosen_at",
                USABLE.replace("$MACHINE", "$2")
            )),
            unfavor: dialect.render("DELETE FROM machine_favorites WHERE user_id = $1"),
            favorite: dialect.render("SELECT machine_id FROM machine_favorites WHERE user_id = $1"),
        }
    }
}

#[async_trait]
impl MachineChoiceStore for SqlStorage {
    async fn set_machine_shared(
        &self,
        fence: &Fence,
        machine: &MachineId,
        owner: &UserId,
        shared: bool,
    ) -> StoreResult<()> {
        let action = "sharing a machine";
        let sql = &self.inner.machine_choice_sql;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let update = if shared { &sql.share } else { &sql.unshare };
        let changed = tx
            .execute(
                sqlx::query(update)
                    .bind(&machine.0)
                    .bind(&owner.0)
                    .bind(tx.now.0),
                action,
            )
            .await?;
        if changed == 0 {
            return Err(fermata_store::machine::not_owners_machine());
        }
        if !shared {
            for statement in [&sql.drop_teammates_choices, &sql.drop_teammates_favorites] {
                tx.execute(
                    sqlx::query(statement).bind(&machine.0).bind(&owner.0),
                    action,
                )
                .await?;
            }
        }
        tx.commit(action).await
    }

    async fn machine_shared(&self, machine: &MachineId) -> StoreResult<bool> {
        let action = "reading a machine";
        let shared: Option<i64> = sqlx::query_scalar(&self.inner.machine_choice_sql.shared)
            .bind(&machine.0)
            .fetch_optional(&self.inner.pool)
            .await
            .context(action)?;
        shared
            .map(|shared| shared == 1)
            .ok_or_else(fermata_store::machine_choice::unknown_machine)
    }

    async fn choose_machine(
        &self,
        fence: &Fence,
        user: &UserId,
        channel: &ChannelId,
        machine: Option<&MachineId>,
    ) -> StoreResult<()> {
        let action = "choosing a machine";
        let sql = &self.inner.machine_choice_sql;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let query = match machine {
            Some(machine) => sqlx::query(&sql.choose)
                .bind(&user.0)
                .bind(&channel.0)
                .bind(&machine.0)
                .bind(tx.now.0),
            None => sqlx::query(&sql.unchoose).bind(&user.0).bind(&channel.0),
        };
        let changed = query
            .execute(tx.conn())
            .await
            .context(action)?
            .rows_affected();
        if machine.is_some() && changed == 0 {
            return Err(fermata_store::machine_choice::no_usable_machine());
        }
        tx.commit(action).await
    }

    async fn machine_choice(
        &self,
        user: &UserId,
        channel: &ChannelId,
    ) -> StoreResult<Option<MachineId>> {
        let chosen: Option<String> = sqlx::query_scalar(&self.inner.machine_choice_sql.choice)
            .bind(&user.0)
            .bind(&channel.0)
            .fetch_optional(&self.inner.pool)
            .await
            .context("reading a machine choice")?;
        Ok(chosen.map(MachineId))
    }

    async fn set_favorite_machine(
        &self,
        fence: &Fence,
        user: &UserId,
        machine: Option<&MachineId>,
    ) -> StoreResult<()> {
        let action = "choosing a favorite machine";
        let sql = &self.inner.machine_choice_sql;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let query = match machine {
            Some(machine) => sqlx::query(&sql.favor)
                .bind(&user.0)
                .bind(&machine.0)
                .bind(tx.now.0),
            None => sqlx::query(&sql.unfavor).bind(&user.0),
        };
        let changed = query
            .execute(tx.conn())
            .await
            .context(action)?
            .rows_affected();
        if machine.is_some() && changed == 0 {
            return Err(fermata_store::machine_choice::no_usable_machine());
        }
        tx.commit(action).await
    }

    async fn favorite_machine(&self, user: &UserId) -> StoreResult<Option<MachineId>> {
        let chosen: Option<String> = sqlx::query_scalar(&self.inner.machine_choice_sql.favorite)
            .bind(&user.0)
            .fetch_optional(&self.inner.pool)
            .await
            .context("reading a favorite machine")?;
        Ok(chosen.map(MachineId))
    }
}
