//! The storage contract suite against the PostgreSQL adapter, on the throwaway server the test
//! command provisions.

use std::sync::Arc;

use async_trait::async_trait;
use fermata_store::contract::Harness;
use fermata_store::{Storage, StoreOptions};
use fermata_store_sql::testing::ScratchDatabase;

struct Postgres;

#[async_trait]
impl Harness for Postgres {
    async fn open(&self, options: StoreOptions) -> Arc<dyn Storage> {
        Arc::new(ScratchDatabase::postgres().await.open(options).await)
    }
}

fermata_store::contract_suite!(Postgres);
