//! The memory adapter's research store: staged requests in a map; a publication creates the
//! child through the collaboration store's own creation and sets the link in one fenced critical
//! section, so it is all or nothing.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::jobs::enqueue_on;
use super::{MemoryStorage, State};
use fermata_store::channel::{Channel, ChannelId, Repository};
use fermata_store::collaboration::PublishedChannel;
use fermata_store::error::{StoreError, StoreResult};
use fermata_store::jobs::{JobId, NewJob};
use fermata_store::lease::{Fence, FencingToken};
use fermata_store::research::{
    JobLink, Publication, RequestKey, ResearchDraft, ResearchRequest, ResearchStore, check_draft,
    check_link, check_publication, child_key, linked, needs_answer, published_child_refused,
    restaged, staged,
};
use fermata_store::time::UnixMillis;

/// Everything the research store keeps, in memory.
#[derive(Debug, Default)]
pub(super) struct Research {
    requests: BTreeMap<(ChannelId, RequestKey), ResearchRequest>,
}

impl Research {
    /// Refuses deleting `id` while a request links it as its published child, as
    /// `published_channel_id`'s `ON DELETE RESTRICT` does in SQL.
    pub(super) fn refuse_published_child(&self, id: &ChannelId) -> StoreResult<()> {
        if self
            .requests
            .values()
            .any(|r| r.published_channel.as_ref() == Some(id))
        {
            return Err(published_child_refused());
        }
        Ok(())
    }

    /// Forgets every request of a deleted parent.
    pub(super) fn forget_channel(&mut self, id: &ChannelId) {
        self.requests.retain(|(parent, _), _| parent != id);
    }
}

fn request_of(state: &State, parent: &ChannelId, key: &RequestKey) -> StoreResult<ResearchRequest> {
    staged(
        state
            .research
            .requests
            .get(&(parent.clone(), key.clone()))
            .cloned(),
        key,
    )
}

/// Stores `request` as written now under `token`.
fn save(
    state: &mut State,
    mut request: ResearchRequest,
    now: UnixMillis,
    token: FencingToken,
) -> ResearchRequest {
    request.updated_at = now;
    request.fencing_token = token;
    state.research.requests.insert(
        (request.parent.clone(), request.key.clone()),
        request.clone(),
    );
    request
}

#[async_trait]
impl ResearchStore for MemoryStorage {
    async fn stage(&self, fence: &Fence, draft: &ResearchDraft) -> StoreResult<ResearchRequest> {
        check_draft(draft)?;
        self.inner
            .fenced(fence, |state, now| {
                if !state.documents.contains(&draft.parent) {
                    return Err(StoreError::missing(format!(
                        "document {} is unavailable",
                        draft.parent
                    )));
                }
                let slot = (draft.parent.clone(), draft.key.clone());
                if let Some(existing) = state.research.requests.get(&slot) {
                    return restaged(existing.clone(), draft);
                }
                let request = ResearchRequest {
                    parent: draft.parent.clone(),
                    key: draft.key.clone(),
                    payload: draft.payload.clone(),
                    evidence_job: None,
                    answer_job: None,
                    answer_generation: 0,
                    published_channel: None,
                    created_at: now,
                    updated_at: now,
                    published_at: None,
                    fencing_token: fence.token,
                };
                Ok(save(state, request, now, fence.token))
            })
            .await
    }

    async fn request(
        &self,
        parent: &ChannelId,
        key: &RequestKey,
    ) -> StoreResult<Option<ResearchRequest>> {
        let state = self.inner.state();
        Ok(state
            .research
            .requests
            .get(&(parent.clone(), key.clone()))
            .cloned())
    }

    async fn requests_of(&self, parent: &ChannelId) -> StoreResult<Vec<ResearchRequest>> {
        let state = self.inner.state();
        let mut requests: Vec<ResearchRequest> = state
            .research
            .requests
            .values()
            .filter(|r| &r.parent == parent)
            .cloned()
            .collect();
        requests.sort_by(|a, b| (a.created_at, &a.key).cmp(&(b.created_at, &b.key)));
        Ok(requests)
    }

    async fn requests_in(
        &self,
        repository: &Repository,
        include_archived: bool,
    ) -> StoreResult<Vec<ResearchRequest>> {
        let state = self.inner.state();
        let mut requests: Vec<ResearchRequest> = state
            .research
            .requests
            .values()
            .filter(|r| {
                state.documents.get(&r.parent).is_some_and(|parent| {
                    &parent.repository == repository
                        && (include_archived || parent.archived_at.is_none())
                })
            })
            .cloned()
            .collect();
        requests.sort_by(|a, b| {
            (a.created_at, &a.parent, &a.key).cmp(&(b.created_at, &b.parent, &b.key))
        });
        Ok(requests)
    }

    async fn link(
        &self,
        fence: &Fence,
        parent: &ChannelId,
        key: &RequestKey,
        link: JobLink,
        job: &JobId,
    ) -> StoreResult<ResearchRequest> {
        self.inner
            .fenced(fence, |state, now| {
                let request = request_of(state, parent, key)?;
                check_link(parent, job, state.jobs.get(job).as_ref())?;
                match linked(&request, link, job)? {
                    None => Ok(request),
                    Some(next) => Ok(save(state, next, now, fence.token)),
                }
            })
            .await
    }

    async fn reconcile_evidence(
        &self,
        fence: &Fence,
        parent: &ChannelId,
        key: &RequestKey,
        answer: &NewJob,
    ) -> StoreResult<ResearchRequest> {
        self.inner
            .fenced(fence, |state, now| {
                let request = request_of(state, parent, key)?;
                let evidence = request
                    .evidence_job
                    .as_ref()
                    .and_then(|id| state.jobs.get(id));
                if !needs_answer(&request, evidence.as_ref(), answer)? {
                    return Ok(request);
                }
                let job = enqueue_on(state, answer, now, fence.token)?;
                let next = linked(&request, JobLink::Answer, &job.id)?.unwrap_or(request);
                Ok(save(state, next, now, fence.token))
            })
            .await
    }

    async fn publish(&self, fence: &Fence, publication: &Publication) -> StoreResult<Channel> {
        self.inner
            .fenced(fence, |state, now| {
                let parent = state.documents.get(&publication.parent).ok_or_else(|| {
                    StoreError::missing(format!("document {} is unavailable", publication.parent))
                })?;
                let request = request_of(state, &publication.parent, &publication.key)?;
                if let Some(child) = &request.published_channel {
                    return state.documents.get(child).ok_or_else(|| {
                        StoreError::corrupt("a research request links a missing child")
                    });
                }
                let answer = state.jobs.get(&publication.answer_job);
                check_publication(&request, answer.as_ref(), publication)?;
                let child = state.documents.publish(
                    fence,
                    &PublishedChannel {
                        repository: parent.repository.clone(),
                        key: child_key(&parent.id, &request.key)?,
                        title: publication.title.clone(),
                        parent: Some(parent.id.clone()),
                        checkpoint: publication.checkpoint.clone(),
                    },
                    now,
                )?;
                let next = ResearchRequest {
                    published_channel: Some(child.id.clone()),
                    published_at: Some(now),
                    ..request
                };
                save(state, next, now, fence.token);
                Ok(child)
            })
            .await
    }
}
