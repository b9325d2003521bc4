//! Contract cases for shards and several serving processes: a document's shard, the writer lease
//! of one shard writing its documents alone, the whole-database lease and a cluster's leases
//! excluding each other, and members announcing themselves.

use std::time::Duration;

use super::lease::plain;
use super::{Harness, eventually};
use fermata_store::channel::{ChannelId, NewChannel, Repository};
use fermata_store::cluster::{Announcement, Shard, ShardCount};
use fermata_store::collaboration::{Commit, NewCheckpoint, OperationId};
use fermata_store::error::ErrorKind;
use fermata_store::lease::{Acquisition, Fence, Lease, LeaseName};
use fermata_store::{Channel, Storage, UnixMillis};

const LONG: Duration = Duration::from_secs(3600);
const SHORT: Duration = Duration::from_millis(400);

async fn take(store: &dyn Storage, name: &LeaseName, holder: &str, ttl: Duration) -> Lease {
    match store.leases().acquire(name, holder, ttl).await.unwrap() {
        Acquisition::Granted(lease) => lease,
        Acquisition::Held(record) => panic!("{name} is held by {}", record.holder),
    }
}

async fn create(store: &dyn Storage, fence: &Fence, parent: Option<&Channel>) -> Channel {
    try_create(store, fence, ChannelId::random(), parent)
        .await
        .unwrap()
}

async fn try_create(
    store: &dyn Storage,
    fence: &Fence,
    id: ChannelId,
    parent: Option<&Channel>,
) -> fermata_store::StoreResult<Channel> {
    store
        .collaboration()
        .create_channel(
            fence,
            &NewChannel {
                id,
                repository: Repository::new("acme/app").unwrap(),
                title: "Shards".to_owned(),
                parent: parent.map(|p| p.id.clone()),
            },
        )
        .await
}

/// A random ID whose shard is (or, with `inside` false, is not) `shard`.
fn id_in(shard: Shard, inside: bool) -> ChannelId {
    loop {
        let id = ChannelId::random();
        if (Shard::of(&id, ShardCount::DEFAULT) == shard) == inside {
            return id;
        }
    }
}

fn commit(channel: &Channel, operation: &str) -> Commit {
    Commit {
        channel: channel.id.clone(),
        operation: OperationId::new(operation).unwrap(),
        expected_revision: channel.revision,
        update: Some(operation.as_bytes().to_vec()),
        sidecar: None,
        events: Vec::new(),
        title: None,
        text: None,
    }
}

fn checkpoint() -> NewCheckpoint {
    NewCheckpoint {
        epoch: 1,
        through_sequence: 0,
        revision: 0,
        canonical_text: String::new(),
        source_hash: "empty".to_owned(),
        state: Vec::new(),
        sidecar: None,
    }
}

pub async fn documents_keep_the_shard_their_id_or_parent_gave_them(harness: &dyn Harness) {
    let store = plain(harness).await;
    let count = store.cluster().shard_count().await.unwrap();
    assert_eq!(count, ShardCount::DEFAULT);
    let whole = take(&*store, &LeaseName::WRITER, "alone", LONG)
        .await
        .fence();
    let parent = create(&*store, &whole, None).await;
    assert_eq!(parent.shard, Shard::of(&parent.id, count));
    // A child's own ID almost never derives its parent's shard; it takes the parent's anyway.
    let child_id = id_in(parent.shard, false);
    let child = try_create(&*store, &whole, child_id, Some(&parent))
        .await
        .unwrap();
    assert_eq!(child.shard, parent.shard);
    let read = store
        .collaboration()
        .channel(&child.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.shard, parent.shard);
}

