//! The memory adapter's job store: jobs in a map with the shared queue slot of `claim.rs`, each
//! write one fenced critical section, so claims are exclusive without further locking.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;

use super::{MemoryStorage, State};
use fermata_store::channel::ChannelId;
use fermata_store::claim::{QueueSlot, check_ttl, next_ready};
use fermata_store::error::StoreResult;
use fermata_store::jobs::{
    ClaimedJob, Job, JobClaim, JobHolder, JobId, JobKind, JobState, JobStore, NewJob, Settlement,
    check_new_job, check_repeated_enqueue, check_settlement, fenced, repeated_settlement,
};
use fermata_store::lease::{Fence, FencingToken};
use fermata_store::time::UnixMillis;

/// Everything the job store keeps, in memory.
#[derive(Debug, Default)]
pub(super) struct Jobs {
    rows: BTreeMap<JobId, JobRow>,
    /// The newest target generation of each document and kind.
    targets: BTreeMap<(ChannelId, JobKind), i64>,
    /// Each document's background-job channel revision.
    revisions: BTreeMap<ChannelId, i64>,
    /// Enqueue order, for listing oldest first.
    enqueued: u64,
}

#[derive(Debug, Clone)]
struct JobRow {
    job: Job,
    slot: QueueSlot,
    order: u64,
}

impl JobRow {
    fn read(&self) -> Job {
        let mut job = self.job.clone();
        job.claim_generation = self.slot.generation;
        job.ready_at = self.slot.ready_at.filter(|_| job.state == JobState::Queued);
        job.holder = match (&job.holder, job.state, self.slot.ready_at) {
            (Some(holder), JobState::Running, Some(expires_at)) => Some(JobHolder {
                worker: holder.worker.clone(),
                expires_at,
            }),
            _ => None,
        };
        job
    }

    fn written(&mut self, now: UnixMillis, token: FencingToken) {
        self.job.updated_at = now;
        self.job.fencing_token = token;
    }

    fn settle(&mut self, state: JobState, now: UnixMillis) {
        self.job.state = state;
        self.job.holder = None;
        self.slot.ready_at = None;
        self.job.settled_at = Some(now);
    }
}

impl Jobs {
    fn bump(&mut self, channel: &ChannelId) {
        *self.revisions.entry(channel.clone()).or_default() += 1;
    }

    pub(super) fn get(&self, id: &JobId) -> Option<Job> {
        self.rows.get(id).map(JobRow::read)
    }

    /// Enqueues `new` under `fence`; the caller checked its document exists.
    pub(super) fn enqueue(
        &mut self,
        new: &NewJob,
        now: UnixMillis,
        token: FencingToken,
    ) -> StoreResult<Job> {
        check_new_job(new)?;
        if let Some(existing) = self.rows.get(&new.id) {
            check_repeated_enqueue(&existing.job, new)?;
            return Ok(existing.read());
        }
        let target = self
            .targets
            .entry((new.channel.clone(), new.kind.clone()))
            .or_default();
        *target += 1;
        let target_generation = *target;
        self.enqueued += 1;
        let row = JobRow {
            job: Job {
                id: new.id.clone(),
                channel: new.channel.clone(),
                kind: new.kind.clone(),
                input: new.input.clone(),
                state: JobState::Queued,
                target_generation,
                claim_generation: fermata_store::claim::ClaimGeneration(0),
                holder: None,
                attempts: 0,
                failures: 0,
                last_failure: None,
                output: None,
                won: false,
                ready_at: None,
                created_at: now,
                updated_at: now,
                settled_at: None,
                fencing_token: token,
            },
            slot: QueueSlot::ready(now),
            order: self.enqueued,
        };
        let job = row.read();
        self.rows.insert(new.id.clone(), row);
        self.bump(&new.channel);
        Ok(job)
    }

    fn held(&mut self, claim: &JobClaim) -> StoreResult<&mut JobRow> {
        match self.rows.get_mut(&claim.job) {
            Some(row)
                if row.job.state == JobState::Running
                    && row.slot.generation == claim.generation =>
            {
                Ok(row)
            }
            _ => Err(fenced(claim)),
        }
    }

    fn settle(
        &mut self,
        claim: &JobClaim,
        settlement: &Settlement,
        now: UnixMillis,
        token: FencingToken,
    ) -> StoreResult<Job> {
        check_settlement(settlement)?;
        let Some(row) = self.rows.get(&claim.job) else {
            return Err(fenced(claim));
        };
        if row.job.state != JobState::Running || row.slot.generation != claim.generation {
            return repeated_settlement(&row.read(), claim, settlement);
        }
        let newest = self
            .targets
            .get(&(row.job.channel.clone(), row.job.kind.clone()))
            .copied();
        let row = self.held(claim)?;
        match settlement {
            Settlement::Complete { artifact } => {
                row.job.output = Some(artifact.clone());
                row.job.won = newest == Some(row.job.target_generation);
                row.settle(JobState::Completed, now);
            }
            Settlement::Fail {
                failure,
                retry_after,
            } => {
                row.job.failures += 1;
                row.job.last_failure = Some(*failure);
                match retry_after {
                    Some(delay) => {
                        row.job.state = JobState::Queued;
                        row.job.holder = None;
                        row.slot.ready_at = Some(now.plus(*delay));
                    }
                    None => row.settle(JobState::Failed, now),
                }
            }
        }
        row.written(now, token);
        let job = row.read();
        self.bump(&job.channel);
        Ok(job)
    }

