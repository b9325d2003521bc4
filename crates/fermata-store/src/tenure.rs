//! Tenures: the durable record of each grant of a lease that a process served under.
//!
//! A serving process opens a tenure right after it takes the writer lease and closes it when it
//! stops, both as fenced writes. Opening a tenure marks every earlier tenure of the same lease
//! that was never closed as superseded, so an operator can tell a clean stop from a crash or a
//! lost lease (`fermata status`).

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::lease::{Fence, FencingToken, LeaseName};
use crate::time::UnixMillis;

/// Who opens a tenure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenureStart {
    /// The lease holder string (host, process and instance).
    pub holder: String,
    /// The release that served.
    pub version: String,
}

/// How a tenure ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TenureEnd {
    /// The process stopped cleanly and released the lease.
    Stopped,
    /// The process never closed its tenure (it crashed or lost the lease); a later grant found it
    /// open.
    Superseded,
}

impl TenureEnd {
    pub fn as_str(self) -> &'static str {
        match self {
            TenureEnd::Stopped => "stopped",
            TenureEnd::Superseded => "superseded",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "stopped" => Some(TenureEnd::Stopped),
            "superseded" => Some(TenureEnd::Superseded),
            _ => None,
        }
    }
}

/// One tenure as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenure {
    pub lease: LeaseName,
    pub token: FencingToken,
    pub holder: String,
    pub version: String,
    pub started_at: UnixMillis,
    /// When it was closed; absent while open and for superseded tenures, whose end is unknown.
    pub ended_at: Option<UnixMillis>,
    pub end: Option<TenureEnd>,
}

/// The tenure store. Every write is fenced by the lease the tenure belongs to.
#[async_trait]
pub trait TenureStore: Send + Sync {
    /// Opens the tenure of `fence` and marks earlier open tenures of that lease superseded.
    /// Opening the same tenure again returns it unchanged.
    async fn open(&self, fence: &Fence, start: &TenureStart) -> StoreResult<Tenure>;

    /// Closes the tenure of `fence` as stopped. Closing a closed tenure changes nothing; a fence
    /// with no tenure is `Missing`.
    async fn close(&self, fence: &Fence) -> StoreResult<Tenure>;

    /// The latest `limit` tenures of `lease`, newest first.
    async fn recent(&self, lease: &LeaseName, limit: u32) -> StoreResult<Vec<Tenure>>;
}
