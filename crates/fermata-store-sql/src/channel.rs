//! The SQL collaboration store, part one: channels, slugs, children, archive and deletion,
//! descriptions and navigation references. Commits, replay, checkpoints and recovery are in
//! `collaboration.rs`.

use std::collections::HashSet;

use fermata_store::collaboration_rules::{check_new_channel, describe};
use fermata_store::{
    Channel, ChannelFilter, ChannelId, Description, DescriptionDraft, Fence, NewChannel,
    Repository, Shard, Slug, StoreError, StoreResult, StoreResultExt, UnixMillis, UserId,
    channel::check_title, channel::choose_slug,
};
use sqlx::AnyConnection;
use sqlx::any::AnyRow;

use crate::SqlStorage;
use crate::dialect::Dialect;
use crate::error::StoreContext;
use crate::row::{column, instant, optional_instant};

/// The channel columns, in the order `channel_from` reads them.
pub(crate) const CHANNEL_COLUMNS: &str = "c.id, c.repository, c.title, c.slug, c.parent_id, \
    c.archived_at, c.created_at, c.updated_at, c.revision, c.sequence, c.epoch, \
    c.description_text, c.description_revision, c.description_source_plan_revision, \
    c.description_source_hash, c.description_generator_version, c.description_job_id, \
    c.description_projected_at, c.shard";

/// The channel statements, rendered for one dialect.
#[derive(Debug)]
pub(crate) struct Statements {
    pub(crate) by_id: String,
    pub(crate) lock: String,
    hold: String,
    list: String,
    children: String,
    count_children: String,
    resolve: String,
    slugs_of: String,
    slugs_like: String,
    next_promotion: String,
    upsert_slug: String,
    insert: String,
    archive: String,
    restore: String,
    delete: String,
    describe: String,
    set_navigation: String,
    clear_navigation: String,
    navigation: String,
}

impl Statements {
    pub(crate) fn new(dialect: Dialect) -> Self {
        let select = |rest: &str| {
            dialect.render(&format!("SELECT {CHANNEL_COLUMNS} FROM channels c {rest}"))
        };
        Statements {
            by_id: select("WHERE c.id = $1"),
            lock: select("WHERE c.id = $1{for_update}"),
            hold: dialect.render("SELECT id FROM channels WHERE id = $1{for_key_share}"),
            list: select(
                "WHERE ($1 = '' OR c.repository = $1) AND ($2 = 1 OR c.archived_at IS NULL) \
                 ORDER BY c.updated_at DESC, c.id",
            ),
            children: select(
                "WHERE c.parent_id = $1 AND ($2 = 1 OR c.archived_at IS NULL) ORDER BY c.created_at, c.id",
            ),
            count_children: dialect.render("SELECT count(*) FROM channels WHERE parent_id = $1"),
            resolve: dialect.render(&format!(
                "SELECT {CHANNEL_COLUMNS} FROM channel_slugs s JOIN channels c ON c.id = s.channel_id \
                 WHERE s.repository = $1 AND s.slug = $2"
            )),
            slugs_of: dialect.render("SELECT slug FROM channel_slugs WHERE channel_id = $1 ORDER BY promoted DESC"),
            slugs_like: dialect.render(
                "SELECT slug, channel_id FROM channel_slugs \
                 WHERE repository = $1 AND (slug = $2 OR slug LIKE $3)",
            ),
            next_promotion: dialect.render(
                "SELECT COALESCE(MAX(promoted), 0) + 1 FROM channel_slugs WHERE channel_id = $1",
            ),
            upsert_slug: dialect.render(
                "INSERT INTO channel_slugs (repository, slug, channel_id, promoted) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (repository, slug) DO UPDATE SET promoted = excluded.promoted \
                 WHERE channel_slugs.channel_id = excluded.channel_id",
            ),
            insert: dialect.render(
                "INSERT INTO channels (id, repository, title, slug, parent_id, created_at, updated_at, \
                                       revision, sequence, epoch, shard) \
                 VALUES ($1, $2, $3, $4, $5, $6, $6, 0, 0, 1, $7)",
            ),
            archive: dialect.render(
                "UPDATE channels SET archived_at = $2, updated_at = $2 WHERE id = $1 AND archived_at IS NULL",
            ),
            restore: dialect.render(
                "UPDATE channels SET archived_at = NULL, updated_at = $2 WHERE id = $1 AND archived_at IS NOT NULL",
            ),
            delete: dialect.render("DELETE FROM channels WHERE id = $1"),
            describe: dialect.render(
                "UPDATE channels SET description_text = $2, description_revision = $3, \
                 description_source_plan_revision = $4, description_source_hash = $5, \
                 description_generator_version = $6, description_job_id = $7, description_projected_at = $8 \
                 WHERE id = $1",
            ),
            set_navigation: dialect.render(
                "INSERT INTO user_navigation (user_id, channel_id, updated_at) VALUES ($1, $2, {now}) \
                 ON CONFLICT (user_id) DO UPDATE SET channel_id = excluded.channel_id, updated_at = excluded.updated_at",
            ),
            clear_navigation: dialect.render("DELETE FROM user_navigation WHERE user_id = $1"),
            navigation: dialect.render("SELECT channel_id FROM user_navigation WHERE user_id = $1"),
        }
    }
}

