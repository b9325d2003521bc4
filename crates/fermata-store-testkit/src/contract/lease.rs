//! Contract cases for leases, fencing and the renewal channel.

use std::sync::Arc;
use std::time::Duration;

use super::{Harness, PATIENCE, PausedWrites, eventually};
use tokio::task::JoinHandle;

use fermata_store::error::{ErrorKind, StoreResult};
use fermata_store::lease::{Acquisition, FencingToken, Lease, LeaseName};
use fermata_store::tenure::{Tenure, TenureStart};
use fermata_store::{Storage, StoreOptions};

/// Long enough never to expire during a case.
const LONG: Duration = Duration::from_secs(300);
/// Short enough to expire within a case.
const SHORT: Duration = Duration::from_millis(400);

pub(super) fn name() -> LeaseName {
    LeaseName::new("contract:lease").expect("valid name")
}

pub(super) async fn grant(store: &dyn Storage, holder: &str, ttl: Duration) -> Lease {
    match store.leases().acquire(&name(), holder, ttl).await {
        Ok(Acquisition::Granted(lease)) => lease,
        other => panic!("expected {holder} to be granted the lease, got {other:?}"),
    }
}

pub(super) async fn wait_until_free(store: &dyn Storage) {
    eventually("the lease to expire", || async {
        store.leases().peek(&name()).await.expect("peek").is_free()
    })
    .await;
}

pub(super) fn start(holder: &str) -> TenureStart {
    TenureStart {
        holder: holder.to_owned(),
        version: "contract".to_owned(),
    }
}

pub(super) async fn plain(harness: &dyn Harness) -> Arc<dyn Storage> {
    harness.open(StoreOptions::default()).await
}

async fn pausable(harness: &dyn Harness) -> (Arc<dyn Storage>, PausedWrites) {
    let pause = PausedWrites::default();
    let options = StoreOptions {
        fenced_write_hook: Some(pause.hook()),
        ..StoreOptions::default()
    };
    (harness.open(options).await, pause)
}

/// Starts a fenced write under `lease` and returns once it is paused inside its locks.
async fn paused_write(
    store: &Arc<dyn Storage>,
    pause: &PausedWrites,
    lease: &Lease,
) -> JoinHandle<StoreResult<Tenure>> {
    pause.arm();
    let writer = tokio::spawn({
        let store = Arc::clone(store);
        let fence = lease.fence();
        let start = start(&lease.holder);
        async move { store.tenures().open(&fence, &start).await }
    });
    pause.entered().await;
    writer
}

pub async fn lease_is_granted_when_free(harness: &dyn Harness) {
    let store = plain(harness).await;
    let before = store.leases().peek(&name()).await.unwrap();
    assert!(before.is_free());
    assert_eq!(before.record, None);

    let lease = grant(&*store, "alpha", LONG).await;
    assert_eq!(lease.name, name());
    assert_eq!(lease.holder, "alpha");
    assert_eq!(lease.token, FencingToken(1));

    let after = store.leases().peek(&name()).await.unwrap();
    let record = after.live_holder().expect("held after the grant");
    assert_eq!(record.holder, "alpha");
    assert_eq!(record.token, lease.token);
    assert_eq!(record.expires_at, lease.expires_at);
    assert!(record.expires_at > after.now);
}

pub async fn lease_is_refused_while_held(harness: &dyn Harness) {
    let store = plain(harness).await;
    let alpha = grant(&*store, "alpha", LONG).await;
    match store.leases().acquire(&name(), "beta", LONG).await.unwrap() {
        Acquisition::Held(record) => {
            assert_eq!(record.holder, "alpha");
            assert_eq!(record.token, alpha.token);
        }
        Acquisition::Granted(lease) => panic!("granted a held lease: {lease:?}"),
    }
    let peek = store.leases().peek(&name()).await.unwrap();
    assert_eq!(peek.live_holder().unwrap().holder, "alpha");
}

pub async fn renewal_extends_the_expiry(harness: &dyn Harness) {
    let store = plain(harness).await;
    let lease = grant(&*store, "alpha", Duration::from_secs(10)).await;
    let renewed = store.leases().renew(&lease, LONG).await.unwrap();
    assert_eq!(renewed.token, lease.token);
    assert!(renewed.expires_at > lease.expires_at);
    let peek = store.leases().peek(&name()).await.unwrap();
    assert_eq!(peek.live_holder().unwrap().expires_at, renewed.expires_at);
}

