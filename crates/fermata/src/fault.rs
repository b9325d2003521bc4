//! The one fault seam of the real binary: holding a fenced write in flight, and sweeping often,
//! so the lifecycle tests can freeze a holder (SIGSTOP) while it is inside a fenced write, and
//! stop a process while its rooms, sweeps and workflow runs all have work in flight.
//!
//! Pausing is armed only when `FERMATA_TEST_PAUSE_FENCED_WRITES` names a marker file. While that
//! file exists, the first fenced write to reach its locks creates the file `<marker>.entered`
//! and, with its fence checked and its locks held, waits for the marker to be removed (at most a
//! minute), then goes on. Fenced writes after it do not pause (they wait for its locks, as they
//! would behind any slow write), so what a stop does once it has abandoned that write is not
//! held up again. `FERMATA_TEST_SWEEP_EVERY` (a duration such as `50ms`) replaces the 15 minutes
//! between two rounds of sweeps. Nothing else reads these variables; an operator has no use for
//! them, and a build without the `fault-injection` feature (a release build) does not read
//! them at all: there, both seams are off.

#[cfg(feature = "fault-injection")]
pub(crate) use armed::{pause_fenced_writes, sweep_every};

/// The seams, read from the environment.
#[cfg(feature = "fault-injection")]
mod armed {
    use std::future::Future;
    use std::path::PathBuf;
    use std::pin::Pin;
    use std::time::Duration;

    use fermata_store::{Fence, FencedWriteHook};

    /// The variable that arms the pause.
    const PAUSE_VARIABLE: &str = "FERMATA_TEST_PAUSE_FENCED_WRITES";
    /// The variable that sets how often the sweeps run.
    const SWEEP_EVERY_VARIABLE: &str = "FERMATA_TEST_SWEEP_EVERY";
    /// The longest a fenced write waits for the marker to go.
    const LONGEST_PAUSE: Duration = Duration::from_secs(60);
    /// How often a paused write looks at the marker.
    const LOOK_EVERY: Duration = Duration::from_millis(20);

    /// The hook that pauses a fenced write, when the variable arms it.
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
                    // Fenced writes of one lease run one at a time (the lease's locks), so no two
                    // of them look at the files at once.
                    if !tokio::fs::try_exists(&marker).await.unwrap_or(false)
                        || tokio::fs::try_exists(&entered).await.unwrap_or(false)
                    {
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

    /// How often the sweeps run, when the variable sets it.
    pub(crate) fn sweep_every() -> Option<Duration> {
        let every = std::env::var(SWEEP_EVERY_VARIABLE).ok()?;
        humantime::parse_duration(&every)
            .ok()
            .filter(|every| !every.is_zero())
    }
}

/// No pause: the seams are compiled out.
#[cfg(not(feature = "fault-injection"))]
pub(crate) fn pause_fenced_writes() -> Option<fermata_store::FencedWriteHook> {
    None
}

/// The sweeps' own schedule: the seams are compiled out.
#[cfg(not(feature = "fault-injection"))]
pub(crate) fn sweep_every() -> Option<std::time::Duration> {
    None
}
