//! Recovery: turning the consistent snapshot the store reads into an open document, or into a
//! `Corrupt` failure that says which document and what was wrong.
//!
//! The steps follow the storage design:
//!
//! 1. validate the sidecar (version and shapes) and the checkpoint's metadata against the
//!    channel's counters;
//! 2. load the checkpoint's complete Yjs state and verify that it projects to the stored
//!    canonical text and that the text has the stored source hash;
//! 3. replay the journal: every update of the channel's epoch, after the checkpoint, in strictly
//!    increasing sequence, exactly the sequences the operation records say carried an update, each
//!    decoding and applying with nothing left waiting for a missing predecessor;
//! 4. project the resulting text;
//! 5. recover broken comment anchors conservatively: a comment whose passage is gone is marked
//!    detached and reported, never dropped.
//!
//! Stored data that exists is never answered with an empty or partial document: every check that
//! fails is an error. A channel that was created but never opened has none, and opens empty.

use std::error::Error as StdError;
use std::fmt;

use fermata_store::{
    Channel, ChannelId, Checkpoint, JournalUpdate, NewCheckpoint, RecoverySnapshot, SidecarState,
    StoreError,
};

use crate::sidecar::{self, Sidecar, SidecarError};
use crate::source::{DocError, SourceDoc, source_hash};

/// A recovered document, ready to serve.
#[derive(Debug)]
pub struct OpenDocument {
    pub channel_id: ChannelId,
    pub doc: SourceDoc,
    pub sidecar: Sidecar,
    /// The storage revision the document was recovered at: the next commit's expected revision.
    pub revision: i64,
    /// The last storage sequence the recovered state covers.
    pub sequence: i64,
    /// The Yjs epoch; updates of any other epoch never join this history.
    pub epoch: i64,
    /// IDs of the comments this recovery detached because their passage is gone, for the room
    /// to tell their authors; the comments themselves stay in the sidecar.
    pub detached: Vec<String>,
    /// What the document was recovered from: the checkpoint and the journal after it.
    pub stored: Stored,
}

/// The stored data a document was recovered from, for the room's estimates and checkpoints.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stored {
    /// The bytes of the checkpoint's Yjs state.
    pub checkpoint_bytes: usize,
    /// The journal updates replayed after the checkpoint, and their bytes.
    pub tail_updates: usize,
    pub tail_bytes: usize,
    /// The checkpoint's source hash when no journal followed it: the hash of the recovered text,
    /// already checked, so nobody needs to compute it again.
    pub text_hash: Option<String>,
}

impl Stored {
    /// The encoded size of the document, estimated from above without encoding it: the
    /// checkpoint and the updates after it, as stored.
    pub fn size_estimate(&self) -> usize {
        self.checkpoint_bytes + self.tail_bytes
    }
}

impl OpenDocument {
    /// A checkpoint of the document as it is now, covering everything through `sequence`.
    pub fn checkpoint(&self) -> NewCheckpoint {
        let canonical_text = self.doc.text();
        NewCheckpoint {
            epoch: self.epoch,
            through_sequence: self.sequence,
            revision: self.revision,
            source_hash: source_hash(&canonical_text),
            canonical_text,
            state: self.doc.encode_state(),
            sidecar: Some(self.sidecar.to_state()),
        }
    }
}

/// A document that could not be recovered: which one, and what was wrong with its stored data.
#[derive(Debug)]
pub struct RecoveryError {
    channel: ChannelId,
    problem: RecoveryProblem,
}

impl RecoveryError {
    pub(crate) fn new(channel: ChannelId, problem: RecoveryProblem) -> Self {
        RecoveryError { channel, problem }
    }

    pub fn channel(&self) -> &ChannelId {
        &self.channel
    }

    pub fn problem(&self) -> &RecoveryProblem {
        &self.problem
    }
}

impl fmt::Display for RecoveryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "document {}: {}", self.channel, self.problem)
    }
}

impl StdError for RecoveryError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        // The problem is already in the message; only a cause it does not spell out (the JSON
        // parser's) is worth chaining.
        match &self.problem {
            RecoveryProblem::Sidecar(error) => error.source(),
            _ => None,
        }
    }
}

impl From<RecoveryError> for StoreError {
    fn from(error: RecoveryError) -> Self {
        StoreError::corrupt(error.to_string()).with_source(error)
    }
}

