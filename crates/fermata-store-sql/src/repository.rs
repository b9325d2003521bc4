//! The SQL repository store (migration `0011`): repositories, their members, the audit of
//! `system_admin` overrides, keyset pages of documents, the owners of creation keys, and the
//! access generation the migration's triggers raise.
//!
//! Keyset pages compare text bytewise on both engines (`{bytewise}`), so a page boundary falls
//! where the memory adapter's does.

use async_trait::async_trait;
use fermata_store::repository::{MAX_PAGE, check_admin_kept};
use fermata_store::{
    Channel, ChannelId, CreationOrigin, DocumentCursor, DocumentScope, Fence, KeyedCreation,
    Member, NewOverride, Override, PublishedChannel, Repository, RepositoryRecord, RepositoryRole,
    RepositoryStore, StoreError, StoreResult, UserId,
};
use sqlx::AnyConnection;
use sqlx::any::AnyRow;

use crate::SqlStorage;
use crate::channel::{CHANNEL_COLUMNS, channel_from};
use crate::dialect::Dialect;
use crate::error::map;
use crate::row::{column, instant};

const REPOSITORY_COLUMNS: &str = "r.name, r.created_at, r.created_by";
const MEMBER_COLUMNS: &str = "m.repository, m.user_id, m.role, m.added_at";
const OVERRIDE_COLUMNS: &str = "o.id, o.repository, o.user_id, o.action, o.channel_id, o.at";

/// The repository statements, rendered for one dialect.
#[derive(Debug)]
pub(crate) struct Statements {
    insert_repository: String,
    repository: String,
    lock_repository: String,
    user_exists: String,
    role_of: String,
    count_admins: String,
    upsert_member: String,
    delete_member: String,
    member: String,
    members: String,
    repositories_of: String,
    all_repositories: String,
    insert_override: String,
    overrides: String,
    page_of_member: String,
    page_of_repository: String,
    origin: String,
    insert_origin: String,
    generation: String,
}

