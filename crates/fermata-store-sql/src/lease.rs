//! The SQL lease store and renewal channel.
//!
//! Acquisition locks the row `FOR UPDATE`, so a takeover waits for every fenced write in flight
//! (they hold it `FOR KEY SHARE`). Renewal locks it `FOR NO KEY UPDATE`, which no fenced write
//! conflicts with but a takeover does, and only then checks the expiry, so a renewal that waited
//! behind a takeover cannot extend a lease that expired meanwhile. Every expiry decision uses the
//! database's clock, read after the row lock is held. `peek` is one plain statement.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use fermata_store::{
    Acquisition, ErrorChain, FencingToken, Lease, LeaseName, LeasePeek, LeaseRecord, LeaseRenewal,
    LeaseStore, StoreError, StoreResult, UnixMillis,
};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Connection, Executor, Row};

use crate::dialect::Dialect;
use crate::error::StoreContext;
use crate::{Inner, SqlStorage};

/// The whole-database lease's name, as the statements spell it.
const WHOLE: &str = "fermata:writer";

/// How long abandoning a renewal connection may spend ending its server session.
const TERMINATE_TIMEOUT: Duration = Duration::from_secs(2);

/// The lease statements, rendered for one dialect.
#[derive(Debug)]
pub(crate) struct Statements {
    insert_if_absent: String,
    lock_for_takeover: String,
    grant_if_free: String,
    read: String,
    lock_for_renewal: String,
    extend_if_live: String,
    lock_each_for_renewal: String,
    extend_each_if_live: String,
    release: String,
    peek: String,
    lock_whole_shared: String,
    lock_cluster_shared: String,
    live_cluster_writer: String,
}

impl Statements {
    pub(crate) fn new(dialect: Dialect) -> Self {
        // The leases renewed at once, `(name, token)`, read from the JSON array bound as `$1`.
        let listed = match dialect {
            Dialect::Postgres => "jsonb_to_recordset($1::jsonb) AS m(name text, token bigint)",
            Dialect::Sqlite => {
                "(SELECT value ->> 'name' AS name, value ->> 'token' AS token \
                  FROM json_each($1)) AS m"
            }
        };
        Statements {
            // A never-granted lease is a released row with token 0, so the first grant gets 1.
            insert_if_absent: dialect.render(
                "INSERT INTO leases (name, token, holder, acquired_at, expires_at, released_at) \
                 VALUES ($1, 0, '', 0, 0, 0) ON CONFLICT (name) DO NOTHING",
            ),
            lock_for_takeover: dialect.render("SELECT token FROM leases WHERE name = $1{for_update}"),
            grant_if_free: dialect.render(
                "WITH clock AS (SELECT {now} AS now) \
                 UPDATE leases SET token = token + 1, holder = $2, acquired_at = clock.now, \
                        expires_at = clock.now + $3, released_at = NULL \
                 FROM clock \
                 WHERE name = $1 AND (released_at IS NOT NULL OR expires_at <= clock.now) \
                 RETURNING token, expires_at",
            ),
            read: dialect.render(
                "SELECT token, holder, acquired_at, expires_at, released_at FROM leases WHERE name = $1",
            ),
            lock_for_renewal: dialect
                .render("SELECT token FROM leases WHERE name = $1{for_no_key_update}"),
            extend_if_live: dialect.render(
                "WITH clock AS (SELECT {now} AS now) \
                 UPDATE leases SET expires_at = clock.now + $3 \
                 FROM clock \
                 WHERE name = $1 AND token = $2 AND released_at IS NULL AND expires_at > clock.now \
                 RETURNING expires_at",
            ),
            lock_each_for_renewal: dialect.render(&format!(
                "SELECT l.name FROM leases l WHERE l.name IN (SELECT m.name FROM {listed}) \
                 ORDER BY l.name{{for_no_key_update}}"
            )),
            extend_each_if_live: dialect.render(&format!(
                "WITH clock AS (SELECT {{now}} AS now) \
                 UPDATE leases SET expires_at = clock.now + $2 \
                 FROM clock, {listed} \
                 WHERE leases.name = m.name AND leases.token = m.token \
                   AND leases.released_at IS NULL AND leases.expires_at > clock.now \
                 RETURNING leases.name, leases.expires_at"
            )),
            release: dialect.render(
                "WITH clock AS (SELECT {now} AS now) \
                 UPDATE leases SET released_at = clock.now \
                 FROM clock \
                 WHERE name = $1 AND token = $2 AND released_at IS NULL",
            ),
            peek: dialect.render(
                "WITH clock AS (SELECT {now} AS now) \
                 SELECT l.token, l.holder, l.acquired_at, l.expires_at, l.released_at, clock.now \
                 FROM clock LEFT JOIN leases l ON l.name = $1",
            ),
            // A cluster's lease is acquired holding the whole-database lease's row shared, which
            // its acquisition holds exclusively: the two never grant at once.
            lock_whole_shared: dialect.render(&format!(
                "SELECT token FROM leases WHERE name = '{WHOLE}'{{for_share}}"
            )),
            // Taken by the whole-database lease's acquisition before it reads the cluster's
            // leases: a renewal of one of them holds its row until it commits, so the read
            // after this lock sees the renewal, never an expiry it overtook.
            lock_cluster_shared: dialect.render(
                "SELECT name FROM leases \
                 WHERE name LIKE 'fermata:writer:%' OR name = 'fermata:coordinator' \
                 ORDER BY name{for_share}",
            ),
            live_cluster_writer: dialect.render(
                "WITH clock AS (SELECT {now} AS now) \
                 SELECT l.token, l.holder, l.acquired_at, l.expires_at, l.released_at, l.name \
                 FROM leases l, clock \
                 WHERE (l.name LIKE 'fermata:writer:%' OR l.name = 'fermata:coordinator') \
                   AND l.released_at IS NULL AND l.expires_at > clock.now \
                 ORDER BY l.name LIMIT 1",
            ),
        }
    }
}

