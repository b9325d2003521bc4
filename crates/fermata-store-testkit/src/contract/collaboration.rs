//! Contract cases for channels and the collaboration store. Updates are opaque bytes here: the
//! store never decodes them (the documents layer's own tests cover Yjs).

use std::sync::Arc;
use std::time::Duration;

use super::Harness;
use super::lease::{grant, plain};
use fermata_store::channel::{
    ChannelFilter, ChannelId, CreationKey, DescriptionDraft, NewChannel, Repository, Slug,
};
use fermata_store::collaboration::{
    Commit, Event, EventDraft, JournalUpdate, NewCheckpoint, OperationId, PublishedChannel,
    RecoveryHead, RecoveryReceiver, SidecarState,
};
use fermata_store::error::ErrorKind;
use fermata_store::lease::Fence;
use fermata_store::user::{NewUser, UserId, UserName};
use fermata_store::{Channel, Storage};

const LONG: Duration = Duration::from_secs(3600);

struct Docs {
    store: Arc<dyn Storage>,
    fence: Fence,
}

fn repo(name: &str) -> Repository {
    Repository::new(name).unwrap()
}

fn slug(text: &str) -> Slug {
    Slug::new(text).unwrap()
}

fn op(id: &str) -> OperationId {
    OperationId::new(id).unwrap()
}

fn sidecar(n: i64) -> SidecarState {
    SidecarState {
        version: 2,
        json: format!("{{\"documentSequence\":{n}}}"),
        unanswered_decisions: n,
    }
}

fn checkpoint(epoch: i64, through: i64, revision: i64, text: &str) -> NewCheckpoint {
    NewCheckpoint {
        epoch,
        through_sequence: through,
        revision,
        canonical_text: text.to_owned(),
        source_hash: format!("hash-of-{text}"),
        state: text.as_bytes().to_vec(),
        sidecar: Some(sidecar(0)),
    }
}

impl Docs {
    async fn open(harness: &dyn Harness) -> Self {
        let store = plain(harness).await;
        let fence = grant(&*store, "writer", LONG).await.fence();
        Docs { store, fence }
    }

    async fn create(&self, repository: &str, title: &str, parent: Option<&Channel>) -> Channel {
        self.try_create(repository, title, parent).await.unwrap()
    }

    async fn try_create(
        &self,
        repository: &str,
        title: &str,
        parent: Option<&Channel>,
    ) -> fermata_store::StoreResult<Channel> {
        self.store
            .collaboration()
            .create_channel(
                &self.fence,
                &NewChannel {
                    id: ChannelId::random(),
                    repository: repo(repository),
                    title: title.to_owned(),
                    parent: parent.map(|p| p.id.clone()),
                },
            )
            .await
    }

    fn commit(channel: &Channel, operation: &str) -> Commit {
        Commit {
            channel: channel.id.clone(),
            operation: op(operation),
            expected_revision: channel.revision,
            update: None,
            sidecar: None,
            events: Vec::new(),
            title: None,
            text: None,
        }
    }

    async fn reload(&self, channel: &Channel) -> Channel {
        self.store
            .collaboration()
            .channel(&channel.id)
            .await
            .unwrap()
            .unwrap()
    }

    /// Commits one update `bytes` on top of the channel's current revision.
    async fn append(
        &self,
        channel: &Channel,
        operation: &str,
        bytes: &[u8],
    ) -> fermata_store::Committed {
        let current = self.reload(channel).await;
        let commit = Commit {
            update: Some(bytes.to_vec()),
            ..Docs::commit(&current, operation)
        };
        self.store
            .collaboration()
            .commit(&self.fence, &commit)
            .await
            .unwrap()
    }
}

pub async fn channels_get_unique_slugs_per_repository_while_titles_repeat(harness: &dyn Harness) {
    let docs = Docs::open(harness).await;
    let first = docs.create("acme/app", "Release plan", None).await;
    let second = docs.create("acme/app", "Release plan", None).await;
    let third = docs.create("acme/app", "Release  plan!", None).await;
    let elsewhere = docs.create("acme/web", "Release plan", None).await;
    assert_eq!(
        [&first.slug, &second.slug, &third.slug, &elsewhere.slug].map(Slug::as_str),
        [
            "release-plan",
            "release-plan-2",
            "release-plan-3",
            "release-plan"
        ]
    );
    assert_eq!(first.title, second.title);
    assert_eq!((first.revision, first.sequence, first.epoch), (0, 0, 1));
    let found = docs
        .store
        .collaboration()
        .resolve_slug(&repo("acme/app"), &slug("release-plan-2"))
        .await
        .unwrap();
    assert_eq!(found.map(|c| c.id), Some(second.id));
    assert_eq!(
        docs.store
            .collaboration()
            .resolve_slug(&repo("acme/app"), &slug("nothing"))
            .await
            .unwrap(),
        None
    );
}

