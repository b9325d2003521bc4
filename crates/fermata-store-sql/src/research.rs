//! The SQL research store: requests staged under a parent document, their job links and their
//! published child (`research_workspaces`, migration 0008).
//!
//! Every write is one fenced transaction that locks the parent's channel row and then the
//! request row. Publication creates the child through the collaboration store's own creation
//! (`create_published_on`) and sets `published_channel_id` in that transaction, so a failure
//! anywhere leaves neither. `published_channel_id` is `UNIQUE` and `REFERENCES channels ON DELETE
//! RESTRICT`; the refusal it raises when the child is deleted becomes a `Conflict` here
//! ([`deletion_error`]). Job links are composite keys `(channel_id, job)` on `background_jobs`,
//! and the port's `check_link` refuses a job of another document before they are ever tried.

use async_trait::async_trait;
use fermata_store::research::{
    check_draft, check_link, check_publication, child_key, linked, needs_answer,
    published_child_refused, restaged, staged,
};
use fermata_store::{
    Channel, ChannelId, ErrorKind, Fence, FencingToken, JobId, JobLink, NewJob, Publication,
    PublishedChannel, Repository, RequestKey, ResearchDraft, ResearchRequest, ResearchStore,
    StoreError, StoreResult, StoreResultExt, UnixMillis,
};
use sqlx::AnyConnection;
use sqlx::any::AnyRow;

use crate::SqlStorage;
use crate::channel::unavailable;
use crate::dialect::Dialect;
use crate::error::{StoreContext, map};
use crate::row::{column, instant, optional_instant};

/// The research statements, rendered for one dialect.
#[derive(Debug)]
pub(crate) struct Statements {
    by_key: String,
    lock: String,
    of_parent: String,
    in_repository: String,
    insert: String,
    set_links: String,
    set_published: String,
}

const REQUEST_COLUMNS: &str = "channel_id, request_key, payload, evidence_job_id, answer_job_id, \
                               answer_generation, published_channel_id, created_at, updated_at, \
                               published_at, fencing_token";
const BY_KEY: &str = "channel_id = $1 AND request_key = $2";