/// What was wrong with a document's stored data. Every message names only counters, sequences
/// and fixed words, never document content.
#[derive(Debug, thiserror::Error)]
pub enum RecoveryProblem {
    #[error("channel counters are negative (revision {revision}, sequence {sequence})")]
    NegativeCounters { revision: i64, sequence: i64 },
    #[error("sidecar {0}")]
    Sidecar(SidecarError),
    #[error("checkpoint is of epoch {checkpoint} but the channel is at epoch {channel}")]
    CheckpointEpoch { checkpoint: i64, channel: i64 },
    #[error("checkpoint covers sequence {checkpoint} but the channel is at sequence {channel}")]
    CheckpointSequence { checkpoint: i64, channel: i64 },
    #[error("checkpoint is at revision {checkpoint} but the channel is at revision {channel}")]
    CheckpointRevision { checkpoint: i64, channel: i64 },
    #[error("checkpoint covers a negative sequence ({0})")]
    CheckpointNegative(i64),
    #[error("checkpoint hash does not match its text")]
    CheckpointHash,
    #[error("checkpoint state does not load: {0}")]
    CheckpointState(DocError),
    #[error("checkpoint text does not match its state")]
    CheckpointText,
    #[error("update {sequence} is of epoch {update} but the channel is at epoch {channel}")]
    UpdateEpoch {
        sequence: i64,
        update: i64,
        channel: i64,
    },
    #[error("update {sequence} is already covered by the checkpoint through {through}")]
    UpdateCovered { sequence: i64, through: i64 },
    #[error("update {sequence} is out of order after update {previous}")]
    UpdateOrder { sequence: i64, previous: i64 },
    #[error("update {sequence} is past the channel's last sequence {channel}")]
    UpdatePastSequence { sequence: i64, channel: i64 },
    #[error("update {0} is missing from the journal")]
    MissingUpdate(i64),
    #[error("update {0} is in the journal but no commit carried it")]
    UnexpectedUpdate(i64),
    #[error("update {sequence} is refused: {error}")]
    Update { sequence: i64, error: DocError },
    #[error("the store stopped before the whole snapshot was read")]
    Unfinished,
}

/// Recovers a document from its snapshot.
pub fn recover(snapshot: &RecoverySnapshot) -> Result<OpenDocument, RecoveryError> {
    let head = Head {
        channel: &snapshot.channel,
        sidecar: snapshot.sidecar.as_ref(),
        checkpoint: snapshot.checkpoint.as_ref(),
        expected: &snapshot.expected_update_sequences,
    };
    let mut recovery = Recovery::begin(head, None)?;
    recovery.replay(&snapshot.updates)?;
    recovery.finish()
}

/// What a recovery begins from: the store's [`fermata_store::RecoveryHead`], borrowed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Head<'a> {
    pub channel: &'a Channel,
    pub sidecar: Option<&'a SidecarState>,
    pub checkpoint: Option<&'a Checkpoint>,
    pub expected: &'a [i64],
}

/// A recovery under way, in the storage design's steps: [`Self::begin`] checks the sidecar and
/// the checkpoint and loads it, [`Self::replay`] checks and applies each run of the journal in
/// turn, and [`Self::finish`] checks that the journal held exactly the updates the operation
/// records name, then places the sidecar on the text. A recovery that fails at any step is
/// over: its document is discarded.
#[derive(Debug)]
pub(crate) struct Recovery {
    channel: Channel,
    sidecar: Option<sidecar::Checked>,
    doc: SourceDoc,
    stored: Stored,
    /// The sequence the checkpoint covers, and the last sequence replayed after it.
    through: i64,
    previous: i64,
    /// The sequences after the checkpoint whose commits carried an update, sorted, and how many
    /// of them the journal has held so far.
    expected: Vec<i64>,
    found: usize,
    /// The checkpoint's source hash, the recovered text's while nothing follows it.
    checkpoint_hash: Option<String>,
}

