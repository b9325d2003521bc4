//! Fairness inside one room: no member takes every slot, and no connection floods the others.
//!
//! A member holds at most `max_connections_per_member` of a room's connections (a person with a
//! few tabs and devices fits; a script that opens connections until the room is full does not).
//! Presence (cursors and selections) is relayed to every client, so each connection may send it
//! at `presence_per_second` with bursts of `presence_burst`; presence over that is dropped,
//! neither relayed nor kept for clients who join later. Document updates are not limited here:
//! they are bounded by the message and document sizes, and are what the room is for.

use tokio::time::Instant;

use crate::settings::CollabSettings;

/// Whether `member` may open one more connection, holding `held` already.
pub(crate) fn member_has_room(held: usize, settings: &CollabSettings) -> bool {
    held < settings.max_connections_per_member
}

/// A connection's allowance of presence messages: a token bucket.
#[derive(Debug)]
pub(crate) struct PresenceBudget {
    tokens: f64,
    refilled: Instant,
    per_second: f64,
    burst: f64,
    /// Messages dropped so far, to log the first once.
    dropped: u64,
}

impl PresenceBudget {
    pub(crate) fn new(settings: &CollabSettings) -> Self {
        let burst = f64::from(settings.presence_burst.max(1));
        PresenceBudget {
            tokens: burst,
            refilled: Instant::now(),
            per_second: f64::from(settings.presence_per_second),
            burst,
            dropped: 0,
        }
    }

    /// Takes one message's worth; false when the connection has sent too much presence and this
    /// message is to be dropped.
    pub(crate) fn take(&mut self) -> bool {
        let now = Instant::now();
        let elapsed = now.duration_since(self.refilled).as_secs_f64();
        self.refilled = now;
        self.tokens = elapsed
            .mul_add(self.per_second, self.tokens)
            .min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return true;
        }
        self.dropped += 1;
        false
    }

    /// Whether the message just dropped was the connection's first: worth one log line.
    pub(crate) fn first_drop(&self) -> bool {
        self.dropped == 1
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn presence_past_the_burst_is_dropped_until_the_budget_refills() {
        let settings = CollabSettings {
            presence_per_second: 10,
            presence_burst: 20,
            ..CollabSettings::default()
        };
        let mut budget = PresenceBudget::new(&settings);
        let sent = (0..100).filter(|_| budget.take()).count();
        assert_eq!(sent, 20, "the burst, then nothing");
        assert!(!budget.take());
        tokio::time::advance(Duration::from_millis(500)).await;
        let sent = (0..100).filter(|_| budget.take()).count();
        assert_eq!(sent, 5, "half a second at ten a second");
        tokio::time::advance(Duration::from_secs(60)).await;
        let sent = (0..100).filter(|_| budget.take()).count();
        assert_eq!(sent, 20, "never more than the burst");
    }

    #[test]
    fn a_member_holds_a_bounded_share_of_a_room() {
        let settings = CollabSettings {
            max_connections_per_member: 3,
            ..CollabSettings::default()
        };
        assert!(member_has_room(2, &settings));
        assert!(!member_has_room(3, &settings));
    }
}
