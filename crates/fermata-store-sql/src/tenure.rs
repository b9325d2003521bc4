//! The SQL tenure store. Both writes are fenced transactions.

use async_trait::async_trait;
use fermata_store::{
    Fence, FencingToken, LeaseName, StoreError, StoreResult, StoreResultExt, Tenure, TenureEnd,
    TenureStart, TenureStore, UnixMillis,
};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};

use crate::SqlStorage;
use crate::dialect::Dialect;
use crate::error::StoreContext;

/// The tenure statements, rendered for one dialect.
#[derive(Debug)]
pub(crate) struct Statements {
    select_one: String,
    /// Checks the fence, opens this token's tenure and supersedes the lease's other open ones,
    /// in one query; see [`open_statement`].
    open: String,
    close: String,
    recent: String,
}

const COLUMNS: &str = "lease_name, token, holder, version, started_at, ended_at, end_reason";

impl Statements {
    pub(crate) fn new(dialect: Dialect) -> Self {
        Statements {
            select_one: dialect.render(&format!(
                "SELECT {COLUMNS} FROM lease_tenures WHERE lease_name = $1 AND token = $2"
            )),
            open: open_statement(dialect),
            close: dialect.render(
                "UPDATE lease_tenures SET ended_at = $3, end_reason = 'stopped' \
                 WHERE lease_name = $1 AND token = $2 AND end_reason IS NULL",
            ),
            recent: dialect.render(&format!(
                "SELECT {COLUMNS} FROM lease_tenures WHERE lease_name = $1 \
                 ORDER BY token DESC LIMIT $2"
            )),
        }
    }
}

/// The opening query, which carries its fence check: lease `$1`, token `$2`, holder `$3`,
/// version `$4` (and on SQLite the clock, `$5`). It supersedes the lease's other open tenures and
/// inserts this token's, started at the fence's clock, unless it was there already. Its one row:
/// `(now, live, opened)`, `opened` 0 when the tenure was there. PostgreSQL: both writes as
/// data-modifying `WITH` queries after the fence's steps, each only when the token is live.
/// SQLite (whose `WITH` cannot write): the two statements, then the answer, whose `changes()` is
/// the insert's count.
fn open_statement(dialect: Dialect) -> String {
    let supersede = "UPDATE lease_tenures SET end_reason = 'superseded' \
                     WHERE lease_name = $1 AND end_reason IS NULL AND token <> $2";
    let conflict = "ON CONFLICT (lease_name, token) DO NOTHING";
    match dialect {
        Dialect::Postgres => format!(
            "WITH {}, \
                 superseded AS ({supersede} AND (SELECT live FROM fence) = 1), \
                 opened AS (INSERT INTO lease_tenures ({COLUMNS}) \
                     SELECT $1, $2, $3, $4, now, NULL, NULL FROM fence WHERE live = 1 \
                     {conflict} RETURNING 1) \
             {}",
            dialect.fenced_head(),
            dialect.fenced_answer("(SELECT count(*) FROM opened)", "", "")
        ),
        Dialect::Sqlite => format!(
            "{supersede}; \
             INSERT INTO lease_tenures ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, NULL, NULL) \
                 {conflict}; \
             {}",
            dialect.fenced_answer("changes()", "", "$5")
        ),
    }
}

fn tenure_from(row: &AnyRow, action: &str) -> StoreResult<Tenure> {
    let lease: String = row.try_get(0).context(action)?;
    let end: Option<String> = row.try_get(6).context(action)?;
    let end = match end {
        None => None,
        Some(text) => Some(
            TenureEnd::parse(&text)
                .ok_or_else(|| StoreError::corrupt("a tenure has an unknown end reason"))?,
        ),
    };
    Ok(Tenure {
        lease: LeaseName::new(lease).or_corrupt("a tenure names an invalid lease")?,
        token: FencingToken(row.try_get(1).context(action)?),
        holder: row.try_get(2).context(action)?,
        version: row.try_get(3).context(action)?,
        started_at: UnixMillis(row.try_get(4).context(action)?),
        ended_at: row
            .try_get::<Option<i64>, _>(5)
            .context(action)?
            .map(UnixMillis),
        end,
    })
}

impl SqlStorage {
    async fn select_tenure(
        &self,
        conn: &mut AnyConnection,
        fence: &Fence,
        action: &str,
    ) -> StoreResult<Option<Tenure>> {
        let row = sqlx::query(&self.inner.tenure_sql.select_one)
            .bind(fence.lease.as_str())
            .bind(fence.token.0)
            .fetch_optional(conn)
            .await
            .context(action)?;
        row.map(|row| tenure_from(&row, action)).transpose()
    }
}

#[async_trait]
impl TenureStore for SqlStorage {
    async fn open(&self, fence: &Fence, start: &TenureStart) -> StoreResult<Tenure> {
        let action = "opening a tenure";
        let sql = &self.inner.tenure_sql;
        let query = sqlx::query(&sql.open)
            .bind(fence.lease.as_str())
            .bind(fence.token.0)
            .bind(start.holder.as_str())
            .bind(start.version.as_str());
        let (mut tx, row) = self
            .inner
            .begin_with_fenced_statement(fence, query, action)
            .await?;
        let inserted: i64 = row.try_get(2).context(action)?;
        let tenure = Tenure {
            lease: fence.lease.clone(),
            token: fence.token,
            holder: start.holder.clone(),
            version: start.version.clone(),
            started_at: tx.now,
            ended_at: None,
            end: None,
        };
        if inserted == 0 {
            return self
                .select_tenure(tx.conn(), fence, action)
                .await?
                .ok_or_else(|| StoreError::corrupt("a tenure conflicted but cannot be read"));
        }
        tx.commit(action).await?;
        Ok(tenure)
    }

    async fn close(&self, fence: &Fence) -> StoreResult<Tenure> {
        let action = "closing a tenure";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        sqlx::query(&self.inner.tenure_sql.close)
            .bind(fence.lease.as_str())
            .bind(fence.token.0)
            .bind(now.0)
            .execute(tx.conn())
            .await
            .context(action)?;
        let tenure = self
            .select_tenure(tx.conn(), fence, action)
            .await?
            .ok_or_else(|| StoreError::missing("no tenure was opened under this fence"))?;
        tx.commit(action).await?;
        Ok(tenure)
    }

    async fn recent(&self, lease: &LeaseName, limit: u32) -> StoreResult<Vec<Tenure>> {
        let action = "listing tenures";
        let rows = sqlx::query(&self.inner.tenure_sql.recent)
            .bind(lease.as_str())
            .bind(i64::from(limit))
            .fetch_all(&self.inner.pool)
            .await
            .context(action)?;
        rows.iter().map(|row| tenure_from(row, action)).collect()
    }
}