pub async fn a_rename_promotes_a_new_slug_and_keeps_former_ones_reserved(harness: &dyn Harness) {
    let docs = Docs::open(harness).await;
    let plan = docs.create("acme/app", "Plan", None).await;
    let rename = Commit {
        title: Some("Roadmap".to_owned()),
        ..Docs::commit(&plan, "rename-1")
    };
    let committed = docs
        .store
        .collaboration()
        .commit(&docs.fence, &rename)
        .await
        .unwrap();
    assert_eq!(committed.revision, 1);
    let renamed = docs.reload(&plan).await;
    assert_eq!(
        (renamed.title.as_str(), renamed.slug.as_str()),
        ("Roadmap", "roadmap")
    );
    assert_eq!(
        docs.store.collaboration().slugs_of(&plan.id).await.unwrap(),
        [slug("roadmap"), slug("plan")]
    );
    for alias in ["plan", "roadmap"] {
        let found = docs
            .store
            .collaboration()
            .resolve_slug(&repo("acme/app"), &slug(alias))
            .await
            .unwrap();
        assert_eq!(found.map(|c| c.id), Some(plan.id.clone()), "{alias}");
    }

    // The former slug is never given to another channel while this one exists, even archived.
    docs.store
        .collaboration()
        .archive(&docs.fence, &plan.id)
        .await
        .unwrap();
    let other = docs.create("acme/app", "Plan", None).await;
    assert_eq!(other.slug.as_str(), "plan-2");
    let found = docs
        .store
        .collaboration()
        .resolve_slug(&repo("acme/app"), &slug("plan"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.id, plan.id);
    assert!(
        found.archived_at.is_some(),
        "an archived channel resolves by its alias"
    );

    // Renaming back promotes the channel's own former slug.
    docs.store
        .collaboration()
        .restore(&docs.fence, &plan.id)
        .await
        .unwrap();
    let back = Commit {
        title: Some("Plan".to_owned()),
        ..Docs::commit(&docs.reload(&plan).await, "rename-2")
    };
    docs.store
        .collaboration()
        .commit(&docs.fence, &back)
        .await
        .unwrap();
    assert_eq!(docs.reload(&plan).await.slug.as_str(), "plan");
}

pub async fn children_are_one_level_deep_and_in_the_same_repository(harness: &dyn Harness) {
    let docs = Docs::open(harness).await;
    let parent = docs.create("acme/app", "Parent", None).await;
    let child = docs.create("acme/app", "Child", Some(&parent)).await;
    assert_eq!(child.parent.as_ref(), Some(&parent.id));
    let grandchild = docs
        .try_create("acme/app", "Grandchild", Some(&child))
        .await
        .unwrap_err();
    assert_eq!(grandchild.kind(), ErrorKind::Invalid);
    let foreign = docs
        .try_create("acme/web", "Foreign child", Some(&parent))
        .await
        .unwrap_err();
    assert_eq!(foreign.kind(), ErrorKind::Invalid);
    let children = docs
        .store
        .collaboration()
        .children_of(&parent.id, false)
        .await
        .unwrap();
    assert_eq!(
        children.iter().map(|c| &c.id).collect::<Vec<_>>(),
        [&child.id]
    );
}

pub async fn a_commit_assigns_the_next_revision_and_sequence_and_writes_all_it_carries(
    harness: &dyn Harness,
) {
    let docs = Docs::open(harness).await;
    let channel = docs.create("acme/app", "Doc", None).await;
    let collaboration = docs.store.collaboration();
    let full = Commit {
        update: Some(b"update-1".to_vec()),
        sidecar: Some(sidecar(1)),
        events: vec![
            EventDraft {
                kind: "comment.added".to_owned(),
                payload: "{\"id\":1}".to_owned(),
            },
            EventDraft {
                kind: "question.asked".to_owned(),
                payload: "{\"id\":2}".to_owned(),
            },
        ],
        ..Docs::commit(&channel, "op-1")
    };
    let first = collaboration.commit(&docs.fence, &full).await.unwrap();
    assert_eq!(
        (first.revision, first.sequence, first.repeated),
        (1, 1, false)
    );

    // A sidecar-only commit consumes a sequence without a journal row.
    let sidecar_only = Commit {
        sidecar: Some(sidecar(2)),
        ..Docs::commit(&docs.reload(&channel).await, "op-2")
    };
    let second = collaboration
        .commit(&docs.fence, &sidecar_only)
        .await
        .unwrap();
    assert_eq!((second.revision, second.sequence), (2, 2));
    let third = docs.append(&channel, "op-3", b"update-3").await;
    assert_eq!((third.revision, third.sequence), (3, 3));

    let updates = collaboration.updates_after(&channel.id, 0).await.unwrap();
    let journal: Vec<_> = updates
        .iter()
        .map(|u| (u.sequence, u.epoch, u.bytes.clone()))
        .collect();
    assert_eq!(
        journal,
        [(1, 1, b"update-1".to_vec()), (3, 1, b"update-3".to_vec())]
    );
    let events = collaboration.events_after(&channel.id, 0).await.unwrap();
    let kinds: Vec<_> = events
        .iter()
        .map(|e| (e.sequence, e.kind.as_str()))
        .collect();
    assert_eq!(kinds, [(1, "comment.added"), (1, "question.asked")]);
    let snapshot = collaboration.recovery_snapshot(&channel.id).await.unwrap();
    assert_eq!(snapshot.sidecar, Some(sidecar(2)));
    assert_eq!(snapshot.expected_update_sequences, [1, 3]);
    assert_eq!(snapshot.updates, updates);
    assert_eq!(snapshot.events, events);
    let reloaded = docs.reload(&channel).await;
    assert_eq!((reloaded.revision, reloaded.sequence), (3, 3));
    assert!(reloaded.updated_at >= channel.updated_at);
    assert_eq!(
        collaboration
            .updates_after(&channel.id, 1)
            .await
            .unwrap()
            .len(),
        1
    );
    // Once a checkpoint covers them, the journal and the events are not read for recovery.
    collaboration
        .save_checkpoint(&docs.fence, &channel.id, &checkpoint(1, 3, 3, "three"))
        .await
        .unwrap();
    let snapshot = collaboration.recovery_snapshot(&channel.id).await.unwrap();
    assert!(snapshot.updates.is_empty() && snapshot.events.is_empty());
    assert_eq!(snapshot.sidecar, Some(sidecar(2)));
    assert_eq!(snapshot.checkpoint.map(|c| c.through_sequence), Some(3));
}

pub async fn a_stale_revision_is_a_conflict_and_changes_nothing(harness: &dyn Harness) {
    let docs = Docs::open(harness).await;
    let channel = docs.create("acme/app", "Doc", None).await;
    docs.append(&channel, "op-1", b"one").await;
    let stale = Commit {
        update: Some(b"stale".to_vec()),
        sidecar: Some(sidecar(9)),
        ..Docs::commit(&channel, "op-2")
    };
    let error = docs
        .store
        .collaboration()
        .commit(&docs.fence, &stale)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Conflict);
    let snapshot = docs
        .store
        .collaboration()
        .recovery_snapshot(&channel.id)
        .await
        .unwrap();
    assert_eq!(snapshot.updates.len(), 1);
    assert_eq!(snapshot.sidecar, None);
    assert_eq!(snapshot.channel.revision, 1);
}

