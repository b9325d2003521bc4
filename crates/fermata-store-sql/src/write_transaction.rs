//! Write transactions: every store write runs in one, begun on the pool writes use, and on SQLite
//! each holds the process's turn to write while it runs.
//!
//! SQLite has one writer at a time. Write transactions take turns in the order they asked (a
//! fair mutex), instead of meeting at `BEGIN IMMEDIATE` and polling for the lock in the busy
//! handler's sleeps (1, 2, 5, 10 ms...), which a waiting write would add to its latency. The
//! writes' pool keeps two connections: the pool checks a connection it takes back before anyone
//! may use it again (one more hand-off to SQLite's connection thread), and with a second one the
//! next writer begins at once instead of waiting for that check. A transaction dropped without a
//! commit hands its rollback to its connection's thread as the turn passes on; the next writer's
//! `BEGIN IMMEDIATE` waits the moment it takes in the busy handler.
//!
//! On PostgreSQL writes begin on the shared pool and need no turn: row locks order them.
//!
//! Every transaction begins on a task of its own ([`begin_on_task`]): sqlx 0.8 leaves a
//! PostgreSQL session inside the transaction, with nothing queued to end it, when a `BEGIN` in
//! flight is cancelled (its guard rolls back only once the `BEGIN` was answered), and the pool
//! then lends that session, its locks held, to the next borrower. A caller may be cancelled (a
//! timeout, a client that went away); the task is not, and a transaction it began for a caller
//! that is gone is dropped, which rolls it back.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::Duration;

use std::borrow::Cow;

use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyConnection, Transaction};
use tokio::sync::{Mutex, OwnedMutexGuard};

/// Whose turn it is to write, where the database takes one writer at a time.
pub(crate) type WriteTurns = Option<Arc<Mutex<()>>>;

/// A write transaction and, on SQLite, the turn it holds. Dropping it without [`commit`] rolls
/// it back. It dereferences to the connection, so `&mut *tx` runs a statement in it.
///
/// [`commit`]: WriteTransaction::commit
#[derive(Debug)]
pub(crate) struct WriteTransaction {
    // Declared first so it drops first: its rollback is queued before the turn passes on.
    transaction: Transaction<'static, Any>,
    _turn: Option<OwnedMutexGuard<()>>,
}

impl WriteTransaction {
    /// Waits for the turn (where there is one), then begins `begin` on a connection of `pool`.
    /// A turn not given within `patience` fails as the pool's own wait does
    /// (`PoolTimedOut`): a writer that froze holding its turn makes the others fail as
    /// unavailable rather than queue for ever.
    pub(crate) async fn begin(
        pool: &sqlx::AnyPool,
        turns: &WriteTurns,
        begin: &'static str,
        patience: Duration,
    ) -> Result<Self, sqlx::Error> {
        let turn = match turns {
            Some(turns) => Some(
                tokio::time::timeout(patience, Arc::clone(turns).lock_owned())
                    .await
                    .map_err(|_| sqlx::Error::PoolTimedOut)?,
            ),
            None => None,
        };
        let connection = pool.acquire().await?;
        Ok(WriteTransaction {
            transaction: begin_on_task(connection, begin).await?,
            _turn: turn,
        })
    }

    pub(crate) async fn commit(self) -> Result<(), sqlx::Error> {
        self.transaction.commit().await
    }

    pub(crate) async fn rollback(self) -> Result<(), sqlx::Error> {
        self.transaction.rollback().await
    }
}

impl Deref for WriteTransaction {
    type Target = AnyConnection;

    fn deref(&self) -> &AnyConnection {
        &self.transaction
    }
}

impl DerefMut for WriteTransaction {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        &mut self.transaction
    }
}

/// Begins a transaction with `statement` on `connection`, on a task of its own so that the
/// caller's cancellation cannot cut the `BEGIN` short (see the module documentation).
pub(crate) async fn begin_on_task(
    connection: PoolConnection<Any>,
    statement: &'static str,
) -> Result<Transaction<'static, Any>, sqlx::Error> {
    tokio::spawn(Transaction::begin(
        connection,
        Some(Cow::Borrowed(statement)),
    ))
    .await
    .map_err(|_| sqlx::Error::WorkerCrashed)?
}
