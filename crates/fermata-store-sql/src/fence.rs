//! Fenced transactions: the one way every store writes under a lease.
//!
//! A fenced transaction begins a write transaction, locks the lease row so a takeover must wait for
//! it (PostgreSQL `FOR KEY SHARE`, which renewal's `FOR NO KEY UPDATE` does not conflict with),
//! serializes the writes of one lease (a transaction-scoped advisory lock on PostgreSQL; SQLite's
//! `BEGIN IMMEDIATE` already holds the database's write lock), and then checks, on the database's
//! clock and after the locks are held, that the fence's token is the lease's current token and the
//! lease is live: all of it in one statement ([`Dialect::fence_check`]), one round trip after
//! `BEGIN` (a document commit that runs alone carries the check in its own statement; see
//! `commit_statement.rs`). Only then do the store's statements run; they commit together or not at
//! all. On PostgreSQL such a statement, which writes only once its check found the fence live,
//! may also run as a transaction of its own, without `BEGIN` and `COMMIT`
//! ([`Inner::run_fenced_statement`]).

use fermata_store::{Fence, StoreError, StoreResult, UnixMillis};
use sqlx::any::AnyRow;
use sqlx::{Any, AnyConnection, Row};

use crate::Inner;
use crate::dialect::Dialect;
use crate::error::StoreContext;
use crate::write_transaction::WriteTransaction;

/// The statement of a fence check, rendered for one dialect.
#[derive(Debug)]
pub(crate) struct FenceStatements {
    check: String,
}

impl FenceStatements {
    pub(crate) fn new(dialect: Dialect) -> Self {
        FenceStatements {
            check: dialect.fence_check(),
        }
    }
}

/// A write transaction whose fence was checked. Dropping it without [`commit`] rolls it back.
///
/// [`commit`]: FencedTransaction::commit
#[derive(Debug)]
pub(crate) struct FencedTransaction {
    transaction: WriteTransaction,
    /// The database's clock when the fence was checked, for the write's own timestamps.
    pub(crate) now: UnixMillis,
    /// The fence checked, for the writes that check which documents it covers.
    pub(crate) fence: Fence,
}

impl FencedTransaction {
    pub(crate) fn conn(&mut self) -> &mut AnyConnection {
        &mut self.transaction
    }

    /// Runs one statement in the transaction; returns how many rows it changed.
    pub(crate) async fn execute<'q>(
        &mut self,
        query: sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>>,
        action: &str,
    ) -> StoreResult<u64> {
        Ok(query
            .execute(&mut *self.transaction)
            .await
            .context(action)?
            .rows_affected())
    }

    /// The transaction itself, for a gated write that runs its statements as an ordinary one.
    pub(crate) fn into_transaction(self) -> WriteTransaction {
        self.transaction
    }

    pub(crate) async fn commit(self, action: &str) -> StoreResult<()> {
        self.transaction.commit().await.context(action)
    }
}

impl Inner {
    /// Begins a fenced transaction for `fence`, failing with `Fenced` when its token is not the
    /// live token of its lease.
    pub(crate) async fn begin_fenced(
        &self,
        fence: &Fence,
        action: &str,
    ) -> StoreResult<FencedTransaction> {
        let mut transaction = self.begin_ungated(action).await?;
        let row = sqlx::query(&self.fence_sql.check)
            .bind(fence.lease.as_str())
            .bind(fence.token.0)
            .fetch_one(&mut *transaction)
            .await
            .context(action)?;
        let now: i64 = row.try_get(0).context(action)?;
        let live: i64 = row.try_get(1).context(action)?;
        self.fenced(transaction, fence, now, live, action).await
    }

