//! The SQL chat store: `chat_threads`, `chat_session_state` and `workflow_run_stages`, each
//! written whole in one fenced transaction, with the Chat's JSON kept as text.

use async_trait::async_trait;
use fermata_store::{
    ChannelId, ChatKey, ChatStore, ChatThread, Fence, FencingToken, RunStage, SessionState,
    SessionStateDraft, StoreResult, StoreResultExt, ThreadDraft, UnixMillis, UserId,
};
use sqlx::any::AnyRow;

use crate::SqlStorage;
use crate::dialect::Dialect;
use crate::error::StoreContext;
use crate::row::{column, instant};

const THREAD_COLUMNS: &str = "channel_id, root_id, root_message, forked_at, creator_id, replies, \
                              compactions, context_usage, fork_provenance, updated_at, fencing_token";
const SESSION_COLUMNS: &str = "channel_id, compactions, context_usage, entries, leaf_id, \
                               entry_forks_json, updated_at, fencing_token";
const STAGE_COLUMNS: &str = "channel_id, run_id, stage_id, stage_order, status, name, kind, \
                             parent_stage_ids, started_at, ended_at";

/// The chat statements, rendered for one dialect.
#[derive(Debug)]
pub(crate) struct Statements {
    upsert_thread: String,
    thread: String,
    threads: String,
    remove_thread: String,
    upsert_session: String,
    session: String,
    upsert_stage: String,
    stages: String,
    remove_run: String,
}

impl Statements {
    pub(crate) fn new(dialect: Dialect) -> Self {
        Statements {
            upsert_thread: dialect.render(&format!(
                "INSERT INTO chat_threads ({THREAD_COLUMNS}) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
                 ON CONFLICT (channel_id, root_id) DO UPDATE SET \
                     root_message = excluded.root_message, forked_at = excluded.forked_at, \
                     creator_id = excluded.creator_id, replies = excluded.replies, \
                     compactions = excluded.compactions, context_usage = excluded.context_usage, \
                     fork_provenance = excluded.fork_provenance, updated_at = excluded.updated_at, \
                     fencing_token = excluded.fencing_token"
            )),
            thread: dialect.render(&format!(
                "SELECT {THREAD_COLUMNS} FROM chat_threads WHERE channel_id = $1 AND root_id = $2"
            )),
            threads: dialect.render(&format!(
                "SELECT {THREAD_COLUMNS} FROM chat_threads WHERE channel_id = $1 ORDER BY root_id"
            )),
            remove_thread: dialect
                .render("DELETE FROM chat_threads WHERE channel_id = $1 AND root_id = $2"),
            upsert_session: dialect.render(&format!(
                "INSERT INTO chat_session_state ({SESSION_COLUMNS}) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
                 ON CONFLICT (channel_id) DO UPDATE SET \
                     compactions = excluded.compactions, context_usage = excluded.context_usage, \
                     entries = excluded.entries, leaf_id = excluded.leaf_id, \
                     entry_forks_json = excluded.entry_forks_json, \
                     updated_at = excluded.updated_at, fencing_token = excluded.fencing_token"
            )),
            session: dialect.render(&format!(
                "SELECT {SESSION_COLUMNS} FROM chat_session_state WHERE channel_id = $1"
            )),
            upsert_stage: dialect.render(&format!(
                "INSERT INTO workflow_run_stages ({STAGE_COLUMNS}) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
                 ON CONFLICT (channel_id, run_id, stage_id) DO UPDATE SET \
                     stage_order = excluded.stage_order, status = excluded.status, \
                     name = excluded.name, kind = excluded.kind, \
                     parent_stage_ids = excluded.parent_stage_ids, \
                     started_at = excluded.started_at, ended_at = excluded.ended_at"
            )),
            stages: dialect.render(&format!(
                "SELECT {STAGE_COLUMNS} FROM workflow_run_stages WHERE channel_id = $1 \
                 ORDER BY run_id, stage_order, stage_id"
            )),
            remove_run: dialect
                .render("DELETE FROM workflow_run_stages WHERE channel_id = $1 AND run_id = $2"),
        }
    }
}

/// A stored Chat ID, which must still be one.
fn key(text: String) -> StoreResult<ChatKey> {
    ChatKey::new(text).or_corrupt("a stored Chat ID is not a valid one")
}

fn thread_from(row: &AnyRow, action: &str) -> StoreResult<ChatThread> {
    Ok(ChatThread {
        thread: ThreadDraft {
            channel: ChannelId(column(row, 0, action)?),
            root_id: key(column(row, 1, action)?)?,
            root_message_json: column(row, 2, action)?,
            forked_at: instant(row, 3, action)?,
            creator: column::<Option<String>>(row, 4, action)?.map(UserId),
            replies_json: column(row, 5, action)?,
            compactions_json: column(row, 6, action)?,
            context_usage_json: column(row, 7, action)?,
            provenance_json: column(row, 8, action)?,
        },
        updated_at: instant(row, 9, action)?,
        fencing_token: FencingToken(column(row, 10, action)?),
    })
}

fn session_from(row: &AnyRow, action: &str) -> StoreResult<SessionState> {
    Ok(SessionState {
        state: SessionStateDraft {
            channel: ChannelId(column(row, 0, action)?),
            compactions_json: column(row, 1, action)?,
            context_usage_json: column(row, 2, action)?,
            entries_json: column(row, 3, action)?,
            leaf_id: column::<Option<String>>(row, 4, action)?
                .map(key)
                .transpose()?,
            entry_forks_json: column(row, 5, action)?,
        },
        updated_at: instant(row, 6, action)?,
        fencing_token: FencingToken(column(row, 7, action)?),
    })
}

