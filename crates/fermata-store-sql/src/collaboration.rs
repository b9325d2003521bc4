//! The SQL collaboration store, part two: commits, replay, checkpoints, epoch replacement,
//! program-created channels and the recovery snapshot; and the trait implementation that ties in
//! the channel operations of `channel.rs`.
//!
//! Every write is one fenced transaction that locks the channel row (`FOR UPDATE` on
//! PostgreSQL, or the row lock of the `UPDATE` that checks and advances a commit's counters;
//! SQLite's `BEGIN IMMEDIATE` holds the database's write lock) before it relies on the counters
//! it checks.

use async_trait::async_trait;
use fermata_store::collaboration_rules::{
    check_checkpoint, check_commit, check_commit_shape, check_epoch_replacement,
    check_initial_checkpoint, repeated,
};
use fermata_store::{
    Channel, ChannelFilter, ChannelId, Checkpoint, CollaborationStore, Commit, Committed, Coverage,
    DescriptionDraft, Event, Fence, JournalUpdate, NewChannel, NewCheckpoint, PublishedChannel,
    RecoveryHead, RecoveryReceiver, Repository, Shard, SidecarState, Slug, StoreError, StoreResult,
    StoreResultExt, UnixMillis, UserId,
};
use sqlx::AnyConnection;
use sqlx::any::AnyRow;

use crate::SqlStorage;
use crate::channel::unavailable;
use crate::commit_statement::{self, bind_commit, covered_shard};
use crate::dialect::Dialect;
use crate::error::StoreContext;
use crate::fence::FencedTransaction;
use crate::journal_read::{expected_sequences, journal_updates, read_journal};
use crate::recovery_read::read_at_once;
use crate::row::{column, instant};
use crate::write_transaction::begin_on_task;

/// Where a group member's savepoint is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemberSavepoint {
    /// By the member's statement itself, in the same hand-off (SQLite).
    InStatement,
    /// By a statement of its own, first.
    Separate,
    /// Nowhere: the member's one statement writes all of the commit or nothing, so a refusal
    /// leaves nothing to undo (PostgreSQL, a commit without title or events).
    NotNeeded,
}

/// What one commit's statements did in a fenced transaction.
#[derive(Debug)]
pub(crate) enum CommitWrites {
    /// They wrote the commit: it holds once the transaction commits.
    Kept(Committed),
    /// The answer needs nothing written (a repeated operation): whatever they wrote must be
    /// rolled back.
    Nothing(Committed),
}

impl CommitWrites {
    /// Ends `tx`, the transaction of this commit alone: committed when it wrote, otherwise
    /// rolled back (dropped), with the commit's answer.
    async fn settle(self, tx: FencedTransaction, action: &str) -> StoreResult<Committed> {
        match self {
            CommitWrites::Kept(committed) => tx.commit(action).await.map(|()| committed),
            CommitWrites::Nothing(answer) => Ok(answer),
        }
    }
}

/// What a commit's statement wrote (see `commit_statement.rs`).
pub(crate) struct Written {
    revision: i64,
    sequence: i64,
    repository: String,
    /// 0 when the operation ID was used before: the writes must be rolled back.
    recorded: i64,
}

/// The commit statement's answer from column `first` of `row` on: `None` when it wrote nothing.
fn written(row: &AnyRow, first: usize, action: &str) -> StoreResult<Option<Written>> {
    let Some(revision) = column::<Option<i64>>(row, first, action)? else {
        return Ok(None);
    };
    Ok(Some(Written {
        revision,
        sequence: column(row, first + 1, action)?,
        repository: column(row, first + 2, action)?,
        recorded: column(row, first + 3, action)?,
    }))
}

