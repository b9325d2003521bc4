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
    /// Opens this token's tenure and supersedes the lease's other open ones, in one query: it
    /// changes no row when this token's tenure was already there.
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

/// The opening query. PostgreSQL: the supersede as a data-modifying `WITH` query of the insert,
/// whose count is the statement's. SQLite (whose `WITH` cannot write): the insert, then the
/// supersede only when the insert added the row (`changes()` is the count of the last completed
/// write); the query's count sums both.
fn open_statement(dialect: Dialect) -> String {
    let insert = format!(
        "INSERT INTO lease_tenures ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, NULL, NULL) \
         ON CONFLICT (lease_name, token) DO NOTHING"
    );
    let supersede = "UPDATE lease_tenures SET end_reason = 'superseded' \
                     WHERE lease_name = $1 AND end_reason IS NULL AND token <> $2";
    match dialect {
        Dialect::Postgres => format!("WITH superseded AS ({supersede}) {insert}"),
        Dialect::Sqlite => format!("{insert}; {supersede} AND changes() = 1"),
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
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let tenure = Tenure {
            lease: fence.lease.clone(),
            token: fence.token,
            holder: start.holder.clone(),
            version: start.version.clone(),
            started_at: tx.now,
            ended_at: None,
            end: None,
        };
        // Read only when this token's tenure was already there: a repeated open returns it.
        // Tenures of other tokens were superseded when that tenure was opened.
        let inserted = tx
            .execute(
                sqlx::query(&sql.open)
                    .bind(tenure.lease.as_str())
                    .bind(tenure.token.0)
                    .bind(tenure.holder.as_str())
                    .bind(tenure.version.as_str())
                    .bind(tenure.started_at.0),
                action,
            )
            .await?;
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
