//! Random histories through the real collaboration store, then recovery, on memory, SQLite and
//! PostgreSQL: commits of updates from several clients, sidecar-only commits, events, checkpoints
//! made from the recovered document, and epoch replacements. Recovery must equal a plain yrs
//! document fed the same updates; sequences strictly increase; the journal never keeps a row at or
//! below the checkpoint.

use std::sync::Arc;
use std::time::Duration;

use fermata_docs::{SourceDoc, recover};
use fermata_store::{
    Acquisition, Channel, ChannelId, Commit, EventDraft, Fence, LeaseName, NewChannel, OperationId,
    Repository, SidecarState, Storage, StoreOptions,
};
use fermata_store_sql::testing::ScratchDatabase;
use fermata_store_testkit::memory::MemoryStorage;
use proptest::prelude::*;
use proptest::sample::Index;

#[derive(Debug, Clone)]
enum Op {
    Insert {
        client: usize,
        at: Index,
        text: String,
    },
    Delete {
        client: usize,
        at: Index,
        len: u32,
    },
    SidecarOnly,
    Events(u8),
    Checkpoint,
    ReplaceEpoch,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0usize..3, any::<Index>(), "[a-z é\n😀]{1,5}").prop_map(|(client, at, text)| Op::Insert { client, at, text }),
        2 => (0usize..3, any::<Index>(), 1u32..5).prop_map(|(client, at, len)| Op::Delete { client, at, len }),
        1 => Just(Op::SidecarOnly),
        1 => (1u8..3).prop_map(Op::Events),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::ReplaceEpoch),
    ]
}

fn sidecar(n: u64) -> SidecarState {
    fermata_docs::Sidecar {
        document_sequence: n,
        ..fermata_docs::Sidecar::default()
    }
    .to_state()
}

/// A store, a fence under the writer lease, and a runtime to drive them from proptest.
struct Rig {
    runtime: tokio::runtime::Runtime,
    store: Arc<dyn Storage>,
    fence: Fence,
    cases: std::cell::Cell<u32>,
}

