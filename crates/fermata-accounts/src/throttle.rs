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

/// Recent failures by account and by address.
#[derive(Debug, Default)]
pub struct LoginThrottle {
    failures: Mutex<HashMap<Key, VecDeque<Instant>>>,
}

impl LoginThrottle {
    /// `Err(retry_after)` when `account` or `address` has failed too often lately.
    pub fn check(&self, account: &str, address: Option<IpAddr>) -> Result<(), Duration> {
        let now = Instant::now();
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut wait = Duration::ZERO;
        let keys = [(Key::Account(account.to_owned()), PER_ACCOUNT)]
            .into_iter()
            .chain(address.map(|a| (Key::Address(a), PER_ADDRESS)));
        for (key, limit) in keys {
            if let Some(times) = failures.get_mut(&key) {
                while times
                    .front()
                    .is_some_and(|t| now.duration_since(*t) >= WINDOW)
                {
                    times.pop_front();
                }
                if times.len() >= limit {
                    let oldest = times[times.len() - limit];
                    wait = wait.max(WINDOW.saturating_sub(now.duration_since(oldest)));
                }
            }
        }
        if wait.is_zero() { Ok(()) } else { Err(wait) }
    }

    pub fn record_failure(&self, account: &str, address: Option<IpAddr>) {
        let now = Instant::now();
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if failures.len() >= MAX_KEYS {
            failures.retain(|_, times| {
                times
                    .back()
                    .is_some_and(|t| now.duration_since(*t) < WINDOW)
            });
            if failures.len() >= MAX_KEYS {
                failures.clear();
            }
        }
        let keys = [Key::Account(account.to_owned())]
            .into_iter()
            .chain(address.map(Key::Address));
        for key in keys {
            failures.entry(key).or_default().push_back(now);
        }
    }

    /// A successful login clears the account's failures (not the address's).
    pub fn record_success(&self, account: &str) {
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&Key::Account(account.to_owned()));
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
            assert!(throttle.check("ada", ADDRESS).is_ok());
            throttle.record_failure("ada", ADDRESS);
        }
        let wait = throttle.check("ada", ADDRESS).unwrap_err();
        assert_eq!(wait, WINDOW);
        assert!(
            throttle.check("bob", ADDRESS).is_ok(),
            "another account is not throttled"
        );
        tokio::time::advance(WINDOW).await;
        assert!(throttle.check("ada", ADDRESS).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn an_address_is_throttled_across_accounts() {
        let throttle = LoginThrottle::default();
        for attempt in 0..PER_ADDRESS {
            throttle.record_failure(&format!("name-{attempt}"), ADDRESS);
        }
        assert!(throttle.check("fresh-name", ADDRESS).is_err());
        assert!(throttle.check("fresh-name", None).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn success_clears_the_account() {
        let throttle = LoginThrottle::default();
        for _ in 0..PER_ACCOUNT {
            throttle.record_failure("ada", None);
        }
        throttle.record_success("ada");
        assert!(throttle.check("ada", None).is_ok());
    }
}
