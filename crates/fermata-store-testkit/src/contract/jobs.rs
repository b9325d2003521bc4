//! Contract cases for background jobs: enqueueing, claims under the writer lease, takeover,
//! settlement, target supersession and the background-job channel revision.

use std::sync::Arc;
use std::time::Duration;

use super::lease::{grant, name, plain};
use super::{Harness, PATIENCE};
use fermata_store::channel::{ChannelId, NewChannel, Repository};
use fermata_store::error::ErrorKind;
use fermata_store::jobs::{
    ClaimedJob, Job, JobFailure, JobId, JobKind, JobState, NewJob, Settlement,
};
use fermata_store::lease::Fence;
use fermata_store::{Channel, Storage};

/// Long enough never to expire during a case.
pub(super) const LONG: Duration = Duration::from_secs(3600);
/// Short enough to expire within a case.
const SHORT: Duration = Duration::from_millis(300);

/// A store with the writer lease and one document.
pub(super) struct Rig {
    pub(super) store: Arc<dyn Storage>,
    pub(super) fence: Fence,
    pub(super) doc: Channel,
}

pub(super) fn kind(text: &str) -> JobKind {
    JobKind::new(text).unwrap()
}

pub(super) fn summary() -> JobKind {
    kind("document-summary@1")
}

impl Rig {
    pub(super) async fn open(harness: &dyn Harness) -> Self {
        let store = plain(harness).await;
        let fence = grant(&*store, "writer", LONG).await.fence();
        Rig {
            doc: create_doc(&*store, &fence, None).await,
            store,
            fence,
        }
    }

    pub(super) async fn another_doc(&self, parent: Option<&Channel>) -> Channel {
        create_doc(&*self.store, &self.fence, parent).await
    }

    pub(super) fn new_job(channel: &Channel, kind: &JobKind) -> NewJob {
        NewJob {
            id: JobId::random(),
            channel: channel.id.clone(),
            kind: kind.clone(),
            input: r#"{"n":1}"#.to_owned(),
        }
    }

    pub(super) async fn enqueue(&self, channel: &Channel, kind: &JobKind) -> Job {
        self.store
            .jobs()
            .enqueue(&self.fence, &Rig::new_job(channel, kind))
            .await
            .unwrap()
    }

    pub(super) async fn claim(&self, worker: &str, kind: &JobKind, ttl: Duration) -> ClaimedJob {
        self.store
            .jobs()
            .claim(&self.fence, worker, std::slice::from_ref(kind), ttl)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{worker} found no ready job"))
    }

    pub(super) async fn complete(&self, claimed: &ClaimedJob, artifact: &str) -> Job {
        self.store
            .jobs()
            .settle(
                &self.fence,
                &claimed.claim,
                &Settlement::Complete {
                    artifact: artifact.to_owned(),
                },
            )
            .await
            .unwrap()
    }

    pub(super) async fn read(&self, id: &JobId) -> Job {
        self.store.jobs().job(id).await.unwrap().unwrap()
    }

    /// Releases the writer lease this rig's fence names, so the fence is stale from now on.
    pub(super) async fn release_the_lease(&self) {
        let record = self
            .store
            .leases()
            .peek(&name())
            .await
            .unwrap()
            .record
            .unwrap();
        let held = fermata_store::Lease {
            name: record.name,
            token: record.token,
            holder: record.holder,
            expires_at: record.expires_at,
        };
        self.store.leases().release(&held).await.unwrap();
    }

    /// Archives and deletes the rig's document.
    pub(super) async fn delete_the_document(&self) {
        let collaboration = self.store.collaboration();
        collaboration
            .archive(&self.fence, &self.doc.id)
            .await
            .unwrap();
        collaboration
            .delete_archived(&self.fence, &self.doc.id)
            .await
            .unwrap();
    }

    /// The document's children, archived ones included.
    pub(super) async fn children(&self) -> Vec<Channel> {
        self.store
            .collaboration()
            .children_of(&self.doc.id, true)
            .await
            .unwrap()
    }

