//! Password checks under a bound: an argon2id verification takes 19 MiB and tens of
//! milliseconds of one core, so a storm of logins (from many addresses, against many names,
//! where the throttle's keys do not meet) must not run thousands of them at once.
//!
//! At most `password_concurrency` checks run at once, each on one of as many threads of their
//! own (`fermata_threads`: on tokio's blocking pool the allocator would keep each check's 19 MiB
//! with whichever of hundreds of threads ran it); a check waits at most [`QUEUE_WAIT`] for its
//! turn and is then refused as [`AccountError::Busy`].

use std::time::Duration;

use fermata_crypto::{SecretToken, verify_password};
use fermata_store::ErrorChain;
use fermata_threads::{OwnThreads, RunError};

use crate::AccountError;

/// How long a check waits for its turn.
pub const QUEUE_WAIT: Duration = Duration::from_secs(5);

/// The checking threads and their turns; the threads end once every handle is dropped.
#[derive(Debug)]
pub(crate) struct PasswordChecks {
    threads: OwnThreads,
}

impl PasswordChecks {
    /// Starts `count` threads (at least one).
    pub(crate) fn start(count: usize) -> Self {
        let (threads, failures) = OwnThreads::start("fermata-password", count);
        for error in &failures {
            tracing::error!(error = %ErrorChain(error), "could not start a password thread");
        }
        PasswordChecks { threads }
    }

    /// Whether `password` matches `stored` (an unknown account has none, and takes as long).
    pub(crate) async fn verify(
        &self,
        password: SecretToken,
        stored: Option<String>,
    ) -> Result<bool, AccountError> {
        let checked = self
            .threads
            .run_within(QUEUE_WAIT, move || {
                verify_password(password.expose(), stored.as_deref())
            })
            .await;
        match checked {
            Ok(matches) => Ok(matches),
            // A check that panicked matched nothing.
            Err(RunError::Panicked) => Ok(false),
            Err(RunError::Busy) => {
                tracing::warn!("a password check waited its whole turn and was refused");
                Err(AccountError::Busy {
                    retry_after: QUEUE_WAIT,
                })
            }
            Err(RunError::Stopped) => Err(AccountError::Busy {
                retry_after: QUEUE_WAIT,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use fermata_crypto::hash_password;
    use fermata_threads::testing::hold_turn;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_check_that_waits_its_whole_turn_is_refused_as_busy() {
        let checks = PasswordChecks::start(1);
        // Something else holds the one turn until it is released.
        let (release, holder) = hold_turn(&checks.threads).await;
        let refused = checks
            .verify(SecretToken::from_given("guess guess guess"), None)
            .await;
        assert!(
            matches!(refused, Err(AccountError::Busy { retry_after }) if retry_after == QUEUE_WAIT),
            "{refused:?}"
        );
        release.send(()).unwrap();
        holder.await.unwrap().unwrap();
        let stored = hash_password("correct horse battery").unwrap();
        let password = SecretToken::from_given("correct horse battery");
        assert!(checks.verify(password, Some(stored)).await.unwrap());
    }
}
