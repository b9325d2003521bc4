//! The startup sequence on SQLite and PostgreSQL databases seeded with every case it handles:
//! Planner owners with and without a hold a restart keeps, sessions it removes, a paired
//! machine's hold, children with and without a conversation to clear, a document that is not a
//! child, and an earlier release's deferred turns. The second run finds nothing to do. And search
//! texts an upgrade left behind their journal, indexed again from it.

use std::collections::BTreeSet;
use std::time::Duration;

use fermata_collab::startup::{self, ChildrenCleared, SearchTextsRefreshed};
use fermata_store::{
    Acquisition, ChannelId, Commit, CreationKey, DeferredTurn, DeferredTurnRetirement,
    DeferredTurnState, Fence, FencingToken, HeldSessions, HoldOwner, LeaseName, MachineId,
    NewCheckpoint, NewLinkHold, NewMachine, NewSession, NewUser, OperationId, PlannerStatus,
    PublishedChannel, Repository, SearchQuery, SearchTerms, SecretHash, SessionId, SessionSweep,
    SidecarState, Storage, StoreOptions, UserId, UserName,
};
use fermata_store_sql::testing::{
    ScratchDatabase, ScratchStorage, planner as seed, search as seed_search,
};
use fermata_store_testkit::contract::create_document;
use fermata_store_testkit::eventually;
use serde_json::{Value, json};

const LONG: Duration = Duration::from_secs(3600);
const SHORT: Duration = Duration::from_millis(300);

fn state_of(value: &Value) -> SidecarState {
    SidecarState {
        version: 2,
        json: value.to_string(),
        unanswered_decisions: 1,
    }
}

fn conversation(marker: &str, cites_chat: bool) -> Value {
    let mut decision = json!({ "id": "q1", "text": "Which?", "decision": true, "status": "open" });
    if cites_chat {
        decision["chatMessageId"] = json!("message-1");
    }
    json!({
        "version": 2, "documentSequence": 1, "planRevision": 1,
        "questions": [decision],
        "comments": [{ "id": "c1", "body": "kept" }],
        "transcript": [{ "id": "message-1", "text": marker }],
        "workflowRuns": [{ "id": "run-1" }],
        "conversation": { "version": 2 },
        "cardMirrors": {},
        "effectOutbox": []
    })
}

struct Seeded {
    store: ScratchStorage,
    fence: Fence,
    kept_session: SessionId,
    /// Planner documents: kept, expired, metadata-only, machine, plain.
    owned: Vec<ChannelId>,
    parent: ChannelId,
    child: ChannelId,
    citing: ChannelId,
    /// A child whose current sidecar does not parse.
    unreadable: ChannelId,
}

async fn session(store: &dyn Storage, id: &str, user: &UserId, secret: Option<u8>, ttl: Duration) {
    store
        .sessions()
        .create_session(&NewSession {
            id: SessionId(id.to_owned()),
            user: user.clone(),
            secret_hash: secret.map(|seed| SecretHash([seed; 32])),
            ttl,
            credentials: Some(b"sealed".to_vec()),
            verified_password_hash: None,
        })
        .await
        .unwrap();
}

async fn document(store: &dyn Storage, fence: &Fence, title: &str) -> ChannelId {
    create_document(store.collaboration(), fence, title)
        .await
        .id
}

/// A child with a snapshot and a state sidecar both holding `value`.
async fn child(
    store: &dyn Storage,
    fence: &Fence,
    parent: &ChannelId,
    key: &str,
    value: &Value,
) -> ChannelId {
    let collaboration = store.collaboration();
    let child = collaboration
        .create_published(
            fence,
            &PublishedChannel {
                repository: Repository::new("acme/app").unwrap(),
                key: CreationKey::new(key).unwrap(),
                title: format!("Child {key}"),
                parent: Some(parent.clone()),
                checkpoint: NewCheckpoint {
                    epoch: 1,
                    through_sequence: 0,
                    revision: 0,
                    canonical_text: "text".to_owned(),
                    source_hash: "hash".to_owned(),
                    state: b"state".to_vec(),
                    sidecar: Some(state_of(value)),
                },
            },
        )
        .await
        .unwrap();
    commit_sidecar(store, fence, &child.id, key, value).await;
    child.id
}