/// The collaboration statements, rendered for one dialect.
#[derive(Debug)]
pub(crate) struct Statements {
    pub(crate) set_slug: String,
    find_operation: String,
    commit: String,
    /// On SQLite, `commit` after a group member's savepoint, in the same hand-off to the
    /// connection's thread (see `group_commit.rs`); PostgreSQL takes one statement at a time.
    member_commit: Option<String>,
    /// The commit that carries its own fence check, for a commit that runs alone.
    fenced_commit: String,
    /// The commits of a group written at once (`commit_statement::render_group`).
    group_commit: String,
    upsert_state: String,
    insert_event: String,
    updates_after: String,
    events_after: String,
    snapshot: String,
    /// The generation of channel `$1`'s checkpoint, without its text and state.
    snapshot_generation: String,
    upsert_snapshot: String,
    prune: String,
    clear_journal: String,
    set_epoch: String,
    state: String,
}

impl Statements {
    pub(crate) fn new(dialect: Dialect) -> Self {
        Statements {
            set_slug: dialect.render("UPDATE channels SET slug = $2 WHERE id = $1"),
            find_operation: dialect.render(
                "SELECT fingerprint, revision, sequence FROM channel_operations \
                 WHERE channel_id = $1 AND operation_id = $2",
            ),
            commit: commit_statement::render(dialect),
            member_commit: (dialect == Dialect::Sqlite).then(|| {
                format!(
                    "{}; {}",
                    crate::group_commit::SAVEPOINT,
                    commit_statement::render(dialect)
                )
            }),
            fenced_commit: commit_statement::render_fenced(dialect),
            group_commit: commit_statement::render_group(dialect),
            upsert_state: format!(
                "INSERT INTO {} VALUES ($1, $2, $3, $4) {}",
                commit_statement::STATE_COLUMNS,
                commit_statement::UPSERT_STATE
            ),
            insert_event: dialect.render(
                "INSERT INTO channel_events (channel_id, sequence, ordinal, kind, payload, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
            ),
            updates_after: dialect.render(
                "SELECT sequence, epoch, bytes FROM channel_updates \
                 WHERE channel_id = $1 AND sequence > $2 ORDER BY sequence",
            ),
            events_after: dialect.render(
                "SELECT sequence, kind, payload, created_at FROM channel_events \
                 WHERE channel_id = $1 AND sequence > $2 ORDER BY sequence, ordinal",
            ),
            snapshot: dialect.render(
                "SELECT epoch, generation, through_sequence, revision, canonical_text, source_hash, state, \
                        sidecar_version, sidecar, sidecar_unanswered_decisions, created_at \
                 FROM channel_snapshots WHERE channel_id = $1",
            ),
            snapshot_generation: dialect.render(
                "SELECT generation FROM channel_snapshots WHERE channel_id = $1",
            ),
            upsert_snapshot: dialect.render(
                "INSERT INTO channel_snapshots (channel_id, epoch, generation, through_sequence, revision, \
                     canonical_text, source_hash, state, sidecar_version, sidecar, sidecar_unanswered_decisions, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
                 ON CONFLICT (channel_id) DO UPDATE SET epoch = excluded.epoch, generation = excluded.generation, \
                     through_sequence = excluded.through_sequence, revision = excluded.revision, \
                     canonical_text = excluded.canonical_text, source_hash = excluded.source_hash, \
                     state = excluded.state, sidecar_version = excluded.sidecar_version, \
                     sidecar = excluded.sidecar, sidecar_unanswered_decisions = excluded.sidecar_unanswered_decisions, \
                     created_at = excluded.created_at",
            ),
            prune: dialect.render("DELETE FROM channel_updates WHERE channel_id = $1 AND sequence <= $2"),
            clear_journal: dialect.render("DELETE FROM channel_updates WHERE channel_id = $1"),
            set_epoch: dialect.render(
                "UPDATE channels SET revision = $2, sequence = $3, epoch = $4, updated_at = $5 WHERE id = $1",
            ),
            state: dialect.render(
                "SELECT version, sidecar, unanswered_decisions FROM channel_state WHERE channel_id = $1",
            ),
        }
    }
}

