//! Password checks under a bound: an argon2id verification takes 19 MiB and tens of
//! milliseconds of one core, so a storm of logins (from many addresses, against many names,
//! where the throttle's keys do not meet) must not run thousands of them at once.
//!
//! At most `password_concurrency` checks run at once, each on one of as many threads of their
//! own (on tokio's blocking pool the allocator would keep each check's 19 MiB with whichever of
//! hundreds of threads ran it); a check waits at most [`QUEUE_WAIT`] for its turn and is then
//! refused as [`AccountError::Busy`].

use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fermata_crypto::{SecretToken, verify_password};
use fermata_store::ErrorChain;
use tokio::sync::{Semaphore, oneshot};

use crate::AccountError;

/// How long a check waits for its turn.
pub const QUEUE_WAIT: Duration = Duration::from_secs(5);

type Job = Box<dyn FnOnce() + Send>;

/// The checking threads and their turns; the threads end once every handle is dropped.
#[derive(Debug)]
pub(crate) struct PasswordChecks {
    turns: Arc<Semaphore>,
    jobs: mpsc::Sender<Job>,
}

impl PasswordChecks {
    /// Starts `count` threads (at least one).
    pub(crate) fn start(count: usize) -> Self {
        let count = count.max(1);
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        for n in 0..count {
            let queue = Arc::clone(&queue);
            let spawned = std::thread::Builder::new()
                .name(format!("fermata-password-{n}"))
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
                tracing::error!(error = %ErrorChain(&error), "could not start a password thread");
            }
        }
        PasswordChecks {
            turns: Arc::new(Semaphore::new(count)),
            jobs,
        }
    }

    /// Whether `password` matches `stored` (an unknown account has none, and takes as long).
    pub(crate) async fn verify(
        &self,
        password: SecretToken,
        stored: Option<String>,
    ) -> Result<bool, AccountError> {
        let Ok(Ok(turn)) =
            tokio::time::timeout(QUEUE_WAIT, Arc::clone(&self.turns).acquire_owned()).await
        else {
            tracing::warn!("a password check waited its whole turn and was refused");
            return Err(AccountError::Busy {
                retry_after: QUEUE_WAIT,
            });
        };
        let (reply, result) = oneshot::channel();
        let job: Job = Box::new(move || {
            // The turn is held by the work: a login that goes away does not free it early.
            let _turn = turn;
            let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
                verify_password(password.expose(), stored.as_deref())
            }));
            let _ = reply.send(outcome.unwrap_or(false));
        });
        let busy = || AccountError::Busy {
            retry_after: QUEUE_WAIT,
        };
        self.jobs.send(job).map_err(|_| busy())?;
        result.await.map_err(|_| busy())
    }
}
