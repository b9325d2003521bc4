//! The `fermata:writer` process lease: one serving process per database.
//!
//! The holder renews every `renew_every` (10 s) over a connection of its own. An attempt that
//! takes longer than `attempt_timeout` (5 s) counts as failed and is retried; one with no reply
//! at all after `abandon_after` (6 s) is abandoned: its connection is closed and its server
//! session ended, and the next attempt opens a new one. Retries go on until the safety deadline,
//! `safety_deadline` (25 s) after the last successful renewal was *sent*; then the holder stops.
//! The lease's time-to-live `ttl` (30 s) is counted by the database from when it applied that
//! renewal, which is after it was sent, so the holder gives up its lease at least
//! `ttl - safety_deadline` (5 s) before anyone else can take it over, and its bounded drain
//! (`drain_timeout`, 3 s) ends before then too. Fenced writes are refused by the database after
//! expiry in any case.

use std::time::{Duration, SystemTime};

use fermata_collab::storage_outage;
use fermata_metrics::{Metrics, RenewalOutcome, StorageCause};
use fermata_store::{
    Acquisition, ErrorChain, ErrorKind, Lease, LeaseName, LeaseRecord, LeaseRenewal, LeaseStore,
    StoreError,
};
use tokio::time::{Instant, sleep_until, timeout};
use tokio_util::sync::CancellationToken;

use crate::config::Handover;

/// The writer lease's clock settings. See the module documentation for how they relate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTimings {
    pub ttl: Duration,
    pub renew_every: Duration,
    pub attempt_timeout: Duration,
    pub abandon_after: Duration,
    pub safety_deadline: Duration,
    pub drain_timeout: Duration,
}

impl Default for LeaseTimings {
    fn default() -> Self {
        LeaseTimings {
            ttl: Duration::from_secs(30),
            renew_every: Duration::from_secs(10),
            attempt_timeout: Duration::from_secs(5),
            abandon_after: Duration::from_secs(6),
            safety_deadline: Duration::from_secs(25),
            drain_timeout: Duration::from_secs(3),
        }
    }
}

impl LeaseTimings {
    /// Checks that the holder always stops before another process could take over. Returns the
    /// offending key and why.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        let show = |d: Duration| humantime::format_duration(d).to_string();
        if self.attempt_timeout >= self.abandon_after {
            return Err((
                "attempt_timeout",
                format!(
                    "must be shorter than abandon_after ({})",
                    show(self.abandon_after)
                ),
            ));
        }
        if self.abandon_after > self.renew_every {
            return Err((
                "abandon_after",
                format!("must not exceed renew_every ({})", show(self.renew_every)),
            ));
        }
        if self.renew_every >= self.safety_deadline {
            return Err((
                "renew_every",
                format!(
                    "must be shorter than safety_deadline ({})",
                    show(self.safety_deadline)
                ),
            ));
        }
        if self.safety_deadline + self.drain_timeout >= self.ttl {
            return Err((
                "ttl",
                format!(
                    "must exceed safety_deadline + drain_timeout ({} + {}), so the holder stops \
                     before another process can take over",
                    show(self.safety_deadline),
                    show(self.drain_timeout)
                ),
            ));
        }
        Ok(())
    }

    /// The pause before retrying a failed renewal, and between looks at a held lease.
    pub fn retry_delay(&self) -> Duration {
        self.renew_every / 10
    }

    /// The longest one wait of the serving process's pool on the database may last: PostgreSQL's
    /// `statement_timeout`, `lock_timeout` and `idle_in_transaction_session_timeout`, SQLite's
    /// busy timeout. It is the drain timeout, the time a stop already grants work in flight, so
    /// a holder's statement never outlives its own drain, and a frozen holder's transaction is
    /// ended by the database at most this long after its last statement.
    pub fn database_wait(&self) -> Duration {
        self.drain_timeout
    }

    /// How long after the writer lease expires a waiting successor holds it, at most, even when
    /// the holder froze inside a fenced write: the frozen statement ends within one
    /// [`database_wait`](Self::database_wait), its idle transaction is ended within another, and
    /// the successor looks at the lease every [`retry_delay`](Self::retry_delay), once more when
    /// an acquisition gave up on the lock at the moment it was freed. From the holder's last
    /// renewal, a successor takes over within `ttl` plus this bound (38 s at the defaults).
    pub fn takeover_bound(&self) -> Duration {
        2 * self.database_wait() + 2 * self.retry_delay()
    }
}

