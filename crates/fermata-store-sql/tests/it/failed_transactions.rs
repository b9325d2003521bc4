//! A connection whose transaction could not be ended (a COMMIT or ROLLBACK that failed on a full
//! disk or an I/O error) is never handed out again: every later write begins on a clean one.

use std::time::Duration;

use fermata_store::{Acquisition, LeaseName, Storage, StoreOptions};
use fermata_store_sql::testing::ScratchDatabase;

async fn later_writes_begin_on_clean_connections(database: ScratchDatabase) {
    let store = database.open(StoreOptions::default()).await;
    for _ in 0..3 {
        store.storage.strand_a_write_connection().await;
    }
    let name = LeaseName::new("test:stranded").unwrap();
    // Each write begins a transaction on a connection of the writes' pool: on SQLite a stranded
    // one fails `BEGIN` ("non-zero transaction depth") unless the pool closed it.
    for attempt in 0..20 {
        let holder = format!("holder {attempt}");
        let granted = store
            .leases()
            .acquire(&name, &holder, Duration::from_secs(30))
            .await
            .unwrap_or_else(|error| panic!("write {attempt} failed: {error}"));
        let Acquisition::Granted(lease) = granted else {
            panic!("write {attempt}: the lease was not free: {granted:?}");
        };
        assert!(store.leases().release(&lease).await.unwrap());
    }
}

#[tokio::test]
async fn sqlite() {
    later_writes_begin_on_clean_connections(ScratchDatabase::sqlite()).await;
}

#[tokio::test]
async fn postgres() {
    later_writes_begin_on_clean_connections(ScratchDatabase::postgres().await).await;
}
