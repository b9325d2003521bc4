//! The memory adapter's lease store.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::{Inner, MemoryStorage};
use fermata_store::error::{StoreError, StoreResult};
use fermata_store::lease::{
    Acquisition, FencingToken, Lease, LeaseName, LeasePeek, LeaseRecord, LeaseRenewal, LeaseStore,
};
use fermata_store::time::UnixMillis;

#[async_trait]
impl LeaseStore for MemoryStorage {
    async fn acquire(
        &self,
        name: &LeaseName,
        holder: &str,
        ttl: Duration,
    ) -> StoreResult<Acquisition> {
        let gate = self.inner.write_gate(name);
        let _no_write_in_flight = gate.lock().await;
        let mut state = self.inner.state();
        let now = UnixMillis::now();
        let peek = LeasePeek {
            record: state.leases.get(name).cloned(),
            now,
        };
        if let Some(record) = peek.live_holder() {
            return Ok(Acquisition::Held(record.clone()));
        }
        // The whole-database lease and a cluster's leases exclude each other.
        let excluding = if name.is_cluster_writer() {
            state
                .leases
                .get(&LeaseName::WRITER)
                .filter(|record| record.is_live(now))
        } else if *name == LeaseName::WRITER {
            state
                .leases
                .values()
                .find(|record| record.name.is_cluster_writer() && record.is_live(now))
        } else {
            None
        };
        if let Some(record) = excluding {
            return Ok(Acquisition::Held(record.clone()));
        }
        let token = FencingToken(peek.record.map_or(0, |record| record.token.0) + 1);
        let record = LeaseRecord {
            name: name.clone(),
            token,
            holder: holder.to_owned(),
            acquired_at: now,
            expires_at: now.plus(ttl),
            released: false,
        };
        state.leases.insert(name.clone(), record.clone());
        Ok(Acquisition::Granted(Lease {
            name: record.name,
            token,
            holder: record.holder,
            expires_at: record.expires_at,
        }))
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> StoreResult<Lease> {
        renew(&self.inner, lease, ttl)
    }

    async fn release(&self, lease: &Lease) -> StoreResult<bool> {
        let mut state = self.inner.state();
        match state.leases.get_mut(&lease.name) {
            Some(record) if record.token == lease.token && !record.released => {
                record.released = true;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn peek(&self, name: &LeaseName) -> StoreResult<LeasePeek> {
        Ok(LeasePeek {
            record: self.inner.state().leases.get(name).cloned(),
            now: UnixMillis::now(),
        })
    }

    fn renewal_channel(&self) -> Box<dyn LeaseRenewal> {
        Box::new(MemoryRenewal {
            inner: Arc::clone(&self.inner),
        })
    }
}

fn renew(inner: &Inner, lease: &Lease, ttl: Duration) -> StoreResult<Lease> {
    let mut state = inner.state();
    let now = UnixMillis::now();
    match state.leases.get_mut(&lease.name) {
        Some(record)
            if record.token == lease.token && !record.released && record.expires_at > now =>
        {
            record.expires_at = now.plus(ttl);
            Ok(Lease {
                expires_at: record.expires_at,
                ..lease.clone()
            })
        }
        _ => Err(StoreError::fenced(format!(
            "lease `{}` with token {} was lost before it could be renewed",
            lease.name, lease.token
        ))),
    }
}

/// Memory has no connection to lose; renewal goes straight to the shared state.
struct MemoryRenewal {
    inner: Arc<Inner>,
}

#[async_trait]
impl LeaseRenewal for MemoryRenewal {
    async fn renew(&mut self, lease: &Lease, ttl: Duration) -> StoreResult<Lease> {
        renew(&self.inner, lease, ttl)
    }

    async fn abandon(&mut self) {}
}