/// A checkpoint from the eleven columns of the `snapshot` statement, the first at index `at`.
pub(crate) fn checkpoint_from(row: &AnyRow, at: usize, action: &str) -> StoreResult<Checkpoint> {
    let sidecar = match column::<Option<i64>>(row, at + 7, action)? {
        None => None,
        Some(version) => Some(SidecarState {
            version,
            json: column::<Option<String>>(row, at + 8, action)?.unwrap_or_default(),
            unanswered_decisions: column::<Option<i64>>(row, at + 9, action)?.unwrap_or_default(),
        }),
    };
    Ok(Checkpoint {
        epoch: column(row, at, action)?,
        generation: column(row, at + 1, action)?,
        through_sequence: column(row, at + 2, action)?,
        revision: column(row, at + 3, action)?,
        canonical_text: column(row, at + 4, action)?,
        source_hash: column(row, at + 5, action)?,
        state: column(row, at + 6, action)?,
        sidecar,
        created_at: instant(row, at + 10, action)?,
    })
}

impl SqlStorage {
    async fn checkpoint_on(
        &self,
        conn: &mut AnyConnection,
        id: &ChannelId,
        action: &str,
    ) -> StoreResult<Option<Checkpoint>> {
        let row = sqlx::query(&self.inner.collaboration_sql.snapshot)
            .bind(&id.0)
            .fetch_optional(conn)
            .await
            .context(action)?;
        row.map(|row| checkpoint_from(&row, 0, action)).transpose()
    }

    async fn write_state(
        &self,
        conn: &mut AnyConnection,
        id: &ChannelId,
        sidecar: &SidecarState,
        action: &str,
    ) -> StoreResult<()> {
        sqlx::query(&self.inner.collaboration_sql.upsert_state)
            .bind(&id.0)
            .bind(sidecar.version)
            .bind(&sidecar.json)
            .bind(sidecar.unanswered_decisions)
            .execute(conn)
            .await
            .context(action)?;
        Ok(())
    }

    /// Writes `checkpoint` as the channel's checkpoint and prunes the journal it covers.
    async fn install_checkpoint(
        &self,
        conn: &mut AnyConnection,
        id: &ChannelId,
        checkpoint: &NewCheckpoint,
        now: UnixMillis,
        action: &str,
    ) -> StoreResult<Checkpoint> {
        let sql = &self.inner.collaboration_sql;
        let previous: Option<i64> = sqlx::query_scalar(&sql.snapshot_generation)
            .bind(&id.0)
            .fetch_optional(&mut *conn)
            .await
            .context(action)?;
        let generation = previous.unwrap_or(0) + 1;
        let sidecar = checkpoint.sidecar.as_ref();
        sqlx::query(&sql.upsert_snapshot)
            .bind(&id.0)
            .bind(checkpoint.epoch)
            .bind(generation)
            .bind(checkpoint.through_sequence)
            .bind(checkpoint.revision)
            .bind(&checkpoint.canonical_text)
            .bind(&checkpoint.source_hash)
            .bind(checkpoint.state.clone())
            .bind(sidecar.map(|s| s.version))
            .bind(sidecar.map(|s| s.json.clone()))
            .bind(sidecar.map(|s| s.unanswered_decisions))
            .bind(now.0)
            .execute(&mut *conn)
            .await
            .context(action)?;
        sqlx::query(&sql.prune)
            .bind(&id.0)
            .bind(checkpoint.through_sequence)
            .execute(&mut *conn)
            .await
            .context(action)?;
        Ok(Checkpoint {
            epoch: checkpoint.epoch,
            generation,
            through_sequence: checkpoint.through_sequence,
            revision: checkpoint.revision,
            canonical_text: checkpoint.canonical_text.clone(),
            source_hash: checkpoint.source_hash.clone(),
            state: checkpoint.state.clone(),
            sidecar: checkpoint.sidecar.clone(),
            created_at: now,
        })
    }

    async fn updates_on(
        &self,
        conn: &mut AnyConnection,
        id: &ChannelId,
        after: i64,
        action: &str,
    ) -> StoreResult<Vec<JournalUpdate>> {
        let rows: Vec<(i64, i64, Vec<u8>)> =
            sqlx::query_as(&self.inner.collaboration_sql.updates_after)
                .bind(&id.0)
                .bind(after)
                .fetch_all(conn)
                .await
                .context(action)?;
        Ok(journal_updates(rows))
    }

