//! Instants as stored: milliseconds since the Unix epoch, read from the database's own clock.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A point in time as the store records it: milliseconds since the Unix epoch.
///
/// Lease expiry is decided on the database's clock, so these values come from the database and
/// are only compared with other values from the same database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UnixMillis(pub i64);

impl UnixMillis {
    /// The local clock, for adapters whose database is this process (the memory adapter).
    pub fn now() -> Self {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        UnixMillis(i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX))
    }

    /// This instant plus `duration`, saturating.
    #[must_use]
    pub fn plus(self, duration: Duration) -> Self {
        let millis = i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        UnixMillis(self.0.saturating_add(millis))
    }

    /// How long after `earlier` this instant is; zero when it is not later.
    pub fn since(self, earlier: UnixMillis) -> Duration {
        Duration::from_millis(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }

    fn as_system_time(self) -> SystemTime {
        match u64::try_from(self.0) {
            Ok(millis) => UNIX_EPOCH + Duration::from_millis(millis),
            Err(_) => UNIX_EPOCH,
        }
    }
}

impl fmt::Display for UnixMillis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        humantime::format_rfc3339_millis(self.as_system_time()).fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_as_rfc3339() {
        assert_eq!(
            UnixMillis(1_700_000_000_123).to_string(),
            "2023-11-14T22:13:20.123Z"
        );
    }

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(
            UnixMillis(i64::MAX).plus(Duration::from_secs(1)),
            UnixMillis(i64::MAX)
        );
        assert_eq!(UnixMillis(5).since(UnixMillis(9)), Duration::ZERO);
        assert_eq!(
            UnixMillis(1_500).since(UnixMillis(500)),
            Duration::from_secs(1)
        );
    }
}
