//! The SQL session store.

use async_trait::async_trait;
use fermata_store::{
    Fence, NewSession, SecretHash, Session, SessionId, SessionLookup, SessionStore, SessionSweep,
    StoreError, StoreResult, StoreResultExt, UnixMillis, UserId,
};
use sqlx::AnyConnection;
use sqlx::any::AnyRow;

use crate::SqlStorage;
use crate::dialect::Dialect;
use crate::error::StoreContext;
use crate::row::{column, flag, instant};

/// The session statements, rendered for one dialect.
#[derive(Debug)]
pub(crate) struct Statements {
    insert: String,
    by_secret: String,
    by_id: String,
    reauthenticate: String,
    rotate: String,
    read: String,
    exists: String,
    delete: String,
    with_credentials: String,
    delete_expired: String,
    delete_metadata_only: String,
}

/// The session columns; a query that also reads the clock puts it right after them.
const COLUMNS: &str = "s.id, s.user_id, CASE WHEN s.secret_hash IS NULL THEN 1 ELSE 0 END, \
                       s.created_at, s.expires_at, s.authenticated_at, s.revision, s.credentials";
const CLOCK_INDEX: usize = 8;

impl Statements {
    pub(crate) fn new(dialect: Dialect) -> Self {
        Statements {
            insert: dialect.render(
                "WITH clock AS (SELECT {now} AS now) \
                 INSERT INTO web_sessions (id, user_id, secret_hash, created_at, expires_at, \
                                           authenticated_at, revision, credentials) \
                 SELECT $1, $2, $3, clock.now, clock.now + $4, clock.now, 1, $5 \
                 FROM clock WHERE $6 IS NULL \
                    OR EXISTS (SELECT 1 FROM users WHERE id = $2 AND password_hash = $6)",
            ),
            by_secret: dialect.render(&format!(
                "WITH clock AS (SELECT {{now}} AS now) \
                 SELECT {COLUMNS}, clock.now FROM web_sessions s, clock \
                 WHERE s.secret_hash = $1 AND s.expires_at > clock.now"
            )),
            by_id: dialect.render(&format!(
                "WITH clock AS (SELECT {{now}} AS now) \
                 SELECT {COLUMNS}, clock.now FROM web_sessions s, clock \
                 WHERE s.id = $1 AND s.expires_at > clock.now"
            )),
            reauthenticate: dialect.render(
                "WITH clock AS (SELECT {now} AS now) \
                 UPDATE web_sessions SET authenticated_at = clock.now, secret_hash = $2 \
                 FROM clock WHERE id = $1 AND expires_at > clock.now",
            ),
            rotate: dialect.render(
                "UPDATE web_sessions SET credentials = $3, revision = revision + 1 \
                 WHERE id = $1 AND revision = $2",
            ),
            read: dialect.render(&format!(
                "SELECT {COLUMNS} FROM web_sessions s WHERE s.id = $1"
            )),
            exists: dialect.render("SELECT count(*) FROM web_sessions WHERE id = $1"),
            delete: dialect.render("DELETE FROM web_sessions WHERE id = $1"),
            with_credentials: dialect.render(&format!(
                "SELECT {COLUMNS} FROM web_sessions s WHERE s.credentials IS NOT NULL ORDER BY s.id"
            )),
            delete_expired: dialect.render("DELETE FROM web_sessions WHERE expires_at <= $1"),
            delete_metadata_only: dialect
                .render("DELETE FROM web_sessions WHERE secret_hash IS NULL"),
        }
    }
}

fn session_from(row: &AnyRow, action: &str) -> StoreResult<Session> {
    Ok(Session {
        id: SessionId(column(row, 0, action)?),
        user: UserId(column(row, 1, action)?),
        metadata_only: flag(row, 2, action)?,
        created_at: instant(row, 3, action)?,
        expires_at: instant(row, 4, action)?,
        authenticated_at: instant(row, 5, action)?,
        revision: column(row, 6, action)?,
        credentials: column(row, 7, action)?,
    })
}

fn lookup_from(row: &AnyRow, action: &str) -> StoreResult<SessionLookup> {
    Ok(SessionLookup {
        session: session_from(row, action)?,
        now: instant(row, CLOCK_INDEX, action)?,
    })
}

fn ended() -> StoreError {
    StoreError::missing("the session has ended")
}