    async fn events_on(
        &self,
        conn: &mut AnyConnection,
        id: &ChannelId,
        after: i64,
        action: &str,
    ) -> StoreResult<Vec<Event>> {
        let rows: Vec<(i64, String, String, i64)> =
            sqlx::query_as(&self.inner.collaboration_sql.events_after)
                .bind(&id.0)
                .bind(after)
                .fetch_all(conn)
                .await
                .context(action)?;
        Ok(rows
            .into_iter()
            .map(|(sequence, kind, payload, created_at)| Event {
                sequence,
                kind,
                payload,
                created_at: UnixMillis(created_at),
            })
            .collect())
    }

    /// Creates a program's channel with its revision-zero checkpoint on `conn`, inside the
    /// caller's fenced transaction, or returns the channel its creation key already names:
    /// `create_published`, and the research store's publication.
    pub(crate) async fn create_published_on(
        &self,
        conn: &mut AnyConnection,
        fence: &Fence,
        channel: &PublishedChannel,
        now: UnixMillis,
        action: &str,
    ) -> StoreResult<Channel> {
        let id = ChannelId::for_creation_key(&channel.repository, &channel.key);
        if let Some(existing) = self
            .channel_on(conn, &self.inner.channel_sql.lock, &id, action)
            .await?
        {
            fence.check_covers(existing.shard, action)?;
            return Ok(existing);
        }
        check_initial_checkpoint(&channel.checkpoint)?;
        let new = NewChannel {
            id: id.clone(),
            repository: channel.repository.clone(),
            title: channel.title.clone(),
            parent: channel.parent.clone(),
        };
        let created = self
            .insert_channel(
                conn,
                fence,
                &new,
                &channel.checkpoint.canonical_text,
                now,
                action,
            )
            .await?;
        self.install_checkpoint(conn, &id, &channel.checkpoint, now, action)
            .await?;
        if let Some(sidecar) = &channel.checkpoint.sidecar {
            self.write_state(conn, &id, sidecar, action).await?;
        }
        Ok(created)
    }

    /// The statement of a group member's commit, and where its savepoint goes (see
    /// `group_commit.rs`).
    pub(crate) fn member_commit(&self, commit: &Commit) -> (&str, MemberSavepoint) {
        let sql = &self.inner.collaboration_sql;
        if check_commit_shape(commit).is_err() {
            return (&sql.commit, MemberSavepoint::Separate);
        }
        if let Some(combined) = &sql.member_commit {
            return (combined, MemberSavepoint::InStatement);
        }
        // PostgreSQL's statement writes all of the commit or nothing (`commit_statement.rs`); only
        // the title's slug and the events would follow it.
        if Self::writes_together(commit) {
            (&sql.commit, MemberSavepoint::NotNeeded)
        } else {
            (&sql.commit, MemberSavepoint::Separate)
        }
    }

    /// The statement that writes several members of a group at once
    /// (`commit_statement::render_group`).
    pub(crate) fn group_statement(&self) -> &str {
        &self.inner.collaboration_sql.group_commit
    }

    /// Whether `commit` may be written by the group statement with other members of its group:
    /// a commit of a valid shape, which the statement writes all of or nothing of, since nothing
    /// (a title's slug, events) follows it.
    pub(crate) fn writes_together(commit: &Commit) -> bool {
        check_commit_shape(commit).is_ok() && commit.title.is_none() && commit.events.is_empty()
    }

