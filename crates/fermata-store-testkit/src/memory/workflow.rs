//! The memory adapter's workflow store: runs, steps and hooks in maps, every call one critical
//! section, so claims are exclusive without further locking.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;

use super::MemoryStorage;
use fermata_store::claim::{QueueSlot, check_ttl, next_ready};
use fermata_store::error::{StoreError, StoreResult};
use fermata_store::time::UnixMillis;
use fermata_store::workflow::{
    Claim, ClaimedRun, Hook, HookDelivery, HookWait, JournaledError, NewRun, Run, RunClaim, RunId,
    RunState, StepRecord, StepState, StepUpdate, WorkflowStore, check_step_update,
};

/// Everything the workflow store keeps, in memory.
#[derive(Debug, Default)]
pub(super) struct Workflows {
    runs: BTreeMap<RunId, RunRow>,
    steps: BTreeMap<(RunId, String), StepRecord>,
    hooks: BTreeMap<(RunId, String), HookRow>,
}

/// A run with the queue fields the SQL adapter keeps in columns.
#[derive(Debug, Clone)]
struct RunRow {
    run: Run,
    /// The claim generation, and from when a worker may claim the run: see `ready_at` in the
    /// SQL migration.
    slot: QueueSlot,
    /// A hook arrived while the run was `running`; see [`WorkflowStore::suspend`].
    hook_arrived: bool,
}

/// A hook's wait and its delivery, either of which may come first.
#[derive(Debug, Clone, Default)]
struct HookRow {
    deadline: Option<UnixMillis>,
    timed_out: bool,
    delivered: Option<Hook>,
}

fn fenced(claim: &Claim) -> StoreError {
    StoreError::fenced(format!(
        "run {} is no longer held under claim generation {}",
        claim.run, claim.generation
    ))
}

impl RunRow {
    /// The run as read: claim and wake time derived from the queue fields.
    fn read(&self) -> Run {
        let mut run = self.run.clone();
        run.claim = match (&run.state, &self.run.claim, self.slot.ready_at) {
            (RunState::Running, Some(claim), Some(expires_at)) => Some(RunClaim {
                expires_at,
                ..claim.clone()
            }),
            _ => None,
        };
        run.wake_at = match run.state {
            RunState::Waiting => self.slot.ready_at,
            _ => None,
        };
        run
    }

    fn end_claim(&mut self, now: UnixMillis) {
        self.run.claim = None;
        self.hook_arrived = false;
        self.run.updated_at = now;
    }
}

impl Workflows {
    /// Whether `claim` is the claim the run is held under.
    fn holds(&self, claim: &Claim) -> bool {
        self.runs.get(&claim.run).is_some_and(|row| {
            row.run.state == RunState::Running && row.slot.generation == claim.generation
        })
    }

    /// The run held under `claim`, marked as written now, or `Fenced`.
    fn claimed(&mut self, claim: &Claim, now: UnixMillis) -> StoreResult<&mut RunRow> {
        match self.runs.get_mut(&claim.run) {
            Some(row)
                if row.run.state == RunState::Running
                    && row.slot.generation == claim.generation =>
            {
                row.run.updated_at = now;
                Ok(row)
            }
            _ => Err(fenced(claim)),
        }
    }

    fn record_step(
        &mut self,
        claim: &Claim,
        key: &str,
        update: &StepUpdate,
        now: UnixMillis,
    ) -> StoreResult<StepRecord> {
        if !self.holds(claim) {
            return Err(fenced(claim));
        }
        let slot = (claim.run.clone(), key.to_owned());
        check_step_update(&claim.run, key, self.steps.get(&slot), update)?;
        self.claimed(claim, now)?;
        let record = self.steps.entry(slot).or_insert_with(|| StepRecord {
            run: claim.run.clone(),
            key: key.to_owned(),
            state: StepState::Running,
            attempts: 0,
            output: None,
            error: None,
            started_at: now,
            heartbeat_at: now,
            terminal_at: None,
        });
        record.heartbeat_at = now;
        match update {
            StepUpdate::Started { attempt } => record.attempts = *attempt,
            StepUpdate::AttemptFailed { error } => record.error = Some(error.clone()),
            StepUpdate::Succeeded { output } => {
                record.state = StepState::Succeeded;
                record.output = Some(output.clone());
                record.error = None;
                record.terminal_at = Some(now);
            }
            StepUpdate::Failed { error } => {
                record.state = StepState::Failed;
                record.error = Some(error.clone());
                record.terminal_at = Some(now);
            }
        }
        Ok(record.clone())
    }

