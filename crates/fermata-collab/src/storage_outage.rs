//! Storage outages as the log and `/metrics` tell them: once when work of a cause first fails
//! because the database is unavailable (with the cause chain), once when the database takes it
//! again (with how long it did not), and counted in between. The rooms report their commits,
//! checkpoints and loads here, the writer lease keeper its renewals; which success ends which
//! outage is `fermata-metrics`'s `storage_health.rs`.

use std::time::Instant;

use fermata_metrics::{Metrics, StorageCause};
use fermata_store::{ErrorChain, ErrorKind, StoreError};

/// What the log says when an outage of `cause` begins: what the process cannot do meanwhile.
fn consequence(cause: StorageCause) -> &'static str {
    match cause {
        StorageCause::Commit => {
            "document commits fail: nothing is being saved; clients are told and send their \
             edits again once the database answers"
        }
        StorageCause::Checkpoint => {
            "document checkpoints fail; the journal keeps every update meanwhile"
        }
        StorageCause::Load => "documents cannot be opened; clients are asked to come back",
        StorageCause::Renewal => {
            "the writer lease cannot be renewed; retrying until its safety deadline"
        }
    }
}

/// Reports a failure of `cause`. An unavailable database counts towards the outage (logged at
/// its start, at debug level after); other kinds of failure are the caller's to handle. Returns
/// whether the failure was the database being unavailable.
pub fn failed(metrics: &Metrics, cause: StorageCause, error: &StoreError) -> bool {
    if error.kind() != ErrorKind::Unavailable {
        return false;
    }
    if metrics.storage_failed(cause) {
        tracing::warn!(work = cause.as_str(), error = %ErrorChain(error), "{}", consequence(cause));
    } else {
        tracing::debug!(work = cause.as_str(), error = %ErrorChain(error), "the database is still unavailable");
    }
    true
}

/// Reports a failure of `cause` that left no error to show (a renewal that got no reply).
pub fn failed_without_reply(metrics: &Metrics, cause: StorageCause, what: &str) {
    if metrics.storage_failed(cause) {
        tracing::warn!(
            work = cause.as_str(),
            reason = what,
            "{}",
            consequence(cause)
        );
    }
}

/// Reports that the database took work of `cause` sent at `sent`, logging each outage it ended.
pub fn answered(metrics: &Metrics, cause: StorageCause, sent: Instant) {
    for recovered in metrics.storage_answered(cause, sent) {
        tracing::info!(
            work = recovered.cause.as_str(),
            outage_ms = u64::try_from(recovered.after.as_millis()).unwrap_or(u64::MAX),
            "the database takes this work again"
        );
    }
}
