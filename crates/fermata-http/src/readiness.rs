//! The serving phase of the process, shared between the lifecycle and `/readyz`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

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

/// A shared, cheaply cloned phase.
#[derive(Debug, Clone, Default)]
pub struct Readiness(Arc<AtomicU8>);

impl Readiness {
    pub fn set(&self, phase: Phase) {
        self.0.store(phase as u8, Ordering::SeqCst);
    }

    pub fn phase(&self) -> Phase {
        Phase::from_u8(self.0.load(Ordering::SeqCst))
    }
}