    /// Begins a write transaction and runs `query`, a statement that carries its fence check
    /// ([`Dialect::fenced_head`], [`Dialect::fenced_answer`]): one round trip after `BEGIN`
    /// instead of two. On SQLite the transaction's clock is bound here, as the statement's last
    /// placeholder, once `BEGIN IMMEDIATE` holds the write lock. Answers the fenced transaction
    /// and the statement's first row, whose first two columns are `(now, live)`; `Fenced`, with
    /// the writes rolled back, when the token was not live.
    pub(crate) async fn begin_with_fenced_statement<'q>(
        &self,
        fence: &Fence,
        query: sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>>,
        action: &str,
    ) -> StoreResult<(FencedTransaction, AnyRow)> {
        let mut transaction = self.begin_ungated(action).await?;
        let query = match self.dialect {
            Dialect::Sqlite => query.bind(UnixMillis::now().0),
            Dialect::Postgres => query,
        };
        // All rows: a driver that stops at the first would leave SQLite's later statements
        // unrun.
        let row = query
            .fetch_all(&mut *transaction)
            .await
            .context(action)?
            .into_iter()
            .next()
            .ok_or_else(|| StoreError::corrupt("a fenced statement answered nothing"))?;
        let now: i64 = row.try_get(0).context(action)?;
        let live: i64 = row.try_get(1).context(action)?;
        let transaction = self.fenced(transaction, fence, now, live, action).await?;
        Ok((transaction, row))
    }

    /// Whether a statement that carries its fence check and writes only once it found the fence
    /// live may run as a transaction of its own ([`run_fenced_statement`]): on PostgreSQL,
    /// unless a fenced-write hook (tests) must run inside the transaction. SQLite's writes
    /// cannot wait for the check (its `WITH` cannot write): its statements write first and
    /// need the transaction to take the writes back.
    ///
    /// [`run_fenced_statement`]: Inner::run_fenced_statement
    pub(crate) fn runs_fenced_statements_alone(&self) -> bool {
        self.dialect == Dialect::Postgres && self.options.fenced_write_hook.is_none()
    }

    /// Runs `query`, a statement that carries its fence check ([`Dialect::fenced_head`]) and
    /// writes only once the check found the fence live, as a transaction of its own: one round
    /// trip, without `BEGIN` and `COMMIT`. The statement holds the lease row and the lease's
    /// advisory lock until it ends, as a fenced transaction does, and its writes are durable when
    /// it answers. Answers its first row, whose first two columns are `(now, live)`; `Fenced`
    /// when the token was not live (the statement wrote nothing). Only where
    /// [`runs_fenced_statements_alone`] says so.
    ///
    /// [`runs_fenced_statements_alone`]: Inner::runs_fenced_statements_alone
    pub(crate) async fn run_fenced_statement<'q>(
        &self,
        fence: &Fence,
        query: sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>>,
        action: &str,
    ) -> StoreResult<AnyRow> {
        debug_assert!(self.runs_fenced_statements_alone());
        let row = query.fetch_one(&self.writes).await.context(action)?;
        let live: i64 = row.try_get(1).context(action)?;
        check_live(fence, live, action)?;
        Ok(row)
    }

    /// The fenced transaction `transaction` is, once a check of `fence` answered `now` and
    /// `live` in it: `Fenced` unless the token was live.
    pub(crate) async fn fenced(
        &self,
        transaction: WriteTransaction,
        fence: &Fence,
        now: i64,
        live: i64,
        action: &str,
    ) -> StoreResult<FencedTransaction> {
        check_live(fence, live, action)?;
        if let Some(hook) = &self.options.fenced_write_hook {
            hook.inside(fence).await;
        }
        Ok(FencedTransaction {
            transaction,
            now: UnixMillis(now),
            fence: fence.clone(),
        })
    }
}

/// `Fenced` unless a fence check answered that `fence`'s token is live.
fn check_live(fence: &Fence, live: i64, action: &str) -> StoreResult<()> {
    if live == 1 {
        return Ok(());
    }
    Err(StoreError::fenced(format!(
        "{action}: token {} is not the live token of lease `{}`",
        fence.token, fence.lease
    )))
}