pub async fn operation_ids_are_idempotent(harness: &dyn Harness) {
    let docs = Docs::open(harness).await;
    let channel = docs.create("acme/app", "Doc", None).await;
    let commit = Commit {
        update: Some(b"once".to_vec()),
        ..Docs::commit(&channel, "op-1")
    };
    let first = docs
        .store
        .collaboration()
        .commit(&docs.fence, &commit)
        .await
        .unwrap();
    let again = docs
        .store
        .collaboration()
        .commit(&docs.fence, &commit)
        .await
        .unwrap();
    assert_eq!(
        (again.revision, again.sequence, again.repeated),
        (first.revision, first.sequence, true)
    );
    assert_eq!(
        docs.store
            .collaboration()
            .updates_after(&channel.id, 0)
            .await
            .unwrap()
            .len(),
        1
    );

    let different = Commit {
        update: Some(b"twice".to_vec()),
        ..commit
    };
    let error = docs
        .store
        .collaboration()
        .commit(&docs.fence, &different)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Conflict);
    assert_eq!(docs.reload(&channel).await.revision, 1);

    // The same ID again at the document's current revision, which the revision check alone
    // would let through: the earlier commit still answers, and nothing of this one is kept.
    let reused = Commit {
        expected_revision: 1,
        ..different
    };
    let error = docs
        .store
        .collaboration()
        .commit(&docs.fence, &reused)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Conflict);
    assert_eq!(docs.reload(&channel).await.revision, 1);
    let journal = docs
        .store
        .collaboration()
        .updates_after(&channel.id, 0)
        .await
        .unwrap();
    assert_eq!(journal.len(), 1);
}