pub async fn release_frees_the_lease_once(harness: &dyn Harness) {
    let store = plain(harness).await;
    let alpha = grant(&*store, "alpha", LONG).await;
    assert!(store.leases().release(&alpha).await.unwrap());
    assert!(store.leases().peek(&name()).await.unwrap().is_free());
    assert!(
        !store.leases().release(&alpha).await.unwrap(),
        "released twice"
    );

    let beta = grant(&*store, "beta", LONG).await;
    assert!(
        !store.leases().release(&alpha).await.unwrap(),
        "a former holder released the new holder's lease"
    );
    let peek = store.leases().peek(&name()).await.unwrap();
    assert_eq!(peek.live_holder().unwrap().token, beta.token);
}

pub async fn peek_tells_free_held_expired_and_released(harness: &dyn Harness) {
    let store = plain(harness).await;
    assert!(
        store.leases().peek(&name()).await.unwrap().is_free(),
        "never granted"
    );

    let alpha = grant(&*store, "alpha", SHORT).await;
    let held = store.leases().peek(&name()).await.unwrap();
    assert!(!held.is_free(), "held");
    wait_until_free(&*store).await;
    let expired = store.leases().peek(&name()).await.unwrap();
    let record = expired.record.as_ref().unwrap();
    assert!(
        !record.released && record.expires_at <= expired.now,
        "expired"
    );
    assert_eq!(record.token, alpha.token);

    let beta = grant(&*store, "beta", LONG).await;
    store.leases().release(&beta).await.unwrap();
    let released = store.leases().peek(&name()).await.unwrap();
    assert!(released.is_free());
    assert!(released.record.unwrap().released, "released");
}

pub async fn takeover_happens_only_after_expiry(harness: &dyn Harness) {
    let store = plain(harness).await;
    let alpha = grant(&*store, "alpha", SHORT).await;
    assert!(matches!(
        store.leases().acquire(&name(), "beta", LONG).await.unwrap(),
        Acquisition::Held(_)
    ));
    wait_until_free(&*store).await;
    let beta = grant(&*store, "beta", LONG).await;
    assert!(beta.token > alpha.token);
    assert_eq!(
        store
            .leases()
            .peek(&name())
            .await
            .unwrap()
            .live_holder()
            .unwrap()
            .holder,
        "beta"
    );
}

pub async fn tokens_strictly_increase_across_grants(harness: &dyn Harness) {
    let store = plain(harness).await;
    let mut last = FencingToken(0);
    for round in 0..3 {
        let released = grant(&*store, &format!("released-{round}"), LONG).await;
        assert!(released.token > last);
        last = released.token;
        store.leases().release(&released).await.unwrap();

        let expired = grant(&*store, &format!("expired-{round}"), SHORT).await;
        assert!(expired.token > last);
        last = expired.token;
        wait_until_free(&*store).await;
    }
    assert_eq!(last, FencingToken(6));
}

pub async fn renewal_after_a_takeover_cannot_extend_the_lost_lease(harness: &dyn Harness) {
    let store = plain(harness).await;
    let alpha = grant(&*store, "alpha", SHORT).await;
    wait_until_free(&*store).await;
    let beta = grant(&*store, "beta", LONG).await;

    let error = store.leases().renew(&alpha, LONG).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Fenced);
    let error = store
        .leases()
        .renewal_channel()
        .renew(&alpha, LONG)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Fenced);

    let record = store.leases().peek(&name()).await.unwrap().record.unwrap();
    assert_eq!(record.holder, "beta");
    assert_eq!(record.token, beta.token);
    assert_eq!(
        record.expires_at, beta.expires_at,
        "the lost lease's renewal changed the row"
    );
}