pub async fn a_shard_lease_writes_the_documents_of_its_shard_alone(harness: &dyn Harness) {
    let store = plain(harness).await;
    let whole = take(&*store, &LeaseName::WRITER, "alone", LONG).await;
    let ours = create(&*store, &whole.fence(), None).await;
    let theirs = try_create(&*store, &whole.fence(), id_in(ours.shard, false), None)
        .await
        .unwrap();
    let mut together = Vec::new();
    for inside in [true, false, true] {
        let id = id_in(ours.shard, inside);
        together.push(try_create(&*store, &whole.fence(), id, None).await.unwrap());
    }
    assert!(store.leases().release(&whole).await.unwrap());

    let lease = LeaseName::shard_writer(ours.shard);
    let fence = take(&*store, &lease, "member", LONG).await.fence();
    let collaboration = store.collaboration();
    let written = collaboration
        .commit(&fence, &commit(&ours, "ours-1"))
        .await
        .unwrap();
    assert_eq!(written.revision, 1);
    let fenced = |result: fermata_store::StoreResult<()>| {
        assert_eq!(result.unwrap_err().kind(), ErrorKind::Fenced);
    };
    fenced(
        collaboration
            .commit(&fence, &commit(&theirs, "theirs-1"))
            .await
            .map(drop),
    );
    fenced(
        collaboration
            .save_checkpoint(&fence, &theirs.id, &checkpoint())
            .await
            .map(drop),
    );
    fenced(
        collaboration
            .replace_epoch(
                &fence,
                &theirs.id,
                0,
                &NewCheckpoint {
                    epoch: 2,
                    ..checkpoint()
                },
            )
            .await
            .map(drop),
    );
    fenced(collaboration.archive(&fence, &theirs.id).await.map(drop));
    fenced(collaboration.restore(&fence, &theirs.id).await.map(drop));
    fenced(collaboration.delete_archived(&fence, &theirs.id).await);
    fenced(
        try_create(&*store, &fence, id_in(ours.shard, false), None)
            .await
            .map(drop),
    );
    // Commits that arrive together may be written as one group: there too, the other shard's
    // is refused and the others are written.
    let commits: Vec<Commit> = together
        .iter()
        .map(|channel| commit(channel, "together"))
        .collect();
    let results = futures::future::join_all(
        commits
            .iter()
            .map(|commit| collaboration.commit(&fence, commit)),
    )
    .await;
    for (channel, result) in together.iter().zip(results) {
        if channel.shard == ours.shard {
            assert_eq!(result.unwrap().revision, 1);
        } else {
            fenced(result.map(drop));
        }
    }
    // Nothing of the other shard's documents moved.
    for id in [&theirs.id, &together[1].id] {
        let read = collaboration.channel(id).await.unwrap().unwrap();
        assert_eq!((read.revision, read.archived_at), (0, None));
    }

    // Its own shard's documents: a new one its ID places there, and a child of one there.
    let created = try_create(&*store, &fence, id_in(ours.shard, true), None)
        .await
        .unwrap();
    assert_eq!(created.shard, ours.shard);
    let child = try_create(&*store, &fence, id_in(ours.shard, false), Some(&ours))
        .await
        .unwrap();
    assert_eq!(child.shard, ours.shard);
    collaboration.archive(&fence, &created.id).await.unwrap();
}

pub async fn the_whole_database_lease_and_a_clusters_leases_exclude_each_other(
    harness: &dyn Harness,
) {
    let store = plain(harness).await;
    let leases = store.leases();
    let shard = LeaseName::shard_writer(Shard(7));
    let whole = take(&*store, &LeaseName::WRITER, "alone", LONG).await;
    for name in [&shard, &LeaseName::COORDINATOR] {
        match leases.acquire(name, "member", LONG).await.unwrap() {
            Acquisition::Held(record) => assert_eq!(record.name, LeaseName::WRITER),
            Acquisition::Granted(_) => panic!("{name} was granted beside the whole database"),
        }
    }
    // Other leases are not part of it.
    let member = LeaseName::member("m1").unwrap();
    take(&*store, &member, "member", LONG).await;
    assert!(leases.release(&whole).await.unwrap());

    let held = take(&*store, &shard, "member", LONG).await;
    take(&*store, &LeaseName::COORDINATOR, "member", SHORT).await;
    match leases
        .acquire(&LeaseName::WRITER, "alone", LONG)
        .await
        .unwrap()
    {
        Acquisition::Held(record) => assert!(record.name.is_cluster_writer()),
        Acquisition::Granted(_) => panic!("the whole database was granted beside a shard"),
    }
    assert!(leases.release(&held).await.unwrap());
    // The coordinator's lease still excludes it until it expires.
    eventually("the coordinator's lease to expire", || async {
        matches!(
            leases
                .acquire(&LeaseName::WRITER, "alone", LONG)
                .await
                .unwrap(),
            Acquisition::Granted(_)
        )
    })
    .await;
}

