//! The storage contract suite against the memory adapter.

use std::sync::Arc;

use async_trait::async_trait;
use fermata_store::contract::Harness;
use fermata_store::memory::MemoryStorage;
use fermata_store::{Storage, StoreOptions};

struct Memory;

#[async_trait]
impl Harness for Memory {
    async fn open(&self, options: StoreOptions) -> Arc<dyn Storage> {
        Arc::new(MemoryStorage::new(options))
    }
}

fermata_store::contract_suite!(Memory);