/// Several leases renewed at once: the live ones are extended; one released, one that expired
/// and one granted again are answered `None` and keep their rows as they were.
pub async fn leases_renewed_at_once_extend_only_the_live_ones(harness: &dyn Harness) {
    let store = plain(harness).await;
    let leases = store.leases();
    let named = |n: &str| LeaseName::new(format!("test:each:{n}")).unwrap();
    let take = |n: &'static str, ttl: Duration| {
        let store = Arc::clone(&store);
        async move {
            match store
                .leases()
                .acquire(&named(n), "alpha", ttl)
                .await
                .unwrap()
            {
                Acquisition::Granted(lease) => lease,
                Acquisition::Held(record) => panic!("{n} is held by {}", record.holder),
            }
        }
    };
    let live = take("live", LONG).await;
    let released = take("released", LONG).await;
    assert!(leases.release(&released).await.unwrap());
    let expired = take("expired", SHORT).await;
    let lost = take("lost", SHORT).await;
    let also_live = take("also-live", LONG).await;
    eventually("the short leases expired", || async {
        leases.peek(&named("lost")).await.unwrap().is_free()
            && leases.peek(&named("expired")).await.unwrap().is_free()
    })
    .await;
    let regranted = match leases.acquire(&named("lost"), "beta", LONG).await.unwrap() {
        Acquisition::Granted(lease) => lease,
        Acquisition::Held(record) => panic!("held by {}", record.holder),
    };
    let asked = [
        live.clone(),
        released.clone(),
        expired.clone(),
        lost.clone(),
        also_live.clone(),
    ];
    let renewed = leases.renew_each(&asked, 2 * LONG).await.unwrap();
    assert_eq!(renewed.len(), asked.len());
    for (index, lease) in [(0, &live), (4, &also_live)] {
        let renewed = renewed[index].as_ref().expect("a live lease is renewed");
        assert_eq!((&renewed.name, renewed.token), (&lease.name, lease.token));
        assert!(renewed.expires_at > lease.expires_at, "{renewed:?}");
        let record = leases.peek(&lease.name).await.unwrap().record.unwrap();
        assert_eq!(record.expires_at, renewed.expires_at);
    }
    assert!(renewed[1..4].iter().all(Option::is_none), "{renewed:?}");
    assert!(leases.peek(&named("released")).await.unwrap().is_free());
    assert!(leases.peek(&named("expired")).await.unwrap().is_free());
    let record = leases.peek(&named("lost")).await.unwrap().record.unwrap();
    assert_eq!(
        (record.holder.as_str(), record.token, record.expires_at),
        ("beta", regranted.token, regranted.expires_at)
    );
    assert!(leases.renew_each(&[], LONG).await.unwrap().is_empty());
}

pub async fn renewal_of_an_expired_lease_is_fenced(harness: &dyn Harness) {
    let store = plain(harness).await;
    let alpha = grant(&*store, "alpha", SHORT).await;
    wait_until_free(&*store).await;
    let error = store.leases().renew(&alpha, LONG).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Fenced);
    assert!(store.leases().peek(&name()).await.unwrap().is_free());
}

pub async fn renewal_waiting_behind_a_takeover_cannot_extend_an_expired_lease(
    harness: &dyn Harness,
) {
    let (store, pause) = pausable(harness).await;
    let alpha = grant(&*store, "alpha", SHORT).await;

    // A write under alpha checks its fence and pauses inside its locks.
    let writer = paused_write(&store, &pause, &alpha).await;
    wait_until_free(&*store).await;

    // Beta's takeover queues behind the write; alpha's renewal comes after it.
    let takeover = tokio::spawn({
        let store = Arc::clone(&store);
        async move { store.leases().acquire(&name(), "beta", LONG).await }
    });
    let renewal = tokio::spawn({
        let store = Arc::clone(&store);
        let alpha = alpha.clone();
        async move { store.leases().renew(&alpha, LONG).await }
    });

    pause.release();
    writer
        .await
        .unwrap()
        .expect("the write checked its fence before the lease expired");
    let beta = match takeover.await.unwrap().unwrap() {
        Acquisition::Granted(lease) => lease,
        Acquisition::Held(record) => panic!("the expired lease was extended: {record:?}"),
    };
    let error = renewal.await.unwrap().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Fenced);
    let record = store.leases().peek(&name()).await.unwrap().record.unwrap();
    assert_eq!(
        (record.token, record.expires_at),
        (beta.token, beta.expires_at)
    );
}