impl Statements {
    pub(crate) fn new(dialect: Dialect) -> Self {
        let role_order = "CASE m.role WHEN 'admin' THEN 0 WHEN 'editor' THEN 1 ELSE 2 END";
        // $2: archived ones too; $3: whether there is a cursor, then its instant and ID.
        let page = |scope: &str| {
            dialect.render(&format!(
                "SELECT {CHANNEL_COLUMNS} FROM channels c WHERE {scope} \
                 AND ($2 = 1 OR c.archived_at IS NULL) \
                 AND ($3 = 0 OR c.updated_at < $4 OR (c.updated_at = $4 AND c.id{{bytewise}} > $5)) \
                 ORDER BY c.updated_at DESC, c.id{{bytewise}} LIMIT $6"
            ))
        };
        Statements {
            insert_repository: dialect.render(
                "INSERT INTO repositories (name, created_at, created_by, fencing_token) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING",
            ),
            repository: dialect.render(&format!(
                "SELECT {REPOSITORY_COLUMNS} FROM repositories r WHERE r.name = $1"
            )),
            lock_repository: dialect.render(&format!(
                "SELECT {REPOSITORY_COLUMNS} FROM repositories r WHERE r.name = $1{{for_update}}"
            )),
            user_exists: dialect.render("SELECT id FROM users WHERE id = $1"),
            role_of: dialect.render(
                "SELECT role FROM repository_members WHERE repository = $1 AND user_id = $2",
            ),
            count_admins: dialect.render(
                "SELECT count(*) FROM repository_members WHERE repository = $1 AND role = 'admin'",
            ),
            upsert_member: dialect.render(
                "INSERT INTO repository_members (repository, user_id, role, added_at, fencing_token) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (repository, user_id) DO UPDATE \
                 SET role = excluded.role, added_at = excluded.added_at, \
                     fencing_token = excluded.fencing_token",
            ),
            delete_member: dialect.render(
                "DELETE FROM repository_members WHERE repository = $1 AND user_id = $2",
            ),
            member: dialect.render(&format!(
                "SELECT {MEMBER_COLUMNS} FROM repository_members m \
                 WHERE m.repository = $1 AND m.user_id = $2"
            )),
            members: dialect.render(&format!(
                "SELECT {MEMBER_COLUMNS} FROM repository_members m WHERE m.repository = $1 \
                 ORDER BY {role_order}, m.added_at, m.user_id{{bytewise}}"
            )),
            repositories_of: dialect.render(&format!(
                "SELECT {REPOSITORY_COLUMNS}, m.role FROM repository_members m \
                 JOIN repositories r ON r.name = m.repository \
                 WHERE m.user_id = $1 AND ($2 = 0 OR r.name{{bytewise}} > $3) \
                 ORDER BY r.name{{bytewise}} LIMIT $4"
            )),
            all_repositories: dialect.render(&format!(
                "SELECT {REPOSITORY_COLUMNS} FROM repositories r \
                 WHERE ($1 = 0 OR r.name{{bytewise}} > $2) ORDER BY r.name{{bytewise}} LIMIT $3"
            )),
            insert_override: dialect.render(
                "INSERT INTO repository_overrides (repository, user_id, action, channel_id, at, fencing_token) \
                 VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
            ),
            overrides: dialect.render(&format!(
                "SELECT {OVERRIDE_COLUMNS} FROM repository_overrides o WHERE o.repository = $1 \
                 ORDER BY o.id DESC LIMIT $2"
            )),
            page_of_member: page(
                "c.repository IN (SELECT repository FROM repository_members WHERE user_id = $1)",
            ),
            page_of_repository: page("c.repository = $1"),
            origin: dialect.render(
                "SELECT caller_id, fingerprint FROM document_creation_keys WHERE channel_id = $1",
            ),
            insert_origin: dialect.render(
                "INSERT INTO document_creation_keys (channel_id, caller_id, fingerprint) VALUES ($1, $2, $3)",
            ),
            generation: dialect.render("SELECT generation FROM access_generation WHERE id = 1"),
        }
    }
}

fn corrupt(what: &str) -> StoreError {
    StoreError::corrupt(format!("a stored repository row has an invalid {what}"))
}

fn repository_from(row: &AnyRow, action: &str) -> StoreResult<RepositoryRecord> {
    Ok(RepositoryRecord {
        name: Repository::new(column::<String>(row, 0, action)?).map_err(|_| corrupt("name"))?,
        created_at: instant(row, 1, action)?,
        created_by: column::<Option<String>>(row, 2, action)?.map(UserId),
    })
}

fn role_from(text: &str) -> StoreResult<RepositoryRole> {
    RepositoryRole::parse(text).ok_or_else(|| corrupt("role"))
}

fn member_from(row: &AnyRow, action: &str) -> StoreResult<Member> {
    Ok(Member {
        repository: Repository::new(column::<String>(row, 0, action)?)
            .map_err(|_| corrupt("repository"))?,
        user: UserId(column(row, 1, action)?),
        role: role_from(&column::<String>(row, 2, action)?)?,
        added_at: instant(row, 3, action)?,
    })
}

fn override_from(row: &AnyRow, action: &str) -> StoreResult<Override> {
    Ok(Override {
        id: column(row, 0, action)?,
        repository: Repository::new(column::<String>(row, 1, action)?)
            .map_err(|_| corrupt("repository"))?,
        user: UserId(column(row, 2, action)?),
        action: column(row, 3, action)?,
        document: column::<Option<String>>(row, 4, action)?.map(ChannelId),
        at: instant(row, 5, action)?,
    })
}

fn page_limit(limit: usize) -> i64 {
    i64::try_from(limit.min(MAX_PAGE)).unwrap_or(0)
}

fn no_repository(name: &Repository) -> StoreError {
    StoreError::missing(format!("no repository {name}"))
}