    fn await_hook(
        &mut self,
        claim: &Claim,
        key: &str,
        timeout: Option<Duration>,
        now: UnixMillis,
    ) -> StoreResult<HookWait> {
        self.claimed(claim, now)?;
        let row = self
            .hooks
            .entry((claim.run.clone(), key.to_owned()))
            .or_insert_with(|| HookRow {
                deadline: timeout.map(|timeout| now.plus(timeout)),
                ..HookRow::default()
            });
        if let Some(hook) = &row.delivered {
            return Ok(HookWait::Delivered(hook.clone()));
        }
        if row.timed_out {
            return Ok(HookWait::TimedOut);
        }
        match row.deadline {
            Some(deadline) if deadline <= now => {
                row.timed_out = true;
                Ok(HookWait::TimedOut)
            }
            deadline => Ok(HookWait::Waiting {
                wake_after: deadline.map(|deadline| deadline.since(now)),
            }),
        }
    }

    fn deliver_hook(
        &mut self,
        run: &RunId,
        key: &str,
        idempotency_key: &str,
        payload: &str,
        now: UnixMillis,
    ) -> StoreResult<HookDelivery> {
        let unavailable = || StoreError::missing(format!("run {run} is unavailable"));
        let Some(row) = self.runs.get_mut(run) else {
            return Err(unavailable());
        };
        let slot = (run.clone(), key.to_owned());
        if let Some(existing) = self.hooks.get(&slot) {
            if let Some(hook) = &existing.delivered {
                if hook.idempotency_key == idempotency_key {
                    return Ok(HookDelivery::AlreadyDelivered);
                }
                return Err(StoreError::conflict(format!(
                    "hook `{key}` of run {run} was delivered under another idempotency key"
                )));
            }
            if existing.timed_out {
                return Err(StoreError::conflict(format!(
                    "the wait for hook `{key}` of run {run} timed out"
                )));
            }
        }
        if row.run.state.is_terminal() {
            return Err(unavailable());
        }
        self.hooks.entry(slot).or_default().delivered = Some(Hook {
            run: run.clone(),
            key: key.to_owned(),
            idempotency_key: idempotency_key.to_owned(),
            payload: payload.to_owned(),
            delivered_at: now,
        });
        match row.run.state {
            RunState::Waiting if row.slot.ready_at.is_none_or(|ready| ready > now) => {
                row.slot.ready_at = Some(now);
            }
            RunState::Running => row.hook_arrived = true,
            _ => {}
        }
        row.run.updated_at = now;
        Ok(HookDelivery::Delivered)
    }
}

#[async_trait]
impl WorkflowStore for MemoryStorage {
    async fn create_run(&self, new: &NewRun) -> StoreResult<Run> {
        self.inner.gate("create run")?;
        let mut state = self.inner.state();
        let workflows = &mut state.workflows;
        if workflows.runs.contains_key(&new.id) {
            return Err(StoreError::conflict(format!("run {} exists", new.id)));
        }
        let now = UnixMillis::now();
        let row = RunRow {
            run: Run {
                id: new.id.clone(),
                workflow: new.workflow.clone(),
                input: new.input.clone(),
                state: RunState::Pending,
                claim: None,
                wake_at: None,
                created_at: now,
                updated_at: now,
                finished_at: None,
                output: None,
                error: None,
            },
            slot: QueueSlot::ready(now),
            hook_arrived: false,
        };
        let run = row.read();
        workflows.runs.insert(new.id.clone(), row);
        Ok(run)
    }

    async fn run(&self, id: &RunId) -> StoreResult<Option<Run>> {
        Ok(self.inner.state().workflows.runs.get(id).map(RunRow::read))
    }

    async fn claim_run(
        &self,
        worker: &str,
        workflows: &[String],
        ttl: Duration,
    ) -> StoreResult<Option<ClaimedRun>> {
        self.inner.gate("claim run")?;
        let ttl = check_ttl(ttl)?;
        let mut state = self.inner.state();
        let now = UnixMillis::now();
        let candidate = next_ready(
            state
                .workflows
                .runs
                .iter()
                .filter(|(_, row)| workflows.contains(&row.run.workflow))
                .map(|(id, row)| (id, &row.slot)),
            now,
        );
        let Some(id) = candidate else {
            return Ok(None);
        };
        let Some(row) = state.workflows.runs.get_mut(&id) else {
            return Ok(None);
        };
        let expires_at = row.slot.claim(now, ttl);
        row.hook_arrived = false;
        row.run.state = RunState::Running;
        row.run.updated_at = now;
        let claim = Claim {
            run: id,
            worker: worker.to_owned(),
            generation: row.slot.generation,
            expires_at,
        };
        row.run.claim = Some(RunClaim {
            worker: claim.worker.clone(),
            generation: claim.generation,
            expires_at: claim.expires_at,
        });
        Ok(Some(ClaimedRun {
            claim,
            run: row.read(),
        }))
    }