async fn commit_sidecar(
    store: &dyn Storage,
    fence: &Fence,
    id: &ChannelId,
    key: &str,
    value: &Value,
) {
    commit_state(store, fence, id, key, state_of(value)).await;
}

async fn commit_state(
    store: &dyn Storage,
    fence: &Fence,
    id: &ChannelId,
    key: &str,
    sidecar: SidecarState,
) {
    let collaboration = store.collaboration();
    let channel = collaboration.channel(id).await.unwrap().unwrap();
    collaboration
        .commit(
            fence,
            &Commit {
                channel: id.clone(),
                operation: OperationId::new(format!("{key}-sidecar")).unwrap(),
                expected_revision: channel.revision,
                update: None,
                sidecar: Some(sidecar),
                events: Vec::new(),
                title: None,
                text: None,
            },
        )
        .await
        .unwrap();
}

async fn seeded(scratch: ScratchDatabase) -> Seeded {
    let store = scratch.open(StoreOptions::default()).await;
    let Ok(Acquisition::Granted(lease)) = store
        .leases()
        .acquire(&LeaseName::WRITER, "test", LONG)
        .await
    else {
        panic!("the writer lease is free");
    };
    let fence = lease.fence();
    let ada = UserId("ada".to_owned());
    store
        .users()
        .create_user(&NewUser {
            id: ada.clone(),
            name: UserName::new("ada").unwrap(),
            password_hash: "$argon2id$x".to_owned(),
            roles: BTreeSet::new(),
        })
        .await
        .unwrap();
    session(&store, "kept", &ada, Some(1), LONG).await;
    session(&store, "expiring", &ada, Some(2), SHORT).await;
    session(&store, "metadata-only", &ada, None, LONG).await;
    session(&store, "delegated", &ada, None, LONG).await;
    session(&store, "plain", &ada, Some(3), LONG).await;
    let machine = store
        .machines()
        .pair_machine(&NewMachine {
            id: MachineId("machine".to_owned()),
            owner: ada.clone(),
            name: "laptop".to_owned(),
            secret_hash: SecretHash([9; 32]),
        })
        .await
        .unwrap()
        .id;

    let planner = store.planner();
    let mut owned = Vec::new();
    for (title, owner, hold) in [
        (
            "kept",
            "kept",
            Some(HoldOwner::Session(SessionId("kept".to_owned()))),
        ),
        (
            "expired",
            "expiring",
            Some(HoldOwner::Session(SessionId("expiring".to_owned()))),
        ),
        (
            "metadata",
            "metadata-only",
            Some(HoldOwner::Session(SessionId("metadata-only".to_owned()))),
        ),
        (
            "machine",
            "delegated",
            Some(HoldOwner::Machine(machine.clone())),
        ),
        ("plain", "plain", None),
    ] {
        let doc = document(&store, &fence, title).await;
        planner
            .claim_planner(&fence, &doc, &SessionId(owner.to_owned()))
            .await
            .unwrap();
        planner
            .set_planner_status(&fence, &doc, 1, PlannerStatus::Working)
            .await
            .unwrap();
        if let Some(owner) = hold {
            planner
                .write_link_hold(
                    &fence,
                    &NewLinkHold {
                        channel: doc.clone(),
                        owner,
                        user: ada.clone(),
                        generation: 1,
                        held_sessions: HeldSessions::new(r#"[{"id":"held"}]"#).unwrap(),
                        handover: Some(Duration::from_secs(30)),
                    },
                )
                .await
                .unwrap();
        }
        seed::seed_reserved_context(&store.storage, &doc, &format!("summary of {title}"), 5).await;
        owned.push(doc);
    }

    let parent = document(&store, &fence, "Parent").await;
    commit_sidecar(
        &store,
        &fence,
        &parent,
        "parent",
        &conversation("parent chat", false),
    )
    .await;
    seed::seed_reserved_context(&store.storage, &parent, "parent summary", 8).await;
    let child_id = child(
        &store,
        &fence,
        &parent,
        "child",
        &conversation("child chat", false),
    )
    .await;
    seed::seed_reserved_context(&store.storage, &child_id, "child summary", 3).await;
    let citing = child(
        &store,
        &fence,
        &parent,
        "citing",
        &conversation("cited", true),
    )
    .await;
    seed::seed_reserved_context(&store.storage, &citing, "citing summary", 4).await;
    let unreadable = child(
        &store,
        &fence,
        &parent,
        "unreadable",
        &conversation("lost", false),
    )
    .await;
    let broken = SidecarState {
        version: 2,
        json: "{\"transcript\": [".to_owned(),
        unanswered_decisions: 0,
    };
    commit_state(&store, &fence, &unreadable, "unreadable-broken", broken).await;

    let turn = |id: &str, state| DeferredTurn {
        id: id.to_owned(),
        channel: parent.clone(),
        kind: "invoke_planner".to_owned(),
        state,
        fencing_token: FencingToken(0),
        resolved_at: None,
    };
    seed::seed_deferred_turns(
        &store.storage,
        &[
            turn("t-waiting", DeferredTurnState::Waiting),
            turn("t-started", DeferredTurnState::Started),
            turn("t-ended", DeferredTurnState::Ended),
        ],
    )
    .await;

    eventually("the session to expire", || async {
        store
            .sessions()
            .session(&SessionId("expiring".to_owned()))
            .await
            .unwrap()
            .is_none()
    })
    .await;
    Seeded {
        store,
        fence,
        kept_session: SessionId("kept".to_owned()),
        owned,
        parent,
        child: child_id,
        citing,
        unreadable,
    }
}

async fn startup_runs_once_and_then_finds_nothing(scratch: ScratchDatabase) {
    let seeded = seeded(scratch).await;
    let store: &dyn Storage = &seeded.store;
    let planner = store.planner();
    let collaboration = store.collaboration();
    let parent_before = collaboration
        .recovery_snapshot(&seeded.parent)
        .await
        .unwrap();
    let child_before = collaboration
        .recovery_snapshot(&seeded.child)
        .await
        .unwrap();
    let citing_before = collaboration
        .recovery_snapshot(&seeded.citing)
        .await
        .unwrap();
    let unreadable_before = collaboration
        .recovery_snapshot(&seeded.unreadable)
        .await
        .unwrap();

    let first = startup::run(store, &seeded.fence).await.unwrap();
    let owners = first.owners;
    assert_eq!(
        owners.sessions,
        SessionSweep {
            expired: 1,
            metadata_only: 2
        }
    );
    assert_eq!((owners.owners_cleared, owners.owners_kept), (4, 1));
    assert_eq!(
        first.children,
        ChildrenCleared {
            cleared: 1,
            citing_chat: vec![seeded.citing.clone()],
            unreadable: vec![seeded.unreadable.clone()],
        }
    );
    assert_eq!(
        first.deferred_turns,
        DeferredTurnRetirement {
            cancelled: 1,
            interrupted: 1
        }
    );

    // Owners: only the kept hold's; statuses forced; generation, summary and cursor unchanged.
    for (index, doc) in seeded.owned.iter().enumerate() {
        let state = planner.agent_state(doc).await.unwrap().unwrap();
        let owner = (index == 0).then(|| seeded.kept_session.clone());
        assert_eq!(state.owner, owner, "document {index}");
        assert_eq!(state.status, PlannerStatus::Unavailable);
        assert_eq!((state.generation, state.transcript_cursor), (1, Some(5)));
        assert!(state.summary.is_some());
    }
    let holds = [
        planner.link_hold(&seeded.owned[0]).await.unwrap().is_some(),
        planner.link_hold(&seeded.owned[1]).await.unwrap().is_some(),
        planner.link_hold(&seeded.owned[2]).await.unwrap().is_some(),
        planner.link_hold(&seeded.owned[3]).await.unwrap().is_some(),
    ];
    assert_eq!(
        holds,
        [true, false, false, true],
        "holds of removed sessions go"
    );

    // The child: conversation gone from both sidecars, everything else and every counter kept.
    let child_after = collaboration
        .recovery_snapshot(&seeded.child)
        .await
        .unwrap();
    assert_eq!(child_after.channel, child_before.channel);
    let mut expected = conversation("child chat", false);
    let fields = expected.as_object_mut().unwrap();
    fields.insert("transcript".to_owned(), json!([]));
    for field in [
        "workflowRuns",
        "conversation",
        "cardMirrors",
        "effectOutbox",
    ] {
        fields.remove(field);
    }
    let state: Value = serde_json::from_str(&child_after.sidecar.clone().unwrap().json).unwrap();
    assert_eq!(state, expected);
    let checkpoint = child_after.checkpoint.clone().unwrap();
    let snapshot: Value = serde_json::from_str(&checkpoint.sidecar.unwrap().json).unwrap();
    assert_eq!(snapshot, expected);
    let old = child_before.checkpoint.unwrap();
    assert_eq!(
        (
            checkpoint.revision,
            checkpoint.generation,
            checkpoint.through_sequence
        ),
        (old.revision, old.generation, old.through_sequence)
    );
    let child_state = planner.agent_state(&seeded.child).await.unwrap().unwrap();
    assert_eq!(
        (child_state.summary, child_state.transcript_cursor),
        (None, None)
    );

    // The citing child, the unreadable one and the parent are untouched.
    assert_eq!(
        collaboration
            .recovery_snapshot(&seeded.citing)
            .await
            .unwrap(),
        citing_before
    );
    assert_eq!(
        collaboration
            .recovery_snapshot(&seeded.unreadable)
            .await
            .unwrap(),
        unreadable_before
    );
    let citing_state = planner.agent_state(&seeded.citing).await.unwrap().unwrap();
    assert_eq!(citing_state.transcript_cursor, Some(4));
    assert_eq!(
        collaboration
            .recovery_snapshot(&seeded.parent)
            .await
            .unwrap(),
        parent_before
    );
    let parent_state = planner.agent_state(&seeded.parent).await.unwrap().unwrap();
    assert_eq!(parent_state.transcript_cursor, Some(8));

    let turns = seed::deferred_turns(&seeded.store.storage).await;
    let states: Vec<_> = turns
        .iter()
        .map(|turn| (turn.id.as_str(), turn.state))
        .collect();
    assert_eq!(
        states,
        [
            ("t-ended", DeferredTurnState::Ended),
            ("t-started", DeferredTurnState::Interrupted),
            ("t-waiting", DeferredTurnState::Cancelled),
        ]
    );

    // A second run finds nothing to do.
    let second = startup::run(store, &seeded.fence).await.unwrap();
    let owners = second.owners;
    assert_eq!(owners.sessions, SessionSweep::default());
    assert_eq!((owners.owners_cleared, owners.owners_kept), (0, 1));
    assert_eq!(
        second.children,
        ChildrenCleared {
            cleared: 0,
            citing_chat: vec![seeded.citing.clone()],
            unreadable: vec![seeded.unreadable.clone()],
        }
    );
    assert_eq!(second.deferred_turns, DeferredTurnRetirement::default());
    assert_eq!(seed::deferred_turns(&seeded.store.storage).await, turns);
    assert_eq!(
        collaboration
            .recovery_snapshot(&seeded.child)
            .await
            .unwrap(),
        child_after
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_startup_runs_once_and_then_finds_nothing() {
    startup_runs_once_and_then_finds_nothing(ScratchDatabase::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_startup_runs_once_and_then_finds_nothing() {
    startup_runs_once_and_then_finds_nothing(ScratchDatabase::postgres().await).await;
}

/// A document an upgrade indexed from its last checkpoint while its journal went on is indexed
/// again from its whole journal; one that does not recover is left as it was, logged, and tried
/// again at the next start.
async fn startup_indexes_again_the_texts_an_upgrade_left_behind(scratch: ScratchDatabase) {
    let store = scratch.open(StoreOptions::default()).await;
    let Ok(Acquisition::Granted(lease)) = store
        .leases()
        .acquire(&LeaseName::WRITER, "test", LONG)
        .await
    else {
        panic!("the writer lease is free");
    };
    let fence = lease.fence();
    let ada = UserId("ada".to_owned());
    store
        .users()
        .create_user(&NewUser {
            id: ada.clone(),
            name: UserName::new("ada").unwrap(),
            password_hash: "$argon2id$x".to_owned(),
            roles: BTreeSet::new(),
        })
        .await
        .unwrap();
    let repository = Repository::new("acme/app").unwrap();
    store
        .repositories()
        .create_repository(&fence, &repository, &ada)
        .await
        .unwrap();
    let collaboration = store.collaboration();
    let publish = |key: &str, checkpoint: NewCheckpoint| PublishedChannel {
        repository: repository.clone(),
        key: CreationKey::new(key).unwrap(),
        title: format!("Document {key}"),
        parent: None,
        checkpoint,
    };
    // A document checkpointed at its first text, then edited by a commit.
    let mut doc = fermata_docs::SourceDoc::new();
    doc.replace_all("The lighthouse draft.");
    let first = NewCheckpoint {
        epoch: 1,
        through_sequence: 0,
        revision: 0,
        canonical_text: doc.text(),
        source_hash: doc.source_hash(),
        state: doc.encode_state(),
        sidecar: None,
    };
    let edited = collaboration
        .create_published(&fence, &publish("edited", first))
        .await
        .unwrap();
    let update = doc.replace_text("The lighthouse keeper's log.").unwrap();
    collaboration
        .commit(
            &fence,
            &Commit {
                channel: edited.id.clone(),
                operation: OperationId::new("edit").unwrap(),
                expected_revision: edited.revision,
                update: Some(update),
                sidecar: None,
                events: Vec::new(),
                title: None,
                text: Some(doc.text()),
            },
        )
        .await
        .unwrap();
    // A document whose stored state does not decode.
    let broken = collaboration
        .create_published(
            &fence,
            &publish(
                "broken",
                NewCheckpoint {
                    epoch: 1,
                    through_sequence: 0,
                    revision: 0,
                    canonical_text: "unreadable".to_owned(),
                    source_hash: "hash".to_owned(),
                    state: b"not a Yjs update".to_vec(),
                    sidecar: None,
                },
            ),
        )
        .await
        .unwrap();
    seed_search::seed_stale_search_text(&store.storage, &edited.id, "The lighthouse draft.").await;
    seed_search::seed_stale_search_text(&store.storage, &broken.id, "unreadable").await;
    let search = |text: &str| {
        let query = SearchQuery {
            reader: ada.clone(),
            terms: SearchTerms::parse(text).unwrap(),
            repository: None,
            include_archived: false,
            after: None,
            limit: 10,
        };
        let store = store.clone();
        async move {
            let hits = store.search().search(&query).await.unwrap();
            hits.into_iter().map(|hit| hit.id).collect::<Vec<_>>()
        }
    };
    assert_eq!(search("draft").await, std::slice::from_ref(&edited.id));

    let first = startup::run(&store, &fence).await.unwrap();
    assert_eq!(
        first.search_texts,
        SearchTextsRefreshed {
            refreshed: 1,
            unreadable: vec![broken.id.clone()],
        }
    );
    assert!(search("draft").await.is_empty());
    assert_eq!(search("keeper").await, std::slice::from_ref(&edited.id));
    assert_eq!(
        store.search().stale_texts(None, 10).await.unwrap(),
        std::slice::from_ref(&broken.id)
    );
    let second = startup::run(&store, &fence).await.unwrap();
    assert_eq!(
        second.search_texts,
        SearchTextsRefreshed {
            refreshed: 0,
            unreadable: vec![broken.id],
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_startup_indexes_again_the_texts_an_upgrade_left_behind() {
    startup_indexes_again_the_texts_an_upgrade_left_behind(ScratchDatabase::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_startup_indexes_again_the_texts_an_upgrade_left_behind() {
    startup_indexes_again_the_texts_an_upgrade_left_behind(ScratchDatabase::postgres().await).await;
}