pub async fn concurrent_commits_on_the_same_revision_let_exactly_one_win(harness: &dyn Harness) {
    let docs = Arc::new(Docs::open(harness).await);
    let channel = docs.create("acme/app", "Doc", None).await;
    let mut tasks = Vec::new();
    for writer in 0..8 {
        let docs = Arc::clone(&docs);
        let commit = Commit {
            update: Some(format!("from-{writer}").into_bytes()),
            ..Docs::commit(&channel, &format!("writer-{writer}"))
        };
        tasks.push(tokio::spawn(async move {
            docs.store
                .collaboration()
                .commit(&docs.fence, &commit)
                .await
        }));
    }
    let mut won = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(committed) => {
                won += 1;
                assert_eq!(committed.revision, 1);
            }
            Err(error) => assert_eq!(error.kind(), ErrorKind::Conflict, "{error}"),
        }
    }
    assert_eq!(won, 1);
    assert_eq!(
        docs.store
            .collaboration()
            .updates_after(&channel.id, 0)
            .await
            .unwrap()
            .len(),
        1
    );
}

pub async fn collaboration_writes_under_a_lost_lease_are_fenced(harness: &dyn Harness) {
    let docs = Docs::open(harness).await;
    let channel = docs.create("acme/app", "Doc", None).await;
    let lease = docs
        .store
        .leases()
        .peek(&super::lease::name())
        .await
        .unwrap()
        .record
        .unwrap();
    let held = fermata_store::Lease {
        name: lease.name,
        token: lease.token,
        holder: lease.holder,
        expires_at: lease.expires_at,
    };
    docs.store.leases().release(&held).await.unwrap();
    let successor = grant(&*docs.store, "successor", LONG).await;
    assert!(successor.token > docs.fence.token);
    let commit = Commit {
        update: Some(b"late".to_vec()),
        ..Docs::commit(&channel, "late")
    };
    let collaboration = docs.store.collaboration();
    assert_eq!(
        collaboration
            .commit(&docs.fence, &commit)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Fenced
    );
    let cp = checkpoint(1, 0, 0, "");
    assert_eq!(
        collaboration
            .save_checkpoint(&docs.fence, &channel.id, &cp)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Fenced
    );
    assert_eq!(
        collaboration
            .archive(&docs.fence, &channel.id)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Fenced
    );
    assert_eq!(docs.reload(&channel).await, channel);
    collaboration
        .commit(&successor.fence(), &commit)
        .await
        .unwrap();
}

pub async fn archive_and_restore_are_idempotent_and_move_no_counter(harness: &dyn Harness) {
    let docs = Docs::open(harness).await;
    let channel = docs.create("acme/app", "Doc", None).await;
    docs.append(&channel, "op-1", b"one").await;
    let before = docs.reload(&channel).await;
    let collaboration = docs.store.collaboration();
    let archived = collaboration
        .archive(&docs.fence, &channel.id)
        .await
        .unwrap();
    let again = collaboration
        .archive(&docs.fence, &channel.id)
        .await
        .unwrap();
    assert_eq!(archived, again, "archiving twice changed the channel");
    assert_eq!(
        (archived.revision, archived.sequence, archived.epoch),
        (before.revision, before.sequence, before.epoch)
    );
    assert!(archived.archived_at.is_some());

    let refused = Commit {
        update: Some(b"while archived".to_vec()),
        ..Docs::commit(&archived, "op-2")
    };
    assert_eq!(
        collaboration
            .commit(&docs.fence, &refused)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Conflict
    );

    let restored = collaboration
        .restore(&docs.fence, &channel.id)
        .await
        .unwrap();
    assert_eq!(restored.archived_at, None);
    assert_eq!(
        collaboration
            .restore(&docs.fence, &channel.id)
            .await
            .unwrap(),
        restored
    );
    assert_eq!(restored.revision, before.revision);
}