/// A channel from the columns of `CHANNEL_COLUMNS`.
pub(crate) fn channel_from(row: &AnyRow, action: &str) -> StoreResult<Channel> {
    let corrupt = |what: &str| format!("a stored document has an invalid {what}");
    let description = match column::<Option<String>>(row, 11, action)? {
        None => None,
        Some(text) => Some(Description {
            text,
            revision: column(row, 12, action)?,
            source_plan_revision: column(row, 13, action)?,
            source_hash: column(row, 14, action)?,
            generator_version: column(row, 15, action)?,
            job_id: column(row, 16, action)?,
            projected_at: instant(row, 17, action)?,
        }),
    };
    Ok(Channel {
        id: ChannelId(column(row, 0, action)?),
        repository: Repository::new(column::<String>(row, 1, action)?)
            .or_corrupt(corrupt("repository"))?,
        title: column(row, 2, action)?,
        slug: Slug::new(column::<String>(row, 3, action)?).or_corrupt(corrupt("slug"))?,
        parent: column::<Option<String>>(row, 4, action)?.map(ChannelId),
        archived_at: optional_instant(row, 5, action)?,
        created_at: instant(row, 6, action)?,
        updated_at: instant(row, 7, action)?,
        revision: column(row, 8, action)?,
        sequence: column(row, 9, action)?,
        epoch: column(row, 10, action)?,
        shard: Shard(u16::try_from(column::<i64>(row, 18, action)?).or_corrupt(corrupt("shard"))?),
        description,
    })
}

pub(crate) fn unavailable(id: &ChannelId) -> StoreError {
    StoreError::missing(format!("document {id} is unavailable"))
}

impl SqlStorage {
    /// Fails with `Missing` unless the document exists, holding its row against deletion until
    /// `conn`'s transaction ends: the check of every store whose rows go with a document, so a
    /// write on a deleted document says so rather than tripping a foreign key.
    pub(crate) async fn require_document(
        &self,
        conn: &mut AnyConnection,
        id: &ChannelId,
        action: &str,
    ) -> StoreResult<()> {
        let found = sqlx::query(&self.inner.channel_sql.hold)
            .bind(&id.0)
            .fetch_optional(conn)
            .await
            .context(action)?;
        found.map(|_| ()).ok_or_else(|| unavailable(id))
    }

    /// The channel, read over `conn` with the given statement (plain or locking).
    pub(crate) async fn channel_on(
        &self,
        conn: &mut AnyConnection,
        sql: &str,
        id: &ChannelId,
        action: &str,
    ) -> StoreResult<Option<Channel>> {
        let row = sqlx::query(sql)
            .bind(&id.0)
            .fetch_optional(conn)
            .await
            .context(action)?;
        row.map(|row| channel_from(&row, action)).transpose()
    }

    /// The channels of a statement taking one text and one flag.
    pub(crate) async fn channels_where(
        &self,
        sql: &str,
        text: &str,
        flag: bool,
        action: &str,
    ) -> StoreResult<Vec<Channel>> {
        let rows = sqlx::query(sql)
            .bind(text.to_owned())
            .bind(i64::from(flag))
            .fetch_all(&self.inner.pool)
            .await
            .context(action)?;
        rows.iter().map(|row| channel_from(row, action)).collect()
    }

    /// Chooses the canonical slug for `title` and records it, over `conn` inside a write.
    pub(crate) async fn promote_slug(
        &self,
        conn: &mut AnyConnection,
        id: &ChannelId,
        repository: &Repository,
        title: &str,
        action: &str,
    ) -> StoreResult<Slug> {
        let sql = &self.inner.channel_sql;
        let base = Slug::from_title(title);
        let rows: Vec<(String, String)> = sqlx::query_as(&sql.slugs_like)
            .bind(repository.as_str())
            .bind(base.as_str())
            .bind(format!("{}-%", base.as_str()))
            .fetch_all(&mut *conn)
            .await
            .context(action)?;
        let mut own = Vec::new();
        let mut taken = HashSet::new();
        for (slug, owner) in rows {
            let Ok(slug) = Slug::new(slug) else { continue };
            if owner == id.0 {
                own.push(slug);
            } else {
                taken.insert(slug);
            }
        }
        let slug = choose_slug(&base, &own, &taken);
        let promotion: i64 = sqlx::query_scalar(&sql.next_promotion)
            .bind(&id.0)
            .fetch_one(&mut *conn)
            .await
            .context(action)?;
        sqlx::query(&sql.upsert_slug)
            .bind(repository.as_str())
            .bind(slug.as_str())
            .bind(&id.0)
            .bind(promotion)
            .execute(&mut *conn)
            .await
            .context(action)?;
        Ok(slug)
    }