/// A new per-start instance ID: twelve lowercase hex digits, which also name a cluster member's
/// lease.
pub fn new_instance() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..12].to_owned()
}

/// Who holds the lease: host, process and the per-start `instance`, so a log line or `status`
/// says which process it was.
pub fn holder_name(instance: &str) -> String {
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    format!("{host} pid {} ({instance})", std::process::id())
}

/// Why the writer lease could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum TakeError {
    #[error(
        "another fermata process is serving this database: the writer lease is held by {} \
         (token {}) until {}; stop it, or start with --handover wait to take over when it \
         releases the lease",
        .0.holder, .0.token, .0.expires_at
    )]
    Held(LeaseRecord),
    #[error("could not take the writer lease: {0}")]
    Store(#[from] StoreError),
}

/// A granted lease and when its acquisition was sent, which starts the safety deadline.
#[derive(Debug)]
pub struct Granted {
    pub lease: Lease,
    pub sent: Instant,
}

/// Takes the writer lease. With `Handover::Wait`, polls `peek` (which never queues behind the
/// holder) and acquires once the lease is free; returns `None` if `shutdown` fires first.
pub async fn take(
    leases: &dyn LeaseStore,
    holder: &str,
    timings: &LeaseTimings,
    handover: Handover,
    shutdown: &CancellationToken,
) -> Result<Option<Granted>, TakeError> {
    let name = LeaseName::WRITER;
    let mut announced = false;
    loop {
        let peek = leases.peek(&name).await?;
        if peek.is_free() {
            let sent = Instant::now();
            match leases.acquire(&name, holder, timings.ttl).await {
                Ok(Acquisition::Granted(lease)) => return Ok(Some(Granted { lease, sent })),
                Ok(Acquisition::Held(record)) if handover == Handover::Refuse => {
                    return Err(TakeError::Held(record));
                }
                Ok(Acquisition::Held(_)) => {}
                // A takeover waits for the old holder's write in flight at most one database
                // wait; a holder that froze in it is ended by the database meanwhile, so the
                // waiting process tries again.
                Err(error) if handover == Handover::Wait && error.is_retryable() => {
                    tracing::warn!(error = %ErrorChain(&error), "could not take the writer lease yet; trying again");
                }
                Err(error) => return Err(error.into()),
            }
        } else if let Some(record) = peek.live_holder() {
            if handover == Handover::Refuse {
                return Err(TakeError::Held(record.clone()));
            }
            if !announced {
                tracing::info!(
                    holder = %record.holder,
                    token = %record.token,
                    expires_at = %record.expires_at,
                    "waiting for the writer lease to be released"
                );
                announced = true;
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return Ok(None),
            () = tokio::time::sleep(timings.retry_delay()) => {}
        }
    }
}

/// How the keeper ended.
#[derive(Debug)]
pub enum KeeperExit {
    /// Shutdown was asked for; the lease is still ours to release.
    Stopped(Lease),
    /// The lease is gone or can no longer be trusted; the process must drain and stop.
    Lost(LeaseLoss),
}

/// Why the lease was lost, with what an operator needs to see.
#[derive(Debug, thiserror::Error)]
#[error("{reason}; last renewed at {}; last renewal error: {}", 
    humantime::format_rfc3339_millis(*.last_renewed),
    .last_error.as_deref().unwrap_or("none"))]
pub struct LeaseLoss {
    pub reason: &'static str,
    /// Wall-clock time of the last successful renewal (or the grant).
    pub last_renewed: SystemTime,
    pub last_error: Option<String>,
}

/// Renews the writer lease until shutdown or loss.
pub struct Keeper {
    pub renewal: Box<dyn LeaseRenewal>,
    pub lease: Lease,
    /// When the latest successful renewal (or the grant) was sent.
    pub last_success_sent: Instant,
    pub timings: LeaseTimings,
    pub metrics: std::sync::Arc<Metrics>,
}

impl std::fmt::Debug for Keeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keeper")
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