pub async fn members_announce_themselves_and_leave_the_view_with_their_lease(
    harness: &dyn Harness,
) {
    let store = plain(harness).await;
    let cluster = store.cluster();
    let staying = take(&*store, &LeaseName::member("staying").unwrap(), "a", LONG).await;
    let leaving = take(&*store, &LeaseName::member("leaving").unwrap(), "b", SHORT).await;
    let shard = take(&*store, &LeaseName::shard_writer(Shard(3)), "a", LONG).await;
    let announce = |address: &str| Announcement {
        address: address.to_owned(),
        version: "contract".to_owned(),
    };
    cluster
        .announce(&staying.fence(), &announce("http://127.0.0.1:1"))
        .await
        .unwrap();
    cluster
        .announce(&staying.fence(), &announce("http://127.0.0.1:2"))
        .await
        .unwrap();
    cluster
        .announce(&leaving.fence(), &announce("http://127.0.0.1:3"))
        .await
        .unwrap();
    // Only a member lease announces.
    let refused = cluster
        .announce(&shard.fence(), &announce("http://127.0.0.1:4"))
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Invalid);

    let view = cluster.view().await.unwrap();
    let instances: Vec<&str> = view.members.iter().map(|m| m.instance()).collect();
    assert_eq!(instances, ["leaving", "staying"]);
    assert_eq!(view.members[1].announcement.address, "http://127.0.0.1:2");
    assert_eq!(
        view.live_holder(&LeaseName::shard_writer(Shard(3)))
            .map(|r| r.holder.as_str()),
        Some("a")
    );
    assert!(view.live_holder(&LeaseName::COORDINATOR).is_none());

    // A member that withdraws leaves the view at once, its lease still live.
    cluster.withdraw(&staying.fence()).await.unwrap();
    let view = cluster.view().await.unwrap();
    assert!(
        view.members.iter().all(|m| m.instance() != "staying"),
        "{view:?}"
    );
    cluster
        .announce(&staying.fence(), &announce("http://127.0.0.1:2"))
        .await
        .unwrap();
    eventually("the leaving member to drop out of the view", || async {
        let view = cluster.view().await.unwrap();
        view.members.len() == 1 && view.members[0].instance() == "staying"
    })
    .await;
    // An announcement under a lease that ended is refused.
    let late = cluster
        .announce(&leaving.fence(), &announce("http://127.0.0.1:5"))
        .await
        .unwrap_err();
    assert_eq!(late.kind(), ErrorKind::Fenced);
    let view = cluster.view().await.unwrap();
    let forgotten = cluster
        .forget_departed(UnixMillis(view.now.0 + 1))
        .await
        .unwrap();
    assert_eq!(forgotten, 1);
    assert_eq!(cluster.view().await.unwrap().members.len(), 1);
    // The departed member's lease row went with it; the live one's stays.
    let gone = store
        .leases()
        .peek(&LeaseName::member("leaving").unwrap())
        .await
        .unwrap();
    assert!(gone.record.is_none(), "{gone:?}");
    let kept = store
        .leases()
        .peek(&LeaseName::member("staying").unwrap())
        .await
        .unwrap();
    assert!(kept.live_holder().is_some());
}