impl SqlStorage {
    /// The repository row, locked until `conn`'s transaction ends; `Missing` when absent.
    async fn lock_repository(
        &self,
        conn: &mut AnyConnection,
        name: &Repository,
        action: &str,
    ) -> StoreResult<RepositoryRecord> {
        let row = sqlx::query(&self.inner.repository_sql.lock_repository)
            .bind(name.as_str())
            .fetch_optional(conn)
            .await
            .map_err(|e| map(e, action))?;
        row.map(|row| repository_from(&row, action))
            .transpose()?
            .ok_or_else(|| no_repository(name))
    }

    async fn role_on(
        &self,
        conn: &mut AnyConnection,
        name: &Repository,
        user: &UserId,
        action: &str,
    ) -> StoreResult<Option<RepositoryRole>> {
        let role: Option<String> = sqlx::query_scalar(&self.inner.repository_sql.role_of)
            .bind(name.as_str())
            .bind(&user.0)
            .fetch_optional(conn)
            .await
            .map_err(|e| map(e, action))?;
        role.as_deref().map(role_from).transpose()
    }

    async fn admins_on(
        &self,
        conn: &mut AnyConnection,
        name: &Repository,
        action: &str,
    ) -> StoreResult<usize> {
        let count: i64 = sqlx::query_scalar(&self.inner.repository_sql.count_admins)
            .bind(name.as_str())
            .fetch_one(conn)
            .await
            .map_err(|e| map(e, action))?;
        Ok(usize::try_from(count).unwrap_or(0))
    }

    async fn origin_on(
        &self,
        conn: &mut AnyConnection,
        id: &ChannelId,
        action: &str,
    ) -> StoreResult<Option<CreationOrigin>> {
        let row: Option<(String, Vec<u8>)> = sqlx::query_as(&self.inner.repository_sql.origin)
            .bind(&id.0)
            .fetch_optional(conn)
            .await
            .map_err(|e| map(e, action))?;
        row.map(|(caller, fingerprint)| {
            Ok(CreationOrigin {
                caller: UserId(caller),
                fingerprint: fingerprint
                    .try_into()
                    .map_err(|_| corrupt("creation fingerprint"))?,
            })
        })
        .transpose()
    }
}

#[async_trait]
impl RepositoryStore for SqlStorage {
    async fn create_repository(
        &self,
        fence: &Fence,
        name: &Repository,
        creator: &UserId,
    ) -> StoreResult<(RepositoryRecord, bool)> {
        let action = "creating a repository";
        let sql = &self.inner.repository_sql;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        let inserted = tx
            .execute(
                sqlx::query(&sql.insert_repository)
                    .bind(name.as_str())
                    .bind(now.0)
                    .bind(&creator.0)
                    .bind(fence.token.0),
                action,
            )
            .await?;
        if inserted == 1 {
            tx.execute(
                sqlx::query(&sql.upsert_member)
                    .bind(name.as_str())
                    .bind(&creator.0)
                    .bind(RepositoryRole::Admin.as_str())
                    .bind(now.0)
                    .bind(fence.token.0),
                action,
            )
            .await?;
        }
        let record = self.lock_repository(tx.conn(), name, action).await?;
        tx.commit(action).await?;
        Ok((record, inserted == 1))
    }

    async fn repository(&self, name: &Repository) -> StoreResult<Option<RepositoryRecord>> {
        let action = "reading a repository";
        let row = sqlx::query(&self.inner.repository_sql.repository)
            .bind(name.as_str())
            .fetch_optional(&self.inner.pool)
            .await
            .map_err(|e| map(e, action))?;
        row.map(|row| repository_from(&row, action)).transpose()
    }

    async fn role_of(
        &self,
        name: &Repository,
        user: &UserId,
    ) -> StoreResult<Option<RepositoryRole>> {
        let action = "reading a repository role";
        let mut conn = self
            .inner
            .pool
            .acquire()
            .await
            .map_err(|e| map(e, action))?;
        self.role_on(&mut conn, name, user, action).await
    }

