//! Leases with fencing tokens: the lease store, the renewal channel, and the values they trade.
//!
//! A lease is one row per name. Acquiring a free lease (released, or expired on the database's
//! clock) grants it with a fencing token one higher than any token that lease ever had. Every
//! fenced write names a [`Fence`] (lease and token) and commits only while that token is the
//! lease's current token and the lease is live; a takeover waits for a fenced write in flight.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;

use crate::error::{ErrorKind, StoreError, StoreResult};
use crate::time::UnixMillis;

/// The name of a lease: 1 to 100 characters of `a-z`, `0-9`, `:`, `.`, `_` and `-`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseName(pub(crate) Cow<'static, str>);

impl LeaseName {
    /// The lease that allows one process at a time to serve a database.
    pub const WRITER: LeaseName = LeaseName(Cow::Borrowed("fermata:writer"));

    /// Checks `name` against the allowed form.
    pub fn new(name: impl Into<Cow<'static, str>>) -> StoreResult<Self> {
        let name = name.into();
        let allowed = |c: char| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, ':' | '.' | '_' | '-')
        };
        if name.is_empty() || name.len() > 100 || !name.chars().all(allowed) {
            return Err(StoreError::invalid(
                "a lease name has 1 to 100 characters of a-z, 0-9, ':', '.', '_' and '-'",
            ));
        }
        Ok(LeaseName(name))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for LeaseName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A fencing token: strictly increasing across the grants of one lease. Tokens of different
/// leases are not comparable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FencingToken(pub i64);

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// What a fenced write presents: the lease it writes under and the token it was granted.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fence {
    pub lease: LeaseName,
    pub token: FencingToken,
}

/// A lease this caller holds, as of its latest grant or renewal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub name: LeaseName,
    pub token: FencingToken,
    pub holder: String,
    /// When the lease expires unless renewed, on the database's clock.
    pub expires_at: UnixMillis,
}

impl Lease {
    /// The fence for writes made under this lease.
    pub fn fence(&self) -> Fence {
        Fence {
            lease: self.name.clone(),
            token: self.token,
        }
    }
}

/// A lease row as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    pub name: LeaseName,
    pub token: FencingToken,
    pub holder: String,
    pub acquired_at: UnixMillis,
    pub expires_at: UnixMillis,
    pub released: bool,
}

impl LeaseRecord {
    /// Whether the lease is held at `now`: granted, not released and not expired.
    pub fn is_live(&self, now: UnixMillis) -> bool {
        !self.released && self.expires_at > now
    }
}

/// The answer of [`LeaseStore::peek`]: the row, if the lease was ever granted, and the
/// database's clock when it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeasePeek {
    pub record: Option<LeaseRecord>,
    pub now: UnixMillis,
}

impl LeasePeek {
    /// Free means never granted, released, or expired on the database's clock.
    pub fn is_free(&self) -> bool {
        self.record
            .as_ref()
            .is_none_or(|record| record.released || record.expires_at <= self.now)
    }

    /// The live holder, when the lease is not free.
    pub fn live_holder(&self) -> Option<&LeaseRecord> {
        self.record.as_ref().filter(|_| !self.is_free())
    }
}

/// The outcome of an acquisition attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquisition {
    /// The lease was free and is now ours.
    Granted(Lease),
    /// Someone else holds a live lease; here is its row.
    Held(LeaseRecord),
}

/// The lease store.
#[async_trait]
pub trait LeaseStore: Send + Sync {
    /// Grants `name` to `holder` for `ttl` if it is free on the database's clock, with the next
    /// fencing token. A takeover of an expired lease waits for a fenced write in flight. The
    /// whole-database lease ([`LeaseName::WRITER`]) is not granted while a cluster's lease (a
    /// shard's writer lease or the coordinator's) is live, nor these while it is: the answer is
    /// then `Held` with the live lease that excludes it.
    async fn acquire(
        &self,
        name: &LeaseName,
        holder: &str,
        ttl: Duration,
    ) -> StoreResult<Acquisition>;

