//! Watching who may still do what, for connections that outlive the request that opened them.
//!
//! A live connection registers a [`Watching`] and re-checks its credential and its role each
//! time it is asked to. It is asked two ways:
//!
//! - in this process, at once: a logout, an API token revocation, a password or role change made
//!   through [`Accounts`], or a membership change (whose caller asks), asks the connections of
//!   the user concerned and waits until they have re-checked, so a revocation is in force before
//!   its request is answered;
//! - from anywhere else (another process, `fermata user passwd`, a row changed by hand): the
//!   access generation, a counter the database raises in the same transaction as every such
//!   change, is polled every [`POLL_EVERY`] while any connection is watched, and every watched
//!   connection is asked when it moves past the generation it last saw. One cheap read per
//!   interval, whatever the number of connections. A connection registers (reading the
//!   generation) before its access is checked, so a change made while it is being checked is
//!   not missed either.
//!
//! The poller runs only while something is watched: the first registration starts it and it
//! ends, within one interval, after the last one goes, so nothing outlives the connections.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fermata_store::{ErrorChain, FailureStreak, Storage, UserId};
use tokio::sync::{mpsc, oneshot};

use crate::AccountError;

/// How often the access generation is read while connections are watched: a change made by
/// another process reaches them within this, plus their re-check.
pub const POLL_EVERY: Duration = Duration::from_millis(250);

/// How long a request that revoked access waits for the connections it concerns.
const RECHECK_WAIT: Duration = Duration::from_secs(2);

/// A request to re-check, answered once the connection has re-checked (and, if it lost its
/// access, left its room).
pub type Recheck = oneshot::Sender<()>;

/// The registry of watched connections.
#[derive(Debug, Clone)]
pub struct AccessWatch {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    storage: Arc<dyn Storage>,
    watchers: Mutex<Watchers>,
    next: AtomicU64,
}

#[derive(Debug, Default)]
struct Watchers {
    by_id: HashMap<u64, Watcher>,
    /// Whether the poller task runs; set and cleared under this lock, so exactly one runs
    /// while anything is watched.
    polling: bool,
}

#[derive(Debug)]
struct Watcher {
    /// The user the connection acts for; absent for a client token's.
    user: Option<UserId>,
    recheck: mpsc::Sender<Recheck>,
    /// The access generation as of the connection's last check.
    seen: i64,
}

/// One watched connection: it receives re-check requests until dropped.
#[derive(Debug)]
pub struct Watching {
    id: u64,
    inner: Arc<Inner>,
    /// The requests to re-check, each to be answered when done.
    pub rechecks: mpsc::Receiver<Recheck>,
}

impl Watching {
    /// Records whom the connection acts for, once its caller is known, so changes to that
    /// user's access reach it at once.
    pub fn act_for(&self, user: Option<UserId>) {
        if let Some(watcher) = lock(&self.inner.watchers).by_id.get_mut(&self.id) {
            watcher.user = user;
        }
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        lock(&self.inner.watchers).by_id.remove(&self.id);
    }
}

fn lock(watchers: &Mutex<Watchers>) -> std::sync::MutexGuard<'_, Watchers> {
    watchers
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl AccessWatch {
    pub fn new(storage: Arc<dyn Storage>) -> Self {
        AccessWatch {
            inner: Arc::new(Inner {
                storage,
                watchers: Mutex::default(),
                next: AtomicU64::new(1),
            }),
        }
    }

    /// Registers a connection acting for `user` (none for a client token's), before its access
    /// is checked, starting the poller if it is not running.
    pub async fn watch(&self, user: Option<UserId>) -> Result<Watching, AccountError> {
        let seen = self
            .inner
            .storage
            .repositories()
            .access_generation()
            .await?;
        let id = self.inner.next.fetch_add(1, Ordering::Relaxed);
        // A connection has at most a few requests pending: one at a time is asked and answered.
        let (recheck, rechecks) = mpsc::channel(4);
        let start = {
            let mut watchers = lock(&self.inner.watchers);
            watchers.by_id.insert(
                id,
                Watcher {
                    user,
                    recheck,
                    seen,
                },
            );
            !std::mem::replace(&mut watchers.polling, true)
        };
        if start {
            tokio::spawn(poll(Arc::clone(&self.inner)));
        }
        Ok(Watching {
            id,
            inner: Arc::clone(&self.inner),
            rechecks,
        })
    }

    /// Asks the connections acting for `user` to re-check, and waits (bounded) until they have.
    pub async fn recheck_user(&self, user: &UserId) {
        ask(&self.inner, |watcher| watcher.user.as_ref() == Some(user)).await;
    }

    /// Asks every watched connection to re-check, and waits (bounded) until they have.
    pub async fn recheck_all(&self) {
        ask(&self.inner, |_| true).await;
    }

    /// How many connections are watched.
    pub fn watched(&self) -> usize {
        lock(&self.inner.watchers).by_id.len()
    }
}

async fn ask(inner: &Inner, concerned: impl Fn(&Watcher) -> bool) {
    let senders: Vec<mpsc::Sender<Recheck>> = lock(&inner.watchers)
        .by_id
        .values()
        .filter(|watcher| concerned(watcher))
        .map(|watcher| watcher.recheck.clone())
        .collect();
    wait_for(senders).await;
}

async fn wait_for(senders: Vec<mpsc::Sender<Recheck>>) {
    let waits = senders.into_iter().map(|sender| async move {
        let (done, finished) = oneshot::channel();
        // A connection that is gone, or busy with requests already, re-checks without this one.
        if sender.try_send(done).is_ok() {
            let _ = finished.await;
        }
    });
    let _ = tokio::time::timeout(RECHECK_WAIT, futures::future::join_all(waits)).await;
}

/// Reads the access generation every [`POLL_EVERY`] while anything is watched, and asks the
/// connections that last saw another generation to re-check.
async fn poll(inner: Arc<Inner>) {
    let mut failures = FailureStreak::default();
    loop {
        tokio::time::sleep(POLL_EVERY).await;
        {
            let mut watchers = lock(&inner.watchers);
            if watchers.by_id.is_empty() {
                watchers.polling = false;
                return;
            }
        }
        match inner.storage.repositories().access_generation().await {
            Ok(generation) => {
                if let Some(failed) = failures.succeeded() {
                    tracing::info!(failed, "the access generation can be read again");
                }
                let behind: Vec<mpsc::Sender<Recheck>> = lock(&inner.watchers)
                    .by_id
                    .values_mut()
                    .filter(|watcher| watcher.seen != generation)
                    .map(|watcher| {
                        watcher.seen = generation;
                        watcher.recheck.clone()
                    })
                    .collect();
                if !behind.is_empty() {
                    wait_for(behind).await;
                }
            }
            Err(error) if failures.failed() => {
                tracing::warn!(error = %ErrorChain(&error), "could not read the access generation; trying again while connections are open");
            }
            Err(error) => {
                tracing::debug!(error = %ErrorChain(&error), "could not read the access generation");
            }
        }
    }
}
