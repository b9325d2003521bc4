//! The writer lease for a command that writes documents (`fermata import`): documents live under
//! the lease, so the command takes it as `serve` does (refusing, exit 3, while a server holds
//! it), keeps it renewed while it works, and releases it when done. It opens no tenure and runs
//! no startup reset: it serves nothing, and the next `serve` does both when it takes the lease.

use std::future::Future;
use std::sync::Arc;

use fermata_collab::WriterFence;
use fermata_metrics::Metrics;
use fermata_store::{ErrorChain, Storage};
use fermata_store_sql::SqlStorage;
use tokio_util::sync::CancellationToken;

use crate::config::Handover;
use crate::failure::{Exit, Failure};
use crate::writer_lease::{self, Keeper, KeeperExit, LeaseTimings, TakeError};

/// Runs `work` while this process holds the writer lease, with `fence` set for as long as it
/// does. `work` is dropped (its writes after that refused by the database) if the lease is lost.
pub(crate) async fn under_lease<T>(
    store: &SqlStorage,
    fence: &WriterFence,
    timings: LeaseTimings,
    metrics: Arc<Metrics>,
    work: impl Future<Output = Result<T, Failure>>,
) -> Result<T, Failure> {
    let holder = writer_lease::holder_name(&writer_lease::new_instance());
    let never = CancellationToken::new();
    let taken = writer_lease::take(store.leases(), &holder, &timings, Handover::Refuse, &never)
        .await
        .map_err(|error| match error {
            TakeError::Held(ref record) => Failure::new(
                format!(
                    "a fermata server holds the writer lease on this database ({}, until {}); \
                     documents are written only under it: stop the server, run this command, \
                     then start it again",
                    record.holder, record.expires_at
                ),
                Exit::LeaseHeld,
            )
            .with_source(error),
            TakeError::Store(_) => Failure::runtime(error.to_string()).with_source(error),
        })?;
    let Some(granted) = taken else {
        return Err(Failure::runtime("the writer lease was not taken"));
    };
    fence.set(Some(granted.lease.fence()));
    let keeper = Keeper {
        renewal: store.leases().renewal_channel(),
        lease: granted.lease,
        last_success_sent: granted.sent,
        timings,
        metrics,
    };
    let stop = CancellationToken::new();
    let mut keeping = tokio::spawn(keeper.run(stop.clone()));
    let outcome = tokio::select! {
        outcome = work => Some(outcome),
        _ = &mut keeping => None,
    };
    fence.set(None);
    let Some(outcome) = outcome else {
        return Err(Failure::runtime(
            "lost the writer lease while importing; what was written before is kept, and \
             running the import again completes it",
        ));
    };
    stop.cancel();
    match keeping.await {
        Ok(KeeperExit::Stopped(lease)) => {
            if let Err(error) = store.leases().release(&lease).await {
                tracing::warn!(error = %ErrorChain(&error), "could not release the writer lease; it expires by itself");
            }
        }
        Ok(KeeperExit::Lost(loss)) => {
            tracing::warn!(
                reason = loss.reason,
                "the writer lease was lost as the import ended"
            );
        }
        Err(join) => tracing::warn!(error = %ErrorChain(&join), "the writer lease keeper failed"),
    }
    outcome
}