    async fn set_member(
        &self,
        fence: &Fence,
        name: &Repository,
        user: &UserId,
        role: RepositoryRole,
    ) -> StoreResult<Member> {
        let action = "changing a repository member";
        let sql = &self.inner.repository_sql;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        self.lock_repository(tx.conn(), name, action).await?;
        let exists: Option<String> = sqlx::query_scalar(&sql.user_exists)
            .bind(&user.0)
            .fetch_optional(tx.conn())
            .await
            .map_err(|e| map(e, action))?;
        if exists.is_none() {
            return Err(StoreError::missing("no such user"));
        }
        let current = self.role_on(tx.conn(), name, user, action).await?;
        if current == Some(role) {
            // Nothing changes, so nothing is written and no connection is checked again.
            let row = sqlx::query(&sql.member)
                .bind(name.as_str())
                .bind(&user.0)
                .fetch_one(tx.conn())
                .await
                .map_err(|e| map(e, action))?;
            return member_from(&row, action);
        }
        let admins = self.admins_on(tx.conn(), name, action).await?;
        check_admin_kept(admins, current == Some(RepositoryRole::Admin), Some(role))?;
        tx.execute(
            sqlx::query(&sql.upsert_member)
                .bind(name.as_str())
                .bind(&user.0)
                .bind(role.as_str())
                .bind(now.0)
                .bind(fence.token.0),
            action,
        )
        .await?;
        tx.commit(action).await?;
        Ok(Member {
            repository: name.clone(),
            user: user.clone(),
            role,
            added_at: now,
        })
    }

    async fn remove_member(
        &self,
        fence: &Fence,
        name: &Repository,
        user: &UserId,
    ) -> StoreResult<bool> {
        let action = "removing a repository member";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        self.lock_repository(tx.conn(), name, action).await?;
        let Some(current) = self.role_on(tx.conn(), name, user, action).await? else {
            return Ok(false);
        };
        let admins = self.admins_on(tx.conn(), name, action).await?;
        check_admin_kept(admins, current == RepositoryRole::Admin, None)?;
        tx.execute(
            sqlx::query(&self.inner.repository_sql.delete_member)
                .bind(name.as_str())
                .bind(&user.0),
            action,
        )
        .await?;
        tx.commit(action).await?;
        Ok(true)
    }

    async fn members(&self, name: &Repository) -> StoreResult<Vec<Member>> {
        let action = "listing repository members";
        let rows = sqlx::query(&self.inner.repository_sql.members)
            .bind(name.as_str())
            .fetch_all(&self.inner.pool)
            .await
            .map_err(|e| map(e, action))?;
        rows.iter().map(|row| member_from(row, action)).collect()
    }

    async fn repositories_of(
        &self,
        user: &UserId,
        after: Option<&Repository>,
        limit: usize,
    ) -> StoreResult<Vec<(RepositoryRecord, RepositoryRole)>> {
        let action = "listing repositories";
        let rows = sqlx::query(&self.inner.repository_sql.repositories_of)
            .bind(&user.0)
            .bind(i64::from(after.is_some()))
            .bind(after.map_or("", Repository::as_str).to_owned())
            .bind(page_limit(limit))
            .fetch_all(&self.inner.pool)
            .await
            .map_err(|e| map(e, action))?;
        rows.iter()
            .map(|row| {
                Ok((
                    repository_from(row, action)?,
                    role_from(&column::<String>(row, 3, action)?)?,
                ))
            })
            .collect()
    }

    async fn all_repositories(
        &self,
        after: Option<&Repository>,
        limit: usize,
    ) -> StoreResult<Vec<RepositoryRecord>> {
        let action = "listing repositories";
        let rows = sqlx::query(&self.inner.repository_sql.all_repositories)
            .bind(i64::from(after.is_some()))
            .bind(after.map_or("", Repository::as_str).to_owned())
            .bind(page_limit(limit))
            .fetch_all(&self.inner.pool)
            .await
            .map_err(|e| map(e, action))?;
        rows.iter()
            .map(|row| repository_from(row, action))
            .collect()
    }

