//! The fault-injecting wrapper over the memory adapter: a fault before the call writes nothing, a
//! fault after it loses only the answer, faults count down or last until cleared, every call is
//! counted, the renewal channel has faults of its own, and the stores it does not wrap are the
//! inner store's.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use fermata_store::{
    Acquisition, ChannelId, Commit, ErrorKind, Lease, LeaseName, NewUser, OperationId, Storage,
    StoreOptions, TenureStart, UserId, UserName,
};
use fermata_store_testkit::contract::create_document;
use fermata_store_testkit::memory::MemoryStorage;
use fermata_store_testkit::unreliable::{Fault, UnreliableStorage};

const TTL: Duration = Duration::from_secs(3600);

fn wrapped() -> UnreliableStorage {
    UnreliableStorage::new(Arc::new(MemoryStorage::new(StoreOptions::default())))
}

fn user(name: &str) -> NewUser {
    NewUser {
        id: UserId(format!("user-{name}")),
        name: UserName::new(name).unwrap(),
        password_hash: format!("$argon2id$hash-of-{name}"),
        roles: BTreeSet::new(),
    }
}

async fn writer_lease(store: &dyn Storage) -> Lease {
    match store
        .leases()
        .acquire(&LeaseName::WRITER, "faults", TTL)
        .await
        .unwrap()
    {
        Acquisition::Granted(lease) => lease,
        Acquisition::Held(record) => panic!("held by {record:?}"),
    }
}

fn commit_on(channel: &ChannelId, operation: &str) -> Commit {
    Commit {
        channel: channel.clone(),
        operation: OperationId::new(operation).unwrap(),
        expected_revision: 0,
        update: Some(b"an update".to_vec()),
        sidecar: None,
        events: Vec::new(),
        title: None,
        text: None,
    }
}

#[tokio::test]
async fn a_fault_before_the_call_writes_nothing() {
    let store = wrapped();
    let faults = store.faults();
    faults.set("users.create_user", Fault::before(ErrorKind::Unavailable));
    let error = store.users().create_user(&user("ada")).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable);
    assert!(error.is_retryable());
    let name = UserName::new("ada").unwrap();
    assert_eq!(
        store.inner().users().user_by_name(&name).await.unwrap(),
        None
    );
    // Until cleared, every call fails; then the same call goes through.
    let error = store.users().create_user(&user("ada")).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable);
    faults.clear("users.create_user");
    store.users().create_user(&user("ada")).await.unwrap();
    assert!(
        store
            .inner()
            .users()
            .user_by_name(&name)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(faults.calls("users.create_user"), 3);
    assert_eq!(faults.failed("users.create_user"), 2);
}

#[tokio::test]
async fn a_fault_after_the_call_loses_only_its_answer() {
    let store = wrapped();
    let faults = store.faults();
    let fence = writer_lease(&store).await.fence();
    let document = create_document(store.collaboration(), &fence, "Faults")
        .await
        .id;
    faults.set(
        "collaboration.commit",
        Fault::after(ErrorKind::Unavailable).times(1),
    );
    let commit = commit_on(&document, "operation-1");
    let error = store
        .collaboration()
        .commit(&fence, &commit)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable);
    let stored = store
        .inner()
        .collaboration()
        .channel(&document)
        .await
        .unwrap();
    assert_eq!(stored.unwrap().revision, 1, "the commit landed");
    // The fault is spent: the retry under the same operation ID answers with what landed.
    let again = store.collaboration().commit(&fence, &commit).await.unwrap();
    assert_eq!((again.revision, again.repeated), (1, true));
    assert_eq!(faults.calls("collaboration.commit"), 2);
    assert_eq!(faults.failed("collaboration.commit"), 1);
}

#[tokio::test]
async fn a_fault_can_fail_the_next_calls_only() {
    let store = wrapped();
    let faults = store.faults();
    faults.set(
        "users.list_users",
        Fault::before(ErrorKind::Conflict).times(2),
    );
    for _ in 0..2 {
        let error = store.users().list_users().await.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Conflict);
    }
    assert!(store.users().list_users().await.unwrap().is_empty());
    assert_eq!(faults.calls("users.list_users"), 3);
    assert_eq!(faults.failed("users.list_users"), 2);
    // Counted without a fault set, and per name.
    assert_eq!(faults.calls("users.user_by_name"), 0);
    let name = UserName::new("bob").unwrap();
    store.users().user_by_name(&name).await.unwrap();
    assert_eq!(faults.calls("users.user_by_name"), 1);
}

#[tokio::test]
async fn the_renewal_channel_has_faults_of_its_own() {
    let store = wrapped();
    let faults = store.faults();
    let lease = writer_lease(&store).await;
    faults.set(
        "leases.renewal.renew",
        Fault::before(ErrorKind::Unavailable),
    );
    let mut channel = store.leases().renewal_channel();
    let error = channel.renew(&lease, TTL).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable);
    // The pool's renewal is another call.
    let renewed = store.leases().renew(&lease, TTL).await.unwrap();
    faults.clear_all();
    channel.renew(&renewed, TTL).await.unwrap();
    assert_eq!(faults.calls("leases.renewal.renew"), 2);
    assert_eq!(faults.failed("leases.renewal.renew"), 1);
    assert_eq!(faults.calls("leases.renew"), 1);
}

#[tokio::test]
async fn the_stores_it_does_not_wrap_are_the_inner_stores() {
    let store = wrapped();
    assert_eq!(store.driver(), "memory");
    let fence = writer_lease(&store).await.fence();
    let start = TenureStart {
        holder: "faults".to_owned(),
        version: "test".to_owned(),
    };
    // Tenures are not wrapped: written through the wrapper, they are the inner store's.
    let opened = store.tenures().open(&fence, &start).await.unwrap();
    let recent = store
        .inner()
        .tenures()
        .recent(&LeaseName::WRITER, 10)
        .await
        .unwrap();
    assert_eq!(recent, [opened]);
    assert_eq!(store.faults().calls("leases.acquire"), 1);
}

#[test]
fn a_name_that_is_no_wrapped_call_is_refused() {
    let faults = wrapped().faults();
    for name in ["collaboration.comit", "tenures.tenures", "leases"] {
        let set = std::panic::catch_unwind(|| {
            faults.set(name, Fault::before(ErrorKind::Unavailable));
        });
        assert!(set.is_err(), "`{name}` was taken as a call name");
    }
}
