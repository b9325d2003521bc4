//! The SQL cluster store (migration `0019`): the shard count, the members' announcements, the
//! cluster's view read on the database's clock, and the check that a fence covers a document's
//! shard before a write of that document.
//!
//! A document's shard never changes once its channel exists, so the shards this process has
//! looked up are kept (up to [`KEPT_SHARDS`]) and a commit under a shard's lease costs no read
//! after the first. A write under any other lease (the whole-database lease covers every shard)
//! looks nothing up.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use fermata_store::{
    Announcement, ChannelId, ClusterMember, ClusterStore, ClusterView, Coverage, Fence, LeaseName,
    MEMBER_PREFIX, Shard, ShardCount, StoreError, StoreResult, StoreResultExt, UnixMillis,
};
use sqlx::Row;
use tokio::sync::OnceCell;

use crate::channel::unavailable;
use crate::dialect::Dialect;
use crate::error::StoreContext;
use crate::lease::record_from;
use crate::{Inner, SqlStorage};

/// How many documents' shards one process keeps before it forgets them all and starts again.
const KEPT_SHARDS: usize = 100_000;

/// The cluster statements, rendered for one dialect.
#[derive(Debug)]
pub(crate) struct Statements {
    shard_count: String,
    shard_of: String,
    announce: String,
    view: String,
    forget_departed: String,
}

impl Statements {
    pub(crate) fn new(dialect: Dialect) -> Self {
        Statements {
            shard_count: "SELECT shards FROM cluster WHERE id = 1".to_owned(),
            shard_of: "SELECT shard FROM channels WHERE id = $1".to_owned(),
            announce: dialect.render(
                "INSERT INTO cluster_members (lease_name, address, version, announced_at) \
                 VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (lease_name) DO UPDATE SET address = excluded.address, \
                     version = excluded.version, announced_at = excluded.announced_at",
            ),
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
        }
    }
}

/// What the store keeps of the cluster: the shard count, read once, and documents' shards.
#[derive(Debug, Default)]
pub(crate) struct ClusterCache {
    count: OnceCell<ShardCount>,
    shards: Mutex<HashMap<ChannelId, Shard>>,
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

    /// `Fenced` unless `fence` covers the shard of document `id`; `Missing` when there is no such
    /// document under a shard's lease (under any other lease nothing is read).
    pub(crate) async fn check_covers(
        &self,
        fence: &Fence,
        id: &ChannelId,
        action: &str,
    ) -> StoreResult<()> {
        let Coverage::One(_) = fence.coverage() else {
            // The answer does not depend on the shard; no need to read it.
            return fence.check_covers(Shard(0), action);
        };
        let kept = self.kept_shards().get(id).copied();
        let shard = match kept {
            Some(shard) => shard,
            None => {
                let shard: Option<i64> = sqlx::query_scalar(&self.cluster_sql.shard_of)
                    .bind(&id.0)
                    .fetch_optional(&self.pool)
                    .await
                    .context(action)?;
                let shard = Shard(
                    u16::try_from(shard.ok_or_else(|| unavailable(id))?)
                        .or_corrupt("a stored document has an invalid shard")?,
                );
                let mut kept = self.kept_shards();
                if kept.len() >= KEPT_SHARDS {
                    kept.clear();
                }
                kept.insert(id.clone(), shard);
                shard
            }
        };
        fence.check_covers(shard, action)
    }

    fn kept_shards(&self) -> std::sync::MutexGuard<'_, HashMap<ChannelId, Shard>> {
        self.cluster
            .shards
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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
        tx.commit().await.context(action)?;
        Ok(forgotten)
    }
}
