//! Failed-login throttling, per account name, per client address and per known device, in
//! memory.
//!
//! Nobody can lock an account for long, and nobody can lock its owner out of it. After
//! [`FREE_PER_ACCOUNT`] failures within [`WINDOW`] an account name is locked for a short,
//! growing time ([`FIRST_LOCK`], doubled with each further failure up to [`LONGEST_LOCK`]); an
//! address likewise after [`FREE_PER_ADDRESS`]. A lock refuses every password from a client the
//! account does not know, the right one included, until it runs out. A *known* client (a browser
//! holding the account's known-device mark, or a signed-in session re-entering its password) is
//! not held by the account's or the address's lock, only by its own: its failures count under
//! its device key, so an attacker elsewhere cannot keep it out, and it cannot guess without limit
//! either. Its right password clears the account's failures and so lifts the lock.
//!
//! Names are throttled whether or not the account exists, so a refusal tells nothing about
//! existence. Addresses are what the HTTP layer worked out (a configured proxy's own address is
//! never one: behind a proxy the address is the client it names, or none). The table is bounded:
//! past its size the oldest entries go first, and never one that is locked.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// Failures an account name may have within [`WINDOW`] before it is locked.
pub const FREE_PER_ACCOUNT: usize = 5;
/// Failures an address (or a known device) may have within [`WINDOW`] before it is locked.
pub const FREE_PER_ADDRESS: usize = 20;
/// How long a failure counts.
pub const WINDOW: Duration = Duration::from_secs(15 * 60);
/// The lock the first failure over the free ones starts; each further failure doubles it.
pub const FIRST_LOCK: Duration = Duration::from_secs(1);
/// The longest lock: a lock is short.
pub const LONGEST_LOCK: Duration = Duration::from_secs(5 * 60);
/// Failures a known device may have within [`WINDOW`] before its own key is locked.
const FREE_PER_DEVICE: usize = FREE_PER_ACCOUNT;
/// Most keys remembered at once.
const MAX_KEYS: usize = 100_000;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Account(String),
    Address(IpAddr),
    /// A known client: the account's known-device mark or a live session, by an ID of its own.
    Device(String),
}

impl Key {
    fn free(&self) -> usize {
        match self {
            Key::Account(_) => FREE_PER_ACCOUNT,
            Key::Address(_) => FREE_PER_ADDRESS,
            Key::Device(_) => FREE_PER_DEVICE,
        }
    }
}

/// Who is trying: the account name, the client's address, and, when the client is known to the
/// account, its device ID.
#[derive(Debug, Clone, Copy)]
pub struct Attempt<'a> {
    pub account: &'a str,
    pub address: Option<IpAddr>,
    pub known_device: Option<&'a str>,
}

impl Attempt<'_> {
    /// The keys the attempt counts under, and whether each one's lock holds it back.
    fn keys(&self) -> Vec<(Key, bool)> {
        let known = self.known_device.is_some();
        let mut keys = vec![(Key::Account(self.account.to_owned()), !known)];
        if let Some(address) = self.address {
            keys.push((address_key(address), !known));
        }
        if let Some(device) = self.known_device {
            keys.push((Key::Device(device.to_owned()), true));
        }
        keys
    }
}

/// How many failures, locks and refusals there have been, for metrics.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LoginCounts {
    /// Wrong passwords (and unknown names).
    pub failures: u64,
    /// Failures that locked (or kept locking) an account name, an address or a device.
    pub locks: u64,
    /// Attempts refused because a lock held them.
    pub throttled: u64,
}

/// Recent failures by account, by address and by known device.
#[derive(Debug, Default)]
pub struct LoginThrottle {
    attempts: Mutex<HashMap<Key, VecDeque<Instant>>>,
    failures: AtomicU64,
    locks: AtomicU64,
    throttled: AtomicU64,
}

/// The key of an address: IPv6 addresses by their /64, which one host usually holds whole.
fn address_key(address: IpAddr) -> Key {
    match address {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => Key::Address(IpAddr::V4(v4)),
            None => {
                let mut segments = v6.segments();
                segments[4..].fill(0);
                Key::Address(IpAddr::V6(segments.into()))
            }
        },
        v4 @ IpAddr::V4(_) => Key::Address(v4),
    }
}

/// The lock after `failures` within the window for a key allowing `free`, if any.
fn lock_for(failures: usize, free: usize) -> Option<Duration> {
    let over = failures.checked_sub(free)?;
    let doublings = u32::try_from(over).unwrap_or(u32::MAX).min(20);
    Some((FIRST_LOCK * 2u32.pow(doublings)).min(LONGEST_LOCK))
}