pub async fn lists_leave_out_archived_channels_unless_asked(harness: &dyn Harness) {
    let docs = Docs::open(harness).await;
    let active = docs.create("acme/app", "Active", None).await;
    let archived = docs.create("acme/app", "Archived", None).await;
    let elsewhere = docs.create("acme/web", "Elsewhere", None).await;
    docs.store
        .collaboration()
        .archive(&docs.fence, &archived.id)
        .await
        .unwrap();
    let ids = |channels: Vec<Channel>| -> Vec<ChannelId> {
        let mut ids: Vec<_> = channels.into_iter().map(|c| c.id).collect();
        ids.sort();
        ids
    };
    let mut expected = vec![active.id.clone(), elsewhere.id.clone()];
    expected.sort();
    let all_active = docs
        .store
        .collaboration()
        .list_channels(&ChannelFilter::default())
        .await
        .unwrap();
    assert_eq!(ids(all_active), expected);
    let in_app = ChannelFilter {
        repository: Some(repo("acme/app")),
        include_archived: true,
    };
    let mut expected = vec![active.id.clone(), archived.id.clone()];
    expected.sort();
    assert_eq!(
        ids(docs
            .store
            .collaboration()
            .list_channels(&in_app)
            .await
            .unwrap()),
        expected
    );
    let direct = docs
        .store
        .collaboration()
        .channel(&archived.id)
        .await
        .unwrap();
    assert!(
        direct.is_some_and(|c| c.archived_at.is_some()),
        "a direct read finds an archived channel"
    );
}

pub async fn checkpoints_replace_the_prior_one_and_prune_only_the_journal(harness: &dyn Harness) {
    let docs = Docs::open(harness).await;
    let channel = docs.create("acme/app", "Doc", None).await;
    let collaboration = docs.store.collaboration();
    for n in 1..=4 {
        docs.append(&channel, &format!("op-{n}"), format!("u{n}").as_bytes())
            .await;
    }
    let first = collaboration
        .save_checkpoint(&docs.fence, &channel.id, &checkpoint(1, 2, 2, "two"))
        .await
        .unwrap();
    assert_eq!((first.generation, first.through_sequence), (1, 2));
    let remaining: Vec<i64> = collaboration
        .updates_after(&channel.id, 0)
        .await
        .unwrap()
        .iter()
        .map(|u| u.sequence)
        .collect();
    assert_eq!(remaining, [3, 4]);

    let stale = collaboration
        .save_checkpoint(&docs.fence, &channel.id, &checkpoint(1, 1, 1, "one"))
        .await
        .unwrap_err();
    assert_eq!(stale.kind(), ErrorKind::Conflict);
    let wrong_epoch = collaboration
        .save_checkpoint(&docs.fence, &channel.id, &checkpoint(2, 4, 4, "x"))
        .await
        .unwrap_err();
    assert_eq!(wrong_epoch.kind(), ErrorKind::Conflict);
    let future = collaboration
        .save_checkpoint(&docs.fence, &channel.id, &checkpoint(1, 9, 9, "x"))
        .await
        .unwrap_err();
    assert_eq!(future.kind(), ErrorKind::Invalid);

    let second = collaboration
        .save_checkpoint(&docs.fence, &channel.id, &checkpoint(1, 4, 4, "four"))
        .await
        .unwrap();
    assert_eq!(second.generation, 2);
    assert!(
        collaboration
            .updates_after(&channel.id, 0)
            .await
            .unwrap()
            .is_empty()
    );
    // Sequences go on after a checkpoint, and operations are kept: a repeated ID still answers.
    let next = docs.append(&channel, "op-5", b"u5").await;
    assert_eq!(next.sequence, 5);
    let repeat = Commit {
        update: Some(b"u1".to_vec()),
        expected_revision: 0,
        ..Docs::commit(&channel, "op-1")
    };
    let answer = collaboration.commit(&docs.fence, &repeat).await.unwrap();
    assert_eq!((answer.sequence, answer.repeated), (1, true));

    let snapshot = collaboration.recovery_snapshot(&channel.id).await.unwrap();
    let cp = snapshot.checkpoint.unwrap();
    assert_eq!(
        (cp.canonical_text.as_str(), cp.through_sequence, cp.state),
        ("four", 4, b"four".to_vec())
    );
    assert_eq!(
        snapshot
            .updates
            .iter()
            .map(|u| u.sequence)
            .collect::<Vec<_>>(),
        [5]
    );
    assert_eq!(snapshot.expected_update_sequences, [5]);
}

/// A small update of binary bytes: a zero, the separators a store might pack updates with, and
/// bytes that are not UTF-8.
fn binary_update(n: i64) -> Vec<u8> {
    let mut bytes = format!("update {n}").into_bytes();
    bytes.extend([
        0,
        b';',
        b',',
        b' ',
        0xff,
        0xc3,
        u8::try_from(n % 256).unwrap(),
    ]);
    bytes
}

/// A receiver that records the order of the calls a store makes and the journal's runs, one
/// after another.
#[derive(Debug, Default)]
struct Recorder {
    calls: Vec<String>,
    journal: Vec<JournalUpdate>,
}

impl RecoveryReceiver for Recorder {
    fn head(&mut self, _head: RecoveryHead) {
        self.calls.push("head".to_owned());
    }