    /// Inserts a new channel (and its first slug) over `conn`, checking title and parent.
    /// Inserts a new channel on `conn` with its slug and its search row holding `text`, inside
    /// the caller's transaction.
    pub(crate) async fn insert_channel(
        &self,
        conn: &mut AnyConnection,
        fence: &Fence,
        new: &NewChannel,
        text: &str,
        now: UnixMillis,
        action: &str,
    ) -> StoreResult<Channel> {
        check_title(&new.title)?;
        let parent = match &new.parent {
            Some(parent) => Some(
                self.channel_on(conn, &self.inner.channel_sql.by_id, parent, action)
                    .await?
                    .ok_or_else(|| StoreError::invalid("the parent document does not exist"))?,
            ),
            None => None,
        };
        let shard = check_new_channel(new, parent.as_ref(), self.inner.shard_count().await?)?;
        fence.check_covers(shard, action)?;
        let slug = Slug::from_title(&new.title);
        // Insert with the base slug first so the slug row's foreign key holds, then promote.
        sqlx::query(&self.inner.channel_sql.insert)
            .bind(&new.id.0)
            .bind(new.repository.as_str())
            .bind(&new.title)
            .bind(slug.as_str())
            .bind(new.parent.as_ref().map(|p| p.0.clone()))
            .bind(now.0)
            .bind(i64::from(shard.0))
            .execute(&mut *conn)
            .await
            .context(action)?;
        let slug = self
            .promote_slug(conn, &new.id, &new.repository, &new.title, action)
            .await?;
        self.set_canonical_slug(conn, &new.id, &slug, action)
            .await?;
        self.insert_search_row(conn, &new.id, &new.title, text, action)
            .await?;
        self.channel_on(conn, &self.inner.channel_sql.by_id, &new.id, action)
            .await?
            .ok_or_else(|| unavailable(&new.id))
    }

    async fn set_canonical_slug(
        &self,
        conn: &mut AnyConnection,
        id: &ChannelId,
        slug: &Slug,
        action: &str,
    ) -> StoreResult<()> {
        sqlx::query(&self.inner.collaboration_sql.set_slug)
            .bind(&id.0)
            .bind(slug.as_str())
            .execute(conn)
            .await
            .context(action)?;
        Ok(())
    }

    pub(crate) async fn get_channel(&self, id: &ChannelId) -> StoreResult<Option<Channel>> {
        let action = "reading a document";
        let mut conn = self.inner.pool.acquire().await.context(action)?;
        self.channel_on(&mut conn, &self.inner.channel_sql.by_id, id, action)
            .await
    }

    pub(crate) async fn list(&self, filter: &ChannelFilter) -> StoreResult<Vec<Channel>> {
        let repository = filter.repository.as_ref().map_or("", Repository::as_str);
        self.channels_where(
            &self.inner.channel_sql.list,
            repository,
            filter.include_archived,
            "listing documents",
        )
        .await
    }

    pub(crate) async fn children(
        &self,
        id: &ChannelId,
        include_archived: bool,
    ) -> StoreResult<Vec<Channel>> {
        self.channels_where(
            &self.inner.channel_sql.children,
            &id.0,
            include_archived,
            "listing child documents",
        )
        .await
    }

    pub(crate) async fn resolve(
        &self,
        repository: &Repository,
        slug: &Slug,
    ) -> StoreResult<Option<Channel>> {
        let action = "resolving a slug";
        let row = sqlx::query(&self.inner.channel_sql.resolve)
            .bind(repository.as_str())
            .bind(slug.as_str())
            .fetch_optional(&self.inner.pool)
            .await
            .context(action)?;
        row.map(|row| channel_from(&row, action)).transpose()
    }

    pub(crate) async fn slugs(&self, id: &ChannelId) -> StoreResult<Vec<Slug>> {
        let action = "listing slugs";
        let Some(channel) = self.get_channel(id).await? else {
            return Ok(Vec::new());
        };
        let rows: Vec<String> = sqlx::query_scalar(&self.inner.channel_sql.slugs_of)
            .bind(&id.0)
            .fetch_all(&self.inner.pool)
            .await
            .context(action)?;
        let mut slugs = vec![channel.slug.clone()];
        for slug in rows {
            let slug = Slug::new(slug).or_corrupt("a stored slug is invalid")?;
            if slug != channel.slug {
                slugs.push(slug);
            }
        }
        Ok(slugs)
    }

