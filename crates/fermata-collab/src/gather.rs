//! How long a room's batch waits for its other writers' updates before it commits.
//!
//! A batch takes the updates already waiting and commits at once (classic group commit: what
//! arrives while a commit runs forms the next batch), so an update that finds the room idle adds
//! no wait to its acknowledgement. When commits are slow, the database is the bottleneck: many
//! rooms share its flushes, or it is far away. A room whose other writers are typing then waits a
//! share of its last commit's time for their next updates, so one commit carries them all rather
//! than one commit each queueing behind the rest. PostgreSQL applies the same rule to its own
//! flushes (`commit_delay`, taken only when `commit_siblings` transactions are active). The wait
//! ends as soon as every typing writer's update is in the batch.
//!
//! A wait shorter than tokio's timer resolution is never asked for: the timer rounds a deadline up
//! to its next millisecond, so a shorter wait would cost a whole one.

use std::time::Duration;

use tokio::time::Instant;

/// The share of the last commit's time a batch may wait for its siblings' updates.
const SHARE_OF_LAST_COMMIT: u32 = 8;
/// The longest such wait, however slow the commits.
const LONGEST_WAIT: Duration = Duration::from_millis(5);
/// The resolution of tokio's timer.
const TIMER_RESOLUTION: Duration = Duration::from_millis(1);
/// A writer counts as typing while its last update is at most this old.
pub(crate) const TYPING: Duration = Duration::from_secs(1);

/// How long a batch may wait for the updates of writers who are typing, after a commit that took
/// `last_commit`: nothing while commits are fast.
pub(crate) fn sibling_wait(last_commit: Duration) -> Duration {
    let wait = (last_commit / SHARE_OF_LAST_COMMIT).min(LONGEST_WAIT);
    if wait < TIMER_RESOLUTION {
        Duration::ZERO
    } else {
        wait
    }
}

/// When a batch that began at one instant stops waiting for more updates: at the end of its
/// window, or, while it waits for typing writers, at the end of their wait.
pub(crate) struct Deadlines {
    window: Instant,
    siblings: Instant,
}

impl Deadlines {
    pub(crate) fn new(start: Instant, window: Duration, sibling_wait: Duration) -> Self {
        Deadlines {
            window: start + window,
            siblings: start + window.max(sibling_wait),
        }
    }

    /// The deadline to wait for the next update until at `now`, or `None` once it has passed:
    /// a passed deadline is never handed to the timer, which would round it up to its next
    /// millisecond and hold the commit that long.
    pub(crate) fn next(&self, now: Instant, awaiting_writers: bool) -> Option<Instant> {
        let deadline = if awaiting_writers {
            self.siblings
        } else {
            self.window
        };
        (now < deadline).then_some(deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_commits_wait_for_nobody() {
        assert_eq!(sibling_wait(Duration::ZERO), Duration::ZERO);
        assert_eq!(sibling_wait(Duration::from_micros(900)), Duration::ZERO);
        assert_eq!(sibling_wait(Duration::from_micros(7_999)), Duration::ZERO);
    }

    #[test]
    fn slow_commits_wait_a_share_of_their_time() {
        assert_eq!(
            sibling_wait(Duration::from_millis(8)),
            Duration::from_millis(1)
        );
        assert_eq!(
            sibling_wait(Duration::from_millis(24)),
            Duration::from_millis(3)
        );
    }

    #[test]
    fn a_zero_window_never_asks_the_timer() {
        let start = Instant::now();
        let deadlines = Deadlines::new(start, Duration::ZERO, Duration::ZERO);
        assert_eq!(deadlines.next(start, false), None);
        assert_eq!(deadlines.next(start, true), None);
    }

    #[test]
    fn a_window_waits_until_its_end() {
        let (start, window) = (Instant::now(), Duration::from_millis(2));
        let deadlines = Deadlines::new(start, window, Duration::ZERO);
        assert_eq!(deadlines.next(start, false), Some(start + window));
        assert_eq!(deadlines.next(start + window, false), None);
    }

    #[test]
    fn typing_writers_are_waited_for_only_while_awaited() {
        let (start, wait) = (Instant::now(), Duration::from_millis(3));
        let deadlines = Deadlines::new(start, Duration::ZERO, wait);
        assert_eq!(deadlines.next(start, true), Some(start + wait));
        assert_eq!(deadlines.next(start, false), None);
        assert_eq!(deadlines.next(start + wait, true), None);
    }

    #[test]
    fn the_wait_is_bounded() {
        assert_eq!(sibling_wait(Duration::from_secs(2)), LONGEST_WAIT);
    }
}
