//! What every claimable queue shares, written once: the workflow runner's runs and the background
//! jobs are both rows that become *ready* at an instant on the database's clock, are claimed by
//! one worker at a time for a time-to-live, and raise a claim generation on every claim, so a
//! worker whose claim expired and was taken over is fenced out by the generation it presents.
//!
//! A queued row is ready from its `ready_at` on: since it was queued, since its claim expired
//! while running (the expiry is the claim's `ready_at`), or since its wake or retry time. A
//! terminal row has no `ready_at`. The SQL adapter keeps the same two fields as columns and
//! renders its claim statements from `fermata-store-sql`'s `claim.rs`.

use std::fmt;
use std::time::Duration;

use crate::error::{StoreError, StoreResult, StoreResultExt};
use crate::time::UnixMillis;

/// Raised by one on every claim of a row; a worker's writes name the generation it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClaimGeneration(pub i64);

impl fmt::Display for ClaimGeneration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Checks a claim time-to-live: at least 1 ms, at most `i64::MAX` ms.
pub fn check_ttl(ttl: Duration) -> StoreResult<Duration> {
    ttl_millis(ttl).map(|_| ttl)
}

/// A claim time-to-live in whole milliseconds: at least 1.
pub fn ttl_millis(ttl: Duration) -> StoreResult<i64> {
    Some(millis(ttl)?)
        .filter(|ms| *ms > 0)
        .ok_or_else(|| StoreError::invalid("a claim time-to-live is at least 1 ms"))
}

/// `duration` in whole milliseconds.
pub fn millis(duration: Duration) -> StoreResult<i64> {
    i64::try_from(duration.as_millis()).or_invalid("a duration is at most i64::MAX ms")
}

/// The queue fields of one row, as the memory adapter keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSlot {
    pub generation: ClaimGeneration,
    /// From when a worker may claim the row; absent while only something else can make it ready.
    pub ready_at: Option<UnixMillis>,
}

impl QueueSlot {
    /// A row never claimed, ready at once.
    pub fn ready(now: UnixMillis) -> Self {
        QueueSlot {
            generation: ClaimGeneration(0),
            ready_at: Some(now),
        }
    }

    pub fn is_ready(&self, now: UnixMillis) -> bool {
        self.ready_at.is_some_and(|ready| ready <= now)
    }

    /// Claims the row for `ttl` from `now`: the next generation, expiring then. Returns the
    /// expiry.
    pub fn claim(&mut self, now: UnixMillis, ttl: Duration) -> UnixMillis {
        self.generation = ClaimGeneration(self.generation.0 + 1);
        let expires_at = now.plus(ttl);
        self.ready_at = Some(expires_at);
        expires_at
    }
}

/// The key of the row a claim takes among `rows`: the ready one with the earliest `ready_at`,
/// ties broken by key, the order the SQL claim query uses.
pub fn next_ready<'a, K: Ord + Clone + 'a>(
    rows: impl IntoIterator<Item = (&'a K, &'a QueueSlot)>,
    now: UnixMillis,
) -> Option<K> {
    rows.into_iter()
        .filter(|(_, slot)| slot.is_ready(now))
        .min_by_key(|(key, slot)| (slot.ready_at, (*key).clone()))
        .map(|(key, _)| key.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_ready_row_is_claimed_and_each_claim_raises_the_generation() {
        let now = UnixMillis(1_000);
        let mut a = QueueSlot::ready(UnixMillis(900));
        let b = QueueSlot::ready(UnixMillis(800));
        let later = QueueSlot::ready(UnixMillis(2_000));
        let rows = [("a", a), ("b", b), ("c", later)];
        assert_eq!(next_ready(rows.iter().map(|(k, s)| (k, s)), now), Some("b"));
        assert_eq!(a.claim(now, Duration::from_millis(5)), UnixMillis(1_005));
        assert_eq!(a.generation, ClaimGeneration(1));
        assert!(!a.is_ready(now));
        assert!(a.is_ready(UnixMillis(1_005)));
        assert!(ttl_millis(Duration::ZERO).is_err());
    }
}