    /// Writes `commits` in `tx` with `statement`, the group statement: each may be written
    /// together ([`Self::writes_together`]), and no two are on the same document. Answers what
    /// each wrote, in their order, `None` for one it did not write (to be answered from reads,
    /// as a refused lone commit is, by [`Self::finish_commit`]).
    pub(crate) async fn write_together(
        &self,
        tx: &mut FencedTransaction,
        statement: &str,
        commits: &[&Commit],
    ) -> StoreResult<Vec<Option<Written>>> {
        let action = "committing to documents";
        let rows = commit_statement::bind_group(sqlx::query(statement), commits)
            .bind(tx.now.0)
            .bind(covered_shard(&tx.fence))
            .fetch_all(tx.conn())
            .await
            .context(action)?;
        let mut by_channel = std::collections::HashMap::new();
        for row in &rows {
            let channel: String = column(row, 0, action)?;
            by_channel.insert(channel, written(row, 1, action)?);
        }
        Ok(commits
            .iter()
            .map(|commit| by_channel.remove(&commit.channel.0).flatten())
            .collect())
    }

    /// Runs one commit's statements in `tx`, a fenced transaction that may carry other
    /// documents' commits too (see `group_commit.rs`): what they wrote, or the answer when they
    /// must leave nothing behind. The revision check, the advance, the journal row, the sidecar,
    /// the search row and the operation record are one query, `statement` (the commit's own from
    /// `commit_statement.rs`, or [`Self::member_commit`]'s), and nothing is read that the writer
    /// already knows; a new title's slug and the events follow. Only a commit that cannot be
    /// written as it came (a stale or archived document, a repeated operation, an invalid shape)
    /// reads the channel and its earlier operation to say why, exactly as the rules order it.
    pub(crate) async fn commit_with(
        &self,
        tx: &mut FencedTransaction,
        commit: &Commit,
        statement: &str,
    ) -> StoreResult<CommitWrites> {
        let action = "committing to a document";
        let written = match check_commit_shape(commit) {
            Ok(()) => {
                let query = sqlx::query(statement).bind(covered_shard(&tx.fence));
                let query = bind_commit(query, commit);
                let rows = query
                    .bind(tx.now.0)
                    .fetch_all(tx.conn())
                    .await
                    .context(action)?;
                match rows.first() {
                    Some(row) => written(row, 0, action)?,
                    None => None,
                }
            }
            Err(_) => None,
        };
        self.finish_commit(tx, commit, written).await
    }

    /// One commit in a fenced transaction of its own, committed when it wrote. A commit of a
    /// valid shape checks its fence in the query that writes it, so it costs at most what a bare
    /// insert does: `BEGIN`, one query, `COMMIT`. On PostgreSQL a commit with nothing to write
    /// after its statement (no title, no events) is that one statement alone, one round trip.
    /// A commit of an invalid shape, and one that statement did not write, are answered from a
    /// fenced transaction that reads why, in the order of the rules.
    pub(crate) async fn commit_alone(
        &self,
        fence: &Fence,
        commit: &Commit,
    ) -> StoreResult<Committed> {
        let action = "committing to a document";
        if check_commit_shape(commit).is_ok() {
            let query = sqlx::query(&self.inner.collaboration_sql.fenced_commit)
                .bind(fence.lease.as_str())
                .bind(fence.token.0)
                .bind(covered_shard(fence));
            let query = bind_commit(query, commit);
            let nothing_follows = commit.title.is_none() && commit.events.is_empty();
            if !(nothing_follows && self.inner.runs_fenced_statements_alone()) {
                let (mut tx, row) = self
                    .inner
                    .begin_with_fenced_statement(fence, query, action)
                    .await?;
                let written = written(&row, 2, action)?;
                let writes = self.finish_commit(&mut tx, commit, written).await?;
                return writes.settle(tx, action).await;
            }
            let row = self
                .inner
                .run_fenced_statement(fence, query, action)
                .await?;
            // PostgreSQL's statement writes only a new operation, and records it with the rest
            // (see `commit_statement.rs`).
            if let Some(Written {
                revision, sequence, ..
            }) = written(&row, 2, action)?
            {
                return Ok(Committed {
                    revision,
                    sequence,
                    repeated: false,
                });
            }
        }
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let writes = self.finish_commit(&mut tx, commit, None).await?;
        writes.settle(tx, action).await
    }