    async fn record_override(&self, fence: &Fence, entry: &NewOverride) -> StoreResult<Override> {
        let action = "recording an audited override";
        entry.check()?;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        self.lock_repository(tx.conn(), &entry.repository, action)
            .await?;
        let id: i64 = sqlx::query_scalar(&self.inner.repository_sql.insert_override)
            .bind(entry.repository.as_str())
            .bind(&entry.user.0)
            .bind(&entry.action)
            .bind(entry.document.as_ref().map(|d| d.0.clone()))
            .bind(now.0)
            .bind(fence.token.0)
            .fetch_one(tx.conn())
            .await
            .map_err(|e| map(e, action))?;
        tx.commit(action).await?;
        Ok(Override {
            id,
            repository: entry.repository.clone(),
            user: entry.user.clone(),
            action: entry.action.clone(),
            document: entry.document.clone(),
            at: now,
        })
    }

    async fn overrides(&self, name: &Repository, limit: usize) -> StoreResult<Vec<Override>> {
        let action = "listing audited overrides";
        let rows = sqlx::query(&self.inner.repository_sql.overrides)
            .bind(name.as_str())
            .bind(page_limit(limit))
            .fetch_all(&self.inner.pool)
            .await
            .map_err(|e| map(e, action))?;
        rows.iter().map(|row| override_from(row, action)).collect()
    }

    async fn documents_page(
        &self,
        scope: &DocumentScope,
        include_archived: bool,
        after: Option<&DocumentCursor>,
        limit: usize,
    ) -> StoreResult<Vec<Channel>> {
        let action = "listing documents";
        let sql = &self.inner.repository_sql;
        let (statement, scope) = match scope {
            DocumentScope::MemberOf(user) => (&sql.page_of_member, user.0.clone()),
            DocumentScope::Repository(name) => (&sql.page_of_repository, name.as_str().to_owned()),
        };
        let rows = sqlx::query(statement)
            .bind(scope)
            .bind(i64::from(include_archived))
            .bind(i64::from(after.is_some()))
            .bind(after.map_or(0, |cursor| cursor.updated_at.0))
            .bind(after.map_or_else(String::new, |cursor| cursor.id.0.clone()))
            .bind(page_limit(limit))
            .fetch_all(&self.inner.pool)
            .await
            .map_err(|e| map(e, action))?;
        rows.iter().map(|row| channel_from(row, action)).collect()
    }

    async fn create_keyed(
        &self,
        fence: &Fence,
        channel: &PublishedChannel,
        origin: &CreationOrigin,
    ) -> StoreResult<KeyedCreation> {
        let action = "creating a document";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        let id = ChannelId::for_creation_key(&channel.repository, &channel.key);
        if let Some(existing) = self
            .channel_on(tx.conn(), &self.inner.channel_sql.lock, &id, action)
            .await?
        {
            let origin = self.origin_on(tx.conn(), &id, action).await?;
            return Ok(KeyedCreation {
                channel: existing,
                origin,
                created: false,
            });
        }
        let created = self
            .create_published_on(tx.conn(), fence, channel, now, action)
            .await?;
        tx.execute(
            sqlx::query(&self.inner.repository_sql.insert_origin)
                .bind(&id.0)
                .bind(&origin.caller.0)
                .bind(origin.fingerprint.to_vec()),
            action,
        )
        .await?;
        tx.commit(action).await?;
        Ok(KeyedCreation {
            channel: created,
            origin: Some(origin.clone()),
            created: true,
        })
    }

    async fn access_generation(&self) -> StoreResult<i64> {
        sqlx::query_scalar(&self.inner.repository_sql.generation)
            .fetch_one(&self.inner.pool)
            .await
            .map_err(|e| map(e, "reading the access generation"))
    }
}
