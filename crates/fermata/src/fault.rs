//! The one fault seam of the real binary: pausing fenced writes, so the lifecycle tests can
//! freeze a holder (SIGSTOP) while it is inside a fenced write, holding its locks.
//!
//! It is armed only when `FERMATA_TEST_PAUSE_FENCED_WRITES` names a marker file. While that file
//! exists, every fenced write, once its fence is checked and its locks are held, creates the file
//! `<marker>.entered` and waits for the marker to be removed (at most a minute), then goes on.
//! Nothing else reads the variable; an operator has no use for it.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use fermata_store::{Fence, FencedWriteHook};

/// The variable that arms the seam.
const PAUSE_VARIABLE: &str = "FERMATA_TEST_PAUSE_FENCED_WRITES";
/// The longest a fenced write waits for the marker to go.
const LONGEST_PAUSE: Duration = Duration::from_secs(60);
/// How often a paused write looks at the marker.
const LOOK_EVERY: Duration = Duration::from_millis(20);

/// The hook that pauses fenced writes, when the variable arms it.
pub(crate) fn pause_fenced_writes() -> Option<FencedWriteHook> {
    let marker = PathBuf::from(std::env::var_os(PAUSE_VARIABLE)?);
    let mut entered = marker.clone().into_os_string();
    entered.push(".entered");
    let entered = PathBuf::from(entered);
    Some(FencedWriteHook::new(
        move |_: &Fence| -> Pin<Box<dyn Future<Output = ()> + Send>> {
            let marker = marker.clone();
            let entered = entered.clone();
            Box::pin(async move {
                if !tokio::fs::try_exists(&marker).await.unwrap_or(false) {
                    return;
                }
                let _ = tokio::fs::write(&entered, b"").await;
                let until = tokio::time::Instant::now() + LONGEST_PAUSE;
                while tokio::fs::try_exists(&marker).await.unwrap_or(false)
                    && tokio::time::Instant::now() < until
                {
                    tokio::time::sleep(LOOK_EVERY).await;
                }
            })
        },
    ))
}