/// How a live session is looked up.
enum Key<'a> {
    Id(&'a SessionId),
    Secret(&'a SecretHash),
}

impl SqlStorage {
    /// The session row, expired or not.
    async fn stored_session(&self, id: &SessionId, action: &str) -> StoreResult<Option<Session>> {
        let row = sqlx::query(&self.inner.session_sql.read)
            .bind(&id.0)
            .fetch_optional(&self.inner.pool)
            .await
            .context(action)?;
        row.map(|row| session_from(&row, action)).transpose()
    }

    async fn live_session(&self, key: Key<'_>) -> StoreResult<Option<SessionLookup>> {
        let action = "reading a session";
        let sql = &self.inner.session_sql;
        let query = match key {
            Key::Id(id) => sqlx::query(&sql.by_id).bind(id.0.clone()),
            Key::Secret(hash) => sqlx::query(&sql.by_secret).bind(hash.0.to_vec()),
        };
        let row = query
            .fetch_optional(&self.inner.pool)
            .await
            .context(action)?;
        row.map(|row| lookup_from(&row, action)).transpose()
    }
}

#[async_trait]
impl SessionStore for SqlStorage {
    async fn create_session(&self, new: &NewSession) -> StoreResult<Session> {
        let action = "creating a session";
        let ttl =
            i64::try_from(new.ttl.as_millis()).or_invalid("a session lifetime is too long")?;
        let mut tx = self.inner.begin_write(action).await?;
        let inserted = sqlx::query(&self.inner.session_sql.insert)
            .bind(&new.id.0)
            .bind(&new.user.0)
            .bind(new.secret_hash.map(|hash| hash.0.to_vec()))
            .bind(ttl)
            .bind(new.credentials.clone())
            .bind(new.verified_password_hash.as_deref())
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        if inserted.rows_affected() == 0 {
            return Err(password_changed());
        }
        // Read back what the database recorded (even if it has already expired).
        self.stored_session(&new.id, action)
            .await?
            .ok_or_else(|| StoreError::unavailable("the new session vanished"))
    }

    async fn session_by_secret(&self, hash: &SecretHash) -> StoreResult<Option<SessionLookup>> {
        self.live_session(Key::Secret(hash)).await
    }

    async fn session(&self, id: &SessionId) -> StoreResult<Option<SessionLookup>> {
        self.live_session(Key::Id(id)).await
    }

    async fn reauthenticate(
        &self,
        id: &SessionId,
        secret_hash: &SecretHash,
    ) -> StoreResult<Session> {
        let action = "re-authenticating a session";
        let mut tx = self.inner.begin_write(action).await?;
        let done = sqlx::query(&self.inner.session_sql.reauthenticate)
            .bind(&id.0)
            .bind(secret_hash.0.to_vec())
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        if done.rows_affected() == 0 {
            return Err(ended());
        }
        self.session(id)
            .await?
            .map(|lookup| lookup.session)
            .ok_or_else(ended)
    }

    async fn rotate_session_credentials(
        &self,
        id: &SessionId,
        expected_revision: i64,
        credentials: Option<&[u8]>,
    ) -> StoreResult<Session> {
        let action = "rotating session credentials";
        let sql = &self.inner.session_sql;
        let mut tx = self.inner.begin_write(action).await?;
        let done = sqlx::query(&sql.rotate)
            .bind(&id.0)
            .bind(expected_revision)
            .bind(credentials.map(<[u8]>::to_vec))
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        if done.rows_affected() == 0 {
            let count: i64 = sqlx::query_scalar(&sql.exists)
                .bind(&id.0)
                .fetch_one(&self.inner.pool)
                .await
                .context(action)?;
            return Err(if count == 0 {
                ended()
            } else {
                StoreError::conflict("the session's credentials changed meanwhile")
            });
        }
        let row = sqlx::query(&sql.read)
            .bind(&id.0)
            .fetch_optional(&self.inner.pool)
            .await
            .context(action)?;
        row.map(|row| session_from(&row, action))
            .transpose()?
            .ok_or_else(ended)
    }

    async fn delete_session(&self, id: &SessionId) -> StoreResult<bool> {
        let action = "deleting a session";
        let mut tx = self.inner.begin_write(action).await?;
        let done = sqlx::query(&self.inner.session_sql.delete)
            .bind(&id.0)
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        Ok(done.rows_affected() == 1)
    }

    async fn sessions_with_credentials(&self) -> StoreResult<Vec<Session>> {
        let action = "listing sessions with credentials";
        let rows = sqlx::query(&self.inner.session_sql.with_credentials)
            .fetch_all(&self.inner.pool)
            .await
            .context(action)?;
        rows.iter().map(|row| session_from(row, action)).collect()
    }

    async fn sweep_sessions(&self, fence: &Fence) -> StoreResult<SessionSweep> {
        let action = "sweeping sessions";
        let sql = &self.inner.session_sql;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        let sweep = sweep_in(tx.conn(), sql, now, action).await?;
        tx.commit(action).await?;
        Ok(sweep)
    }
}

/// Removes expired (at `now`) and metadata-only sessions inside the caller's fenced transaction.
pub(crate) async fn sweep_in(
    conn: &mut AnyConnection,
    sql: &Statements,
    now: UnixMillis,
    action: &str,
) -> StoreResult<SessionSweep> {
    let expired = sqlx::query(&sql.delete_expired)
        .bind(now.0)
        .execute(&mut *conn)
        .await
        .context(action)?
        .rows_affected();
    let metadata_only = sqlx::query(&sql.delete_metadata_only)
        .execute(&mut *conn)
        .await
        .context(action)?
        .rows_affected();
    Ok(SessionSweep {
        expired,
        metadata_only,
    })
}

fn password_changed() -> StoreError {
    StoreError::conflict("the password changed while the login was checked")
}
