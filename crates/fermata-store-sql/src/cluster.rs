//! The SQL cluster store (migration `0019`): the shard count, the members' announcements, and
//! the cluster's view read on the database's clock.
//!
//! Which documents a fence covers is checked where each write reads or locks the document's
//! channel row, never from a shard remembered from before: a document is never moved, but a
//! deleted one's ID can be used again (a creation key, a child's key) for a document in another
//! shard. A commit checks it in its own statement (`commit_statement.rs`).

use async_trait::async_trait;
use fermata_store::{
    Announcement, ClusterMember, ClusterStore, ClusterView, Fence, LeaseName, MEMBER_PREFIX,
    ShardCount, StoreError, StoreResult, StoreResultExt, UnixMillis,
};
use sqlx::Row;
use tokio::sync::OnceCell;

use crate::dialect::Dialect;
use crate::error::StoreContext;
use crate::lease::record_from;
use crate::{Inner, SqlStorage};

/// The cluster statements, rendered for one dialect.
#[derive(Debug)]
pub(crate) struct Statements {
    shard_count: String,
    announce: String,
    withdraw: String,
    view: String,
    forget_departed: String,
    forget_departed_leases: String,
}

impl Statements {
    pub(crate) fn new(dialect: Dialect) -> Self {
        Statements {
            shard_count: "SELECT shards FROM cluster WHERE id = 1".to_owned(),
            announce: dialect.render(
                "INSERT INTO cluster_members (lease_name, address, version, announced_at) \
                 VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (lease_name) DO UPDATE SET address = excluded.address, \
                     version = excluded.version, announced_at = excluded.announced_at",
            ),
            withdraw: "DELETE FROM cluster_members WHERE lease_name = $1".to_owned(),
            // One statement, so the leases and the clock are one snapshot; the clock's row comes
            // back even when no lease matches.
            view: dialect.render(&format!(
                "WITH clock AS (SELECT {{now}} AS now) \
                 SELECT l.token, l.holder, l.acquired_at, l.expires_at, l.released_at, l.name, \
                        m.address, m.version, clock.now \
                 FROM clock \
                 LEFT JOIN leases l ON l.name LIKE 'fermata:writer:%' \
                     OR l.name = 'fermata:coordinator' OR l.name LIKE '{MEMBER_PREFIX}%' \
                 LEFT JOIN cluster_members m ON m.lease_name = l.name \
                 ORDER BY l.name"
            )),
            forget_departed: dialect.render(
                "DELETE FROM cluster_members WHERE lease_name IN ( \
                     SELECT l.name FROM leases l \
                     WHERE l.name = cluster_members.lease_name \
                       AND l.expires_at < $1)",
            ),
            forget_departed_leases: format!(
                "DELETE FROM leases WHERE name LIKE '{MEMBER_PREFIX}%' AND expires_at < $1"
            ),
        }
    }
}

/// What the store keeps of the cluster: the shard count, read once (it never changes).
#[derive(Debug, Default)]
pub(crate) struct ClusterCache {
    count: OnceCell<ShardCount>,
}

impl Inner {
    /// The database's shard count, read on first use.
    pub(crate) async fn shard_count(&self) -> StoreResult<ShardCount> {
        let action = "reading the shard count";
        let count = self
            .cluster
            .count
            .get_or_try_init(|| async {
                let count: i64 = sqlx::query_scalar(&self.cluster_sql.shard_count)
                    .fetch_one(&self.pool)
                    .await
                    .context(action)?;
                ShardCount::new(count)
            })
            .await?;
        Ok(*count)
    }
}

#[async_trait]
impl ClusterStore for SqlStorage {
    async fn shard_count(&self) -> StoreResult<ShardCount> {
        self.inner.shard_count().await
    }

    async fn announce(&self, fence: &Fence, announcement: &Announcement) -> StoreResult<()> {
        let action = "announcing a member";
        if fence.lease.as_str().strip_prefix(MEMBER_PREFIX).is_none() {
            return Err(StoreError::invalid(
                "a member announces under its member lease",
            ));
        }
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        tx.execute(
            sqlx::query(&self.inner.cluster_sql.announce)
                .bind(fence.lease.as_str())
                .bind(&announcement.address)
                .bind(&announcement.version)
                .bind(now.0),
            action,
        )
        .await?;
        tx.commit(action).await
    }

    async fn withdraw(&self, fence: &Fence) -> StoreResult<()> {
        let action = "withdrawing a member";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        tx.execute(
            sqlx::query(&self.inner.cluster_sql.withdraw).bind(fence.lease.as_str()),
            action,
        )
        .await?;
        tx.commit(action).await
    }

    async fn view(&self) -> StoreResult<ClusterView> {
        let action = "reading the cluster";
        let rows = sqlx::query(&self.inner.cluster_sql.view)
            .fetch_all(&self.inner.pool)
            .await
            .context(action)?;
        let mut view = ClusterView {
            members: Vec::new(),
            leases: Vec::new(),
            now: UnixMillis(0),
        };
        for row in rows {
            view.now = UnixMillis(row.try_get(8).context(action)?);
            let Some(name) = row.try_get::<Option<String>, _>(5).context(action)? else {
                continue;
            };
            let name = LeaseName::new(name).or_corrupt("a stored lease has an invalid name")?;
            let Some(record) = record_from(&name, &row, action)? else {
                continue;
            };
            if name.as_str().starts_with(MEMBER_PREFIX) {
                let address: Option<String> = row.try_get(6).context(action)?;
                let version: Option<String> = row.try_get(7).context(action)?;
                if let (Some(address), Some(version)) = (address, version)
                    && record.is_live(view.now)
                {
                    view.members.push(ClusterMember {
                        lease: record,
                        announcement: Announcement { address, version },
                    });
                }
            } else {
                view.leases.push(record);
            }
        }
        Ok(view)
    }

    async fn forget_departed(&self, before: UnixMillis) -> StoreResult<u64> {
        let action = "forgetting departed members";
        let mut tx = self.inner.begin_write(action).await?;
        let forgotten = sqlx::query(&self.inner.cluster_sql.forget_departed)
            .bind(before.0)
            .execute(&mut *tx)
            .await
            .context(action)?
            .rows_affected();
        sqlx::query(&self.inner.cluster_sql.forget_departed_leases)
            .bind(before.0)
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        Ok(forgotten)
    }
}
