//! Recovery against a plain yrs document: random concurrent editing histories from several
//! clients, stored as a checkpoint plus journal chunks at random points, must recover to exactly
//! the text a plain yrs document fed the same updates shows.

use fermata_docs::{SourceDoc, recover, source_hash};
use fermata_store::{Channel, Checkpoint, JournalUpdate, RecoverySnapshot, UnixMillis};
use fermata_store_testkit::fixtures;
use proptest::prelude::*;
use proptest::sample::Index;
use yrs::updates::decoder::Decode;
use yrs::{ClientID, Doc, GetString, OffsetKind, Options, Text, Transact, Update};

/// One step of the simulated editing.
#[derive(Debug, Clone)]
enum Step {
    /// A client types `text` at a position given as a fraction of its text's length.
    Insert {
        client: usize,
        at: Index,
        text: String,
    },
    /// A client deletes up to `len` code units from a position.
    Delete { client: usize, at: Index, len: u32 },
    /// One client receives everything another has, so later edits build on both histories.
    Sync { from: usize, to: usize },
}

fn step() -> impl Strategy<Value = Step> {
    let client = 0usize..3;
    prop_oneof![
        4 => (client.clone(), any::<Index>(), "[a-c é\n中😀]{1,4}")
            .prop_map(|(client, at, text)| Step::Insert { client, at, text }),
        2 => (client.clone(), any::<Index>(), 1u32..6)
            .prop_map(|(client, at, len)| Step::Delete { client, at, len }),
        1 => (client.clone(), client).prop_map(|(from, to)| Step::Sync { from, to }),
    ]
}

/// Runs the steps; returns every update the clients produced, in the order they made them.
fn edit(clients: usize, steps: &[Step]) -> Vec<Vec<u8>> {
    let docs: Vec<Doc> = (0..clients)
        .map(|n| {
            Doc::with_options(Options {
                offset_kind: OffsetKind::Utf16,
                ..Options::with_client_id(ClientID::new(n as u64 + 1))
            })
        })
        .collect();
    let texts: Vec<_> = docs
        .iter()
        .map(|doc| doc.get_or_insert_text("source"))
        .collect();
    let mut updates = Vec::new();
    for step in steps {
        match step {
            Step::Insert { client, at, text } => {
                let client = client % clients;
                let mut txn = docs[client].transact_mut();
                let len = texts[client].len(&txn);
                texts[client].insert(&mut txn, at.index(len as usize + 1) as u32, text);
                txn.commit();
                updates.push(txn.encode_update_v1());
            }
            Step::Delete { client, at, len } => {
                let client = client % clients;
                let mut txn = docs[client].transact_mut();
                let text_len = texts[client].len(&txn);
                if text_len == 0 {
                    continue;
                }
                let index = at.index(text_len as usize) as u32;
                texts[client].remove_range(&mut txn, index, (*len).min(text_len - index));
                txn.commit();
                updates.push(txn.encode_update_v1());
            }
            Step::Sync { from, to } => {
                let (from, to) = (from % clients, to % clients);
                if from == to {
                    continue;
                }
                let have = yrs::ReadTxn::state_vector(&docs[to].transact());
                let missing = yrs::ReadTxn::encode_diff_v1(&docs[from].transact(), &have);
                let update = Update::decode_v1(&missing).unwrap();
                docs[to].transact_mut().apply_update(update).unwrap();
            }
        }
    }
    updates
}

/// The text a plain yrs document shows after `updates`, applied one by one.
///
/// It counts in UTF-16 like the clients: with yrs's default byte offsets, an update that splits
/// a surrogate pair makes yrs 0.28 miscount the text's length and overflow on a later delete.
fn plain_text(updates: &[Vec<u8>]) -> String {
    let doc = Doc::with_options(Options {
        offset_kind: OffsetKind::Utf16,
        ..Options::default()
    });
    let text = doc.get_or_insert_text("source");
    for update in updates {
        let mut txn = doc.transact_mut();
        txn.apply_update(Update::decode_v1(update).unwrap())
            .unwrap();
        assert!(yrs::ReadTxn::store(&txn).pending_update().is_none());
    }
    text.get_string(&doc.transact())
}

fn channel(sequence: i64) -> Channel {
    Channel {
        revision: sequence,
        sequence,
        ..fixtures::channel("5f0e2d8c-3b7a-4e19-8c6d-2a4b6c8e0f12", "acme/plans")
    }
}

/// Stores `updates` as journal rows of `chunk_sizes` updates each (merged, as a batching server
/// would), with sidecar-only commits between some of them, and a checkpoint after `cut` rows.
fn snapshot(
    updates: &[Vec<u8>],
    chunk_sizes: &[usize],
    gaps: &[bool],
    cut: Index,
) -> RecoverySnapshot {
    let mut rows = Vec::new();
    let mut rest = updates;
    let mut sequence = 0;
    for (n, size) in chunk_sizes.iter().cycle().enumerate() {
        if rest.is_empty() {
            break;
        }
        let (chunk, tail) = rest.split_at((*size).min(rest.len()));
        rest = tail;
        sequence += if gaps[n % gaps.len()] { 2 } else { 1 };
        rows.push(JournalUpdate {
            sequence,
            epoch: 1,
            bytes: yrs::merge_updates_v1(chunk).unwrap(),
        });
    }
    let cut = cut.index(rows.len() + 1);
    let checkpoint = (cut > 0).then(|| {
        let mut doc = SourceDoc::new();
        for row in &rows[..cut] {
            doc.apply_update(&row.bytes).unwrap();
        }
        let text = doc.text();
        let through = rows[cut - 1].sequence;
        Checkpoint {
            epoch: 1,
            generation: 1,
            through_sequence: through,
            revision: through,
            source_hash: source_hash(&text),
            canonical_text: text,
            state: doc.encode_state(),
            sidecar: None,
            created_at: UnixMillis(0),
        }
    });
    let journal = rows.split_off(cut);
    RecoverySnapshot {
        channel: channel(sequence + 1),
        sidecar: None,
        checkpoint,
        expected_update_sequences: journal.iter().map(|row| row.sequence).collect(),
        updates: journal,
        events: Vec::new(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn recovery_matches_a_plain_document(
        clients in 2usize..=3,
        steps in prop::collection::vec(step(), 1..60),
        chunk_sizes in prop::collection::vec(1usize..=4, 1..8),
        gaps in prop::collection::vec(any::<bool>(), 1..8),
        cut in any::<Index>(),
    ) {
        let updates = edit(clients, &steps);
        prop_assume!(!updates.is_empty());
        let snapshot = snapshot(&updates, &chunk_sizes, &gaps, cut);
        let open = recover(&snapshot).map_err(|error| TestCaseError::fail(error.to_string()))?;
        let expected = plain_text(&updates);
        prop_assert_eq!(&open.doc.text(), &expected);

        // The checkpoint the open document makes recovers to the same text on its own.
        let made = open.checkpoint();
        let again = RecoverySnapshot {
            checkpoint: Some(Checkpoint {
                epoch: made.epoch,
                generation: 2,
                through_sequence: made.through_sequence,
                revision: made.revision,
                canonical_text: made.canonical_text,
                source_hash: made.source_hash,
                state: made.state,
                sidecar: made.sidecar.clone(),
                created_at: UnixMillis(0),
            }),
            sidecar: made.sidecar,
            updates: Vec::new(),
            expected_update_sequences: Vec::new(),
            ..snapshot
        };
        let reopened = recover(&again).map_err(|error| TestCaseError::fail(error.to_string()))?;
        prop_assert_eq!(reopened.doc.text(), expected);
    }
}