    /// Forgets every job of a deleted document.
    pub(super) fn forget_channel(&mut self, id: &ChannelId) {
        self.rows.retain(|_, row| &row.job.channel != id);
        self.targets.retain(|(channel, _), _| channel != id);
        self.revisions.remove(id);
    }
}

/// Enqueues a job on `state` for a document that exists: shared with the research store.
pub(super) fn enqueue_on(
    state: &mut State,
    job: &NewJob,
    now: UnixMillis,
    token: FencingToken,
) -> StoreResult<Job> {
    state.documents.require(&job.channel)?;
    state.jobs.enqueue(job, now, token)
}

#[async_trait]
impl JobStore for MemoryStorage {
    async fn enqueue(&self, fence: &Fence, job: &NewJob) -> StoreResult<Job> {
        self.inner
            .fenced(fence, |state, now| enqueue_on(state, job, now, fence.token))
            .await
    }

    async fn job(&self, id: &JobId) -> StoreResult<Option<Job>> {
        Ok(self.inner.state().jobs.get(id))
    }

    async fn jobs_of(&self, channel: &ChannelId) -> StoreResult<Vec<Job>> {
        let state = self.inner.state();
        let mut rows: Vec<&JobRow> = state
            .jobs
            .rows
            .values()
            .filter(|row| &row.job.channel == channel)
            .collect();
        rows.sort_by_key(|row| row.order);
        Ok(rows.into_iter().map(JobRow::read).collect())
    }

    async fn latest_won(&self, channel: &ChannelId, kind: &JobKind) -> StoreResult<Option<Job>> {
        let state = self.inner.state();
        Ok(state
            .jobs
            .rows
            .values()
            .filter(|row| &row.job.channel == channel && &row.job.kind == kind && row.job.won)
            .max_by_key(|row| row.job.target_generation)
            .map(JobRow::read))
    }

    async fn channel_revision(&self, channel: &ChannelId) -> StoreResult<i64> {
        Ok(self
            .inner
            .state()
            .jobs
            .revisions
            .get(channel)
            .copied()
            .unwrap_or(0))
    }

    async fn claim(
        &self,
        fence: &Fence,
        worker: &str,
        kinds: &[JobKind],
        ttl: Duration,
    ) -> StoreResult<Option<ClaimedJob>> {
        let ttl = check_ttl(ttl)?;
        self.inner
            .fenced(fence, |state, now| {
                let jobs = &mut state.jobs;
                let candidate = next_ready(
                    jobs.rows
                        .iter()
                        .filter(|(_, row)| kinds.contains(&row.job.kind))
                        .map(|(id, row)| (id, &row.slot)),
                    now,
                );
                let Some(row) = candidate.and_then(|id| jobs.rows.get_mut(&id)) else {
                    return Ok(None);
                };
                let expires_at = row.slot.claim(now, ttl);
                row.job.state = JobState::Running;
                row.job.attempts += 1;
                row.job.holder = Some(JobHolder {
                    worker: worker.to_owned(),
                    expires_at,
                });
                row.written(now, fence.token);
                let job = row.read();
                jobs.bump(&job.channel);
                Ok(Some(ClaimedJob {
                    claim: JobClaim {
                        job: job.id.clone(),
                        worker: worker.to_owned(),
                        generation: job.claim_generation,
                        expires_at,
                    },
                    job,
                }))
            })
            .await
    }

    async fn heartbeat(
        &self,
        fence: &Fence,
        claim: &JobClaim,
        ttl: Duration,
    ) -> StoreResult<JobClaim> {
        let ttl = check_ttl(ttl)?;
        self.inner
            .fenced(fence, |state, now| {
                let row = state.jobs.held(claim)?;
                let expires_at = now.plus(ttl);
                row.slot.ready_at = Some(expires_at);
                row.written(now, fence.token);
                let channel = row.job.channel.clone();
                state.jobs.bump(&channel);
                Ok(JobClaim {
                    expires_at,
                    ..claim.clone()
                })
            })
            .await
    }

    async fn settle(
        &self,
        fence: &Fence,
        claim: &JobClaim,
        settlement: &Settlement,
    ) -> StoreResult<Job> {
        self.inner
            .fenced(fence, |state, now| {
                state.jobs.settle(claim, settlement, now, fence.token)
            })
            .await
    }

    async fn cancel(&self, fence: &Fence, id: &JobId) -> StoreResult<bool> {
        self.inner
            .fenced(fence, |state, now| {
                let jobs = &mut state.jobs;
                let Some(row) = jobs.rows.get_mut(id) else {
                    return Err(fermata_store::jobs::no_such_job(id));
                };
                if row.job.state.is_terminal() {
                    return Ok(false);
                }
                row.settle(JobState::Cancelled, now);
                row.written(now, fence.token);
                let channel = row.job.channel.clone();
                jobs.bump(&channel);
                Ok(true)
            })
            .await
    }
}
