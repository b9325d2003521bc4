//! The writer fence a serving process holds, and the write gate built on it.
//!
//! A serving process opens its store with a [`WriterFence`] in [`crate::StoreOptions`]: from
//! then on every write the store makes, whether or not its method names a fence, is made under
//! the process's current fence. While the fence is empty (before the process takes the writer
//! lease, and after it loses it) such a write is refused with `Fenced` before any statement runs;
//! while it is set, the adapter checks it inside the write's own transaction, on the database, so
//! a process that lost the lease without knowing it (frozen, partitioned) is refused there too.
//! Lease operations themselves are never gated. A store opened without a writer fence (the
//! command-line commands, tests) writes without this gate; see docs/operations.md for the rule.

use std::sync::{Arc, RwLock};

use crate::error::{StoreError, StoreResult};
use crate::lease::Fence;

/// The fence of the writer lease while this process serves; absent before it takes the lease and
/// after it loses it, when every write is refused.
#[derive(Debug, Clone, Default)]
pub struct WriterFence(Arc<RwLock<Option<Fence>>>);

impl WriterFence {
    pub fn set(&self, fence: Option<Fence>) {
        *self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = fence;
    }

    fn get(&self) -> Option<Fence> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The fence to write under, or `Unavailable` when this process is not serving.
    pub fn current(&self) -> Result<Fence, StoreError> {
        self.get()
            .ok_or_else(|| StoreError::unavailable("this server does not hold the writer lease"))
    }

    /// The fence a gated write is made under, or `Fenced` (naming `action`) when this process
    /// does not hold the writer lease.
    pub fn gate(&self, action: &str) -> StoreResult<Fence> {
        self.get().ok_or_else(|| {
            StoreError::fenced(format!(
                "{action}: this process does not hold the writer lease"
            ))
        })
    }
}