    /// What follows a commit's statement: the answer when it wrote nothing or repeated an
    /// operation, otherwise the new title's slug and the events.
    pub(crate) async fn finish_commit(
        &self,
        tx: &mut FencedTransaction,
        commit: &Commit,
        written: Option<Written>,
    ) -> StoreResult<CommitWrites> {
        let action = "committing to a document";
        let sql = &self.inner.collaboration_sql;
        let (now, id) = (tx.now, &commit.channel);
        let Some(Written {
            revision,
            sequence,
            repository,
            recorded,
        }) = written
        else {
            let fence = tx.fence.clone();
            return self
                .refuse_commit(tx.conn(), &fence, commit, action)
                .await
                .map(CommitWrites::Nothing);
        };
        if recorded == 0 {
            // The operation ID was used before, at the revision this commit expected: answer as
            // a repeat, with the writes rolled back.
            return self
                .earlier_operation(tx.conn(), commit, action)
                .await?
                .map(CommitWrites::Nothing)
                .ok_or_else(|| StoreError::corrupt("an operation conflicted but cannot be read"));
        }
        if let Some(title) = &commit.title {
            let repository = Repository::new(repository)
                .or_corrupt("a stored document names an invalid repository")?;
            let slug = self
                .promote_slug(tx.conn(), id, &repository, title, action)
                .await?;
            sqlx::query(&sql.set_slug)
                .bind(&id.0)
                .bind(slug.as_str())
                .execute(tx.conn())
                .await
                .context(action)?;
        }
        for (ordinal, event) in commit.events.iter().enumerate() {
            sqlx::query(&sql.insert_event)
                .bind(&id.0)
                .bind(sequence)
                .bind(i64::try_from(ordinal).unwrap_or(i64::MAX))
                .bind(&event.kind)
                .bind(&event.payload)
                .bind(now.0)
                .execute(tx.conn())
                .await
                .context(action)?;
        }
        Ok(CommitWrites::Kept(Committed {
            revision,
            sequence,
            repeated: false,
        }))
    }

    /// The answer to a commit whose `UPDATE` matched nothing, made on the locked channel in the
    /// order of the rules: a missing document, then a shard `fence` does not cover, then a
    /// repeated operation, then the checks.
    async fn refuse_commit(
        &self,
        conn: &mut AnyConnection,
        fence: &Fence,
        commit: &Commit,
        action: &str,
    ) -> StoreResult<Committed> {
        let id = &commit.channel;
        let channel = self
            .channel_on(conn, &self.inner.channel_sql.lock, id, action)
            .await?
            .ok_or_else(|| unavailable(id))?;
        fence.check_covers(channel.shard, action)?;
        if let Some(repeat) = self.earlier_operation(conn, commit, action).await? {
            return Ok(repeat);
        }
        check_commit(&channel, commit)?;
        // The checks passed on the locked channel, so it changed after the `UPDATE` read it,
        // which the lease's one-at-a-time writes rule out; refuse rather than guess.
        Err(StoreError::conflict(format!(
            "document {id} changed while the commit was written"
        )))
    }

    /// The earlier commit of the same operation ID, answered as a repeat (or a conflict when
    /// its content differs); `None` when the ID is new.
    async fn earlier_operation(
        &self,
        conn: &mut AnyConnection,
        commit: &Commit,
        action: &str,
    ) -> StoreResult<Option<Committed>> {
        let earlier: Option<(Vec<u8>, i64, i64)> =
            sqlx::query_as(&self.inner.collaboration_sql.find_operation)
                .bind(&commit.channel.0)
                .bind(commit.operation.as_str())
                .fetch_optional(conn)
                .await
                .context(action)?;
        let Some((stored, revision, sequence)) = earlier else {
            return Ok(None);
        };
        // Dropped on purpose: the failure is the stored bytes themselves.
        let stored: [u8; 32] = stored
            .try_into()
            .map_err(|_| StoreError::corrupt("a stored operation fingerprint is not 32 bytes"))?;
        repeated(stored, revision, sequence, commit.fingerprint()).map(Some)
    }
}