    /// Extends a lease we still hold to `ttl` from now. Fails with `Fenced` when the lease expired
    /// or another grant happened, and then extends nothing. Never waits for a fenced write.
    async fn renew(&self, lease: &Lease, ttl: Duration) -> StoreResult<Lease>;

    /// Renews each of `leases` as [`renew`](Self::renew) does, all at once: in their order, the
    /// renewed lease, or `None` for one that expired or was granted again (which is extended by
    /// nothing). A store may renew them in one transaction; this one renews them one by one.
    async fn renew_each(&self, leases: &[Lease], ttl: Duration) -> StoreResult<Vec<Option<Lease>>> {
        let mut renewed = Vec::with_capacity(leases.len());
        for lease in leases {
            renewed.push(match self.renew(lease, ttl).await {
                Ok(lease) => Some(lease),
                Err(error) if error.kind() == ErrorKind::Fenced => None,
                Err(error) => return Err(error),
            });
        }
        Ok(renewed)
    }

    /// Releases a lease we hold. Returns false, changing nothing, when it was no longer ours.
    async fn release(&self, lease: &Lease) -> StoreResult<bool>;

    /// A plain read of the lease row that takes no lock: it neither waits for the holder's writes
    /// nor delays them.
    async fn peek(&self, name: &LeaseName) -> StoreResult<LeasePeek>;

    /// A renewal channel of its own, outside the shared pool, for a process lease.
    fn renewal_channel(&self) -> Box<dyn LeaseRenewal>;
}

/// Renews one lease over a connection of its own, so a busy or stuck shared pool cannot delay
/// the renewal, and a renewal that gets no reply can be abandoned without harming the pool.
#[async_trait]
pub trait LeaseRenewal: Send {
    /// As [`LeaseStore::renew`], over this channel's connection (opened on first use).
    async fn renew(&mut self, lease: &Lease, ttl: Duration) -> StoreResult<Lease>;

    /// Gives up the channel's connection after a renewal got no reply: closes it, ends its
    /// server session where the database has one, and opens a new one on the next renewal.
    async fn abandon(&mut self);
}

/// Called inside every fenced write after its fence was checked and while it holds its locks,
/// before the write's own statements. Tests use it to hold a write in flight.
#[derive(Clone)]
pub struct FencedWriteHook(Arc<HookFn>);

type HookFn = dyn Fn(&Fence) -> BoxFuture<'static, ()> + Send + Sync;

impl FencedWriteHook {
    pub fn new(hook: impl Fn(&Fence) -> BoxFuture<'static, ()> + Send + Sync + 'static) -> Self {
        FencedWriteHook(Arc::new(hook))
    }

    pub async fn inside(&self, fence: &Fence) {
        (self.0)(fence).await;
    }
}

impl fmt::Debug for FencedWriteHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FencedWriteHook")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_names_are_checked() {
        assert!(LeaseName::new("fermata:writer").is_ok());
        assert!(LeaseName::new("schema-mutation").is_ok());
        for bad in ["", "Upper", "with space", "quote'", &"x".repeat(101)] {
            assert!(
                LeaseName::new(bad.to_owned()).is_err(),
                "{bad:?} was accepted"
            );
        }
    }

    fn record(expires_at: i64, released: bool) -> LeaseRecord {
        LeaseRecord {
            name: LeaseName::WRITER,
            token: FencingToken(1),
            holder: "a".to_owned(),
            acquired_at: UnixMillis(0),
            expires_at: UnixMillis(expires_at),
            released,
        }
    }

    #[test]
    fn free_means_absent_released_or_expired() {
        let peek = |record, now| LeasePeek {
            record,
            now: UnixMillis(now),
        };
        assert!(peek(None, 10).is_free());
        assert!(peek(Some(record(100, true)), 10).is_free());
        assert!(peek(Some(record(100, false)), 100).is_free());
        assert!(!peek(Some(record(100, false)), 99).is_free());
        assert!(peek(Some(record(100, false)), 99).live_holder().is_some());
    }
}
