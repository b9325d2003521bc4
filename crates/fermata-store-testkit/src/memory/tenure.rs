//! The memory adapter's tenure store.

use async_trait::async_trait;

use super::MemoryStorage;
use fermata_store::error::{StoreError, StoreResult};
use fermata_store::lease::{Fence, LeaseName};
use fermata_store::tenure::{Tenure, TenureEnd, TenureStart, TenureStore};

#[async_trait]
impl TenureStore for MemoryStorage {
    async fn open(&self, fence: &Fence, start: &TenureStart) -> StoreResult<Tenure> {
        self.inner
            .fenced(fence, |state, now| {
                let key = (fence.lease.clone(), fence.token.0);
                if let Some(existing) = state.tenures.get(&key) {
                    return Ok(existing.clone());
                }
                for tenure in state.tenures.values_mut() {
                    if tenure.lease == fence.lease && tenure.end.is_none() {
                        tenure.end = Some(TenureEnd::Superseded);
                    }
                }
                let tenure = Tenure {
                    lease: fence.lease.clone(),
                    token: fence.token,
                    holder: start.holder.clone(),
                    version: start.version.clone(),
                    started_at: now,
                    ended_at: None,
                    end: None,
                };
                state.tenures.insert(key, tenure.clone());
                Ok(tenure)
            })
            .await
    }

    async fn close(&self, fence: &Fence) -> StoreResult<Tenure> {
        self.inner
            .fenced(fence, |state, now| {
                let tenure = state
                    .tenures
                    .get_mut(&(fence.lease.clone(), fence.token.0))
                    .ok_or_else(|| StoreError::missing("no tenure was opened under this fence"))?;
                if tenure.end.is_none() {
                    tenure.end = Some(TenureEnd::Stopped);
                    tenure.ended_at = Some(now);
                }
                Ok(tenure.clone())
            })
            .await
    }

    async fn recent(&self, lease: &LeaseName, limit: u32) -> StoreResult<Vec<Tenure>> {
        let state = self.inner.state();
        Ok(state
            .tenures
            .values()
            .rev()
            .filter(|tenure| &tenure.lease == lease)
            .take(limit as usize)
            .cloned()
            .collect())
    }
}