#[async_trait]
impl CollaborationStore for SqlStorage {
    async fn create_channel(&self, fence: &Fence, channel: &NewChannel) -> StoreResult<Channel> {
        let action = "creating a document";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        let created = self
            .insert_channel(tx.conn(), fence, channel, "", now, action)
            .await?;
        tx.commit(action).await?;
        Ok(created)
    }

    async fn create_published(
        &self,
        fence: &Fence,
        channel: &PublishedChannel,
    ) -> StoreResult<Channel> {
        let action = "creating a document";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        let created = self
            .create_published_on(tx.conn(), fence, channel, now, action)
            .await?;
        tx.commit(action).await?;
        Ok(created)
    }

    async fn channel(&self, id: &ChannelId) -> StoreResult<Option<Channel>> {
        self.get_channel(id).await
    }

    async fn list_channels(&self, filter: &ChannelFilter) -> StoreResult<Vec<Channel>> {
        self.list(filter).await
    }

    async fn resolve_slug(
        &self,
        repository: &Repository,
        slug: &Slug,
    ) -> StoreResult<Option<Channel>> {
        self.resolve(repository, slug).await
    }

    async fn slugs_of(&self, id: &ChannelId) -> StoreResult<Vec<Slug>> {
        self.slugs(id).await
    }

    async fn children_of(
        &self,
        id: &ChannelId,
        include_archived: bool,
    ) -> StoreResult<Vec<Channel>> {
        self.children(id, include_archived).await
    }

    async fn commit(&self, fence: &Fence, commit: &Commit) -> StoreResult<Committed> {
        // A shard's fence is checked against the document's shard by the commit's own statement
        // (`commit_statement.rs`); a fence that covers no document is refused without a read.
        if fence.coverage() == Coverage::NoDocument {
            fence.check_covers(Shard(0), "committing to a document")?;
        }
        self.inner.commits.commit(self, fence, commit).await
    }

    async fn updates_after(
        &self,
        id: &ChannelId,
        sequence: i64,
    ) -> StoreResult<Vec<JournalUpdate>> {
        let action = "reading the journal";
        let mut conn = self.inner.pool.acquire().await.context(action)?;
        self.updates_on(&mut conn, id, sequence, action).await
    }

    async fn events_after(&self, id: &ChannelId, sequence: i64) -> StoreResult<Vec<Event>> {
        let action = "reading events";
        let mut conn = self.inner.pool.acquire().await.context(action)?;
        self.events_on(&mut conn, id, sequence, action).await
    }

    async fn save_checkpoint(
        &self,
        fence: &Fence,
        id: &ChannelId,
        checkpoint: &NewCheckpoint,
    ) -> StoreResult<Checkpoint> {
        let action = "saving a checkpoint";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        let channel = self
            .channel_on(tx.conn(), &self.inner.channel_sql.lock, id, action)
            .await?
            .ok_or_else(|| unavailable(id))?;
        fence.check_covers(channel.shard, action)?;
        let current = self
            .checkpoint_on(tx.conn(), id, action)
            .await?
            .map(|c| c.through_sequence);
        check_checkpoint(&channel, current, checkpoint)?;
        let saved = self
            .install_checkpoint(tx.conn(), id, checkpoint, now, action)
            .await?;
        tx.commit(action).await?;
        Ok(saved)
    }