    fn journal(&mut self, run: Vec<JournalUpdate>) {
        self.calls.push("journal".to_owned());
        self.journal.extend(run);
    }

    fn rest(&mut self, _events: Vec<Event>) {
        self.calls.push("rest".to_owned());
    }
}

/// A snapshot's journal as (sequence, bytes) pairs, to compare with what was written.
fn sequenced(updates: &[JournalUpdate]) -> Vec<(i64, Vec<u8>)> {
    updates
        .iter()
        .map(|update| (update.sequence, update.bytes.clone()))
        .collect()
}

/// A journal longer than any batch a store reads it in, with large updates among small binary
/// ones and sequences that carried no update, is recovered whole, in sequence order; so is a
/// short one, and so are a long and a short tail after a checkpoint.
pub async fn a_long_journal_with_large_updates_reads_back_whole_and_in_order(
    harness: &dyn Harness,
) {
    let docs = Docs::open(harness).await;
    let collaboration = docs.store.collaboration();
    let short = docs.create("acme/app", "Short", None).await;
    let mut written = Vec::new();
    for n in 0..40 {
        let committed = docs
            .append(&short, &format!("op-{n}"), &binary_update(n))
            .await;
        written.push((committed.sequence, binary_update(n)));
    }
    let snapshot = collaboration.recovery_snapshot(&short.id).await.unwrap();
    let read = sequenced(&snapshot.updates);
    assert!(
        read == written,
        "the short journal did not read back as written"
    );

    let channel = docs.create("acme/app", "Doc", None).await;
    let mut written = Vec::new();
    for n in 0..4_400_i64 {
        let update = match n {
            _ if n % 900 == 450 => None,
            _ if n % 1_500 == 3 => Some(vec![u8::try_from(n % 251).unwrap(); 40 * 1024 + 1]),
            _ => Some(binary_update(n)),
        };
        let commit = Commit {
            expected_revision: n,
            update: update.clone(),
            sidecar: update.is_none().then(|| sidecar(n)),
            ..Docs::commit(&channel, &format!("op-{n}"))
        };
        let committed = collaboration.commit(&docs.fence, &commit).await.unwrap();
        if let Some(bytes) = update {
            written.push((committed.sequence, bytes));
        }
    }
    let snapshot = collaboration.recovery_snapshot(&channel.id).await.unwrap();
    let read = sequenced(&snapshot.updates);
    assert_eq!(read.len(), written.len());
    assert!(read == written, "the journal did not read back as written");
    assert!(snapshot.updates.iter().all(|update| update.epoch == 1));
    let sequences: Vec<i64> = written.iter().map(|(sequence, _)| *sequence).collect();
    assert_eq!(snapshot.expected_update_sequences, sequences);
    let channel_sidecar = snapshot.sidecar.map(|sidecar| sidecar.json);
    assert_eq!(channel_sidecar, Some(sidecar(4_050).json));

    // Handed over as it is read: the head first, then runs in sequence order, then the rest.
    let mut recorder = Recorder::default();
    collaboration
        .read_for_recovery(&channel.id, &mut recorder)
        .await
        .unwrap();
    assert_eq!(recorder.calls.first().map(String::as_str), Some("head"));
    assert_eq!(recorder.calls.last().map(String::as_str), Some("rest"));
    assert!(
        recorder.calls[1..recorder.calls.len() - 1]
            .iter()
            .all(|call| call == "journal"),
        "{:?}",
        recorder.calls
    );
    assert!(
        sequenced(&recorder.journal) == written,
        "the runs did not hand the journal over as written"
    );

    // After a checkpoint, a tail longer than any batch, then a short one: each read whole, with
    // the checkpoint's contents and the channel's sidecar.
    for through in [100, 4_000] {
        let saved = checkpoint(1, through, through, &format!("through {through}"));
        collaboration
            .save_checkpoint(&docs.fence, &channel.id, &saved)
            .await
            .unwrap();
        let snapshot = collaboration.recovery_snapshot(&channel.id).await.unwrap();
        let stored = snapshot.checkpoint.expect("the checkpoint");
        assert_eq!(stored.through_sequence, through);
        assert_eq!(stored.canonical_text, saved.canonical_text);
        assert_eq!(stored.state, saved.state);
        assert_eq!(stored.source_hash, saved.source_hash);
        assert_eq!(
            stored.sidecar.map(|sidecar| sidecar.json),
            saved.sidecar.map(|sidecar| sidecar.json)
        );
        assert_eq!(
            snapshot.sidecar.map(|sidecar| sidecar.json),
            channel_sidecar
        );
        let tail: Vec<(i64, Vec<u8>)> = written
            .iter()
            .filter(|(sequence, _)| *sequence > through)
            .cloned()
            .collect();
        let read = sequenced(&snapshot.updates);
        assert!(
            read == tail,
            "the journal after the checkpoint through {through} did not read back as written"
        );
        let sequences: Vec<i64> = tail.iter().map(|(sequence, _)| *sequence).collect();
        assert_eq!(snapshot.expected_update_sequences, sequences);
    }
}

