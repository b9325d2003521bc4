//! The retry schedule of steps, in one pure function, and the clock a run waits on between
//! tries ([`RetryPause`]): tokio's timer, unless a test injects its own.

use std::time::Duration;

use async_trait::async_trait;

/// How a run waits out a retry delay before a step's next try.
#[async_trait]
pub trait RetryPause: Send + Sync + std::fmt::Debug + 'static {
    async fn pause(&self, delay: Duration);
}

/// The default: tokio's timer.
#[derive(Debug, Clone, Copy, Default)]
pub struct TimerPause;

#[async_trait]
impl RetryPause for TimerPause {
    async fn pause(&self, delay: Duration) {
        tokio::time::sleep(delay).await;
    }
}

/// The wait before trying a step again after its attempts so far (`failed_attempts` of them,
/// at least one) failed, or `None` when the step has had all its tries (or has not failed).
///
/// A step that fails with a transient error ([`StepError::retryable`]) gets at most three
/// retries after its first try, 1 s, 3 s and 9 s after the failure before each: four tries in
/// all. A permanent error is never retried, whatever this says. An attempt whose worker died
/// before its outcome was recorded counts as a failed attempt, so a resumed run continues the
/// schedule instead of starting it again.
///
/// [`StepError::retryable`]: crate::StepError::retryable
pub fn retry_delay(failed_attempts: u32) -> Option<Duration> {
    match failed_attempts {
        1 => Some(Duration::from_secs(1)),
        2 => Some(Duration::from_secs(3)),
        3 => Some(Duration::from_secs(9)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_retries_after_one_three_and_nine_seconds() {
        let schedule: Vec<_> = (0..=5).map(retry_delay).collect();
        assert_eq!(
            schedule,
            [
                None,
                Some(Duration::from_secs(1)),
                Some(Duration::from_secs(3)),
                Some(Duration::from_secs(9)),
                None,
                None,
            ]
        );
    }
}
