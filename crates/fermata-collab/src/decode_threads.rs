//! The threads decodes run on: `decode_concurrency` of them, started with the media service and
//! ended when it is dropped.
//!
//! Decoding is CPU work that must stay off the async threads, but not on tokio's blocking pool:
//! that pool grows to hundreds of threads, and the allocator keeps what a large decode freed
//! with the thread that freed it, so decodes spread over many threads would each leave their
//! tens of MiB behind and the process would grow with every new thread. On a few threads of its
//! own, what the allocator keeps is bounded by the decodes that can run at once. The media
//! service's semaphore hands out one turn per thread, so a job never waits here.

use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use fermata_store::ErrorChain;
use tokio::sync::oneshot;

type Job = Box<dyn FnOnce() + Send>;

/// A handle to the decode threads; they end once every handle is dropped.
#[derive(Debug, Clone)]
pub(crate) struct DecodeThreads {
    jobs: mpsc::Sender<Job>,
}

/// The work panicked, or the threads are gone.
#[derive(Debug)]
pub(crate) struct Interrupted;

impl DecodeThreads {
    /// Starts `count` threads (at least one).
    pub(crate) fn start(count: usize) -> Self {
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        for n in 0..count.max(1) {
            let queue = Arc::clone(&queue);
            let spawned = std::thread::Builder::new()
                .name(format!("fermata-decode-{n}"))
                .spawn(move || {
                    loop {
                        // The lock is held only to take the next job, never while it runs.
                        let next = queue
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .recv();
                        let Ok(job) = next else {
                            return;
                        };
                        job();
                    }
                });
            if let Err(error) = spawned {
                tracing::error!(error = %ErrorChain(&error), "could not start a decode thread");
            }
        }
        DecodeThreads { jobs }
    }

    /// Runs `work` on a decode thread and waits for its result.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Interrupted> {
        let (reply, result) = oneshot::channel();
        let job: Job = Box::new(move || {
            // A decoder that panics on a hostile file fails that file, not the thread.
            let outcome = panic::catch_unwind(AssertUnwindSafe(work));
            let _ = reply.send(outcome.map_err(|_| Interrupted));
        });
        self.jobs.send(job).map_err(|_| Interrupted)?;
        result.await.map_err(|_| Interrupted)?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_runs_on_the_decode_threads_and_a_panic_fails_only_its_job() {
        let threads = DecodeThreads::start(2);
        let name = threads
            .run(|| std::thread::current().name().map(str::to_owned))
            .await
            .unwrap();
        assert!(name.is_some_and(|name| name.starts_with("fermata-decode-")));
        assert!(
            threads
                .run(|| -> u8 { panic!("a hostile file") })
                .await
                .is_err()
        );
        assert_eq!(threads.run(|| 2 + 2).await.unwrap(), 4);
    }
}