impl Recovery {
    /// Steps 1 and 2: the sidecar and the checkpoint's metadata, then the checkpoint's complete
    /// state, checked against its canonical text and hash. The state is `moved_state` when it
    /// was moved out of the checkpoint; the document then keeps those bytes until its first
    /// change ([`SourceDoc::from_owned_state`]).
    pub(crate) fn begin(
        head: Head<'_>,
        moved_state: Option<Vec<u8>>,
    ) -> Result<Self, RecoveryError> {
        let channel = head.channel;
        let fail = |problem| RecoveryError {
            channel: channel.id.clone(),
            problem,
        };
        if channel.revision < 0 || channel.sequence < 0 {
            return Err(fail(RecoveryProblem::NegativeCounters {
                revision: channel.revision,
                sequence: channel.sequence,
            }));
        }
        // The channel's own sidecar is the newest; the checkpoint's copy stands in only when
        // the channel has none.
        let stored_sidecar = head.sidecar.or_else(|| {
            head.checkpoint
                .and_then(|checkpoint| checkpoint.sidecar.as_ref())
        });
        let sidecar = stored_sidecar
            .map(|stored| sidecar::check(stored.version, &stored.json))
            .transpose()
            .map_err(|error| fail(RecoveryProblem::Sidecar(error)))?;
        let (doc, through, stored, checkpoint_hash) = match head.checkpoint {
            Some(checkpoint) => {
                let through = check_checkpoint_metadata(checkpoint, channel).map_err(fail)?;
                let stored = Stored {
                    checkpoint_bytes: moved_state.as_ref().unwrap_or(&checkpoint.state).len(),
                    ..Stored::default()
                };
                let doc = load_checkpoint(checkpoint, moved_state).map_err(fail)?;
                (doc, through, stored, Some(checkpoint.source_hash.clone()))
            }
            None => (SourceDoc::new(), 0, Stored::default(), None),
        };
        Ok(Recovery {
            channel: channel.clone(),
            sidecar,
            doc,
            stored,
            through,
            previous: through,
            expected: expected_after(head.expected, through),
            found: 0,
            checkpoint_hash,
        })
    }

    /// Step 3, for one run of the journal: every update of the channel's epoch, after the
    /// checkpoint and after the runs before, in strictly increasing sequence, exactly the
    /// sequences the operation records say carried an update, checked before any of the run is
    /// decoded; then each applied with nothing left waiting for a missing predecessor.
    pub(crate) fn replay(&mut self, run: &[JournalUpdate]) -> Result<(), RecoveryError> {
        let fail = |problem| RecoveryError {
            channel: self.channel.id.clone(),
            problem,
        };
        let mut previous = self.previous;
        for update in run {
            check_update(update, &self.channel, self.through, previous).map_err(fail)?;
            previous = update.sequence;
        }
        let mut found = self.found;
        for update in run {
            match self.expected.get(found) {
                Some(&wanted) if wanted == update.sequence => found += 1,
                Some(&wanted) if wanted < update.sequence => {
                    return Err(fail(RecoveryProblem::MissingUpdate(wanted)));
                }
                _ => return Err(fail(RecoveryProblem::UnexpectedUpdate(update.sequence))),
            }
        }
        let journal: Vec<&[u8]> = run.iter().map(|update| update.bytes.as_slice()).collect();
        self.doc.apply_journal(&journal).map_err(|(index, error)| {
            fail(RecoveryProblem::Update {
                sequence: run[index].sequence,
                error,
            })
        })?;
        (self.previous, self.found) = (previous, found);
        self.stored.tail_updates += run.len();
        self.stored.tail_bytes += run.iter().map(|update| update.bytes.len()).sum::<usize>();
        Ok(())
    }

    /// Steps 4 and 5: no update the operation records name is missing from the end of the
    /// journal, and the sidecar is placed on the current text, with broken anchors detached.
    /// Every update was applied in full, so nothing is waiting that could change the text later.
    pub(crate) fn finish(self) -> Result<OpenDocument, RecoveryError> {
        let Recovery {
            channel,
            sidecar,
            doc,
            mut stored,
            expected,
            found,
            checkpoint_hash,
            ..
        } = self;
        let fail = |problem| RecoveryError {
            channel: channel.id.clone(),
            problem,
        };
        if let Some(&wanted) = expected.get(found) {
            return Err(fail(RecoveryProblem::MissingUpdate(wanted)));
        }
        if stored.tail_updates == 0 {
            stored.text_hash = checkpoint_hash;
        }
        let (mut sidecar, mut detached) = match sidecar {
            Some(checked) => {
                let converted = sidecar::convert(checked, &doc)
                    .map_err(|error| fail(RecoveryProblem::Sidecar(error)))?;
                (converted.sidecar, converted.detached)
            }
            None => (Sidecar::default(), Vec::new()),
        };
        for comment in &mut sidecar.comments {
            let Some(anchor) = &comment.anchor else {
                continue;
            };
            if !comment.detached && doc.resolve(anchor).is_none() {
                comment.detached = true;
                tracing::warn!(
                    document = %channel.id,
                    comment = %comment.id,
                    "a comment's passage is gone; the comment is detached"
                );
                detached.push(comment.id.clone());
            }
        }
        Ok(OpenDocument {
            channel_id: channel.id,
            doc,
            sidecar,
            revision: channel.revision,
            sequence: channel.sequence,
            epoch: channel.epoch,
            detached,
            stored,
        })
    }
}

