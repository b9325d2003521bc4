//! Waiting for a condition in a test: poll it with a bound, never sleep for a guessed time.
//!
//! Every crate's tests wait through [`eventually`] (or [`eventually_within`] where a case knows
//! its condition needs longer, such as a process start), so a slow machine makes a test slower,
//! never wrong, and a condition that never holds fails with what was awaited.

use std::future::Future;
use std::time::Duration;

/// How long a test waits for a condition before it fails.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// How often a condition is asked again.
const POLL_EVERY: Duration = Duration::from_millis(20);

/// Polls `condition` until it holds, failing the test after [`PATIENCE`].
pub async fn eventually<F, Fut>(what: &str, condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    eventually_within(PATIENCE, what, condition).await;
}

/// Polls `condition` until it holds, failing the test after `patience`.
pub async fn eventually_within<F, Fut>(patience: Duration, what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    eventually_some_within(patience, what, || {
        let holds = condition();
        async move { holds.await.then_some(()) }
    })
    .await;
}

/// Polls `probe` until it finds something, and returns it, failing the test after
/// [`PATIENCE`].
pub async fn eventually_some<T, F, Fut>(what: &str, probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    eventually_some_within(PATIENCE, what, probe).await
}

/// Polls `probe` until it finds something, and returns it, failing the test after `patience`.
pub async fn eventually_some_within<T, F, Fut>(patience: Duration, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        if let Some(found) = probe().await {
            return found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "gave up after {patience:?} waiting for: {what}"
        );
        tokio::time::sleep(POLL_EVERY).await;
    }
}
