//! A connection whose transaction could not be ended (a COMMIT or ROLLBACK that failed on a full
//! disk or an I/O error) is never handed out again: every later write begins on a clean one. Nor
//! is one whose transaction's caller stopped waiting, even while its `BEGIN` was in flight.

use std::time::Duration;

use fermata_store::{Acquisition, LeaseName, Storage, StoreOptions};
use fermata_store_sql::testing::ScratchDatabase;
use futures::FutureExt as _;

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

/// Writes and renewals whose callers stop waiting at every point of their round trips (a
/// renewal's attempt timeout, a client that went away): afterwards no session of the pool is left
/// inside a transaction, where the pool would lend it, its locks held, to the next borrower.
#[tokio::test]
async fn postgres_writes_cancelled_midway_leave_no_session_inside_a_transaction() {
    let store = ScratchDatabase::postgres()
        .await
        .open(StoreOptions::default())
        .await;
    let name = LeaseName::new("test:renewed").unwrap();
    let long = Duration::from_secs(3600);
    let Acquisition::Granted(lease) = store.leases().acquire(&name, "holder", long).await.unwrap()
    else {
        panic!("the lease was not free");
    };
    let short = Duration::from_millis(1);
    for attempt in 0..100_u32 {
        let other = LeaseName::new(format!("test:taken{}", attempt % 7)).unwrap();
        // Polled once, which sends the `BEGIN`, then dropped before its answer is read.
        let _ = store.leases().renew(&lease, long).now_or_never();
        let _ = store.leases().acquire(&other, "x", short).now_or_never();
        // Dropped a little later, anywhere in their round trips.
        let patience = Duration::from_millis(u64::from(attempt % 3));
        let _ = tokio::time::timeout(patience, store.leases().renew(&lease, long)).await;
        let _ = tokio::time::timeout(patience, store.leases().acquire(&other, "x", short)).await;
    }
    // Every session of the pool held here, idle: two of them look at the others (and so at each
    // other), none of which may be inside a transaction.
    let pool = store.storage.pool();
    let mut sessions = Vec::new();
    for _ in 0..pool.options().get_max_connections() {
        sessions.push(pool.acquire().await.unwrap());
    }
    for session in sessions.iter_mut().take(2) {
        let open: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
             AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'",
        )
        .fetch_one(&mut **session)
        .await
        .unwrap();
        assert_eq!(
            open, 0,
            "a session of the pool was left inside a transaction"
        );
    }
}