/// Checks a checkpoint's counters against the channel's; returns the sequence it covers.
fn check_checkpoint_metadata(
    checkpoint: &Checkpoint,
    channel: &Channel,
) -> Result<i64, RecoveryProblem> {
    if checkpoint.epoch != channel.epoch {
        return Err(RecoveryProblem::CheckpointEpoch {
            checkpoint: checkpoint.epoch,
            channel: channel.epoch,
        });
    }
    if checkpoint.through_sequence < 0 {
        return Err(RecoveryProblem::CheckpointNegative(
            checkpoint.through_sequence,
        ));
    }
    if checkpoint.through_sequence > channel.sequence {
        return Err(RecoveryProblem::CheckpointSequence {
            checkpoint: checkpoint.through_sequence,
            channel: channel.sequence,
        });
    }
    if checkpoint.revision > channel.revision {
        return Err(RecoveryProblem::CheckpointRevision {
            checkpoint: checkpoint.revision,
            channel: channel.revision,
        });
    }
    Ok(checkpoint.through_sequence)
}

/// Checks one journal update's metadata before it is decoded: the channel's epoch, after the
/// checkpoint (`through`) and after the update before it (`previous`), and not past the
/// channel's sequence.
fn check_update(
    update: &JournalUpdate,
    channel: &Channel,
    through: i64,
    previous: i64,
) -> Result<(), RecoveryProblem> {
    if update.epoch != channel.epoch {
        return Err(RecoveryProblem::UpdateEpoch {
            sequence: update.sequence,
            update: update.epoch,
            channel: channel.epoch,
        });
    }
    if update.sequence <= through {
        return Err(RecoveryProblem::UpdateCovered {
            sequence: update.sequence,
            through,
        });
    }
    if update.sequence <= previous {
        return Err(RecoveryProblem::UpdateOrder {
            sequence: update.sequence,
            previous,
        });
    }
    if update.sequence > channel.sequence {
        return Err(RecoveryProblem::UpdatePastSequence {
            sequence: update.sequence,
            channel: channel.sequence,
        });
    }
    Ok(())
}

/// The sequences whose commits carried an update after the checkpoint (`through`), sorted and
/// once each: those at or before it are covered by it and not looked for.
fn expected_after(expected: &[i64], through: i64) -> Vec<i64> {
    let mut after: Vec<i64> = expected
        .iter()
        .copied()
        .filter(|sequence| *sequence > through)
        .collect();
    after.sort_unstable();
    after.dedup();
    after
}

