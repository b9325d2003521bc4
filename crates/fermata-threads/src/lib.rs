//! A bounded pool of the process's own threads for CPU-heavy work: password checks
//! (`fermata-accounts`) and media decoding (`fermata-collab`).
//!
//! The work must stay off the async threads, but not on tokio's blocking pool: that pool grows
//! to hundreds of threads, and the allocator keeps what a large job freed with the thread that
//! freed it, so jobs spread over many threads would each leave their tens of MiB behind and the
//! process would grow with every new thread. On a few threads of its own, what the allocator
//! keeps is bounded by the jobs that can run at once.
//!
//! A pool of `count` threads hands out `count` turns. A job is queued only once it has a turn, so
//! jobs do not pile up behind the threads; the others wait for a turn, as long as it takes
//! ([`OwnThreads::run`]) or at most a given time ([`OwnThreads::run_within`]), and are then
//! refused unrun. The turn is held by the job itself: a caller that goes away does not free it
//! while its work still runs. A job that panics fails alone, and its thread goes on to the next.
//!
//! With the `testing` feature, [`testing::hold_turn`] keeps a turn taken for other crates' tests
//! of what a busy pool does.

use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

type Job = Box<dyn FnOnce() + Send>;

/// A handle to the threads; they end once every handle is dropped.
#[derive(Debug, Clone)]
pub struct OwnThreads {
    /// One per thread; a job holds one from before it is queued until its work has ended.
    turns: Arc<Semaphore>,
    jobs: mpsc::Sender<Job>,
}

/// Why a job gave no result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunError {
    /// No turn came within the wait; the work did not run.
    Busy,
    /// The work panicked.
    Panicked,
    /// No thread is left to run the work: none could be started.
    Stopped,
}

impl OwnThreads {
    /// Starts `count` threads (at least one), named `{name}-0`, `{name}-1`, ...; with the errors
    /// of those that could not be started, for the caller to log. The turns stay `count`: jobs
    /// wait in line for the threads that did start.
    pub fn start(name: &str, count: usize) -> (Self, Vec<io::Error>) {
        let count = count.max(1);
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        let mut failures = Vec::new();
        for n in 0..count {
            let queue = Arc::clone(&queue);
            let spawned = std::thread::Builder::new()
                .name(format!("{name}-{n}"))
                .spawn(move || {
                    loop {
                        // The lock is held only to take the next job, never while it runs.
                        let next = queue.lock().unwrap_or_else(PoisonError::into_inner).recv();
                        let Ok(job) = next else {
                            return;
                        };
                        job();
                    }
                });
            if let Err(error) = spawned {
                failures.push(error);
            }
        }
        let threads = OwnThreads {
            turns: Arc::new(Semaphore::new(count)),
            jobs,
        };
        (threads, failures)
    }

    /// Runs `work` on one of the threads, waiting as long as it takes for a turn.
    pub async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, RunError> {
        let turn = Arc::clone(&self.turns)
            .acquire_owned()
            .await
            // The turns are never closed.
            .map_err(|_| RunError::Stopped)?;
        self.run_in_turn(turn, work).await
    }

    /// Runs `work` on one of the threads, or refuses it as [`RunError::Busy`] when no turn came
    /// within `wait`.
    pub async fn run_within<T: Send + 'static>(
        &self,
        wait: Duration,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, RunError> {
        let turn = match tokio::time::timeout(wait, Arc::clone(&self.turns).acquire_owned()).await {
            Ok(Ok(turn)) => turn,
            // The turns are never closed.
            Ok(Err(_)) => return Err(RunError::Stopped),
            Err(_) => return Err(RunError::Busy),
        };
        self.run_in_turn(turn, work).await
    }

    async fn run_in_turn<T: Send + 'static>(
        &self,
        turn: OwnedSemaphorePermit,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, RunError> {
        let (reply, result) = oneshot::channel();
        let job: Job = Box::new(move || {
            let outcome = panic::catch_unwind(AssertUnwindSafe(work));
            // Freed before the reply, so a caller that runs again at once finds its turn free.
            drop(turn);
            let _ = reply.send(outcome.map_err(|_| RunError::Panicked));
        });
        self.jobs.send(job).map_err(|_| RunError::Stopped)?;
        result.await.map_err(|_| RunError::Stopped)?
    }
}

/// What tests of the pool, and of what runs on one, need.
#[cfg(any(test, feature = "testing"))]
pub mod testing {
    use std::sync::mpsc;

    use tokio::sync::oneshot;
    use tokio::task::JoinHandle;

    use crate::{OwnThreads, RunError};

    /// Takes a turn of `threads` with work that holds it until the returned sender sends (or is
    /// dropped), and returns once that work runs, with the task that waits for it.
    pub async fn hold_turn(
        threads: &OwnThreads,
    ) -> (mpsc::Sender<()>, JoinHandle<Result<(), RunError>>) {
        let (release, blocked) = mpsc::channel::<()>();
        let (running, started_running) = oneshot::channel();
        let holder = tokio::spawn({
            let threads = threads.clone();
            async move {
                threads
                    .run(move || {
                        let _ = running.send(());
                        let _ = blocked.recv();
                    })
                    .await
            }
        });
        started_running.await.expect("the held turn's work runs");
        (release, holder)
    }
}

#[cfg(test)]
mod tests {
    use super::testing::hold_turn;
    use super::*;

    fn started(count: usize) -> OwnThreads {
        let (threads, failures) = OwnThreads::start("fermata-test", count);
        assert!(failures.is_empty(), "{failures:?}");
        threads
    }

    fn thread_name() -> Option<String> {
        std::thread::current().name().map(str::to_owned)
    }

    #[tokio::test]
    async fn work_runs_on_the_named_threads_and_a_panic_fails_only_its_job() {
        // Asked for none, the pool has one thread.
        let threads = started(0);
        assert_eq!(
            threads.run(thread_name).await,
            Ok(Some("fermata-test-0".to_owned()))
        );
        assert_eq!(
            threads.run(|| -> u8 { panic!("a hostile file") }).await,
            Err(RunError::Panicked)
        );
        // The one thread survived the panic, and its turn was given back.
        assert_eq!(
            threads.run_within(Duration::from_secs(5), || 2 + 2).await,
            Ok(4)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_job_waits_at_most_its_wait_and_the_work_holds_its_turn() {
        let threads = started(1);
        let (release, caller) = hold_turn(&threads).await;
        // The caller goes away while its work runs: the turn stays taken until the work ends.
        caller.abort();
        let _ = caller.await;
        let asked = tokio::time::Instant::now();
        assert_eq!(
            threads.run_within(Duration::from_secs(5), || 1).await,
            Err(RunError::Busy)
        );
        assert_eq!(asked.elapsed(), Duration::from_secs(5));
        let waiting = tokio::spawn({
            let threads = threads.clone();
            async move { threads.run(|| 2).await }
        });
        release.send(()).unwrap();
        assert_eq!(waiting.await.unwrap(), Ok(2));
    }
}