    async fn revision(&self, channel: &Channel) -> i64 {
        self.store
            .jobs()
            .channel_revision(&channel.id)
            .await
            .unwrap()
    }
}

async fn create_doc(store: &dyn Storage, fence: &Fence, parent: Option<&Channel>) -> Channel {
    store
        .collaboration()
        .create_channel(
            fence,
            &NewChannel {
                id: ChannelId::random(),
                repository: Repository::new("acme/app").unwrap(),
                title: "Doc".to_owned(),
                parent: parent.map(|p| p.id.clone()),
            },
        )
        .await
        .unwrap()
}

fn fail(failure: JobFailure, retry_after: Option<Duration>) -> Settlement {
    Settlement::Fail {
        failure,
        retry_after,
    }
}

pub async fn jobs_are_enqueued_per_document_and_repeat_by_id(harness: &dyn Harness) {
    let rig = Rig::open(harness).await;
    let jobs = rig.store.jobs();
    let new = Rig::new_job(&rig.doc, &summary());
    let job = jobs.enqueue(&rig.fence, &new).await.unwrap();
    assert_eq!(job.state, JobState::Queued);
    assert_eq!(job.target_generation, 1);
    assert_eq!(job.claim_generation.0, 0);
    assert_eq!((job.attempts, job.failures), (0, 0));
    assert_eq!(job.fencing_token, rig.fence.token);
    assert!(job.holder.is_none() && job.output.is_none() && !job.won);
    assert!(job.ready_at.is_some());
    assert_eq!(jobs.enqueue(&rig.fence, &new).await.unwrap(), job);
    let other_input = NewJob {
        input: r#"{"n":2}"#.to_owned(),
        ..new.clone()
    };
    assert_eq!(
        jobs.enqueue(&rig.fence, &other_input)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Conflict
    );
    let nowhere = NewJob {
        id: JobId::random(),
        channel: ChannelId::random(),
        ..new.clone()
    };
    assert_eq!(
        jobs.enqueue(&rig.fence, &nowhere).await.unwrap_err().kind(),
        ErrorKind::Missing
    );
    let not_json = NewJob {
        id: JobId::random(),
        input: "{".to_owned(),
        ..new
    };
    assert_eq!(
        jobs.enqueue(&rig.fence, &not_json)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Invalid
    );
    assert_eq!(jobs.jobs_of(&rig.doc.id).await.unwrap(), vec![job]);
}

/// `workers` workers claim at once, each at most one job; returns what they got.
async fn race_for_jobs(rig: &Rig, workers: usize) -> Vec<ClaimedJob> {
    let start = Arc::new(tokio::sync::Barrier::new(workers));
    let mut tasks = Vec::new();
    for worker in 0..workers {
        let store = Arc::clone(&rig.store);
        let fence = rig.fence.clone();
        let start = Arc::clone(&start);
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            store
                .jobs()
                .claim(&fence, &format!("worker-{worker}"), &[summary()], LONG)
                .await
                .unwrap()
        }));
    }
    let mut claims = Vec::new();
    for task in tasks {
        claims.extend(task.await.unwrap());
    }
    claims
}

pub async fn only_one_of_racing_workers_claims_a_job(harness: &dyn Harness) {
    let rig = Rig::open(harness).await;
    let job = rig.enqueue(&rig.doc, &summary()).await;
    let claims = race_for_jobs(&rig, 8).await;
    assert_eq!(claims.len(), 1, "{claims:?}");
    let claimed = &claims[0];
    assert_eq!(claimed.claim.job, job.id);
    assert_eq!(claimed.claim.generation.0, 1);
    assert_eq!(claimed.job.state, JobState::Running);
    assert_eq!(claimed.job.attempts, 1);
    let holder = claimed
        .job
        .holder
        .as_ref()
        .expect("a running job has a holder");
    assert_eq!(holder.worker, claimed.claim.worker);
    assert_eq!(holder.expires_at, claimed.claim.expires_at);
    assert_eq!(rig.read(&job.id).await, claimed.job);
}