pub async fn renewal_channel_renews_and_recovers_after_abandon(harness: &dyn Harness) {
    let store = plain(harness).await;
    let lease = grant(&*store, "alpha", Duration::from_secs(10)).await;
    let mut channel = store.leases().renewal_channel();
    let renewed = channel.renew(&lease, LONG).await.unwrap();
    assert!(renewed.expires_at > lease.expires_at);
    channel.abandon().await;
    let again = channel.renew(&renewed, LONG).await.unwrap();
    assert!(again.expires_at >= renewed.expires_at);
    assert_eq!(
        store
            .leases()
            .peek(&name())
            .await
            .unwrap()
            .live_holder()
            .unwrap()
            .expires_at,
        again.expires_at
    );
}

pub async fn fenced_write_with_a_stale_token_is_refused(harness: &dyn Harness) {
    let store = plain(harness).await;
    let alpha = grant(&*store, "alpha", LONG).await;
    store.leases().release(&alpha).await.unwrap();
    let beta = grant(&*store, "beta", LONG).await;
    store
        .tenures()
        .open(&beta.fence(), &start("beta"))
        .await
        .unwrap();
    let before = store.tenures().recent(&name(), 10).await.unwrap();

    let error = store
        .tenures()
        .open(&alpha.fence(), &start("alpha"))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Fenced);
    let error = store.tenures().close(&alpha.fence()).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Fenced);
    assert_eq!(store.tenures().recent(&name(), 10).await.unwrap(), before);
}

pub async fn fenced_write_with_an_expired_lease_is_refused(harness: &dyn Harness) {
    let store = plain(harness).await;
    let alpha = grant(&*store, "alpha", SHORT).await;
    wait_until_free(&*store).await;
    let error = store
        .tenures()
        .open(&alpha.fence(), &start("alpha"))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Fenced);
    assert!(
        store
            .tenures()
            .recent(&name(), 10)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn fenced_write_after_release_is_refused(harness: &dyn Harness) {
    let store = plain(harness).await;
    let alpha = grant(&*store, "alpha", LONG).await;
    store.leases().release(&alpha).await.unwrap();
    let error = store
        .tenures()
        .open(&alpha.fence(), &start("alpha"))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Fenced);
    assert!(
        store
            .tenures()
            .recent(&name(), 10)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn takeover_waits_for_a_write_in_flight(harness: &dyn Harness) {
    let (store, pause) = pausable(harness).await;
    let alpha = grant(&*store, "alpha", SHORT).await;

    let writer = paused_write(&store, &pause, &alpha).await;
    wait_until_free(&*store).await;

    let mut takeover = tokio::spawn({
        let store = Arc::clone(&store);
        async move { store.leases().acquire(&name(), "beta", LONG).await }
    });
    let early = tokio::time::timeout(Duration::from_millis(500), &mut takeover).await;
    assert!(
        early.is_err(),
        "the takeover did not wait for the write in flight"
    );

    pause.release();
    let written = writer.await.unwrap().expect("the write in flight commits");
    assert_eq!(written.token, alpha.token);
    let granted = tokio::time::timeout(PATIENCE, takeover)
        .await
        .expect("the takeover finishes once the write commits")
        .unwrap()
        .unwrap();
    let Acquisition::Granted(beta) = granted else {
        panic!("the expired lease was not taken over: {granted:?}");
    };
    assert!(beta.token > alpha.token);
    let tenures = store.tenures().recent(&name(), 10).await.unwrap();
    assert_eq!(
        tenures.len(),
        1,
        "the write in flight was lost: {tenures:?}"
    );
}

pub async fn peek_returns_while_a_fenced_write_holds_its_locks(harness: &dyn Harness) {
    let (store, pause) = pausable(harness).await;
    let alpha = grant(&*store, "alpha", LONG).await;

    let writer = paused_write(&store, &pause, &alpha).await;

    let peek = tokio::time::timeout(PATIENCE, store.leases().peek(&name()))
        .await
        .expect("peek waited behind the fenced write")
        .unwrap();
    assert_eq!(peek.live_holder().unwrap().token, alpha.token);

    pause.release();
    writer.await.unwrap().unwrap();
}