    async fn heartbeat(&self, claim: &Claim, ttl: Duration) -> StoreResult<Claim> {
        self.inner.gate("heartbeat")?;
        let ttl = check_ttl(ttl)?;
        let mut state = self.inner.state();
        let now = UnixMillis::now();
        let workflows = &mut state.workflows;
        let row = workflows.claimed(claim, now)?;
        row.slot.ready_at = Some(now.plus(ttl));
        for record in workflows.steps.values_mut() {
            if record.run == claim.run && record.state == StepState::Running {
                record.heartbeat_at = now;
            }
        }
        Ok(Claim {
            expires_at: now.plus(ttl),
            ..claim.clone()
        })
    }

    async fn step(&self, run: &RunId, key: &str) -> StoreResult<Option<StepRecord>> {
        let state = self.inner.state();
        let slot = (run.clone(), key.to_owned());
        Ok(state.workflows.steps.get(&slot).cloned())
    }

    async fn record_step(
        &self,
        claim: &Claim,
        key: &str,
        update: &StepUpdate,
    ) -> StoreResult<StepRecord> {
        self.inner.gate("record step")?;
        let mut state = self.inner.state();
        state
            .workflows
            .record_step(claim, key, update, UnixMillis::now())
    }

    async fn await_hook(
        &self,
        claim: &Claim,
        key: &str,
        timeout: Option<Duration>,
    ) -> StoreResult<HookWait> {
        self.inner.gate("await hook")?;
        let mut state = self.inner.state();
        state
            .workflows
            .await_hook(claim, key, timeout, UnixMillis::now())
    }

    async fn suspend(&self, claim: &Claim, wake_after: Option<Duration>) -> StoreResult<Run> {
        self.inner.gate("suspend")?;
        let mut state = self.inner.state();
        let now = UnixMillis::now();
        let row = state.workflows.claimed(claim, now)?;
        row.slot.ready_at = if row.hook_arrived {
            Some(now)
        } else {
            wake_after.map(|delay| now.plus(delay))
        };
        row.run.state = RunState::Waiting;
        row.end_claim(now);
        Ok(row.read())
    }

    async fn release(&self, claim: &Claim) -> StoreResult<Run> {
        self.inner.gate("release")?;
        let mut state = self.inner.state();
        let now = UnixMillis::now();
        let row = state.workflows.claimed(claim, now)?;
        row.slot.ready_at = Some(now);
        row.run.state = RunState::Waiting;
        row.end_claim(now);
        Ok(row.read())
    }

    async fn finish(
        &self,
        claim: &Claim,
        outcome: Result<String, JournaledError>,
    ) -> StoreResult<Run> {
        self.inner.gate("finish")?;
        let mut state = self.inner.state();
        let now = UnixMillis::now();
        let row = state.workflows.claimed(claim, now)?;
        match outcome {
            Ok(output) => {
                row.run.state = RunState::Succeeded;
                row.run.output = Some(output);
            }
            Err(error) => {
                row.run.state = RunState::Failed;
                row.run.error = Some(error);
            }
        }
        row.slot.ready_at = None;
        row.run.finished_at = Some(now);
        row.end_claim(now);
        Ok(row.read())
    }

    async fn deliver_hook(
        &self,
        run: &RunId,
        key: &str,
        idempotency_key: &str,
        payload: &str,
    ) -> StoreResult<HookDelivery> {
        self.inner.gate("deliver hook")?;
        let mut state = self.inner.state();
        state
            .workflows
            .deliver_hook(run, key, idempotency_key, payload, UnixMillis::now())
    }

    async fn hook(&self, run: &RunId, key: &str) -> StoreResult<Option<Hook>> {
        let state = self.inner.state();
        let slot = (run.clone(), key.to_owned());
        Ok(state
            .workflows
            .hooks
            .get(&slot)
            .and_then(|row| row.delivered.clone()))
    }

    async fn cancel_run(&self, id: &RunId) -> StoreResult<bool> {
        self.inner.gate("cancel run")?;
        let mut state = self.inner.state();
        let now = UnixMillis::now();
        match state.workflows.runs.get_mut(id) {
            Some(row) if !row.run.state.is_terminal() => {
                row.run.state = RunState::Cancelled;
                row.slot.ready_at = None;
                row.run.finished_at = Some(now);
                row.end_claim(now);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn purge_runs(&self, age: Duration) -> StoreResult<u64> {
        self.inner.gate("purge runs")?;
        let mut state = self.inner.state();
        let now = UnixMillis::now();
        let workflows = &mut state.workflows;
        let old: Vec<RunId> = workflows
            .runs
            .values()
            .filter(|row| {
                row.run
                    .finished_at
                    .is_some_and(|finished| finished.plus(age) < now)
            })
            .map(|row| row.run.id.clone())
            .collect();
        for id in &old {
            workflows.runs.remove(id);
        }
        workflows.steps.retain(|(run, _), _| !old.contains(run));
        workflows.hooks.retain(|(run, _), _| !old.contains(run));
        Ok(u64::try_from(old.len()).unwrap_or(u64::MAX))
    }
}