/// Loads a checkpoint, checked against its text and hash. Its Yjs state is `moved` when it was
/// moved out of the checkpoint; the document then keeps those bytes until its first change (see
/// [`SourceDoc::from_owned_state`]).
fn load_checkpoint(
    checkpoint: &Checkpoint,
    moved: Option<Vec<u8>>,
) -> Result<SourceDoc, RecoveryProblem> {
    if source_hash(&checkpoint.canonical_text) != checkpoint.source_hash {
        return Err(RecoveryProblem::CheckpointHash);
    }
    let loaded = match moved {
        Some(state) => SourceDoc::from_owned_state(state),
        None => SourceDoc::from_state(&checkpoint.state),
    };
    let doc = loaded.map_err(RecoveryProblem::CheckpointState)?;
    if doc.text() != checkpoint.canonical_text {
        return Err(RecoveryProblem::CheckpointText);
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use fermata_store::{Channel, ErrorKind, JournalUpdate, SidecarState, UnixMillis};
    use fermata_store_testkit::fixtures;
    use serde_json::json;

    use super::*;
    use crate::recovering::{Recovering, hand_over};
    use crate::sidecar::Comment;

    const ID: &str = "0b7c6f2e-5d1a-4c3b-9e8f-1a2b3c4d5e6f";

    fn channel(revision: i64, sequence: i64, epoch: i64) -> Channel {
        Channel {
            revision,
            sequence,
            epoch,
            ..fixtures::channel(ID, "acme/plans")
        }
    }

    fn empty_snapshot() -> RecoverySnapshot {
        RecoverySnapshot {
            channel: channel(0, 0, 1),
            sidecar: None,
            checkpoint: None,
            updates: Vec::new(),
            events: Vec::new(),
            expected_update_sequences: Vec::new(),
        }
    }

    fn checkpoint_of(doc: &SourceDoc, through: i64, revision: i64) -> Checkpoint {
        let text = doc.text();
        Checkpoint {
            epoch: 1,
            generation: 1,
            through_sequence: through,
            revision,
            source_hash: source_hash(&text),
            canonical_text: text,
            state: doc.encode_state(),
            sidecar: None,
            created_at: UnixMillis(0),
        }
    }

    fn journal(sequence: i64, bytes: Vec<u8>) -> JournalUpdate {
        JournalUpdate {
            sequence,
            epoch: 1,
            bytes,
        }
    }

    /// A document with a checkpoint through sequence 3 and updates at 4 and 6 (5 was a
    /// sidecar-only commit), with a sidecar holding two anchored comments.
    fn happy_snapshot() -> RecoverySnapshot {
        let mut author = SourceDoc::new();
        author.insert(0, "# Plan\n\nStep one.").unwrap();
        let checkpoint = checkpoint_of(&author, 3, 3);
        let kept = author.anchor(8, 16).unwrap();
        let doomed = author.anchor(0, 6).unwrap();
        let first = author.insert(17, "\nStep two.").unwrap();
        let second = author.delete(0, 8).unwrap();
        assert_eq!(author.text(), "Step one.\nStep two.");
        let sidecar = json!({
            "version": 2, "documentSequence": 9, "planRevision": 2,
            "questions": [{ "id": "q", "text": "Ship?", "decision": true, "status": "open" }],
            "comments": [
                { "id": "kept", "body": "good step", "anchor": kept },
                { "id": "doomed", "body": "title?", "anchor": doomed },
                { "id": "general", "body": "overall fine" }
            ]
        });
        RecoverySnapshot {
            channel: channel(6, 6, 1),
            sidecar: Some(SidecarState {
                version: 2,
                json: sidecar.to_string(),
                unanswered_decisions: 1,
            }),
            checkpoint: Some(checkpoint),
            updates: vec![journal(4, first), journal(6, second)],
            events: Vec::new(),
            expected_update_sequences: vec![4, 6],
        }
    }

    /// Why `snapshot` is refused: the same whether it is recovered whole, handed over at once
    /// and recovered in place, or handed over in runs of two updates to a recovery on a thread.
    fn corrupt(snapshot: &RecoverySnapshot) -> String {
        let error = recover(snapshot).unwrap_err();
        assert_eq!(error.channel().0, ID);
        let message = error.to_string();
        assert!(
            message.starts_with(&format!("document {ID}: ")),
            "{message}"
        );
        for (mut recovering, run) in [
            (Recovering::new(&snapshot.channel.id), usize::MAX),
            (Recovering::on_a_thread(&snapshot.channel.id), 2),
        ] {
            hand_over(snapshot.clone(), run, &mut recovering);
            assert_eq!(recovering.finish().unwrap_err().to_string(), message);
        }
        let store_error = StoreError::from(error);
        assert_eq!(store_error.kind(), ErrorKind::Corrupt);
        assert!(store_error.to_string().contains(ID));
        message[format!("document {ID}: ").len()..].to_owned()
    }

    /// `snapshot` recovered as a room opens it, handed over in runs of `run` updates, in place
    /// or on a thread.
    fn served(snapshot: RecoverySnapshot, run: usize, on_a_thread: bool) -> OpenDocument {
        let id = snapshot.channel.id.clone();
        let mut recovering = if on_a_thread {
            Recovering::on_a_thread(&id)
        } else {
            Recovering::new(&id)
        };
        hand_over(snapshot, run, &mut recovering);
        recovering.finish().unwrap().1
    }

    #[test]
    fn checkpoint_and_journal_recover() {
        let open = recover(&happy_snapshot()).unwrap();
        assert_eq!(open.doc.text(), "Step one.\nStep two.");
        assert_eq!((open.revision, open.sequence, open.epoch), (6, 6, 1));
        assert_eq!(open.sidecar.document_sequence, 9);
        let comment =
            |id: &str| -> &Comment { open.sidecar.comments.iter().find(|c| c.id == id).unwrap() };
        let kept = comment("kept");
        assert!(!kept.detached);
        assert_eq!(
            open.doc.resolve(kept.anchor.as_ref().unwrap()),
            Some((0, 8))
        );
        assert!(!comment("general").detached);

        let checkpoint = open.checkpoint();
        assert_eq!(checkpoint.through_sequence, 6);
        assert_eq!(checkpoint.revision, 6);
        assert_eq!(checkpoint.canonical_text, "Step one.\nStep two.");
        assert_eq!(checkpoint.source_hash, source_hash("Step one.\nStep two."));
        let sidecar = checkpoint.sidecar.as_ref().unwrap();
        assert_eq!(sidecar.unanswered_decisions, 1);

        // The checkpoint it makes recovers to the same document on its own.
        let mut later = happy_snapshot();
        later.checkpoint = Some(Checkpoint {
            epoch: checkpoint.epoch,
            generation: 2,
            through_sequence: checkpoint.through_sequence,
            revision: checkpoint.revision,
            canonical_text: checkpoint.canonical_text.clone(),
            source_hash: checkpoint.source_hash.clone(),
            state: checkpoint.state.clone(),
            sidecar: checkpoint.sidecar.clone(),
            created_at: UnixMillis(0),
        });
        later.sidecar = checkpoint.sidecar.clone();
        later.updates.clear();
        later.expected_update_sequences = vec![4, 6];
        let reopened = recover(&later).unwrap();
        assert_eq!(reopened.doc.text(), open.doc.text());
        assert!(reopened.detached.is_empty());
        assert!(comment("doomed").detached);
        assert!(
            reopened
                .sidecar
                .comments
                .iter()
                .any(|c| c.id == "doomed" && c.detached)
        );
    }

    #[test]
    fn what_a_document_was_recovered_from_is_told_and_a_bare_checkpoint_is_served_as_stored() {
        let empty = yrs::updates::encoder::Encode::encode_v1(&yrs::StateVector::default());
        // Checkpoint and journal: the journal is counted, and nothing is kept to serve.
        let snapshot = happy_snapshot();
        let checkpoint_bytes = snapshot.checkpoint.as_ref().unwrap().state.len();
        let tail_bytes: usize = snapshot.updates.iter().map(|u| u.bytes.len()).sum();
        let whole = recover(&snapshot).unwrap();
        for (run, on_a_thread) in [(usize::MAX, false), (1, true), (2, false)] {
            let open = served(snapshot.clone(), run, on_a_thread);
            assert_eq!(open.stored, whole.stored);
            assert_eq!(open.doc.text(), whole.doc.text());
            assert_eq!(open.sidecar, whole.sidecar);
            assert_eq!(open.detached, whole.detached);
        }
        let mut open = served(snapshot.clone(), usize::MAX, false);
        assert_eq!(
            open.stored,
            Stored {
                checkpoint_bytes,
                tail_updates: snapshot.updates.len(),
                tail_bytes,
                text_hash: None,
            }
        );
        assert_eq!(open.stored.size_estimate(), checkpoint_bytes + tail_bytes);
        let answer = open.doc.sync_answer(&empty).unwrap();
        assert_eq!(
            SourceDoc::from_state(&answer).unwrap().text(),
            open.doc.text()
        );

        // A checkpoint alone: its checked hash is the text's, and its bytes the first answer.
        let mut bare = snapshot;
        bare.updates.clear();
        bare.expected_update_sequences.clear();
        let checkpoint = bare.checkpoint.clone().unwrap();
        bare.channel.sequence = checkpoint.through_sequence;
        bare.channel.revision = checkpoint.revision;
        let mut open = served(bare, usize::MAX, true);
        assert_eq!(
            open.stored.text_hash.as_ref(),
            Some(&checkpoint.source_hash)
        );
        assert_eq!((open.stored.tail_updates, open.stored.tail_bytes), (0, 0));
        assert_eq!(open.doc.sync_answer(&empty).unwrap(), checkpoint.state);
    }

    #[test]
    fn deleted_passage_detaches_its_comment() {
        let open = recover(&happy_snapshot()).unwrap();
        assert_eq!(open.detached, ["doomed"]);
        let doomed = open
            .sidecar
            .comments
            .iter()
            .find(|c| c.id == "doomed")
            .unwrap();
        assert!(doomed.detached);
        assert_eq!(doomed.body, "title?");
        assert!(doomed.anchor.is_some(), "the anchor is kept for its quote");
        assert_eq!(open.sidecar.comments.len(), 3);
    }

    #[test]
    fn never_opened_channel_recovers_empty() {
        let open = recover(&empty_snapshot()).unwrap();
        assert_eq!(open.doc.text(), "");
        assert_eq!(open.sidecar, Sidecar::default());
        assert!(open.detached.is_empty());
        assert_eq!(open.checkpoint().through_sequence, 0);
        assert_eq!(open.checkpoint().source_hash, source_hash(""));
    }

    #[test]
    fn journal_without_checkpoint_recovers() {
        let mut author = SourceDoc::new();
        let mut snapshot = empty_snapshot();
        snapshot.updates = vec![
            journal(1, author.insert(0, "hello").unwrap()),
            journal(3, author.insert(5, " world").unwrap()),
        ];
        snapshot.expected_update_sequences = vec![1, 3];
        snapshot.channel = channel(3, 3, 1);
        assert_eq!(recover(&snapshot).unwrap().doc.text(), "hello world");
    }

    #[test]
    fn tampered_checkpoint_hash_is_corrupt() {
        let mut snapshot = happy_snapshot();
        if let Some(checkpoint) = &mut snapshot.checkpoint {
            checkpoint.source_hash = source_hash("something else");
        }
        assert_eq!(
            corrupt(&snapshot),
            "checkpoint hash does not match its text"
        );
    }

    #[test]
    fn checkpoint_text_not_matching_its_state_is_corrupt() {
        let mut snapshot = happy_snapshot();
        if let Some(checkpoint) = &mut snapshot.checkpoint {
            checkpoint.canonical_text = "# Plan\n\nStep zero.".to_owned();
            checkpoint.source_hash = source_hash(&checkpoint.canonical_text);
        }
        assert_eq!(
            corrupt(&snapshot),
            "checkpoint text does not match its state"
        );
    }

    #[test]
    fn undecodable_checkpoint_state_is_corrupt() {
        let mut snapshot = happy_snapshot();
        if let Some(checkpoint) = &mut snapshot.checkpoint {
            checkpoint.state.truncate(checkpoint.state.len() / 2);
        }
        assert_eq!(
            corrupt(&snapshot),
            "checkpoint state does not load: the update does not decode"
        );
    }

    #[test]
    fn truncated_update_is_corrupt() {
        let mut snapshot = happy_snapshot();
        let bytes = &mut snapshot.updates[1].bytes;
        bytes.truncate(bytes.len() - 1);
        assert_eq!(
            corrupt(&snapshot),
            "update 6 is refused: the update does not decode"
        );
    }

    #[test]
    fn update_from_another_epoch_is_corrupt() {
        let mut snapshot = happy_snapshot();
        snapshot.updates[0].epoch = 2;
        assert_eq!(
            corrupt(&snapshot),
            "update 4 is of epoch 2 but the channel is at epoch 1"
        );
    }

    #[test]
    fn gap_in_the_journal_is_corrupt() {
        let mut snapshot = happy_snapshot();
        snapshot.updates.remove(0);
        assert_eq!(corrupt(&snapshot), "update 4 is missing from the journal");

        let mut snapshot = happy_snapshot();
        snapshot.expected_update_sequences = vec![4, 5, 6];
        assert_eq!(corrupt(&snapshot), "update 5 is missing from the journal");

        let mut snapshot = happy_snapshot();
        snapshot.updates.pop();
        assert_eq!(corrupt(&snapshot), "update 6 is missing from the journal");

        let mut snapshot = happy_snapshot();
        snapshot.expected_update_sequences = vec![6];
        assert_eq!(
            corrupt(&snapshot),
            "update 4 is in the journal but no commit carried it"
        );

        // Without a checkpoint every carried update must be there too.
        let mut snapshot = empty_snapshot();
        snapshot.channel = channel(2, 2, 1);
        snapshot.expected_update_sequences = vec![2];
        assert_eq!(corrupt(&snapshot), "update 2 is missing from the journal");
    }

    #[test]
    fn journal_order_and_range_are_checked() {
        let mut snapshot = happy_snapshot();
        snapshot.updates.swap(0, 1);
        assert_eq!(
            corrupt(&snapshot),
            "update 4 is out of order after update 6"
        );

        let mut snapshot = happy_snapshot();
        snapshot.updates[0].sequence = 3;
        assert_eq!(
            corrupt(&snapshot),
            "update 3 is already covered by the checkpoint through 3"
        );

        let mut snapshot = happy_snapshot();
        snapshot.channel.sequence = 5;
        snapshot.channel.revision = 5;
        assert_eq!(
            corrupt(&snapshot),
            "update 6 is past the channel's last sequence 5"
        );
    }

    #[test]
    fn checkpoint_metadata_is_checked() {
        let mut snapshot = happy_snapshot();
        snapshot.channel.epoch = 2;
        assert_eq!(
            corrupt(&snapshot),
            "checkpoint is of epoch 1 but the channel is at epoch 2"
        );

        let mut snapshot = happy_snapshot();
        snapshot.channel.sequence = 2;
        assert_eq!(
            corrupt(&snapshot),
            "checkpoint covers sequence 3 but the channel is at sequence 2"
        );

        let mut snapshot = happy_snapshot();
        snapshot.channel.revision = 2;
        assert_eq!(
            corrupt(&snapshot),
            "checkpoint is at revision 3 but the channel is at revision 2"
        );
    }

    #[test]
    fn unknown_sidecar_version_is_corrupt() {
        let mut snapshot = happy_snapshot();
        if let Some(sidecar) = &mut snapshot.sidecar {
            sidecar.version = 3;
        }
        assert_eq!(corrupt(&snapshot), "sidecar version 3 is unknown");

        let mut snapshot = happy_snapshot();
        if let Some(sidecar) = &mut snapshot.sidecar {
            sidecar.json = "{ not json".to_owned();
        }
        assert_eq!(corrupt(&snapshot), "sidecar is not JSON");
        assert!(recover(&snapshot).unwrap_err().source().is_some());
    }

    #[test]
    fn missing_dependencies_are_corrupt() {
        let mut author = SourceDoc::new();
        let lost = author.insert(0, "first").unwrap();
        let kept = author.insert(5, " second").unwrap();
        let mut snapshot = empty_snapshot();
        snapshot.channel = channel(2, 2, 1);
        snapshot.updates = vec![journal(2, kept)];
        snapshot.expected_update_sequences = vec![2];
        assert_eq!(
            corrupt(&snapshot),
            "update 2 is refused: the update depends on changes the document does not have"
        );
        // With its predecessor present the same history is fine.
        snapshot.updates.insert(0, journal(1, lost));
        snapshot.expected_update_sequences = vec![1, 2];
        assert_eq!(recover(&snapshot).unwrap().doc.text(), "first second");
    }

    #[test]
    fn checkpoint_sidecar_stands_in_for_a_missing_one() {
        let mut snapshot = happy_snapshot();
        let stored = snapshot.sidecar.take();
        if let Some(checkpoint) = &mut snapshot.checkpoint {
            checkpoint.sidecar = stored;
        }
        assert_eq!(recover(&snapshot).unwrap().sidecar.document_sequence, 9);
    }

    #[test]
    fn version_1_sidecar_converts_on_the_recovered_text() {
        let mut snapshot = happy_snapshot();
        let v1 = json!({
            "docSeq": 1, "planRev": 1,
            "comments": [
                { "id": "a", "body": "on step two", "anchor": { "from": 10, "to": 19 } },
                { "id": "b", "body": "too far", "anchor": { "from": 10, "to": 99 } }
            ]
        });
        snapshot.sidecar = Some(SidecarState {
            version: 1,
            json: v1.to_string(),
            unanswered_decisions: 0,
        });
        let open = recover(&snapshot).unwrap();
        assert_eq!(open.detached, ["b"]);
        let a = &open.sidecar.comments[0];
        assert_eq!(a.anchor.as_ref().unwrap().quote, "Step two.");
        assert_eq!(open.sidecar.version, 2);
    }
}