fn millis(ttl: Duration) -> StoreResult<i64> {
    i64::try_from(ttl.as_millis())
        .ok()
        .filter(|ms| *ms > 0)
        .ok_or_else(|| StoreError::invalid("a lease time-to-live is between 1 ms and i64::MAX ms"))
}

/// Reads a lease row from the first five columns of `row`; `None` for a never-granted lease.
pub(crate) fn record_from(
    name: &LeaseName,
    row: &AnyRow,
    action: &str,
) -> StoreResult<Option<LeaseRecord>> {
    let token: Option<i64> = row.try_get(0).context(action)?;
    let Some(token) = token.filter(|token| *token > 0) else {
        return Ok(None);
    };
    let released_at: Option<i64> = row.try_get(4).context(action)?;
    Ok(Some(LeaseRecord {
        name: name.clone(),
        token: FencingToken(token),
        holder: row.try_get(1).context(action)?,
        acquired_at: UnixMillis(row.try_get(2).context(action)?),
        expires_at: UnixMillis(row.try_get(3).context(action)?),
        released: released_at.is_some(),
    }))
}

/// Renews `lease` over `conn`; shared by the pooled store and the renewal channel.
async fn renew_on(
    conn: &mut AnyConnection,
    inner: &Inner,
    lease: &Lease,
    ttl: Duration,
) -> StoreResult<Lease> {
    let action = "renewing a lease";
    let ttl = millis(ttl)?;
    let sql = &inner.lease_sql;
    let mut tx = conn
        .begin_with(inner.dialect.begin_write())
        .await
        .context(action)?;
    sqlx::query(&sql.lock_for_renewal)
        .bind(lease.name.as_str())
        .fetch_optional(&mut *tx)
        .await
        .context(action)?;
    let extended: Option<i64> = sqlx::query_scalar(&sql.extend_if_live)
        .bind(lease.name.as_str())
        .bind(lease.token.0)
        .bind(ttl)
        .fetch_optional(&mut *tx)
        .await
        .context(action)?;
    tx.commit().await.context(action)?;
    match extended {
        Some(expires_at) => Ok(Lease {
            expires_at: UnixMillis(expires_at),
            ..lease.clone()
        }),
        None => Err(StoreError::fenced(format!(
            "lease `{}` with token {} was lost before it could be renewed",
            lease.name, lease.token
        ))),
    }
}