impl Rig {
    fn new(
        open: impl FnOnce() -> std::pin::Pin<Box<dyn std::future::Future<Output = Arc<dyn Storage>>>>,
    ) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let store = runtime.block_on(open());
        let fence = runtime.block_on(async {
            match store
                .leases()
                .acquire(&LeaseName::WRITER, "history", Duration::from_secs(3600))
                .await
                .unwrap()
            {
                Acquisition::Granted(lease) => lease.fence(),
                Acquisition::Held(record) => panic!("held by {record:?}"),
            }
        });
        Rig {
            runtime,
            store,
            fence,
            cases: std::cell::Cell::new(0),
        }
    }

    /// Runs one random history and checks recovery against the plain model.
    fn check(&self, ops: &[Op]) -> Result<(), TestCaseError> {
        self.cases.set(self.cases.get() + 1);
        self.runtime.block_on(async {
            let collaboration = self.store.collaboration();
            let channel = collaboration
                .create_channel(
                    &self.fence,
                    &NewChannel {
                        id: ChannelId::random(),
                        repository: Repository::new("acme/history").unwrap(),
                        title: "History".to_owned(),
                        parent: None,
                    },
                )
                .await
                .unwrap();
            let mut model = SourceDoc::new();
            let mut clients: Vec<SourceDoc> = (0..3).map(|_| SourceDoc::new()).collect();
            let mut revision = 0;
            let mut last_sequence = 0;
            let mut operations = 0;
            for op in ops {
                operations += 1;
                let operation = OperationId::new(format!("op-{operations}")).unwrap();
                let mut commit = Commit {
                    channel: channel.id.clone(),
                    operation,
                    expected_revision: revision,
                    update: None,
                    sidecar: None,
                    events: Vec::new(),
                    title: None,
                    text: None,
                };
                match op {
                    Op::Insert { client, at, text } => {
                        let doc = &mut clients[*client];
                        let index = at.index(doc.len() as usize + 1) as u32;
                        let update = doc.insert(index, text).unwrap();
                        model.apply_update(&update).unwrap();
                        commit.update = Some(update);
                    }
                    Op::Delete { client, at, len } => {
                        let doc = &mut clients[*client];
                        if doc.is_empty() {
                            continue;
                        }
                        let index = at.index(doc.len() as usize) as u32;
                        let update = doc.delete(index, (*len).min(doc.len() - index)).unwrap();
                        model.apply_update(&update).unwrap();
                        commit.update = Some(update);
                    }
                    Op::SidecarOnly => commit.sidecar = Some(sidecar(operations)),
                    Op::Events(count) => {
                        commit.events = (0..*count)
                            .map(|n| EventDraft {
                                kind: "test.event".to_owned(),
                                payload: format!("{{\"n\":{n}}}"),
                            })
                            .collect();
                    }
                    Op::Checkpoint => {
                        let snapshot = collaboration.recovery_snapshot(&channel.id).await.unwrap();
                        let open =
                            recover(&snapshot).map_err(|e| TestCaseError::fail(e.to_string()))?;
                        let saved = collaboration
                            .save_checkpoint(&self.fence, &channel.id, &open.checkpoint())
                            .await
                            .unwrap();
                        let journal = collaboration.updates_after(&channel.id, 0).await.unwrap();
                        prop_assert!(journal.iter().all(|u| u.sequence > saved.through_sequence));
                        continue;
                    }
                    Op::ReplaceEpoch => {
                        // A new history with the same text: incompatible with the old one.
                        let mut fresh = SourceDoc::new();
                        fresh.replace_all(&model.text());
                        let current: Channel =
                            collaboration.channel(&channel.id).await.unwrap().unwrap();
                        let checkpoint = fermata_store::NewCheckpoint {
                            epoch: current.epoch + 1,
                            through_sequence: 0,
                            revision: 0,
                            canonical_text: fresh.text(),
                            source_hash: fresh.source_hash(),
                            state: fresh.encode_state(),
                            sidecar: Some(sidecar(operations)),
                        };
                        let replaced = collaboration
                            .replace_epoch(&self.fence, &channel.id, revision, &checkpoint)
                            .await
                            .unwrap();
                        prop_assert!(replaced.sequence > last_sequence);
                        last_sequence = replaced.sequence;
                        revision = replaced.revision;
                        let state = fresh.encode_state();
                        model = SourceDoc::from_state(&state).unwrap();
                        clients = (0..3)
                            .map(|_| SourceDoc::from_state(&state).unwrap())
                            .collect();
                        continue;
                    }
                }
                let committed = collaboration.commit(&self.fence, &commit).await.unwrap();
                prop_assert!(
                    committed.sequence > last_sequence,
                    "sequences must strictly increase"
                );
                prop_assert_eq!(committed.revision, revision + 1);
                last_sequence = committed.sequence;
                revision = committed.revision;
            }
            let snapshot = collaboration.recovery_snapshot(&channel.id).await.unwrap();
            let open = recover(&snapshot).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(open.doc.text(), model.text());
            prop_assert_eq!(open.revision, revision);
            prop_assert_eq!(open.sequence, last_sequence);
            if let Some(checkpoint) = &snapshot.checkpoint {
                prop_assert!(
                    snapshot
                        .updates
                        .iter()
                        .all(|u| u.sequence > checkpoint.through_sequence)
                );
            }
            Ok(())
        })
    }
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 40,
        ..ProptestConfig::default()
    }
}

#[test]
fn memory_histories_recover_exactly() {
    let rig = Rig::new(|| {
        Box::pin(async {
            Arc::new(MemoryStorage::new(StoreOptions::default())) as Arc<dyn Storage>
        })
    });
    proptest!(config(), |(ops in prop::collection::vec(op(), 1..40))| { rig.check(&ops)?; });
    assert!(rig.cases.get() >= 40);
}

#[test]
fn sqlite_histories_recover_exactly() {
    let rig = Rig::new(|| {
        Box::pin(async {
            Arc::new(
                ScratchDatabase::sqlite()
                    .open(StoreOptions::default())
                    .await,
            ) as Arc<dyn Storage>
        })
    });
    proptest!(config(), |(ops in prop::collection::vec(op(), 1..40))| { rig.check(&ops)?; });
    assert!(rig.cases.get() >= 40);
}

#[test]
fn postgres_histories_recover_exactly() {
    let rig = Rig::new(|| {
        Box::pin(async {
            Arc::new(
                ScratchDatabase::postgres()
                    .await
                    .open(StoreOptions::default())
                    .await,
            ) as Arc<dyn Storage>
        })
    });
    proptest!(config(), |(ops in prop::collection::vec(op(), 1..40))| { rig.check(&ops)?; });
    assert!(rig.cases.get() >= 40);
}
