//! Whether the application database takes this process's work, as that work last saw it.
//!
//! Each cause (document commits, checkpoints, document loads, writer lease renewals) is failing
//! from its first failure that says the database is unavailable until a later success. An outage
//! of a cause begins once and ends once, so the place that saw it logs it once, with its cause
//! chain, however many keystrokes fail meanwhile. A successful write (a commit, a checkpoint, a
//! renewal) also ends the outage of every other cause whose last failure came before that write
//! was sent: the database took a write since, so a cause nobody retries (a document nobody types
//! in any more) does not keep the process unready for ever. A successful read ends only the
//! outage of reads. `/readyz` answers 503 while any cause is failing.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What the process was doing when the database did not answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StorageCause {
    /// A document commit: a live client's updates, or a program's write.
    Commit,
    /// A document checkpoint.
    Checkpoint,
    /// Reading a document to open its room.
    Load,
    /// Renewing the writer lease.
    Renewal,
}

impl StorageCause {
    pub(crate) const ALL: [StorageCause; 4] = [
        StorageCause::Commit,
        StorageCause::Checkpoint,
        StorageCause::Load,
        StorageCause::Renewal,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            StorageCause::Commit => "commit",
            StorageCause::Checkpoint => "checkpoint",
            StorageCause::Load => "load",
            StorageCause::Renewal => "renewal",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// Whether a success of this cause is a write the database took.
    fn is_write(self) -> bool {
        self != StorageCause::Load
    }
}

/// One cause's outage: when it began and when it last failed.
#[derive(Debug, Clone, Copy)]
struct Outage {
    since: Instant,
    last_failure: Instant,
}

/// An outage that a success ended: its cause and how long it lasted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recovered {
    pub cause: StorageCause,
    pub after: Duration,
}

/// The outages in progress, one slot per cause.
#[derive(Debug, Default)]
pub(crate) struct StorageHealth {
    outages: Mutex<[Option<Outage>; 4]>,
}

impl StorageHealth {
    /// Records a failure of `cause`; true when it begins an outage of that cause.
    pub(crate) fn failed(&self, cause: StorageCause, at: Instant) -> bool {
        let mut outages = self.outages.lock().unwrap_or_else(|e| e.into_inner());
        let slot = &mut outages[cause.index()];
        match slot {
            Some(outage) => {
                outage.last_failure = outage.last_failure.max(at);
                false
            }
            None => {
                *slot = Some(Outage {
                    since: at,
                    last_failure: at,
                });
                true
            }
        }
    }

    /// Records a success of `cause` sent at `sent`; returns the outages it ended.
    pub(crate) fn answered(&self, cause: StorageCause, sent: Instant) -> Vec<Recovered> {
        let mut outages = self.outages.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let mut ended = Vec::new();
        for other in StorageCause::ALL {
            let slot = &mut outages[other.index()];
            let Some(outage) = *slot else { continue };
            let ends = other == cause || (cause.is_write() && outage.last_failure < sent);
            if ends {
                *slot = None;
                ended.push(Recovered {
                    cause: other,
                    after: now.saturating_duration_since(outage.since),
                });
            }
        }
        ended
    }

    /// Whether no cause is failing.
    pub(crate) fn available(&self) -> bool {
        let outages = self.outages.lock().unwrap_or_else(|e| e.into_inner());
        outages.iter().all(Option::is_none)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_begins_once_and_ends_with_a_success_of_its_cause() {
        let health = StorageHealth::default();
        let start = Instant::now();
        assert!(health.failed(StorageCause::Commit, start));
        assert!(!health.failed(StorageCause::Commit, start + Duration::from_secs(1)));
        assert!(!health.available());
        let ended = health.answered(StorageCause::Commit, start + Duration::from_secs(2));
        assert_eq!(ended.len(), 1);
        assert_eq!(ended[0].cause, StorageCause::Commit);
        assert!(health.available());
        assert!(health.failed(StorageCause::Commit, start + Duration::from_secs(3)));
    }

    #[test]
    fn a_write_sent_after_the_last_failure_ends_every_outage() {
        let health = StorageHealth::default();
        let start = Instant::now();
        health.failed(StorageCause::Commit, start);
        health.failed(StorageCause::Load, start);
        let ended = health.answered(StorageCause::Renewal, start + Duration::from_millis(1));
        let causes: Vec<_> = ended.iter().map(|r| r.cause).collect();
        assert_eq!(causes, [StorageCause::Commit, StorageCause::Load]);
        assert!(health.available());
    }

    #[test]
    fn a_write_sent_before_the_last_failure_ends_only_its_own_cause() {
        let health = StorageHealth::default();
        let start = Instant::now();
        health.failed(StorageCause::Renewal, start);
        health.failed(StorageCause::Commit, start + Duration::from_secs(2));
        let ended = health.answered(StorageCause::Renewal, start + Duration::from_secs(1));
        assert_eq!(ended.len(), 1);
        assert_eq!(ended[0].cause, StorageCause::Renewal);
        assert!(!health.available());
    }

    #[test]
    fn a_read_ends_only_the_outage_of_reads() {
        let health = StorageHealth::default();
        let start = Instant::now();
        health.failed(StorageCause::Commit, start);
        health.failed(StorageCause::Load, start);
        let ended = health.answered(StorageCause::Load, start + Duration::from_secs(1));
        assert_eq!(ended.len(), 1);
        assert_eq!(ended[0].cause, StorageCause::Load);
        assert!(!health.available());
    }
}
