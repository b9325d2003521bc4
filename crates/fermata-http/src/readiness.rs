//! The serving phase of the process, shared between the lifecycle and `/readyz`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

/// Where the process is in its life. Only `Serving` is ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    Starting = 0,
    WaitingForLease = 1,
    Serving = 2,
    Draining = 3,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Starting => "starting",
            Phase::WaitingForLease => "waiting for the writer lease",
            Phase::Serving => "serving",
            Phase::Draining => "draining",
        }
    }

    fn from_u8(value: u8) -> Phase {
        match value {
            1 => Phase::WaitingForLease,
            2 => Phase::Serving,
            3 => Phase::Draining,
            _ => Phase::Starting,
        }
    }
}

/// A shared, cheaply cloned phase, and how long a client refused outside `Serving` should wait
/// before it asks again.
#[derive(Debug, Clone)]
pub struct Readiness {
    phase: Arc<AtomicU8>,
    /// The `Retry-After` of a refusal, in whole seconds: about how long a planned hand-over takes.
    retry_after: Arc<AtomicU64>,
}

/// The `Retry-After` of a refusal until the serving process sets one from its lease timings.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(5);

impl Default for Readiness {
    fn default() -> Self {
        Readiness {
            phase: Arc::default(),
            retry_after: Arc::new(AtomicU64::new(DEFAULT_RETRY_AFTER.as_secs())),
        }
    }
}

impl Readiness {
    pub fn set(&self, phase: Phase) {
        self.phase.store(phase as u8, Ordering::SeqCst);
    }

    pub fn phase(&self) -> Phase {
        Phase::from_u8(self.phase.load(Ordering::SeqCst))
    }

    /// Sets the `Retry-After` of refusals, rounded up to whole seconds (at least one).
    pub fn set_retry_after(&self, wait: Duration) {
        self.retry_after.store(
            fermata_accounts::retry_after_seconds(wait),
            Ordering::SeqCst,
        );
    }

    /// The `Retry-After` of a refusal, in seconds.
    pub fn retry_after_seconds(&self) -> u64 {
        self.retry_after.load(Ordering::SeqCst)
    }
}
