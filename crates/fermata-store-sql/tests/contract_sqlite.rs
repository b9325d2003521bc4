//! The storage contract suite against the SQLite adapter, on a real database file.

use std::sync::Arc;

use async_trait::async_trait;
use fermata_store::contract::Harness;
use fermata_store::{Storage, StoreOptions};
use fermata_store_sql::testing::ScratchDatabase;

struct Sqlite;

#[async_trait]
impl Harness for Sqlite {
    async fn open(&self, options: StoreOptions) -> Arc<dyn Storage> {
        Arc::new(ScratchDatabase::sqlite().open(options).await)
    }
}

fermata_store::contract_suite!(Sqlite);