impl LoginThrottle {
    /// Counts an attempt before the password is checked, so attempts made at the same moment
    /// cannot all pass: `Err(retry_after)` when a lock that applies to this client holds, and
    /// then nothing is counted. A successful attempt is handed back with [`Self::succeeded`], a
    /// failed one reported with [`Self::failed`].
    pub fn attempt(&self, attempt: &Attempt<'_>) -> Result<(), Duration> {
        let now = Instant::now();
        let keys = attempt.keys();
        let mut table = self.lock_table();
        let mut wait = Duration::ZERO;
        for (key, held) in &keys {
            let Some(times) = table.get_mut(key) else {
                continue;
            };
            while times
                .front()
                .is_some_and(|t| now.duration_since(*t) >= WINDOW)
            {
                times.pop_front();
            }
            if !held {
                continue;
            }
            if let (Some(lock), Some(last)) = (lock_for(times.len(), key.free()), times.back()) {
                wait = wait.max(lock.saturating_sub(now.duration_since(*last)));
            }
        }
        if !wait.is_zero() {
            self.throttled.fetch_add(1, Ordering::Relaxed);
            return Err(wait);
        }
        if table.len() + keys.len() > MAX_KEYS {
            // Forget only keys whose failures have all expired: never one that is locked.
            table.retain(|_, times| {
                times
                    .back()
                    .is_some_and(|t| now.duration_since(*t) < WINDOW)
            });
            if table.len() + keys.len() > MAX_KEYS && attempt.known_device.is_none() {
                // The table is full of live failures: refuse strangers rather than forget a lock.
                self.throttled.fetch_add(1, Ordering::Relaxed);
                return Err(LONGEST_LOCK);
            }
        }
        for (key, _) in keys {
            table.entry(key).or_default().push_back(now);
        }
        Ok(())
    }

    /// The attempt succeeded: the account's and the device's failures are forgotten (which lifts
    /// the account's lock) and the address's last attempt is handed back.
    pub fn succeeded(&self, attempt: &Attempt<'_>) {
        let mut table = self.lock_table();
        table.remove(&Key::Account(attempt.account.to_owned()));
        if let Some(device) = attempt.known_device {
            table.remove(&Key::Device(device.to_owned()));
        }
        if let Some(times) = attempt
            .address
            .and_then(|address| table.get_mut(&address_key(address)))
        {
            times.pop_back();
        }
    }

    /// The attempt was never decided (the server was too busy to check the password): it stops
    /// counting against its keys.
    pub fn withdrawn(&self, attempt: &Attempt<'_>) {
        let mut table = self.lock_table();
        for (key, _) in attempt.keys() {
            if let Some(times) = table.get_mut(&key) {
                times.pop_back();
            }
        }
    }

    /// The attempt failed (it was counted when it began): the longest lock it started, if any.
    pub fn failed(&self, attempt: &Attempt<'_>) -> Option<Duration> {
        self.failures.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let mut table = self.lock_table();
        let mut lock = None;
        for (key, _) in attempt.keys() {
            let Some(times) = table.get_mut(&key) else {
                continue;
            };
            // A lock runs from when the failure was known, not from when the attempt began
            // (checking a password takes a moment).
            if let Some(last) = times.back_mut() {
                *last = (*last).max(now);
            }
            lock = lock.max(lock_for(times.len(), key.free()));
        }
        if lock.is_some() {
            self.locks.fetch_add(1, Ordering::Relaxed);
        }
        lock
    }

    pub fn counts(&self) -> LoginCounts {
        LoginCounts {
            failures: self.failures.load(Ordering::Relaxed),
            locks: self.locks.load(Ordering::Relaxed),
            throttled: self.throttled.load(Ordering::Relaxed),
        }
    }

