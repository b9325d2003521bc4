//! Failed-login throttling, per account name and per client address, in memory.
//!
//! Names are throttled whether or not the account exists, so a refusal tells nothing about
//! existence. The table is bounded: past its size the oldest entries go first.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Failures allowed per account name within [`WINDOW`].
pub(crate) const PER_ACCOUNT: usize = 5;
/// Failures allowed per client address within [`WINDOW`].
pub(crate) const PER_ADDRESS: usize = 20;
/// How long a failure counts.
pub(crate) const WINDOW: Duration = Duration::from_secs(15 * 60);
/// Most keys remembered at once.
const MAX_KEYS: usize = 100_000;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Account(String),
    Address(IpAddr),
}

/// Recent attempts by account and by address.
#[derive(Debug, Default)]
pub struct LoginThrottle {
    attempts: Mutex<HashMap<Key, VecDeque<Instant>>>,
}

/// The key of an address: IPv6 addresses by their /64, which one host usually holds whole.
fn address_key(address: IpAddr) -> Key {
    match address {
        IpAddr::V6(v6) => {
            let mut segments = v6.segments();
            segments[4..].fill(0);
            Key::Address(IpAddr::V6(segments.into()))
        }
        v4 @ IpAddr::V4(_) => Key::Address(v4),
    }
}

impl LoginThrottle {
    /// Counts an attempt before the password is checked, so attempts made at the same moment
    /// cannot all pass: `Err(retry_after)` when `account` or `address` is over its limit, and
    /// then nothing is counted. A successful attempt is handed back with [`Self::succeeded`].
    pub fn attempt(&self, account: &str, address: Option<IpAddr>) -> Result<(), Duration> {
        let now = Instant::now();
        let mut attempts = self
            .attempts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let keys: Vec<(Key, usize)> = [(Key::Account(account.to_owned()), PER_ACCOUNT)]
            .into_iter()
            .chain(address.map(|a| (address_key(a), PER_ADDRESS)))
            .collect();
        let mut wait = Duration::ZERO;
        for (key, limit) in &keys {
            if let Some(times) = attempts.get_mut(key) {
                while times
                    .front()
                    .is_some_and(|t| now.duration_since(*t) >= WINDOW)
                {
                    times.pop_front();
                }
                if times.len() >= *limit {
                    let oldest = times[times.len() - limit];
                    wait = wait.max(WINDOW.saturating_sub(now.duration_since(oldest)));
                }
            }
        }
        if !wait.is_zero() {
            return Err(wait);
        }
        if attempts.len() + keys.len() > MAX_KEYS {
            // Forget only keys whose attempts have all expired: never one that is throttled.
            attempts.retain(|_, times| {
                times
                    .back()
                    .is_some_and(|t| now.duration_since(*t) < WINDOW)
            });
            if attempts.len() + keys.len() > MAX_KEYS {
                // The table is full of live attempts: refuse rather than forget a lockout.
                return Err(WINDOW);
            }
        }
        for (key, _) in keys {
            attempts.entry(key).or_default().push_back(now);
        }
        Ok(())
    }

    /// The attempt succeeded: the account's attempts are forgotten and the address's last one
    /// is handed back.
    pub fn succeeded(&self, account: &str, address: Option<IpAddr>) {
        let mut attempts = self
            .attempts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        attempts.remove(&Key::Account(account.to_owned()));
        if let Some(times) = address.and_then(|a| attempts.get_mut(&address_key(a))) {
            times.pop_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADDRESS: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));

    #[tokio::test(start_paused = true)]
    async fn an_account_is_throttled_after_five_failures_for_fifteen_minutes() {
        let throttle = LoginThrottle::default();
        for _ in 0..PER_ACCOUNT {
            assert!(throttle.attempt("ada", ADDRESS).is_ok());
        }
        let wait = throttle.attempt("ada", ADDRESS).unwrap_err();
        assert_eq!(wait, WINDOW);
        assert!(
            throttle.attempt("bob", ADDRESS).is_ok(),
            "another account is not throttled"
        );
        tokio::time::advance(WINDOW).await;
        assert!(throttle.attempt("ada", ADDRESS).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn an_address_is_throttled_across_accounts() {
        let throttle = LoginThrottle::default();
        for attempt in 0..PER_ADDRESS {
            throttle
                .attempt(&format!("name-{attempt}"), ADDRESS)
                .unwrap();
        }
        assert!(throttle.attempt("fresh-name", ADDRESS).is_err());
        assert!(throttle.attempt("fresh-name", None).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn success_clears_the_account() {
        let throttle = LoginThrottle::default();
        for _ in 0..PER_ACCOUNT - 1 {
            throttle.attempt("ada", None).unwrap();
        }
        throttle.attempt("ada", None).unwrap();
        throttle.succeeded("ada", None);
        assert!(throttle.attempt("ada", None).is_ok());
    }
}

#[cfg(test)]
mod pressure {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_flood_of_new_names_does_not_lift_a_lockout() {
        let throttle = LoginThrottle::default();
        for _ in 0..PER_ACCOUNT {
            throttle.attempt("bob", None).unwrap();
        }
        for n in 0..MAX_KEYS + 10 {
            let _ = throttle.attempt(&format!("flood-{n}"), None);
        }
        assert!(
            throttle.attempt("bob", None).is_err(),
            "the flood lifted bob's lockout"
        );
    }

    #[test]
    fn ipv6_addresses_count_by_their_prefix() {
        let one: IpAddr = "2001:db8::1".parse().unwrap();
        let other: IpAddr = "2001:db8::ffff".parse().unwrap();
        assert_eq!(address_key(one), address_key(other));
    }
}