    /// Archives (`archive` true) or restores a channel under the fence. Idempotent.
    pub(crate) async fn set_archived(
        &self,
        fence: &fermata_store::Fence,
        id: &ChannelId,
        archive: bool,
    ) -> StoreResult<Channel> {
        let action = if archive {
            "archiving a document"
        } else {
            "restoring a document"
        };
        let sql = &self.inner.channel_sql;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        let channel = self
            .channel_on(tx.conn(), &sql.lock, id, action)
            .await?
            .ok_or_else(|| unavailable(id))?;
        fence.check_covers(channel.shard, action)?;
        sqlx::query(if archive { &sql.archive } else { &sql.restore })
            .bind(&id.0)
            .bind(now.0)
            .execute(tx.conn())
            .await
            .context(action)?;
        let channel = self
            .channel_on(tx.conn(), &sql.by_id, id, action)
            .await?
            .ok_or_else(|| unavailable(id))?;
        tx.commit(action).await?;
        Ok(channel)
    }

    pub(crate) async fn delete(
        &self,
        fence: &fermata_store::Fence,
        id: &ChannelId,
    ) -> StoreResult<()> {
        let action = "deleting a document";
        let sql = &self.inner.channel_sql;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let channel = self
            .channel_on(tx.conn(), &sql.lock, id, action)
            .await?
            .ok_or_else(|| unavailable(id))?;
        fence.check_covers(channel.shard, action)?;
        if channel.archived_at.is_none() {
            return Err(StoreError::conflict(
                "only an archived document can be deleted",
            ));
        }
        let children: i64 = sqlx::query_scalar(&sql.count_children)
            .bind(&id.0)
            .fetch_one(tx.conn())
            .await
            .context(action)?;
        if children > 0 {
            return Err(StoreError::conflict(
                "a document with children cannot be deleted",
            ));
        }
        // Foreign keys cascade to every row the channel owns and clear navigation references;
        // a research request's link to its published child restricts the deletion.
        sqlx::query(&sql.delete)
            .bind(&id.0)
            .execute(tx.conn())
            .await
            .map_err(|e| crate::research::deletion_error(e, action))?;
        tx.commit(action).await
    }

    pub(crate) async fn describe(
        &self,
        fence: &fermata_store::Fence,
        id: &ChannelId,
        draft: &DescriptionDraft,
    ) -> StoreResult<bool> {
        let action = "publishing a description";
        let sql = &self.inner.channel_sql;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        let channel = self
            .channel_on(tx.conn(), &sql.lock, id, action)
            .await?
            .ok_or_else(|| unavailable(id))?;
        fence.check_covers(channel.shard, action)?;
        if channel
            .description
            .as_ref()
            .is_some_and(|d| d.job_id == draft.job_id)
        {
            return Ok(false);
        }
        let description = describe(channel.description.as_ref(), draft, now);
        sqlx::query(&sql.describe)
            .bind(&id.0)
            .bind(&description.text)
            .bind(description.revision)
            .bind(description.source_plan_revision)
            .bind(&description.source_hash)
            .bind(&description.generator_version)
            .bind(&description.job_id)
            .bind(description.projected_at.0)
            .execute(tx.conn())
            .await
            .context(action)?;
        tx.commit(action).await?;
        Ok(true)
    }

    pub(crate) async fn save_navigation(
        &self,
        user: &UserId,
        channel: Option<&ChannelId>,
    ) -> StoreResult<()> {
        let action = "saving a navigation reference";
        let sql = &self.inner.channel_sql;
        let Some(channel) = channel else {
            let mut tx = self.inner.begin_write(action).await?;
            sqlx::query(&sql.clear_navigation)
                .bind(&user.0)
                .execute(&mut *tx)
                .await
                .context(action)?;
            tx.commit().await.context(action)?;
            return Ok(());
        };
        if self.get_channel(channel).await?.is_none() {
            return Err(unavailable(channel));
        }
        let mut tx = self.inner.begin_write(action).await?;
        sqlx::query(&sql.set_navigation)
            .bind(&user.0)
            .bind(&channel.0)
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        Ok(())
    }

    pub(crate) async fn load_navigation(&self, user: &UserId) -> StoreResult<Option<ChannelId>> {
        let row: Option<Option<String>> = sqlx::query_scalar(&self.inner.channel_sql.navigation)
            .bind(&user.0)
            .fetch_optional(&self.inner.pool)
            .await
            .context("reading a navigation reference")?;
        Ok(row.flatten().map(ChannelId))
    }
}
