//! The writer fence this process holds, shared by every part that writes documents.

use std::sync::{Arc, RwLock};

use fermata_store::{Fence, StoreError};

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

    /// The fence to write under, or `Unavailable` when this process is not serving.
    pub fn current(&self) -> Result<Fence, StoreError> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            .ok_or_else(|| StoreError::unavailable("this server does not hold the writer lease"))
    }
}
