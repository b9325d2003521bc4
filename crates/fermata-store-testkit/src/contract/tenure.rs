//! Contract cases for the tenure store.

use std::time::Duration;

use super::Harness;
use super::lease::{grant, name, plain, start};
use fermata_store::error::ErrorKind;
use fermata_store::tenure::TenureEnd;

const LONG: Duration = Duration::from_secs(300);

pub async fn tenure_open_supersedes_earlier_open_tenures(harness: &dyn Harness) {
    let store = plain(harness).await;
    let alpha = grant(&*store, "alpha", LONG).await;
    store
        .tenures()
        .open(&alpha.fence(), &start("alpha"))
        .await
        .unwrap();
    // Alpha goes away without closing its tenure.
    store.leases().release(&alpha).await.unwrap();

    let beta = grant(&*store, "beta", LONG).await;
    let opened = store
        .tenures()
        .open(&beta.fence(), &start("beta"))
        .await
        .unwrap();
    assert_eq!(opened.token, beta.token);
    assert_eq!(opened.end, None);

    let tenures = store.tenures().recent(&name(), 10).await.unwrap();
    let summary: Vec<_> = tenures
        .iter()
        .map(|t| (t.holder.as_str(), t.token, t.end))
        .collect();
    assert_eq!(
        summary,
        [
            ("beta", beta.token, None),
            ("alpha", alpha.token, Some(TenureEnd::Superseded)),
        ]
    );
    assert_eq!(
        tenures[1].ended_at, None,
        "a superseded tenure's end is unknown"
    );
    assert_eq!(store.tenures().recent(&name(), 1).await.unwrap().len(), 1);
}

pub async fn tenure_open_is_idempotent(harness: &dyn Harness) {
    let store = plain(harness).await;
    let alpha = grant(&*store, "alpha", LONG).await;
    let first = store
        .tenures()
        .open(&alpha.fence(), &start("alpha"))
        .await
        .unwrap();
    let second = store
        .tenures()
        .open(&alpha.fence(), &start("other"))
        .await
        .unwrap();
    assert_eq!(first, second);
    assert_eq!(store.tenures().recent(&name(), 10).await.unwrap(), [first]);
}

pub async fn tenure_close_records_a_clean_stop(harness: &dyn Harness) {
    let store = plain(harness).await;
    let alpha = grant(&*store, "alpha", LONG).await;
    let opened = store
        .tenures()
        .open(&alpha.fence(), &start("alpha"))
        .await
        .unwrap();
    let closed = store.tenures().close(&alpha.fence()).await.unwrap();
    assert_eq!(closed.end, Some(TenureEnd::Stopped));
    let ended_at = closed.ended_at.expect("a clean stop has an end time");
    assert!(ended_at >= opened.started_at);
    let again = store.tenures().close(&alpha.fence()).await.unwrap();
    assert_eq!(again, closed, "closing twice changed the tenure");
}

pub async fn tenure_close_without_open_is_missing(harness: &dyn Harness) {
    let store = plain(harness).await;
    let alpha = grant(&*store, "alpha", LONG).await;
    let error = store.tenures().close(&alpha.fence()).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Missing);
}
