//! The sweeps the serving process runs under the writer lease, once when it starts serving and
//! then every [`SWEEP_EVERY`]: Chat files nobody sent within a day of their upload, Planner
//! credential digests past their expiry, and MCP sessions idle for longer than
//! [`MCP_SESSION_IDLE`]. Each sweep is one fenced statement; a failure is logged and the next
//! round tries again, so one failing sweep never stops the others.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use fermata_store::{ErrorChain, Storage, StoreError, UNSENT_ATTACHMENT_LIFETIME};

use crate::fence::WriterFence;

/// How often the sweeps run while serving.
pub const SWEEP_EVERY: Duration = Duration::from_secs(15 * 60);

/// How long an MCP session may go unseen before it is swept.
pub const MCP_SESSION_IDLE: Duration = Duration::from_secs(24 * 60 * 60);

/// What one round of sweeps removed; a sweep that failed counts nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepReport {
    pub unsent_attachments: u64,
    pub expired_planner_credentials: u64,
    pub idle_mcp_sessions: u64,
}

/// The serving process's sweeps.
#[derive(Debug, Clone)]
pub struct Sweeps {
    storage: Arc<dyn Storage>,
    fence: WriterFence,
}

impl Sweeps {
    pub fn new(storage: Arc<dyn Storage>, fence: WriterFence) -> Self {
        Sweeps { storage, fence }
    }

    /// Runs every sweep once and logs what they removed (a line only when something went).
    pub async fn sweep_once(&self) -> SweepReport {
        let report = SweepReport {
            unsent_attachments: self
                .sweep("unsent attachments", |storage, fence| async move {
                    storage
                        .attachments()
                        .sweep_unsent(&fence, UNSENT_ATTACHMENT_LIFETIME)
                        .await
                })
                .await,
            expired_planner_credentials: self
                .sweep("expired Planner credentials", |storage, fence| async move {
                    storage.planner().sweep_planner_credentials(&fence).await
                })
                .await,
            idle_mcp_sessions: self
                .sweep("idle MCP sessions", |storage, fence| async move {
                    storage
                        .mcp_sessions()
                        .sweep_idle_mcp_sessions(&fence, MCP_SESSION_IDLE)
                        .await
                })
                .await,
        };
        if report != SweepReport::default() {
            tracing::info!(
                unsent_attachments = report.unsent_attachments,
                expired_planner_credentials = report.expired_planner_credentials,
                idle_mcp_sessions = report.idle_mcp_sessions,
                "swept rows nobody needs any more"
            );
        }
        report
    }

    /// Runs [`Sweeps::sweep_once`] every `every` until `stop` completes; the first round runs at
    /// once.
    pub async fn run(&self, every: Duration, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = &mut stop => return,
                _ = ticks.tick() => {
                    self.sweep_once().await;
                }
            }
        }
    }

    async fn sweep<F, Fut>(&self, what: &'static str, sweep: F) -> u64
    where
        F: FnOnce(Arc<dyn Storage>, fermata_store::Fence) -> Fut,
        Fut: Future<Output = Result<u64, StoreError>>,
    {
        let outcome = match self.fence.current() {
            Ok(fence) => sweep(Arc::clone(&self.storage), fence).await,
            Err(error) => Err(error),
        };
        outcome.unwrap_or_else(|error| {
            tracing::warn!(error = %ErrorChain(&error), sweep = what, "a sweep failed; it runs again later");
            0
        })
    }
}
