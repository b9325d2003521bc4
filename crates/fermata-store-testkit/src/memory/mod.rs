//! The memory adapter: every store held in process memory, for unit and contract tests.
//!
//! It is not a runtime storage driver. It follows the same contract as the SQL adapters: a
//! per-lease write gate stands in for PostgreSQL's row and advisory locks, so fenced writes under
//! one lease run one at a time and a takeover waits for a write in flight, while `peek` and
//! renewal never wait for a write.

mod accounts;
mod chat;
mod cluster;
mod collaboration;
mod history;
mod jobs;
mod lease;
mod media;
mod planner;
mod repository;
mod research;
mod schema;
mod search;
mod tenure;
mod workflow;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use fermata_store::StoreOptions;
use fermata_store::api_token::{ApiToken, ApiTokenId};
use fermata_store::error::{StoreError, StoreResult};
use fermata_store::lease::{Fence, LeaseName, LeaseRecord};
use fermata_store::machine::{Machine, MachineId};
use fermata_store::session::{SecretHash, SessionId};
use fermata_store::tenure::Tenure;
use fermata_store::time::UnixMillis;
use fermata_store::user::{User, UserId};

/// All stores, in memory.
#[derive(Debug, Clone)]
pub struct MemoryStorage {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The rows. Held only for short critical sections, never across an await.
    state: Mutex<State>,
    /// One gate per lease: held for the whole of a fenced write and by a takeover, so the two
    /// exclude each other, as the lease row lock does in PostgreSQL.
    write_gates: Mutex<HashMap<LeaseName, Arc<tokio::sync::Mutex<()>>>>,
    options: StoreOptions,
}

#[derive(Debug, Default)]
struct State {
    leases: HashMap<LeaseName, LeaseRecord>,
    announcements: cluster::Announcements,
    tenures: BTreeMap<(LeaseName, i64), Tenure>,
    users: BTreeMap<UserId, User>,
    sessions: HashMap<SessionId, accounts::SessionRow>,
    api_tokens: HashMap<ApiTokenId, (ApiToken, SecretHash)>,
    machines: HashMap<MachineId, (Machine, SecretHash)>,
    documents: collaboration::Documents,
    schema: schema::SchemaTables,
    workflows: workflow::Workflows,
    jobs: jobs::Jobs,
    research: research::Research,
    history: history::Versions,
    chat: chat::ChatTables,
    planner: planner::PlannerTables,
    media: media::Media,
    repositories: repository::Repositories,
    /// Raised by every change of who may do what, as the SQL adapters' triggers raise theirs.
    access_generation: i64,
}

impl MemoryStorage {
    pub fn new(options: StoreOptions) -> Self {
        MemoryStorage {
            inner: Arc::new(Inner {
                state: Mutex::default(),
                write_gates: Mutex::default(),
                options,
            }),
        }
    }
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind; keep serving it.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write_gate(&self, lease: &LeaseName) -> Arc<tokio::sync::Mutex<()>> {
        let mut gates = self
            .write_gates
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(gates.entry(lease.clone()).or_default())
    }

    /// Refuses a write that names no fence while the store gates writes on a writer fence that
    /// is empty or no longer the live token of its lease, as the SQL adapters do in the write's
    /// transaction; see [`fermata_store::writer_fence`].
    fn gate(&self, action: &str) -> StoreResult<()> {
        if let Some(writer) = &self.options.writer_fence {
            let fence = writer.gate(action)?;
            self.state().check_fence(&fence, UnixMillis::now())?;
        }
        Ok(())
    }

    /// Runs `write` as a fenced write: under the lease's write gate, only while `fence` names the
    /// current token of a live lease, with the state changes applied in one critical section.
    async fn fenced<T>(
        &self,
        fence: &Fence,
        write: impl FnOnce(&mut State, UnixMillis) -> StoreResult<T>,
    ) -> StoreResult<T> {
        let gate = self.write_gate(&fence.lease);
        let _in_flight = gate.lock().await;
        self.state().check_fence(fence, UnixMillis::now())?;
        if let Some(hook) = &self.options.fenced_write_hook {
            hook.inside(fence).await;
        }
        write(&mut self.state(), UnixMillis::now())
    }
}

/// Removes the rows `doomed` picks; returns how many went.
fn remove_where<K: Ord, V>(rows: &mut BTreeMap<K, V>, doomed: impl Fn(&K, &V) -> bool) -> u64 {
    let before = rows.len();
    rows.retain(|key, row| !doomed(key, row));
    (before - rows.len()) as u64
}

impl State {
    fn access_changed(&mut self) {
        self.access_generation += 1;
    }

    fn check_fence(&self, fence: &Fence, now: UnixMillis) -> StoreResult<()> {
        match self.leases.get(&fence.lease) {
            Some(lease)
                if lease.token == fence.token && !lease.released && lease.expires_at > now =>
            {
                Ok(())
            }
            _ => Err(StoreError::fenced(format!(
                "token {} is not the live token of lease `{}`",
                fence.token, fence.lease
            ))),
        }
    }
}

fermata_store::impl_storage!(MemoryStorage, driver = |_memory| "memory");