impl Keeper {
    pub async fn run(mut self, shutdown: CancellationToken) -> KeeperExit {
        let timings = self.timings;
        let mut last_renewed = SystemTime::now();
        let mut last_error: Option<String> = None;
        let mut next_attempt = self.last_success_sent + timings.renew_every;
        loop {
            let deadline = self.last_success_sent + timings.safety_deadline;
            // While the database fails other work (commits, loads), the keeper looks every retry
            // delay and renews at once: a renewal is a write, and its success ends those outages
            // (or its failure starts this one) without waiting for the next scheduled renewal.
            let look = next_attempt.min(Instant::now() + timings.retry_delay());
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return KeeperExit::Stopped(self.lease),
                () = sleep_until(deadline) => {
                    return self.lost("the safety deadline passed without a successful renewal", last_renewed, last_error);
                }
                () = sleep_until(look) => {}
            }
            if Instant::now() < next_attempt && self.metrics.storage_available() {
                continue;
            }

            let sent = Instant::now();
            let attempt = timeout(
                timings.abandon_after,
                self.renewal.renew(&self.lease, timings.ttl),
            );
            // Shutdown does not interrupt an attempt, but its result is then ignored: it neither
            // re-arms the deadline nor schedules a retry.
            let result = tokio::select! {
                result = attempt => result,
                () = sleep_until(deadline) => {
                    self.renewal.abandon().await;
                    return self.lost("the safety deadline passed during a renewal", last_renewed, last_error);
                }
            };
            if shutdown.is_cancelled() {
                return KeeperExit::Stopped(self.lease);
            }
            let retry_at = Instant::now() + timings.retry_delay();
            match result {
                Err(_no_reply) => {
                    self.metrics.renewal(RenewalOutcome::Abandoned);
                    let error = format!(
                        "no reply within {}; connection abandoned",
                        humantime::format_duration(timings.abandon_after)
                    );
                    tracing::warn!(reason = %error, "writer lease renewal abandoned");
                    storage_outage::failed_without_reply(
                        &self.metrics,
                        StorageCause::Renewal,
                        &error,
                    );
                    self.renewal.abandon().await;
                    last_error = Some(error);
                    next_attempt = retry_at;
                }
                Ok(Ok(lease)) if sent.elapsed() <= timings.attempt_timeout => {
                    self.metrics.renewal(RenewalOutcome::Renewed);
                    storage_outage::answered(&self.metrics, StorageCause::Renewal, sent.into_std());
                    self.metrics
                        .lease_granted(lease.token.0, lease.expires_at.0);
                    self.lease = lease;
                    self.last_success_sent = sent;
                    last_renewed = SystemTime::now();
                    if last_error.take().is_some() {
                        tracing::info!("writer lease renewed again");
                    }
                    next_attempt = sent + timings.renew_every;
                }
                Ok(Ok(lease)) => {
                    self.metrics.renewal(RenewalOutcome::Slow);
                    let error = format!(
                        "renewal took longer than {}",
                        humantime::format_duration(timings.attempt_timeout)
                    );
                    tracing::warn!(reason = %error, "writer lease renewal too slow; retrying");
                    self.lease = lease;
                    last_error = Some(error);
                    next_attempt = Instant::now();
                }
                Ok(Err(error)) if error.kind() == ErrorKind::Fenced => {
                    self.metrics.renewal(RenewalOutcome::Failed);
                    return self.lost(
                        "the writer lease expired or was taken over",
                        last_renewed,
                        Some(error.to_string()),
                    );
                }
                Ok(Err(error)) => {
                    self.metrics.renewal(RenewalOutcome::Failed);
                    // An unavailable database is logged once per outage; anything else each time.
                    if !storage_outage::failed(&self.metrics, StorageCause::Renewal, &error) {
                        tracing::warn!(error = %ErrorChain(&error), "writer lease renewal failed; retrying");
                    }
                    last_error = Some(error.to_string());
                    next_attempt = retry_at;
                }
            }
        }
    }

    fn lost(
        &self,
        reason: &'static str,
        last_renewed: SystemTime,
        last_error: Option<String>,
    ) -> KeeperExit {
        self.metrics.lease_dropped();
        KeeperExit::Lost(LeaseLoss {
            reason,
            last_renewed,
            last_error,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use async_trait::async_trait;
    use fermata_store::{FencingToken, StoreResult, UnixMillis};

    use super::*;

    #[test]
    fn default_timings_hold_together() {
        let timings = LeaseTimings::default();
        assert_eq!(timings.check(), Ok(()));
        assert_eq!(timings.retry_delay(), Duration::from_secs(1));
    }

    #[test]
    fn the_takeover_bound_follows_from_the_timings() {
        let timings = LeaseTimings::default();
        assert_eq!(timings.database_wait(), Duration::from_secs(3));
        assert_eq!(timings.takeover_bound(), Duration::from_secs(8));
        assert_eq!(
            timings.ttl + timings.takeover_bound(),
            Duration::from_secs(38)
        );
    }

    #[test]
    fn a_ttl_too_short_to_stop_in_time_is_refused() {
        let timings = LeaseTimings {
            ttl: Duration::from_secs(27),
            ..LeaseTimings::default()
        };
        let (key, problem) = timings.check().unwrap_err();
        assert_eq!(key, "ttl");
        assert!(problem.contains("25s + 3s"), "{problem}");
    }

    /// What the scripted renewal channel does on its next call.
    #[derive(Debug, Clone, Copy)]
    enum Step {
        /// Answers after the delay, renewing or failing with the kind.
        Reply(Duration, Option<ErrorKind>),
        /// Never answers.
        Hang,
    }

    #[derive(Debug, Default, Clone)]
    struct Script {
        steps: Arc<Mutex<VecDeque<Step>>>,
        calls: Arc<AtomicUsize>,
        abandons: Arc<AtomicUsize>,
    }

    impl Script {
        fn new(steps: impl IntoIterator<Item = Step>) -> Self {
            let script = Script::default();
            script.steps.lock().unwrap().extend(steps);
            script
        }

        fn calls(&self) -> usize {
            self.calls.load(Ordering::SeqCst)
        }

        fn abandons(&self) -> usize {
            self.abandons.load(Ordering::SeqCst)
        }
    }

    /// A renewal channel that follows a script, then renews at once forever.
    #[async_trait]
    impl LeaseRenewal for Script {
        async fn renew(&mut self, lease: &Lease, ttl: Duration) -> StoreResult<Lease> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let step = self.steps.lock().unwrap().pop_front();
            match step.unwrap_or(Step::Reply(Duration::ZERO, None)) {
                Step::Hang => std::future::pending().await,
                Step::Reply(delay, outcome) => {
                    tokio::time::sleep(delay).await;
                    match outcome {
                        None => Ok(Lease {
                            expires_at: UnixMillis::now().plus(ttl),
                            ..lease.clone()
                        }),
                        Some(kind) => Err(StoreError::new(kind, "scripted")),
                    }
                }
            }
        }

        async fn abandon(&mut self) {
            self.abandons.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn keeper(script: &Script) -> Keeper {
        Keeper {
            renewal: Box::new(script.clone()),
            lease: Lease {
                name: LeaseName::WRITER,
                token: FencingToken(1),
                holder: "test".to_owned(),
                expires_at: UnixMillis::now().plus(Duration::from_secs(30)),
            },
            last_success_sent: Instant::now(),
            timings: LeaseTimings::default(),
            metrics: std::sync::Arc::new(Metrics::new("test")),
        }
    }

    /// Runs the keeper until it ends by itself, or until `stop_after` when given.
    async fn run(script: &Script, stop_after: Option<Duration>) -> (KeeperExit, Duration) {
        let started = Instant::now();
        let shutdown = CancellationToken::new();
        if let Some(after) = stop_after {
            let stop = shutdown.clone();
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
                stop.cancel();
            });
        }
        let exit = keeper(script).run(shutdown).await;
        (exit, started.elapsed())
    }

    #[tokio::test(start_paused = true)]
    async fn renews_every_ten_seconds_until_shutdown() {
        let script = Script::new([]);
        let (exit, _) = run(&script, Some(Duration::from_secs(35))).await;
        assert!(matches!(exit, KeeperExit::Stopped(_)), "{exit:?}");
        assert_eq!(script.calls(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn stops_at_the_safety_deadline_when_renewals_keep_failing() {
        let failing = Step::Reply(Duration::from_millis(100), Some(ErrorKind::Unavailable));
        let script = Script::new([failing; 100]);
        let (exit, elapsed) = run(&script, None).await;
        let KeeperExit::Lost(loss) = exit else {
            panic!("expected the lease to be lost, got {exit:?}");
        };
        assert_eq!(elapsed, Duration::from_secs(25));
        assert!(loss.reason.contains("safety deadline"), "{loss}");
        assert_eq!(
            loss.last_error.as_deref(),
            Some("storage unavailable: scripted")
        );
        // Retried about once a second from 10 s on.
        assert!(
            (14..=16).contains(&script.calls()),
            "{} attempts",
            script.calls()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_with_no_reply_is_abandoned_after_six_seconds_and_retried() {
        let script = Script::new([Step::Hang]);
        let (exit, _) = run(&script, Some(Duration::from_secs(40))).await;
        assert!(matches!(exit, KeeperExit::Stopped(_)), "{exit:?}");
        assert_eq!(script.abandons(), 1);
        // 10 s: hangs until 16 s; retry at 17 s renews; next at 27 s and 37 s.
        assert_eq!(script.calls(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn hung_renewals_end_at_the_deadline() {
        let script = Script::new([Step::Hang; 10]);
        let (exit, elapsed) = run(&script, None).await;
        assert!(matches!(exit, KeeperExit::Lost(_)), "{exit:?}");
        assert_eq!(elapsed, Duration::from_secs(25));
        assert!(script.abandons() >= 2, "{} abandons", script.abandons());
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_renewal_does_not_rearm_the_deadline() {
        // Every renewal takes 5.5 s: each one succeeds on the database but too late to count.
        let slow = Step::Reply(Duration::from_millis(5_500), None);
        let script = Script::new([slow; 100]);
        let (exit, elapsed) = run(&script, None).await;
        assert!(matches!(exit, KeeperExit::Lost(_)), "{exit:?}");
        assert_eq!(elapsed, Duration::from_secs(25));
    }

    #[tokio::test(start_paused = true)]
    async fn an_outage_elsewhere_is_probed_by_a_renewal_within_a_retry_delay() {
        let script = Script::new([]);
        let keeper = keeper(&script);
        let metrics = Arc::clone(&keeper.metrics);
        let shutdown = CancellationToken::new();
        let running = tokio::spawn(keeper.run(shutdown.clone()));
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        assert_eq!(script.calls(), 0);
        // A commit failed: the database may be gone. The keeper renews at its next look (3 s),
        // not at its schedule (10 s), and the renewal's success ends the commits' outage.
        assert!(metrics.storage_failed(StorageCause::Commit));
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        assert_eq!(script.calls(), 1);
        assert!(metrics.storage_available());
        // Back to the schedule: the next renewal is 10 s after that one.
        tokio::time::sleep(Duration::from_millis(9_000)).await;
        assert_eq!(script.calls(), 1);
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        assert_eq!(script.calls(), 2);
        shutdown.cancel();
        assert!(matches!(running.await.unwrap(), KeeperExit::Stopped(_)));
    }

    #[tokio::test(start_paused = true)]
    async fn failing_renewals_are_an_outage_that_a_renewal_ends() {
        let failing = Step::Reply(Duration::ZERO, Some(ErrorKind::Unavailable));
        let script = Script::new([failing; 3]);
        let keeper = keeper(&script);
        let metrics = Arc::clone(&keeper.metrics);
        let shutdown = CancellationToken::new();
        let running = tokio::spawn(keeper.run(shutdown.clone()));
        // 10 s fails, 11 s fails, 12 s fails, 13 s renews.
        tokio::time::sleep(Duration::from_millis(10_500)).await;
        assert!(!metrics.storage_available());
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(script.calls(), 4);
        assert!(metrics.storage_available());
        shutdown.cancel();
        assert!(matches!(running.await.unwrap(), KeeperExit::Stopped(_)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_fenced_renewal_loses_the_lease_at_once() {
        let script = Script::new([Step::Reply(Duration::ZERO, Some(ErrorKind::Fenced))]);
        let (exit, elapsed) = run(&script, None).await;
        let KeeperExit::Lost(loss) = exit else {
            panic!("expected the lease to be lost, got {exit:?}");
        };
        assert_eq!(elapsed, Duration::from_secs(10));
        assert!(loss.reason.contains("taken over"), "{loss}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_in_flight_at_shutdown_neither_rearms_nor_retries() {
        let failing = Step::Reply(Duration::from_secs(3), Some(ErrorKind::Unavailable));
        let script = Script::new([failing]);
        // Shutdown comes 1 s into the first attempt, which fails 2 s later.
        let (exit, elapsed) = run(&script, Some(Duration::from_secs(11))).await;
        assert!(matches!(exit, KeeperExit::Stopped(_)), "{exit:?}");
        assert_eq!(elapsed, Duration::from_secs(13));
        assert_eq!(script.calls(), 1, "a retry was scheduled after shutdown");
    }
}