/// Renews each of `leases` in one transaction: every row locked as [`renew_on`] locks one (in
/// the order of their names, so two renewals of overlapping sets cannot deadlock), then every
/// live one extended by one statement.
async fn renew_each_on(
    inner: &Inner,
    leases: &[Lease],
    ttl: Duration,
) -> StoreResult<Vec<Option<Lease>>> {
    let action = "renewing leases";
    let ttl = millis(ttl)?;
    let sql = &inner.lease_sql;
    let listed: Vec<serde_json::Value> = leases
        .iter()
        .map(|lease| serde_json::json!({"name": lease.name.as_str(), "token": lease.token.0}))
        .collect();
    let listed = serde_json::Value::Array(listed).to_string();
    let mut tx = inner.begin_ungated(action).await?;
    sqlx::query(&sql.lock_each_for_renewal)
        .bind(&listed)
        .fetch_all(&mut *tx)
        .await
        .context(action)?;
    let rows = sqlx::query(&sql.extend_each_if_live)
        .bind(&listed)
        .bind(ttl)
        .fetch_all(&mut *tx)
        .await
        .context(action)?;
    tx.commit().await.context(action)?;
    let mut extended = std::collections::HashMap::new();
    for row in &rows {
        let name: String = row.try_get(0).context(action)?;
        let expires_at: i64 = row.try_get(1).context(action)?;
        extended.insert(name, expires_at);
    }
    Ok(leases
        .iter()
        .map(|lease| {
            extended.get(lease.name.as_str()).map(|expires_at| Lease {
                expires_at: UnixMillis(*expires_at),
                ..lease.clone()
            })
        })
        .collect())
}

impl SqlStorage {
    /// For a cluster's lease, the whole-database lease when it is live, read holding its row
    /// shared (which that lease's acquisition waits for); `None` for any other lease.
    async fn excluding_lease(
        &self,
        conn: &mut AnyConnection,
        name: &LeaseName,
        action: &str,
    ) -> StoreResult<Option<LeaseRecord>> {
        if !name.is_cluster_writer() {
            return Ok(None);
        }
        let sql = &self.inner.lease_sql;
        sqlx::query(&sql.insert_if_absent)
            .bind(WHOLE)
            .execute(&mut *conn)
            .await
            .context(action)?;
        sqlx::query(&sql.lock_whole_shared)
            .fetch_one(&mut *conn)
            .await
            .context(action)?;
        let row = sqlx::query(&sql.peek)
            .bind(WHOLE)
            .fetch_one(&mut *conn)
            .await
            .context(action)?;
        let now = UnixMillis(row.try_get(5).context(action)?);
        Ok(record_from(&LeaseName::WRITER, &row, action)?.filter(|record| record.is_live(now)))
    }
}

#[async_trait]
impl LeaseStore for SqlStorage {
    async fn acquire(
        &self,
        name: &LeaseName,
        holder: &str,
        ttl: Duration,
    ) -> StoreResult<Acquisition> {
        let action = "acquiring a lease";
        let ttl = millis(ttl)?;
        let inner = &self.inner;
        let sql = &inner.lease_sql;
        let mut tx = inner.begin_ungated(action).await?;
        sqlx::query(&sql.insert_if_absent)
            .bind(name.as_str())
            .execute(&mut *tx)
            .await
            .context(action)?;
        if let Some(excluding) = self.excluding_lease(&mut tx, name, action).await? {
            tx.rollback().await.context(action)?;
            return Ok(Acquisition::Held(excluding));
        }
        sqlx::query(&sql.lock_for_takeover)
            .bind(name.as_str())
            .fetch_one(&mut *tx)
            .await
            .context(action)?;
        if *name == LeaseName::WRITER {
            sqlx::query(&sql.lock_cluster_shared)
                .fetch_all(&mut *tx)
                .await
                .context(action)?;
        }
        if *name == LeaseName::WRITER
            && let Some(row) = sqlx::query(&sql.live_cluster_writer)
                .fetch_optional(&mut *tx)
                .await
                .context(action)?
        {
            let held = LeaseName::new(row.try_get::<String, _>(5).context(action)?)?;
            let record = record_from(&held, &row, action)?
                .ok_or_else(|| StoreError::corrupt("a live lease has no holder"))?;
            tx.rollback().await.context(action)?;
            return Ok(Acquisition::Held(record));
        }
        let granted = sqlx::query(&sql.grant_if_free)
            .bind(name.as_str())
            .bind(holder)
            .bind(ttl)
            .fetch_optional(&mut *tx)
            .await
            .context(action)?;
        if let Some(row) = granted {
            let lease = Lease {
                name: name.clone(),
                token: FencingToken(row.try_get(0).context(action)?),
                holder: holder.to_owned(),
                expires_at: UnixMillis(row.try_get(1).context(action)?),
            };
            tx.commit().await.context(action)?;
            return Ok(Acquisition::Granted(lease));
        }
        let row = sqlx::query(&sql.read)
            .bind(name.as_str())
            .fetch_one(&mut *tx)
            .await
            .context(action)?;
        tx.rollback().await.context(action)?;
        let record = record_from(name, &row, action)?
            .ok_or_else(|| StoreError::corrupt("a lease that is not free has no holder"))?;
        Ok(Acquisition::Held(record))
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> StoreResult<Lease> {
        // On a task of its own: a caller that stops waiting (a renewal's attempt timeout) cannot
        // cut its transaction short on a pooled connection (see `write_transaction.rs`).
        let inner = Arc::clone(&self.inner);
        let lease = lease.clone();
        let renewal = tokio::spawn(async move {
            let mut conn = inner.pool.acquire().await.context("renewing a lease")?;
            renew_on(&mut conn, &inner, &lease, ttl).await
        });
        renewal
            .await
            .map_err(|_| StoreError::unavailable("renewing a lease: the renewal's task failed"))?
    }

    async fn renew_each(&self, leases: &[Lease], ttl: Duration) -> StoreResult<Vec<Option<Lease>>> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        // Its transaction begins as every write's does, out of reach of a caller that stops
        // waiting (see `write_transaction.rs`).
        renew_each_on(&self.inner, leases, ttl).await
    }

