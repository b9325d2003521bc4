//! The storage contract suite against the SQLite adapter, on a real database file.

use std::sync::Arc;

use async_trait::async_trait;
use fermata_store::{ChannelId, DeferredTurn, Storage, StoreOptions};
use fermata_store_sql::testing::{ScratchDatabase, ScratchStorage, planner, search};
use fermata_store_testkit::contract::{Harness, Opened};

#[derive(Default)]
struct Sqlite {
    opened: Opened<ScratchStorage>,
}

#[async_trait]
impl Harness for Sqlite {
    async fn open(&self, options: StoreOptions) -> Arc<dyn Storage> {
        self.opened
            .keep(ScratchDatabase::sqlite().open(options).await)
    }

    async fn seed_deferred_turns(&self, store: &dyn Storage, turns: &[DeferredTurn]) {
        planner::seed_deferred_turns(&self.opened.find(store).storage, turns).await;
    }

    async fn deferred_turns(&self, store: &dyn Storage) -> Vec<DeferredTurn> {
        planner::deferred_turns(&self.opened.find(store).storage).await
    }

    async fn seed_reserved_context(
        &self,
        store: &dyn Storage,
        channel: &ChannelId,
        summary: &str,
        cursor: i64,
    ) {
        planner::seed_reserved_context(&self.opened.find(store).storage, channel, summary, cursor)
            .await;
    }

    async fn seed_stale_search_text(&self, store: &dyn Storage, channel: &ChannelId, text: &str) {
        search::seed_stale_search_text(&self.opened.find(store).storage, channel, text).await;
    }
}

fermata_store_testkit::contract_suite!(Sqlite::default());
