//! The threads decodes run on: `decode_concurrency` of them, started with the media service and
//! ended when it is dropped; a pool of the process's own threads (see `fermata_threads` for why
//! not tokio's blocking pool). The media service's semaphore hands out one turn per thread, so
//! a job never waits here.

use fermata_store::ErrorChain;
use fermata_threads::OwnThreads;

/// A handle to the decode threads; they end once every handle is dropped.
#[derive(Debug, Clone)]
pub(crate) struct DecodeThreads {
    threads: OwnThreads,
}

/// The work panicked, or the threads are gone.
#[derive(Debug)]
pub(crate) struct Interrupted;

impl DecodeThreads {
    /// Starts `count` threads (at least one).
    pub(crate) fn start(count: usize) -> Self {
        let (threads, failures) = OwnThreads::start("fermata-decode", count);
        for error in &failures {
            tracing::error!(error = %ErrorChain(error), "could not start a decode thread");
        }
        DecodeThreads { threads }
    }

    /// Runs `work` on a decode thread and waits for its result. A decoder that panics on a
    /// hostile file fails that file, not the thread.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Interrupted> {
        self.threads.run(work).await.map_err(|_| Interrupted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_runs_on_the_decode_threads_and_a_panic_is_an_interruption() {
        let threads = DecodeThreads::start(2);
        let name = threads
            .run(|| std::thread::current().name().map(str::to_owned))
            .await
            .unwrap();
        assert!(name.is_some_and(|name| name.starts_with("fermata-decode-")));
        assert!(matches!(
            threads.run(|| -> u8 { panic!("a hostile file") }).await,
            Err(Interrupted)
        ));
    }
}