    async fn release(&self, lease: &Lease) -> StoreResult<bool> {
        let done = sqlx::query(&self.inner.lease_sql.release)
            .bind(lease.name.as_str())
            .bind(lease.token.0)
            .execute(&self.inner.pool)
            .await
            .context("releasing a lease")?;
        Ok(done.rows_affected() == 1)
    }

    async fn peek(&self, name: &LeaseName) -> StoreResult<LeasePeek> {
        let action = "reading a lease";
        let row = sqlx::query(&self.inner.lease_sql.peek)
            .bind(name.as_str())
            .fetch_one(&self.inner.pool)
            .await
            .context(action)?;
        Ok(LeasePeek {
            record: record_from(name, &row, action)?,
            now: UnixMillis(row.try_get(5).context(action)?),
        })
    }

    fn renewal_channel(&self) -> Box<dyn LeaseRenewal> {
        Box::new(SqlRenewal {
            inner: Arc::clone(&self.inner),
            conn: None,
            server_session: None,
        })
    }
}

/// A renewal channel: one connection outside the shared pool, opened on first use.
struct SqlRenewal {
    inner: Arc<Inner>,
    conn: Option<AnyConnection>,
    /// The server session behind `conn`, where the database has one, so an abandoned renewal
    /// can be ended from the shared pool.
    server_session: Option<i64>,
}

impl SqlRenewal {
    async fn open(&mut self) -> StoreResult<&mut AnyConnection> {
        if self.conn.is_none() {
            let action = "opening the lease renewal connection";
            let mut conn = self.inner.dedicated_connection().await?;
            for setting in self.inner.dialect.renewal_session_settings() {
                conn.execute(*setting).await.context(action)?;
            }
            if let Some(query) = self.inner.dialect.server_session_id() {
                let id: i64 = sqlx::query_scalar(query)
                    .fetch_one(&mut conn)
                    .await
                    .context(action)?;
                self.server_session = Some(id);
            }
            self.conn = Some(conn);
        }
        self.conn
            .as_mut()
            .ok_or_else(|| StoreError::unavailable("the lease renewal connection is not open"))
    }
}

#[async_trait]
impl LeaseRenewal for SqlRenewal {
    async fn renew(&mut self, lease: &Lease, ttl: Duration) -> StoreResult<Lease> {
        let inner = Arc::clone(&self.inner);
        let conn = self.open().await?;
        let renewed = renew_on(conn, &inner, lease, ttl).await;
        if renewed.is_err() {
            // Whatever failed, the connection is not trusted again: it may be broken (a restarted
            // or unreachable server), or left inside a transaction its failed COMMIT could not
            // end (a full disk). The next attempt opens a new one. The server ended the session
            // with the error, or ends it when the socket closes.
            self.conn = None;
            self.server_session = None;
        }
        renewed
    }

    async fn abandon(&mut self) {
        // The connection may be stuck: drop it rather than wait for a polite close.
        drop(self.conn.take());
        let (Some(id), Some(terminate)) = (
            self.server_session.take(),
            self.inner.dialect.terminate_server_session(),
        ) else {
            return;
        };
        let ended = tokio::time::timeout(
            TERMINATE_TIMEOUT,
            sqlx::query(terminate).bind(id).execute(&self.inner.pool),
        )
        .await;
        match ended {
            Ok(Ok(_)) => tracing::info!(session = id, "ended the abandoned lease renewal session"),
            Ok(Err(error)) => tracing::warn!(
                session = id,
                error = %ErrorChain(&error),
                "could not end the abandoned renewal session"
            ),
            Err(_) => tracing::warn!(
                session = id,
                "ending the abandoned renewal session timed out"
            ),
        }
    }
}
