//! The storage contract suite against the memory adapter.

use std::sync::Arc;

use async_trait::async_trait;
use fermata_store::{ChannelId, DeferredTurn, Storage, StoreOptions};
use fermata_store_testkit::contract::{Harness, Opened};
use fermata_store_testkit::memory::MemoryStorage;

#[derive(Default)]
struct Memory {
    opened: Opened<MemoryStorage>,
}

#[async_trait]
impl Harness for Memory {
    async fn open(&self, options: StoreOptions) -> Arc<dyn Storage> {
        self.opened.keep(MemoryStorage::new(options))
    }

    async fn seed_deferred_turns(&self, store: &dyn Storage, turns: &[DeferredTurn]) {
        self.opened.find(store).seed_deferred_turns(turns);
    }

    async fn deferred_turns(&self, store: &dyn Storage) -> Vec<DeferredTurn> {
        self.opened.find(store).deferred_turns()
    }

    async fn seed_reserved_context(
        &self,
        store: &dyn Storage,
        channel: &ChannelId,
        summary: &str,
        cursor: i64,
    ) {
        self.opened
            .find(store)
            .seed_reserved_context(channel, summary, cursor);
    }

    async fn seed_stale_search_text(&self, store: &dyn Storage, channel: &ChannelId, text: &str) {
        self.opened
            .find(store)
            .seed_stale_search_text(channel, text);
    }
}

fermata_store_testkit::contract_suite!(Memory::default());