    async fn replace_epoch(
        &self,
        fence: &Fence,
        id: &ChannelId,
        expected_revision: i64,
        checkpoint: &NewCheckpoint,
    ) -> StoreResult<Committed> {
        let action = "replacing a document's history";
        let sql = &self.inner.collaboration_sql;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        let channel = self
            .channel_on(tx.conn(), &self.inner.channel_sql.lock, id, action)
            .await?
            .ok_or_else(|| unavailable(id))?;
        fence.check_covers(channel.shard, action)?;
        let (revision, sequence) =
            check_epoch_replacement(&channel, expected_revision, checkpoint)?;
        sqlx::query(&sql.set_epoch)
            .bind(&id.0)
            .bind(revision)
            .bind(sequence)
            .bind(checkpoint.epoch)
            .bind(now.0)
            .execute(tx.conn())
            .await
            .context(action)?;
        sqlx::query(&sql.clear_journal)
            .bind(&id.0)
            .execute(tx.conn())
            .await
            .context(action)?;
        let installed = NewCheckpoint {
            through_sequence: sequence,
            revision,
            ..checkpoint.clone()
        };
        self.install_checkpoint(tx.conn(), id, &installed, now, action)
            .await?;
        if let Some(sidecar) = &checkpoint.sidecar {
            self.write_state(tx.conn(), id, sidecar, action).await?;
        }
        self.set_search_text(tx.conn(), id, &checkpoint.canonical_text, action)
            .await?;
        tx.commit(action).await?;
        Ok(Committed {
            revision,
            sequence,
            repeated: false,
        })
    }

    async fn read_for_recovery(
        &self,
        id: &ChannelId,
        receiver: &mut dyn RecoveryReceiver,
    ) -> StoreResult<()> {
        let action = "reading a document for recovery";
        let sql = &self.inner.collaboration_sql;
        let mut conn = self.inner.pool.acquire().await.context(action)?;
        if let Some(snapshot) =
            read_at_once(&mut conn, &self.inner.recovery_sql, id, action).await?
        {
            receiver.head(RecoveryHead {
                channel: snapshot.channel,
                sidecar: snapshot.sidecar,
                checkpoint: snapshot.checkpoint,
                expected_update_sequences: snapshot.expected_update_sequences,
            });
            receiver.journal(snapshot.updates);
            receiver.rest(snapshot.events);
            return Ok(());
        }
        let mut tx = begin_on_task(conn, self.inner.dialect.begin_snapshot())
            .await
            .context(action)?;
        let channel = self
            .channel_on(&mut tx, &self.inner.channel_sql.by_id, id, action)
            .await?
            .ok_or_else(|| unavailable(id))?;
        let sidecar: Option<(i64, String, i64)> = sqlx::query_as(&sql.state)
            .bind(&id.0)
            .fetch_optional(&mut *tx)
            .await
            .context(action)?;
        let checkpoint = self.checkpoint_on(&mut tx, id, action).await?;
        let after = checkpoint.as_ref().map_or(0, |c| c.through_sequence);
        let last = channel.sequence;
        let journal_sql = &self.inner.journal_sql;
        let expected = expected_sequences(&mut tx, journal_sql, id, after, action).await?;
        receiver.head(RecoveryHead {
            channel,
            sidecar: sidecar.map(|(version, json, unanswered_decisions)| SidecarState {
                version,
                json,
                unanswered_decisions,
            }),
            checkpoint,
            expected_update_sequences: expected,
        });
        read_journal(&mut tx, journal_sql, id, (after, last), receiver, action).await?;
        let events = self.events_on(&mut tx, id, after, action).await?;
        tx.commit().await.context(action)?;
        receiver.rest(events);
        Ok(())
    }

    async fn archive(&self, fence: &Fence, id: &ChannelId) -> StoreResult<Channel> {
        self.set_archived(fence, id, true).await
    }

    async fn restore(&self, fence: &Fence, id: &ChannelId) -> StoreResult<Channel> {
        self.set_archived(fence, id, false).await
    }

    async fn delete_archived(&self, fence: &Fence, id: &ChannelId) -> StoreResult<()> {
        self.delete(fence, id).await
    }

    async fn publish_description(
        &self,
        fence: &Fence,
        id: &ChannelId,
        description: &DescriptionDraft,
    ) -> StoreResult<bool> {
        self.describe(fence, id, description).await
    }

    async fn set_navigation(&self, user: &UserId, channel: Option<&ChannelId>) -> StoreResult<()> {
        self.save_navigation(user, channel).await
    }

    async fn navigation(&self, user: &UserId) -> StoreResult<Option<ChannelId>> {
        self.load_navigation(user).await
    }
}