fn stage_from(row: &AnyRow, action: &str) -> StoreResult<RunStage> {
    Ok(RunStage {
        channel: ChannelId(column(row, 0, action)?),
        run_id: key(column(row, 1, action)?)?,
        stage_id: key(column(row, 2, action)?)?,
        order: column(row, 3, action)?,
        status: column(row, 4, action)?,
        name: column(row, 5, action)?,
        kind: column(row, 6, action)?,
        parents: RunStage::parents_from_json(&column::<String>(row, 7, action)?)?,
        started_at: column(row, 8, action)?,
        ended_at: column(row, 9, action)?,
    })
}

#[async_trait]
impl ChatStore for SqlStorage {
    async fn put_thread(&self, fence: &Fence, thread: &ThreadDraft) -> StoreResult<ChatThread> {
        let action = "writing a Chat thread";
        thread.check()?;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        self.require_document(tx.conn(), &thread.channel, action)
            .await?;
        tx.execute(
            sqlx::query(&self.inner.chat_sql.upsert_thread)
                .bind(&thread.channel.0)
                .bind(thread.root_id.as_str())
                .bind(&thread.root_message_json)
                .bind(thread.forked_at.0)
                .bind(thread.creator.as_ref().map(|c| c.0.clone()))
                .bind(&thread.replies_json)
                .bind(&thread.compactions_json)
                .bind(thread.context_usage_json.clone())
                .bind(thread.provenance_json.clone())
                .bind(now.0)
                .bind(fence.token.0),
            action,
        )
        .await?;
        tx.commit(action).await?;
        Ok(ChatThread {
            thread: thread.clone(),
            updated_at: now,
            fencing_token: fence.token,
        })
    }

    async fn thread(&self, channel: &ChannelId, root: &ChatKey) -> StoreResult<Option<ChatThread>> {
        let action = "reading a Chat thread";
        sqlx::query(&self.inner.chat_sql.thread)
            .bind(&channel.0)
            .bind(root.as_str())
            .fetch_optional(&self.inner.pool)
            .await
            .context(action)?
            .map(|row| thread_from(&row, action))
            .transpose()
    }

    async fn threads(&self, channel: &ChannelId) -> StoreResult<Vec<ChatThread>> {
        let action = "reading Chat threads";
        let rows = sqlx::query(&self.inner.chat_sql.threads)
            .bind(&channel.0)
            .fetch_all(&self.inner.pool)
            .await
            .context(action)?;
        rows.iter().map(|row| thread_from(row, action)).collect()
    }

    async fn remove_thread(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        root: &ChatKey,
    ) -> StoreResult<bool> {
        let action = "removing a Chat thread";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let removed = tx
            .execute(
                sqlx::query(&self.inner.chat_sql.remove_thread)
                    .bind(&channel.0)
                    .bind(root.as_str()),
                action,
            )
            .await?;
        tx.commit(action).await?;
        Ok(removed > 0)
    }

    async fn put_session_state(
        &self,
        fence: &Fence,
        state: &SessionStateDraft,
    ) -> StoreResult<SessionState> {
        let action = "writing a Chat session";
        state.check()?;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now: UnixMillis = tx.now;
        self.require_document(tx.conn(), &state.channel, action)
            .await?;
        tx.execute(
            sqlx::query(&self.inner.chat_sql.upsert_session)
                .bind(&state.channel.0)
                .bind(&state.compactions_json)
                .bind(state.context_usage_json.clone())
                .bind(&state.entries_json)
                .bind(state.leaf_id.as_ref().map(|l| l.as_str().to_owned()))
                .bind(&state.entry_forks_json)
                .bind(now.0)
                .bind(fence.token.0),
            action,
        )
        .await?;
        tx.commit(action).await?;
        Ok(SessionState {
            state: state.clone(),
            updated_at: now,
            fencing_token: fence.token,
        })
    }

    async fn session_state(&self, channel: &ChannelId) -> StoreResult<Option<SessionState>> {
        let action = "reading a Chat session";
        sqlx::query(&self.inner.chat_sql.session)
            .bind(&channel.0)
            .fetch_optional(&self.inner.pool)
            .await
            .context(action)?
            .map(|row| session_from(&row, action))
            .transpose()
    }

    async fn put_stage(&self, fence: &Fence, stage: &RunStage) -> StoreResult<()> {
        let action = "writing a workflow run stage";
        stage.check()?;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        self.require_document(tx.conn(), &stage.channel, action)
            .await?;
        tx.execute(
            sqlx::query(&self.inner.chat_sql.upsert_stage)
                .bind(&stage.channel.0)
                .bind(stage.run_id.as_str())
                .bind(stage.stage_id.as_str())
                .bind(stage.order)
                .bind(&stage.status)
                .bind(&stage.name)
                .bind(&stage.kind)
                .bind(stage.parents_json())
                .bind(stage.started_at)
                .bind(stage.ended_at),
            action,
        )
        .await?;
        tx.commit(action).await
    }

    async fn stages(&self, channel: &ChannelId) -> StoreResult<Vec<RunStage>> {
        let action = "reading workflow run stages";
        let rows = sqlx::query(&self.inner.chat_sql.stages)
            .bind(&channel.0)
            .fetch_all(&self.inner.pool)
            .await
            .context(action)?;
        rows.iter().map(|row| stage_from(row, action)).collect()
    }

    async fn remove_run(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        run: &ChatKey,
    ) -> StoreResult<u64> {
        let action = "removing a workflow run's stages";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let removed = tx
            .execute(
                sqlx::query(&self.inner.chat_sql.remove_run)
                    .bind(&channel.0)
                    .bind(run.as_str()),
                action,
            )
            .await?;
        tx.commit(action).await?;
        Ok(removed)
    }
}