    fn lock_table(&self) -> std::sync::MutexGuard<'_, HashMap<Key, VecDeque<Instant>>> {
        self.attempts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADDRESS: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));

    fn stranger(account: &str) -> Attempt<'_> {
        Attempt {
            account,
            address: ADDRESS,
            known_device: None,
        }
    }

    fn fail(throttle: &LoginThrottle, attempt: &Attempt<'_>) -> Option<Duration> {
        throttle.attempt(attempt).unwrap();
        throttle.failed(attempt)
    }

    #[tokio::test(start_paused = true)]
    async fn locks_are_short_and_grow_with_each_failure() {
        let throttle = LoginThrottle::default();
        let ada = stranger("ada");
        for _ in 0..FREE_PER_ACCOUNT - 1 {
            assert_eq!(fail(&throttle, &ada), None);
        }
        assert_eq!(fail(&throttle, &ada), Some(FIRST_LOCK));
        assert_eq!(
            throttle.attempt(&ada),
            Err(FIRST_LOCK),
            "the right password too"
        );
        assert!(
            throttle.attempt(&stranger("bob")).is_ok(),
            "another account is not locked"
        );
        tokio::time::advance(FIRST_LOCK).await;
        assert_eq!(fail(&throttle, &ada), Some(FIRST_LOCK * 2));
        tokio::time::advance(FIRST_LOCK * 2).await;
        assert_eq!(fail(&throttle, &ada), Some(FIRST_LOCK * 4));
        let mut lock = FIRST_LOCK * 4;
        for _ in 0..7 {
            tokio::time::advance(lock).await;
            lock = fail(&throttle, &ada).unwrap();
        }
        assert_eq!(lock, LONGEST_LOCK, "a lock never grows past the longest");
        tokio::time::advance(WINDOW).await;
        assert!(throttle.attempt(&ada).is_ok(), "old failures stop counting");
        assert_eq!(
            throttle.counts(),
            LoginCounts {
                failures: 14,
                locks: 10,
                throttled: 1
            }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_known_device_gets_through_a_lock_and_its_right_password_lifts_it() {
        let throttle = LoginThrottle::default();
        let attacker = Attempt {
            account: "ada",
            address: Some("203.0.113.9".parse().unwrap()),
            known_device: None,
        };
        for _ in 0..FREE_PER_ACCOUNT {
            let _ = fail(&throttle, &attacker);
        }
        assert!(throttle.attempt(&stranger("ada")).is_err());
        let owner = Attempt {
            account: "ada",
            address: ADDRESS,
            known_device: Some("laptop"),
        };
        throttle.attempt(&owner).unwrap();
        throttle.succeeded(&owner);
        assert!(
            throttle.attempt(&stranger("ada")).is_ok(),
            "the owner's login lifted the lock"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_known_device_is_held_by_its_own_failures() {
        let throttle = LoginThrottle::default();
        let device = Attempt {
            account: "ada",
            address: None,
            known_device: Some("stolen-session"),
        };
        for _ in 0..FREE_PER_DEVICE {
            let _ = fail(&throttle, &device);
        }
        assert!(throttle.attempt(&device).is_err());
        let other = Attempt {
            known_device: Some("laptop"),
            ..device
        };
        assert!(
            throttle.attempt(&other).is_ok(),
            "another device is not held"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_address_is_locked_across_accounts() {
        let throttle = LoginThrottle::default();
        for attempt in 0..FREE_PER_ADDRESS {
            let name = format!("name-{attempt}");
            let _ = fail(&throttle, &stranger(&name));
        }
        assert!(throttle.attempt(&stranger("fresh-name")).is_err());
        let elsewhere = Attempt {
            address: None,
            ..stranger("fresh-name")
        };
        assert!(throttle.attempt(&elsewhere).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn success_clears_the_account() {
        let throttle = LoginThrottle::default();
        let ada = Attempt {
            address: None,
            ..stranger("ada")
        };
        for _ in 0..FREE_PER_ACCOUNT - 1 {
            let _ = fail(&throttle, &ada);
        }
        throttle.attempt(&ada).unwrap();
        throttle.succeeded(&ada);
        assert!(throttle.attempt(&ada).is_ok());
    }
}

#[cfg(test)]
mod pressure {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_flood_of_new_names_does_not_lift_a_lock() {
        let throttle = LoginThrottle::default();
        let bob = Attempt {
            account: "bob",
            address: None,
            known_device: None,
        };
        for _ in 0..FREE_PER_ACCOUNT {
            throttle.attempt(&bob).unwrap();
            throttle.failed(&bob);
        }
        for n in 0..MAX_KEYS + 10 {
            let name = format!("flood-{n}");
            let _ = throttle.attempt(&Attempt {
                account: &name,
                ..bob
            });
        }
        assert!(
            throttle.attempt(&bob).is_err(),
            "the flood lifted bob's lock"
        );
    }

    #[test]
    fn ipv6_addresses_count_by_their_prefix() {
        let one: IpAddr = "2001:db8::1".parse().unwrap();
        let other: IpAddr = "2001:db8::ffff".parse().unwrap();
        assert_eq!(address_key(one), address_key(other));
    }
}