pub async fn an_epoch_replacement_installs_a_new_history_atomically(harness: &dyn Harness) {
    let docs = Docs::open(harness).await;
    let channel = docs.create("acme/app", "Doc", None).await;
    let collaboration = docs.store.collaboration();
    docs.append(&channel, "op-1", b"old-1").await;
    docs.append(&channel, "op-2", b"old-2").await;
    let stale = collaboration
        .replace_epoch(&docs.fence, &channel.id, 1, &checkpoint(2, 0, 0, "new"))
        .await
        .unwrap_err();
    assert_eq!(stale.kind(), ErrorKind::Conflict);
    let skipped = collaboration
        .replace_epoch(&docs.fence, &channel.id, 2, &checkpoint(3, 0, 0, "new"))
        .await
        .unwrap_err();
    assert_eq!(skipped.kind(), ErrorKind::Invalid);

    let replaced = collaboration
        .replace_epoch(&docs.fence, &channel.id, 2, &checkpoint(2, 0, 0, "new"))
        .await
        .unwrap();
    assert_eq!((replaced.revision, replaced.sequence), (3, 3));
    let after = docs.reload(&channel).await;
    assert_eq!((after.epoch, after.revision, after.sequence), (2, 3, 3));
    assert!(
        collaboration
            .updates_after(&channel.id, 0)
            .await
            .unwrap()
            .is_empty()
    );
    let next = docs.append(&channel, "op-4", b"new-1").await;
    assert_eq!(next.sequence, 4);
    let snapshot = collaboration.recovery_snapshot(&channel.id).await.unwrap();
    let cp = snapshot.checkpoint.unwrap();
    assert_eq!(
        (
            cp.epoch,
            cp.through_sequence,
            cp.revision,
            cp.canonical_text.as_str()
        ),
        (2, 3, 3, "new")
    );
    assert_eq!(
        snapshot
            .updates
            .iter()
            .map(|u| (u.sequence, u.epoch))
            .collect::<Vec<_>>(),
        [(4, 2)]
    );
    assert_eq!(snapshot.expected_update_sequences, [4]);
}

pub async fn only_archived_channels_without_children_are_deleted_and_leave_no_trace(
    harness: &dyn Harness,
) {
    let docs = Docs::open(harness).await;
    let collaboration = docs.store.collaboration();
    let parent = docs.create("acme/app", "Parent", None).await;
    let child = docs.create("acme/app", "Child", Some(&parent)).await;
    docs.append(&parent, "op-1", b"u").await;
    let rename = Commit {
        title: Some("Parent renamed".to_owned()),
        ..Docs::commit(&docs.reload(&parent).await, "op-2")
    };
    collaboration.commit(&docs.fence, &rename).await.unwrap();
    collaboration
        .save_checkpoint(&docs.fence, &parent.id, &checkpoint(1, 1, 1, "u"))
        .await
        .unwrap();
    let user = docs
        .store
        .users()
        .create_user(&NewUser {
            id: UserId("reader".to_owned()),
            name: UserName::new("reader").unwrap(),
            password_hash: "$argon2id$x".to_owned(),
            roles: Default::default(),
        })
        .await
        .unwrap();
    collaboration
        .set_navigation(&user.id, Some(&parent.id))
        .await
        .unwrap();
    let stranger = UserId("nobody".to_owned());
    let error = collaboration
        .set_navigation(&stranger, Some(&parent.id))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Invalid);
    assert_eq!(
        collaboration.navigation(&user.id).await.unwrap(),
        Some(parent.id.clone())
    );

    let active = collaboration
        .delete_archived(&docs.fence, &parent.id)
        .await
        .unwrap_err();
    assert_eq!(active.kind(), ErrorKind::Conflict);
    collaboration
        .archive(&docs.fence, &parent.id)
        .await
        .unwrap();
    let with_child = collaboration
        .delete_archived(&docs.fence, &parent.id)
        .await
        .unwrap_err();
    assert_eq!(with_child.kind(), ErrorKind::Conflict);
    assert!(collaboration.channel(&parent.id).await.unwrap().is_some());

    collaboration.archive(&docs.fence, &child.id).await.unwrap();
    collaboration
        .delete_archived(&docs.fence, &child.id)
        .await
        .unwrap();
    collaboration
        .delete_archived(&docs.fence, &parent.id)
        .await
        .unwrap();
    assert_eq!(collaboration.channel(&parent.id).await.unwrap(), None);
    assert_eq!(
        collaboration
            .recovery_snapshot(&parent.id)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Missing
    );
    assert!(
        collaboration
            .updates_after(&parent.id, 0)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        collaboration
            .events_after(&parent.id, 0)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(collaboration.navigation(&user.id).await.unwrap(), None);
    for former in ["parent", "parent-renamed"] {
        assert_eq!(
            collaboration
                .resolve_slug(&repo("acme/app"), &slug(former))
                .await
                .unwrap(),
            None
        );
    }
    let reused = docs.create("acme/app", "Parent", None).await;
    assert_eq!(
        reused.slug.as_str(),
        "parent",
        "a deleted channel's slug is free again"
    );
    let gone = Commit {
        update: Some(b"x".to_vec()),
        ..Docs::commit(&parent, "op-3")
    };
    assert_eq!(
        collaboration
            .commit(&docs.fence, &gone)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Missing
    );
}

