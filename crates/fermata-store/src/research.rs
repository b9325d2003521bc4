//! Research request staging under a parent document, and the publication of its answer as one
//! initialized child document.
//!
//! A request is staged once per parent and request key; staging again with the same payload
//! returns the same row, another payload under the key is a `Conflict`. A request links the
//! background jobs that do its work (an evidence job and a private answer job), which must be
//! jobs of the same document: the jobs stay the lifecycle authority, the request only links them.
//! A completed evidence job is reconciled into the answer job idempotently; every new answer job
//! raises the request's answer generation.
//!
//! Publication is one fenced transaction: it locks the parent and the request, verifies the
//! current answer generation and that the answer job completed, creates the child at the ID its
//! creation key determines ([`child_key`]) with its complete revision-zero checkpoint, and sets
//! `published_channel_id`. Repeating it returns the same child; a failure leaves neither. A
//! published child cannot be deleted while the request keeps its link. Every write is fenced by
//! the writer lease and records the fencing token it was written under.

use std::fmt;

use async_trait::async_trait;

use crate::channel::{Channel, ChannelId, CreationKey, Repository, check_title};
use crate::collaboration::NewCheckpoint;
use crate::error::{StoreError, StoreResult};
use crate::jobs::{Job, JobId, JobState, NewJob};
use crate::lease::{Fence, FencingToken};
use crate::time::UnixMillis;

/// A research request's idempotency key within its parent: 1 to 120 printable ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestKey(String);

impl RequestKey {
    pub fn new(text: impl Into<String>) -> StoreResult<Self> {
        let text = text.into();
        if text.is_empty() || text.len() > 120 || !text.chars().all(|c| c.is_ascii_graphic()) {
            return Err(StoreError::invalid(
                "a research request key is 1 to 120 printable ASCII characters",
            ));
        }
        Ok(RequestKey(text))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RequestKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The creation key of the child a request publishes, so its ID is
/// `ChannelId::for_creation_key(parent's repository, child_key(..))` and a repeat finds it.
pub fn child_key(parent: &ChannelId, key: &RequestKey) -> StoreResult<CreationKey> {
    CreationKey::new(format!("research:{parent}:{key}"))
}

/// A research request to stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResearchDraft {
    pub parent: ChannelId,
    pub key: RequestKey,
    /// The request as JSON text.
    pub payload: String,
}

/// A staged research request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResearchRequest {
    pub parent: ChannelId,
    pub key: RequestKey,
    pub payload: String,
    pub evidence_job: Option<JobId>,
    pub answer_job: Option<JobId>,
    /// Raised by every new answer job; 0 before the first.
    pub answer_generation: i64,
    /// The child its answer was published as.
    pub published_channel: Option<ChannelId>,
    pub created_at: UnixMillis,
    pub updated_at: UnixMillis,
    pub published_at: Option<UnixMillis>,
    /// The fencing token of the request's latest write.
    pub fencing_token: FencingToken,
}

/// Which job of a request a link sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobLink {
    Evidence,
    Answer,
}

/// A publication of a request's answer as its child.
#[derive(Debug, Clone)]
pub struct Publication {
    pub parent: ChannelId,
    pub key: RequestKey,
    /// The answer generation the caller read the answer under.
    pub answer_generation: i64,
    /// The completed answer job whose artifact the checkpoint was made from.
    pub answer_job: JobId,
    pub title: String,
    /// The child's revision-zero checkpoint (epoch 1, through sequence 0, revision 0).
    pub checkpoint: NewCheckpoint,
}

/// Checks a draft before staging.
pub fn check_draft(draft: &ResearchDraft) -> StoreResult<()> {
    if serde_json::from_str::<serde_json::Value>(&draft.payload).is_err() {
        return Err(StoreError::invalid(
            "a research request's payload is JSON text",
        ));
    }
    Ok(())
}

/// The answer to staging a key that exists: the row for the same payload, else `Conflict`.
pub fn restaged(existing: ResearchRequest, draft: &ResearchDraft) -> StoreResult<ResearchRequest> {
    if existing.payload == draft.payload {
        Ok(existing)
    } else {
        Err(StoreError::conflict(format!(
            "research request `{}` was staged with another payload",
            draft.key
        )))
    }
}

/// The request a key names, or `Missing`.
pub fn staged(request: Option<ResearchRequest>, key: &RequestKey) -> StoreResult<ResearchRequest> {
    request.ok_or_else(|| StoreError::missing(format!("research request `{key}` is not staged")))
}

/// Checks that `job` (as read) may be linked to a request of `parent`: it exists and is a job
/// of the same document.
pub fn check_link(parent: &ChannelId, id: &JobId, job: Option<&Job>) -> StoreResult<()> {
    match job {
        Some(job) if &job.channel == parent => Ok(()),
        Some(_) => Err(StoreError::invalid(
            "a research request links only jobs of its own document",
        )),
        None => Err(StoreError::missing(format!("job {id} does not exist"))),
    }
}

