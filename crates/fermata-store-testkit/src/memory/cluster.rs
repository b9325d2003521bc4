//! The memory cluster store: the default shard count, members' announcements, and the cluster's
//! view of the leases.

use std::collections::BTreeMap;

use async_trait::async_trait;
use fermata_store::cluster::{
    Announcement, ClusterMember, ClusterStore, ClusterView, MEMBER_PREFIX, ShardCount,
};
use fermata_store::error::{StoreError, StoreResult};
use fermata_store::lease::{Fence, LeaseName};
use fermata_store::time::UnixMillis;

use super::MemoryStorage;

/// Each member's latest announcement and when it was made, by member lease.
pub(super) type Announcements = BTreeMap<LeaseName, (Announcement, UnixMillis)>;

#[async_trait]
impl ClusterStore for MemoryStorage {
    async fn shard_count(&self) -> StoreResult<ShardCount> {
        Ok(ShardCount::DEFAULT)
    }

    async fn announce(&self, fence: &Fence, announcement: &Announcement) -> StoreResult<()> {
        if !fence.lease.as_str().starts_with(MEMBER_PREFIX) {
            return Err(StoreError::invalid(
                "a member announces under its member lease",
            ));
        }
        self.inner
            .fenced(fence, |state, now| {
                state
                    .announcements
                    .insert(fence.lease.clone(), (announcement.clone(), now));
                Ok(())
            })
            .await
    }

    async fn withdraw(&self, fence: &Fence) -> StoreResult<()> {
        self.inner
            .fenced(fence, |state, _now| {
                state.announcements.remove(&fence.lease);
                Ok(())
            })
            .await
    }

    async fn view(&self) -> StoreResult<ClusterView> {
        let state = self.inner.state();
        let now = UnixMillis::now();
        let mut members = Vec::new();
        let mut leases = Vec::new();
        for record in state.leases.values() {
            if record.name.as_str().starts_with(MEMBER_PREFIX) {
                if let Some((announcement, _)) = state.announcements.get(&record.name)
                    && record.is_live(now)
                {
                    members.push(ClusterMember {
                        lease: record.clone(),
                        announcement: announcement.clone(),
                    });
                }
            } else if record.name.is_cluster_writer() {
                leases.push(record.clone());
            }
        }
        members.sort_by(|a, b| a.lease.name.cmp(&b.lease.name));
        leases.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(ClusterView {
            members,
            leases,
            now,
        })
    }

    async fn forget_departed(&self, before: UnixMillis) -> StoreResult<u64> {
        self.inner.gate("forgetting departed members")?;
        let mut state = self.inner.state();
        let ended = |name: &LeaseName| {
            state
                .leases
                .get(name)
                .is_some_and(|record| record.expires_at < before)
        };
        let departed: Vec<LeaseName> = state
            .announcements
            .keys()
            .filter(|name| ended(name))
            .cloned()
            .collect();
        for name in &departed {
            state.announcements.remove(name);
        }
        state.leases.retain(|name, record| {
            !(name.as_str().starts_with(MEMBER_PREFIX) && record.expires_at < before)
        });
        Ok(departed.len() as u64)
    }
}