impl Statements {
    pub(crate) fn new(dialect: Dialect) -> Self {
        Statements {
            by_key: dialect.render(&format!(
                "SELECT {REQUEST_COLUMNS} FROM research_workspaces WHERE {BY_KEY}"
            )),
            lock: dialect.render(&format!(
                "SELECT {REQUEST_COLUMNS} FROM research_workspaces WHERE {BY_KEY}{{for_update}}"
            )),
            of_parent: dialect.render(&format!(
                "SELECT {REQUEST_COLUMNS} FROM research_workspaces WHERE channel_id = $1 \
                 ORDER BY created_at, request_key"
            )),
            in_repository: dialect.render(&format!(
                "SELECT {} FROM research_workspaces r JOIN channels c ON c.id = r.channel_id \
                 WHERE c.repository = $1 AND ($2 = 1 OR c.archived_at IS NULL) \
                 ORDER BY r.created_at, r.channel_id, r.request_key",
                REQUEST_COLUMNS
                    .split(", ")
                    .map(|column| format!("r.{column}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            insert: dialect.render(&format!(
                "INSERT INTO research_workspaces (channel_id, request_key, payload, \
                     answer_generation, created_at, updated_at, fencing_token) \
                 VALUES ($1, $2, $3, 0, $4, $4, $5) RETURNING {REQUEST_COLUMNS}"
            )),
            set_links: dialect.render(&format!(
                "UPDATE research_workspaces SET evidence_job_id = $3, answer_job_id = $4, \
                     answer_generation = $5, updated_at = $6, fencing_token = $7 \
                 WHERE {BY_KEY} RETURNING {REQUEST_COLUMNS}"
            )),
            set_published: dialect.render(&format!(
                "UPDATE research_workspaces SET published_channel_id = $3, published_at = $4, \
                     updated_at = $4, fencing_token = $5 \
                 WHERE {BY_KEY} RETURNING {REQUEST_COLUMNS}"
            )),
        }
    }
}

/// The error of deleting a channel. A `DELETE` can break no constraint but a restricting foreign
/// key, and the only one left once children are refused is `published_channel_id`'s, so a
/// constraint refusal (however the engine classes it: SQLite reports a plain constraint code) is
/// the published-child conflict.
pub(crate) fn deletion_error(error: sqlx::Error, action: &str) -> StoreError {
    let mapped = map(error, action);
    if mapped.kind() == ErrorKind::Invalid {
        published_child_refused().with_source(mapped)
    } else {
        mapped
    }
}

fn request_from(row: &AnyRow, action: &str) -> StoreResult<ResearchRequest> {
    Ok(ResearchRequest {
        parent: ChannelId(column(row, 0, action)?),
        key: RequestKey::new(column::<String>(row, 1, action)?)
            .or_corrupt("a research request has an unusable key")?,
        payload: column(row, 2, action)?,
        evidence_job: column::<Option<String>>(row, 3, action)?.map(JobId),
        answer_job: column::<Option<String>>(row, 4, action)?.map(JobId),
        answer_generation: column(row, 5, action)?,
        published_channel: column::<Option<String>>(row, 6, action)?.map(ChannelId),
        created_at: instant(row, 7, action)?,
        updated_at: instant(row, 8, action)?,
        published_at: optional_instant(row, 9, action)?,
        fencing_token: FencingToken(column(row, 10, action)?),
    })
}

impl SqlStorage {
    /// Locks the parent's channel row, or `Missing`.
    async fn lock_parent(
        &self,
        conn: &mut AnyConnection,
        parent: &ChannelId,
        action: &str,
    ) -> StoreResult<Channel> {
        self.channel_on(conn, &self.inner.channel_sql.lock, parent, action)
            .await?
            .ok_or_else(|| unavailable(parent))
    }

    /// Locks the parent, then the request, which must be staged.
    async fn lock_request(
        &self,
        conn: &mut AnyConnection,
        parent: &ChannelId,
        key: &RequestKey,
        action: &str,
    ) -> StoreResult<(Channel, ResearchRequest)> {
        let channel = self.lock_parent(conn, parent, action).await?;
        let row = sqlx::query(&self.inner.research_sql.lock)
            .bind(&parent.0)
            .bind(key.as_str())
            .fetch_optional(&mut *conn)
            .await
            .context(action)?;
        let request = row.map(|row| request_from(&row, action)).transpose()?;
        Ok((channel, staged(request, key)?))
    }

    async fn save_links(
        &self,
        conn: &mut AnyConnection,
        request: &ResearchRequest,
        now: UnixMillis,
        token: FencingToken,
        action: &str,
    ) -> StoreResult<ResearchRequest> {
        let row = sqlx::query(&self.inner.research_sql.set_links)
            .bind(&request.parent.0)
            .bind(request.key.as_str())
            .bind(request.evidence_job.as_ref().map(|id| id.0.clone()))
            .bind(request.answer_job.as_ref().map(|id| id.0.clone()))
            .bind(request.answer_generation)
            .bind(now.0)
            .bind(token.0)
            .fetch_one(conn)
            .await
            .context(action)?;
        request_from(&row, action)
    }
}

#[async_trait]
impl ResearchStore for SqlStorage {
    async fn stage(&self, fence: &Fence, draft: &ResearchDraft) -> StoreResult<ResearchRequest> {
        let action = "staging a research request";
        check_draft(draft)?;
        let sql = &self.inner.research_sql;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        self.lock_parent(tx.conn(), &draft.parent, action).await?;
        let existing = sqlx::query(&sql.lock)
            .bind(&draft.parent.0)
            .bind(draft.key.as_str())
            .fetch_optional(tx.conn())
            .await
            .context(action)?;
        if let Some(row) = existing {
            return restaged(request_from(&row, action)?, draft);
        }
        let row = sqlx::query(&sql.insert)
            .bind(&draft.parent.0)
            .bind(draft.key.as_str())
            .bind(&draft.payload)
            .bind(now.0)
            .bind(fence.token.0)
            .fetch_one(tx.conn())
            .await
            .context(action)?;
        let request = request_from(&row, action)?;
        tx.commit(action).await?;
        Ok(request)
    }

    async fn request(
        &self,
        parent: &ChannelId,
        key: &RequestKey,
    ) -> StoreResult<Option<ResearchRequest>> {
        let action = "reading a research request";
        let row = sqlx::query(&self.inner.research_sql.by_key)
            .bind(&parent.0)
            .bind(key.as_str())
            .fetch_optional(&self.inner.pool)
            .await
            .context(action)?;
        row.map(|row| request_from(&row, action)).transpose()
    }

    async fn requests_of(&self, parent: &ChannelId) -> StoreResult<Vec<ResearchRequest>> {
        let action = "listing research requests";
        let rows = sqlx::query(&self.inner.research_sql.of_parent)
            .bind(&parent.0)
            .fetch_all(&self.inner.pool)
            .await
            .context(action)?;
        rows.iter().map(|row| request_from(row, action)).collect()
    }

    async fn requests_in(
        &self,
        repository: &Repository,
        include_archived: bool,
    ) -> StoreResult<Vec<ResearchRequest>> {
        let action = "listing a repository's research requests";
        let rows = sqlx::query(&self.inner.research_sql.in_repository)
            .bind(repository.as_str())
            .bind(i64::from(include_archived))
            .fetch_all(&self.inner.pool)
            .await
            .context(action)?;
        rows.iter().map(|row| request_from(row, action)).collect()
    }

    async fn link(
        &self,
        fence: &Fence,
        parent: &ChannelId,
        key: &RequestKey,
        link: JobLink,
        job: &JobId,
    ) -> StoreResult<ResearchRequest> {
        let action = "linking a research request's job";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        let (_, request) = self.lock_request(tx.conn(), parent, key, action).await?;
        let read = self.job_on(tx.conn(), job, false, action).await?;
        check_link(parent, job, read.as_ref())?;
        let Some(next) = linked(&request, link, job)? else {
            return Ok(request);
        };
        let saved = self
            .save_links(tx.conn(), &next, now, fence.token, action)
            .await?;
        tx.commit(action).await?;
        Ok(saved)
    }

    async fn reconcile_evidence(
        &self,
        fence: &Fence,
        parent: &ChannelId,
        key: &RequestKey,
        answer: &NewJob,
    ) -> StoreResult<ResearchRequest> {
        let action = "reconciling a research request's evidence";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        let (_, request) = self.lock_request(tx.conn(), parent, key, action).await?;
        let evidence = match &request.evidence_job {
            Some(id) => self.job_on(tx.conn(), id, false, action).await?,
            None => None,
        };
        if !needs_answer(&request, evidence.as_ref(), answer)? {
            return Ok(request);
        }
        let job = self
            .enqueue_on(tx.conn(), answer, now, fence.token, action)
            .await?;
        let Some(next) = linked(&request, JobLink::Answer, &job.id)? else {
            return Ok(request);
        };
        let saved = self
            .save_links(tx.conn(), &next, now, fence.token, action)
            .await?;
        tx.commit(action).await?;
        Ok(saved)
    }

    async fn publish(&self, fence: &Fence, publication: &Publication) -> StoreResult<Channel> {
        let action = "publishing a research answer";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        let (parent, request) = self
            .lock_request(tx.conn(), &publication.parent, &publication.key, action)
            .await?;
        if let Some(child) = &request.published_channel {
            return self
                .channel_on(tx.conn(), &self.inner.channel_sql.by_id, child, action)
                .await?
                .ok_or_else(|| StoreError::corrupt("a research request links a missing child"));
        }
        let answer = self
            .job_on(tx.conn(), &publication.answer_job, false, action)
            .await?;
        check_publication(&request, answer.as_ref(), publication)?;
        let child = self
            .create_published_on(
                tx.conn(),
                fence,
                &PublishedChannel {
                    repository: parent.repository.clone(),
                    key: child_key(&parent.id, &request.key)?,
                    title: publication.title.clone(),
                    parent: Some(parent.id.clone()),
                    checkpoint: publication.checkpoint.clone(),
                },
                now,
                action,
            )
            .await?;
        sqlx::query(&self.inner.research_sql.set_published)
            .bind(&parent.id.0)
            .bind(request.key.as_str())
            .bind(&child.id.0)
            .bind(now.0)
            .bind(fence.token.0)
            .fetch_one(tx.conn())
            .await
            .context(action)?;
        tx.commit(action).await?;
        Ok(child)
    }
}