/// What linking `id` as `link` changes: `None` when it is already linked so (nothing to write),
/// else the request with the link set (a new answer job raises the answer generation). Another
/// evidence job once one is linked is a `Conflict`.
pub fn linked(
    request: &ResearchRequest,
    link: JobLink,
    id: &JobId,
) -> StoreResult<Option<ResearchRequest>> {
    let mut next = request.clone();
    match link {
        JobLink::Evidence => match &request.evidence_job {
            Some(current) if current == id => return Ok(None),
            Some(_) => {
                return Err(StoreError::conflict(format!(
                    "research request `{}` already links another evidence job",
                    request.key
                )));
            }
            None => next.evidence_job = Some(id.clone()),
        },
        JobLink::Answer => {
            if request.answer_job.as_ref() == Some(id) {
                return Ok(None);
            }
            next.answer_job = Some(id.clone());
            next.answer_generation += 1;
        }
    }
    Ok(Some(next))
}

/// Whether the request's evidence should be reconciled into `answer` now: its evidence job
/// (`evidence`, as read) completed and it has no answer job yet. The answer job must be a job of
/// the request's document.
pub fn needs_answer(
    request: &ResearchRequest,
    evidence: Option<&Job>,
    answer: &NewJob,
) -> StoreResult<bool> {
    if answer.channel != request.parent {
        return Err(StoreError::invalid(
            "a research request links only jobs of its own document",
        ));
    }
    Ok(
        request.answer_job.is_none()
            && evidence.is_some_and(|job| job.state == JobState::Completed),
    )
}

/// The checks of a publication that finds the request unpublished, before anything is written:
/// the caller's answer generation is current, the job is the request's answer job, and it
/// completed.
pub fn check_publication(
    request: &ResearchRequest,
    answer: Option<&Job>,
    publication: &Publication,
) -> StoreResult<()> {
    check_title(&publication.title)?;
    if publication.answer_generation != request.answer_generation {
        return Err(StoreError::conflict(format!(
            "research request `{}` is at answer generation {}, not {}",
            request.key, request.answer_generation, publication.answer_generation
        )));
    }
    if request.answer_job.as_ref() != Some(&publication.answer_job) {
        return Err(StoreError::conflict(format!(
            "job {} is not the answer job of research request `{}`",
            publication.answer_job, request.key
        )));
    }
    if !answer.is_some_and(|job| job.state == JobState::Completed && job.output.is_some()) {
        return Err(StoreError::conflict(format!(
            "the answer of research request `{}` has not completed",
            request.key
        )));
    }
    Ok(())
}

/// The refusal of deleting a child a research request published.
pub fn published_child_refused() -> StoreError {
    StoreError::conflict(
        "a document published from a research request cannot be deleted while the request links it",
    )
}

/// The research store. Every write is fenced by the writer lease.
#[async_trait]
pub trait ResearchStore: Send + Sync {
    /// Stages a request under its parent; see the module documentation for repeats. An unknown
    /// parent is `Missing`.
    async fn stage(&self, fence: &Fence, draft: &ResearchDraft) -> StoreResult<ResearchRequest>;

    async fn request(
        &self,
        parent: &ChannelId,
        key: &RequestKey,
    ) -> StoreResult<Option<ResearchRequest>>;

    /// A parent's requests, oldest first.
    async fn requests_of(&self, parent: &ChannelId) -> StoreResult<Vec<ResearchRequest>>;

    /// The requests of every parent in `repository`, oldest first: the repository-level
    /// listing, which leaves out requests of archived parents unless `include_archived`.
    async fn requests_in(
        &self,
        repository: &Repository,
        include_archived: bool,
    ) -> StoreResult<Vec<ResearchRequest>>;

    /// Links job `job` of the parent to the request; see [`linked`]. A job of another document is
    /// `Invalid`.
    async fn link(
        &self,
        fence: &Fence,
        parent: &ChannelId,
        key: &RequestKey,
        link: JobLink,
        job: &JobId,
    ) -> StoreResult<ResearchRequest>;

    /// When the request's evidence job completed and it has no answer job, enqueues `answer` and
    /// links it as the answer job, in one transaction; otherwise changes nothing. Idempotent.
    async fn reconcile_evidence(
        &self,
        fence: &Fence,
        parent: &ChannelId,
        key: &RequestKey,
        answer: &NewJob,
    ) -> StoreResult<ResearchRequest>;

    /// Publishes the request's answer as its child; see the module documentation.
    async fn publish(&self, fence: &Fence, publication: &Publication) -> StoreResult<Channel>;
}