pub async fn program_creation_is_idempotent_and_publishes_its_checkpoint(harness: &dyn Harness) {
    let docs = Docs::open(harness).await;
    let collaboration = docs.store.collaboration();
    let request = PublishedChannel {
        repository: repo("acme/app"),
        key: CreationKey::new("mcp-request-1").unwrap(),
        title: "From a program".to_owned(),
        parent: None,
        checkpoint: checkpoint(1, 0, 0, "first text"),
    };
    let created = collaboration
        .create_published(&docs.fence, &request)
        .await
        .unwrap();
    assert_eq!(
        created.id,
        ChannelId::for_creation_key(&request.repository, &request.key)
    );
    let again = collaboration
        .create_published(&docs.fence, &request)
        .await
        .unwrap();
    assert_eq!(again, created);
    let snapshot = collaboration.recovery_snapshot(&created.id).await.unwrap();
    let cp = snapshot.checkpoint.expect("published with its checkpoint");
    assert_eq!(
        (cp.revision, cp.through_sequence, cp.canonical_text.as_str()),
        (0, 0, "first text")
    );
    assert_eq!(snapshot.sidecar, Some(sidecar(0)));

    let bad = PublishedChannel {
        key: CreationKey::new("mcp-request-2").unwrap(),
        checkpoint: checkpoint(1, 3, 3, "x"),
        ..request.clone()
    };
    assert_eq!(
        collaboration
            .create_published(&docs.fence, &bad)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Invalid
    );

    collaboration
        .archive(&docs.fence, &created.id)
        .await
        .unwrap();
    collaboration
        .delete_archived(&docs.fence, &created.id)
        .await
        .unwrap();
    let fresh = collaboration
        .create_published(&docs.fence, &request)
        .await
        .unwrap();
    assert_eq!(
        fresh.id, created.id,
        "the same key makes the same ID again after deletion"
    );
    assert_eq!(fresh.archived_at, None);
}

pub async fn descriptions_publish_once_per_job_and_move_no_counter(harness: &dyn Harness) {
    let docs = Docs::open(harness).await;
    let collaboration = docs.store.collaboration();
    let channel = docs.create("acme/app", "Doc", None).await;
    docs.append(&channel, "op-1", b"u").await;
    let before = docs.reload(&channel).await;
    assert_eq!(before.description, None);
    let draft = |job: &str, text: &str| DescriptionDraft {
        text: text.to_owned(),
        source_plan_revision: 3,
        source_hash: "abc".to_owned(),
        generator_version: "document-summary@1".to_owned(),
        job_id: job.to_owned(),
    };
    assert!(
        collaboration
            .publish_description(&docs.fence, &channel.id, &draft("job-1", "First"))
            .await
            .unwrap()
    );
    assert!(
        !collaboration
            .publish_description(&docs.fence, &channel.id, &draft("job-1", "First"))
            .await
            .unwrap()
    );
    assert!(
        collaboration
            .publish_description(&docs.fence, &channel.id, &draft("job-2", "Second"))
            .await
            .unwrap()
    );
    let after = docs.reload(&channel).await;
    let description = after.description.clone().unwrap();
    assert_eq!(
        (
            description.text.as_str(),
            description.revision,
            description.job_id.as_str()
        ),
        ("Second", 2, "job-2")
    );
    assert_eq!(
        (
            after.revision,
            after.sequence,
            after.epoch,
            after.updated_at
        ),
        (
            before.revision,
            before.sequence,
            before.epoch,
            before.updated_at
        )
    );
}