pub async fn racing_workers_claim_distinct_jobs(harness: &dyn Harness) {
    let rig = Rig::open(harness).await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(rig.enqueue(&rig.doc, &summary()).await.id);
    }
    rig.enqueue(&rig.doc, &kind("other-kind")).await;
    let claims = race_for_jobs(&rig, 12).await;
    let mut claimed: Vec<JobId> = claims.iter().map(|c| c.claim.job.clone()).collect();
    claimed.sort();
    ids.sort();
    assert_eq!(claimed, ids, "each job of the kind is claimed exactly once");
    assert!(
        rig.store
            .jobs()
            .claim(&rig.fence, "late", &[summary()], LONG)
            .await
            .unwrap()
            .is_none()
    );
}

pub async fn an_expired_job_claim_is_taken_over_and_the_old_claim_is_fenced(harness: &dyn Harness) {
    let rig = Rig::open(harness).await;
    let job = rig.enqueue(&rig.doc, &summary()).await;
    let first = rig.claim("first", &summary(), SHORT).await;
    assert!(
        rig.store
            .jobs()
            .claim(&rig.fence, "early", &[summary()], LONG)
            .await
            .unwrap()
            .is_none(),
        "a live claim is not taken over"
    );
    let jobs = rig.store.jobs();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let second = loop {
        if let Some(claimed) = jobs
            .claim(&rig.fence, "second", &[summary()], LONG)
            .await
            .unwrap()
        {
            break claimed;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "gave up waiting for the expired claim to be taken over"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(second.claim.job, job.id);
    assert_eq!(second.claim.generation.0, 2);
    assert_eq!(second.job.attempts, 2);
    let heartbeat = jobs.heartbeat(&rig.fence, &first.claim, LONG).await;
    assert_eq!(heartbeat.unwrap_err().kind(), ErrorKind::Fenced);
    let late = jobs
        .settle(
            &rig.fence,
            &first.claim,
            &Settlement::Complete {
                artifact: "{}".to_owned(),
            },
        )
        .await;
    assert_eq!(late.unwrap_err().kind(), ErrorKind::Fenced);
    let beat = jobs
        .heartbeat(&rig.fence, &second.claim, LONG)
        .await
        .unwrap();
    assert!(beat.expires_at >= second.claim.expires_at);
    let done = rig.complete(&second, r#"{"ok":true}"#).await;
    assert_eq!(done.state, JobState::Completed);
    assert_eq!(done.claim_generation.0, 2);
}

pub async fn job_writes_under_a_lost_lease_are_fenced(harness: &dyn Harness) {
    let rig = Rig::open(harness).await;
    let queued = rig.enqueue(&rig.doc, &summary()).await;
    rig.enqueue(&rig.doc, &summary()).await;
    let claimed = rig.claim("worker", &summary(), LONG).await;
    rig.release_the_lease().await;
    let successor = grant(&*rig.store, "successor", LONG).await.fence();
    let jobs = rig.store.jobs();
    let stale = &rig.fence;
    let kinds = [summary()];
    let outcomes = [
        jobs.enqueue(stale, &Rig::new_job(&rig.doc, &summary()))
            .await
            .map(|_| ()),
        jobs.claim(stale, "late", &kinds, LONG).await.map(|_| ()),
        jobs.heartbeat(stale, &claimed.claim, LONG)
            .await
            .map(|_| ()),
        jobs.settle(
            stale,
            &claimed.claim,
            &Settlement::Complete {
                artifact: "{}".to_owned(),
            },
        )
        .await
        .map(|_| ()),
        jobs.cancel(stale, &queued.id).await.map(|_| ()),
    ];
    for outcome in outcomes {
        assert_eq!(outcome.unwrap_err().kind(), ErrorKind::Fenced);
    }
    assert_eq!(rig.read(&claimed.claim.job).await, claimed.job);
    assert_eq!(
        rig.store.jobs().jobs_of(&rig.doc.id).await.unwrap().len(),
        2
    );
    let done = jobs
        .settle(
            &successor,
            &claimed.claim,
            &Settlement::Complete {
                artifact: "{}".to_owned(),
            },
        )
        .await
        .unwrap();
    assert_eq!(done.fencing_token, successor.token);
}

pub async fn job_settlement_is_idempotent_and_a_different_one_conflicts(harness: &dyn Harness) {
    let rig = Rig::open(harness).await;
    let jobs = rig.store.jobs();
    rig.enqueue(&rig.doc, &summary()).await;
    let claimed = rig.claim("worker", &summary(), LONG).await;
    let done = rig.complete(&claimed, r#"{"text":"a"}"#).await;
    assert_eq!(done.state, JobState::Completed);
    assert_eq!(done.output.as_deref(), Some(r#"{"text":"a"}"#));
    assert!(done.holder.is_none() && done.settled_at.is_some());
    assert_eq!(rig.complete(&claimed, r#"{"text":"a"}"#).await, done);
    let other = Settlement::Complete {
        artifact: r#"{"text":"b"}"#.to_owned(),
    };
    let conflict = jobs.settle(&rig.fence, &claimed.claim, &other).await;
    assert_eq!(conflict.unwrap_err().kind(), ErrorKind::Conflict);
    let failure = fail(JobFailure::GeneratorFailed, None);
    let conflict = jobs.settle(&rig.fence, &claimed.claim, &failure).await;
    assert_eq!(conflict.unwrap_err().kind(), ErrorKind::Conflict);
    assert_eq!(rig.read(&done.id).await, done);

    // A failed attempt with a retry queues the job again; a repeat returns it as recorded.
    let job = rig.enqueue(&rig.doc, &summary()).await;
    let first = rig.claim("worker", &summary(), LONG).await;
    let retry = fail(JobFailure::TimedOut, Some(Duration::ZERO));
    let queued = jobs.settle(&rig.fence, &first.claim, &retry).await.unwrap();
    assert_eq!(queued.state, JobState::Queued);
    assert_eq!(queued.failures, 1);
    assert_eq!(queued.last_failure, Some(JobFailure::TimedOut));
    assert_eq!(
        jobs.settle(&rig.fence, &first.claim, &retry).await.unwrap(),
        queued
    );
    let second = rig.claim("worker", &summary(), LONG).await;
    assert_eq!(second.claim.job, job.id);
    assert_eq!(second.claim.generation.0, 2);
    let stale = jobs.settle(&rig.fence, &first.claim, &retry).await;
    assert_eq!(stale.unwrap_err().kind(), ErrorKind::Fenced);
    let failed = jobs
        .settle(&rig.fence, &second.claim, &failure)
        .await
        .unwrap();
    assert_eq!(failed.state, JobState::Failed);
    assert_eq!((failed.attempts, failed.failures), (2, 2));
    assert_eq!(failed.last_failure, Some(JobFailure::GeneratorFailed));
    assert!(failed.output.is_none() && !failed.won);
    assert_eq!(
        jobs.settle(&rig.fence, &second.claim, &failure)
            .await
            .unwrap(),
        failed
    );

    // A cancelled job fences out the worker holding it.
    rig.enqueue(&rig.doc, &summary()).await;
    let held = rig.claim("worker", &summary(), LONG).await;
    assert!(jobs.cancel(&rig.fence, &held.claim.job).await.unwrap());
    assert!(!jobs.cancel(&rig.fence, &held.claim.job).await.unwrap());
    let after = jobs
        .settle(
            &rig.fence,
            &held.claim,
            &Settlement::Complete {
                artifact: "{}".to_owned(),
            },
        )
        .await;
    assert_eq!(after.unwrap_err().kind(), ErrorKind::Fenced);
    assert_eq!(rig.read(&held.claim.job).await.state, JobState::Cancelled);
}

pub async fn a_newer_target_supersedes_an_older_job(harness: &dyn Harness) {
    let rig = Rig::open(harness).await;
    let jobs = rig.store.jobs();
    let older = rig.enqueue(&rig.doc, &summary()).await;
    let claimed_older = rig.claim("worker", &summary(), LONG).await;
    let newer = rig.enqueue(&rig.doc, &summary()).await;
    assert_eq!((older.target_generation, newer.target_generation), (1, 2));
    let other_doc = rig.another_doc(None).await;
    let elsewhere = rig.enqueue(&other_doc, &summary()).await;
    assert_eq!(
        elsewhere.target_generation, 1,
        "targets count per document and kind"
    );
    jobs.cancel(&rig.fence, &elsewhere.id).await.unwrap();
    assert_eq!(
        rig.enqueue(&rig.doc, &kind("other-kind"))
            .await
            .target_generation,
        1
    );

    let settled = rig.complete(&claimed_older, r#"{"v":1}"#).await;
    assert_eq!(settled.state, JobState::Completed);
    assert!(!settled.won, "a superseded job's settlement does not win");
    assert!(
        jobs.latest_won(&rig.doc.id, &summary())
            .await
            .unwrap()
            .is_none()
    );
    let claimed_newer = rig.claim("worker", &summary(), LONG).await;
    assert_eq!(claimed_newer.claim.job, newer.id);
    let won = rig.complete(&claimed_newer, r#"{"v":2}"#).await;
    assert!(won.won);
    assert_eq!(
        jobs.latest_won(&rig.doc.id, &summary()).await.unwrap(),
        Some(won.clone())
    );
    // A newer job that fails leaves the last winner current.
    rig.enqueue(&rig.doc, &summary()).await;
    let failing = rig.claim("worker", &summary(), LONG).await;
    jobs.settle(
        &rig.fence,
        &failing.claim,
        &fail(JobFailure::GeneratorFailed, None),
    )
    .await
    .unwrap();
    assert_eq!(
        jobs.latest_won(&rig.doc.id, &summary()).await.unwrap(),
        Some(won)
    );
}

pub async fn every_job_change_raises_the_documents_job_revision(harness: &dyn Harness) {
    let rig = Rig::open(harness).await;
    let jobs = rig.store.jobs();
    let other = rig.another_doc(None).await;
    assert_eq!(rig.revision(&rig.doc).await, 0);
    rig.enqueue(&rig.doc, &summary()).await;
    assert_eq!(rig.revision(&rig.doc).await, 1);
    let claimed = rig.claim("worker", &summary(), LONG).await;
    assert_eq!(rig.revision(&rig.doc).await, 2);
    jobs.heartbeat(&rig.fence, &claimed.claim, LONG)
        .await
        .unwrap();
    assert_eq!(rig.revision(&rig.doc).await, 3);
    rig.complete(&claimed, "{}").await;
    assert_eq!(rig.revision(&rig.doc).await, 4);
    rig.complete(&claimed, "{}").await;
    assert_eq!(rig.revision(&rig.doc).await, 4, "a repeat changes nothing");
    let queued = rig.enqueue(&rig.doc, &summary()).await;
    jobs.cancel(&rig.fence, &queued.id).await.unwrap();
    assert_eq!(rig.revision(&rig.doc).await, 6);
    assert_eq!(rig.revision(&other).await, 0);
    let channel = rig
        .store
        .collaboration()
        .channel(&rig.doc.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(channel, rig.doc, "jobs move no collaboration counter");
}

pub async fn jobs_go_with_their_document(harness: &dyn Harness) {
    let rig = Rig::open(harness).await;
    let job = rig.enqueue(&rig.doc, &summary()).await;
    rig.delete_the_document().await;
    assert!(rig.store.jobs().job(&job.id).await.unwrap().is_none());
    assert!(
        rig.store
            .jobs()
            .jobs_of(&rig.doc.id)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(rig.revision(&rig.doc).await, 0);
}
