//! The document's source: a Yjs document whose root text `source` holds the MDX, the updates
//! that change it, its canonical text and hash, and anchors that follow a passage through edits.
//!
//! Positions are counted in UTF-16 code units, as Yjs counts them in the browser, so an index a
//! client sends means the same place here. Nothing in this module panics on the bytes it is
//! given: yrs checks some decoded values only with debug assertions, so decoding runs where a
//! panic is caught and turned into [`DocError::Undecodable`].

use std::fmt;
use std::fmt::Write as _;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use yrs::branch::{Branch, BranchPtr};
use yrs::types::Delta;
use yrs::updates::decoder::Decode;
use yrs::updates::encoder::Encode;
use yrs::{
    Any, Assoc, ClientID, Doc, GetString, IndexedSequence, Observable, OffsetKind, Options, Out,
    ReadTxn, StateVector, StickyIndex, Text, TextRef, Transact, Update,
};

/// How many journal updates [`SourceDoc::apply_journal`] applies in one transaction.
const JOURNAL_BATCH: usize = 32;

/// The name of the root text that holds the MDX; browsers bind their editor to the same name.
const SOURCE_TEXT: &str = "source";

/// Why an update, an edit or an anchor was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocError {
    /// The bytes are not a Yjs v1 update.
    #[error("the update does not decode")]
    Undecodable,
    /// The update builds on changes this document has not seen. yrs would stash it and apply it
    /// once they arrive; we refuse it, since a stored history must be complete.
    #[error("the update depends on changes the document does not have")]
    MissingDependencies,
    /// The update decodes but yrs cannot integrate it (it names a parent that is not a type).
    #[error("the update does not fit the document")]
    Inapplicable,
    /// A position or range reaches past the end of the text.
    #[error("the range ends at {end}, past the end of the text ({len})")]
    OutOfRange { end: u64, len: u32 },
    /// An anchor must cover at least one code unit, or it could never be told from a deleted one.
    #[error("an anchor needs a non-empty range")]
    EmptyRange,
    /// An edit from outside makes a shared type besides the document's text `source`.
    #[error("the update makes a shared type besides the document's text")]
    NewRootType,
    /// An edit from outside puts something other than text into `source`: an embed or a
    /// nested type.
    #[error("the update puts something other than text into the document")]
    NotText,
    /// An edit from outside puts a NUL character into the text.
    #[error("the text may not hold a NUL character")]
    Nul,
    /// An edit from outside formats the text: documents are plain MDX.
    #[error("the text may not carry formatting attributes; documents are plain MDX")]
    Formatting,
}

impl DocError {
    /// The rule's code, as an API refusal names it.
    pub fn code(&self) -> &'static str {
        match self {
            DocError::Undecodable => "update_undecodable",
            DocError::MissingDependencies => "update_missing_dependencies",
            DocError::Inapplicable => "update_inapplicable",
            DocError::OutOfRange { .. } => "out_of_range",
            DocError::EmptyRange => "empty_range",
            DocError::NewRootType => "update_new_root_type",
            DocError::NotText => "update_not_text",
            DocError::Nul => "text_nul",
            DocError::Formatting => "text_formatting",
        }
    }
}

/// A passage of the source that follows edits: two Yjs sticky indexes and the text they covered
/// when the anchor was made.
///
/// JSON fields: `start`, `end` (base64 of a v1-encoded `yrs::StickyIndex`) and `quote`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Anchor {
    /// Sticks to the first code unit of the passage.
    pub start: String,
    /// Sticks to the last code unit of the passage, so text typed right after it stays outside.
    pub end: String,
    /// The passage as it was when anchored, for showing a comment whose passage is gone.
    pub quote: String,
}

/// A document's source as a Yjs document.
pub struct SourceDoc {
    doc: Doc,
    /// The root text, fetched once: yrs takes a write transaction to fetch it, which must never
    /// happen while another transaction is open.
    text: TextRef,
    /// The complete state this document was loaded from, kept until its first change or until
    /// [`Self::sync_answer`] hands it out: the answer to a peer that holds nothing, without
    /// encoding the state a second time. Every write transaction goes through
    /// [`Self::changing`], which drops it.
    loaded_state: Option<Vec<u8>>,
}

impl fmt::Debug for SourceDoc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceDoc")
            .field("client", &self.doc.client_id())
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl Default for SourceDoc {
    fn default() -> Self {
        Self::new()
    }
}

impl SourceDoc {
    /// An empty document.
    pub fn new() -> Self {
        Self::with_client(ClientID::random())
    }

    fn with_client(client: ClientID) -> Self {
        let doc = Doc::with_options(Options {
            offset_kind: OffsetKind::Utf16,
            ..Options::with_client_id(client)
        });
        let text = doc.get_or_insert_text(SOURCE_TEXT);
        SourceDoc {
            doc,
            text,
            loaded_state: None,
        }
    }

    /// A document loaded from a complete state encoded as a v1 update (a checkpoint's bytes).
    pub fn from_state(bytes: &[u8]) -> Result<Self, DocError> {
        // Our own edits must not reuse a client ID the history already has: two writers under one
        // ID make clashing items. A random 53-bit ID almost never does, so drawing again is cheap.
        let mut attempts = 0;
        loop {
            let mut doc = Self::new();
            doc.apply_update(bytes)?;
            let ours = doc.doc.client_id();
            attempts += 1;
            if !doc.doc.transact().state_vector().contains_client(&ours) || attempts == 8 {
                return Ok(doc);
            }
        }
    }

    /// [`Self::from_state`], keeping `bytes` as the answer to the first peer that holds nothing
    /// (see [`Self::sync_answer`]) while the document has not changed.
    pub fn from_owned_state(bytes: Vec<u8>) -> Result<Self, DocError> {
        let mut doc = Self::from_state(&bytes)?;
        doc.loaded_state = Some(bytes);
        Ok(doc)
    }

    /// The document and its text for a write transaction: what it was loaded from no longer
    /// describes it.
    fn changing(&mut self) -> (&Doc, &TextRef) {
        self.loaded_state = None;
        (&self.doc, &self.text)
    }

    /// Applies a v1 update.
    ///
    /// On `MissingDependencies` or `Inapplicable` the document may already hold part of the
    /// update; it must be discarded and loaded again from storage, never served or saved.
    pub fn apply_update(&mut self, bytes: &[u8]) -> Result<(), DocError> {
        self.apply_updates([decode_update(bytes)])
            .map_err(|(_, error)| error)
    }

    /// Applies a v1 update that came from outside (a live client's, a program's), under
    /// [`Self::under_edit_rules`].
    pub fn apply_client_update(&mut self, bytes: &[u8]) -> Result<(), DocError> {
        self.under_edit_rules(|doc| doc.apply_update(bytes))
    }

    /// [`Self::replace_all`] with a text that came from outside (a program's rewrite, a restored
    /// version, an import), under [`Self::under_edit_rules`].
    pub fn replace_text(&mut self, text: &str) -> Result<Vec<u8>, DocError> {
        self.under_edit_rules(|doc| Ok(doc.replace_all(text)))
    }

    /// Runs `change` under the rules every edit from outside keeps, whichever way it arrives:
    /// only the root text `source` changes, and only by plain text, without NUL and without
    /// formatting (an update that makes another root type, inserts an embed or a nested type,
    /// or formats a passage is refused, each with its own [`DocError`]). Titles and the sidecar
    /// are not Yjs types and are never reached this way. The size limit is the room's.
    ///
    /// As with [`Self::apply_update`], a refused change may have been partly applied: the
    /// document must then be loaded again from storage.
    fn under_edit_rules<T>(
        &mut self,
        change: impl FnOnce(&mut Self) -> Result<T, DocError>,
    ) -> Result<T, DocError> {
        const CHECK: &str = "fermata:edit-rules";
        let roots_before = self.root_names();
        let broken = Arc::new(Mutex::new(None));
        let seen = Arc::clone(&broken);
        self.text.observe(CHECK, move |txn, event| {
            for change in event.delta(txn) {
                let problem = match change {
                    Delta::Inserted(Out::Any(Any::String(text)), _) if text.contains('\0') => {
                        Some(DocError::Nul)
                    }
                    Delta::Inserted(Out::Any(Any::String(_)), attributes)
                    | Delta::Retain(_, attributes) => attributes
                        .as_ref()
                        .is_some_and(|attributes| !attributes.is_empty())
                        .then_some(DocError::Formatting),
                    Delta::Inserted(..) => Some(DocError::NotText),
                    Delta::Deleted(_) => None,
                };
                if let Some(problem) = problem {
                    seen.lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .get_or_insert(problem);
                }
            }
        });
        let changed = change(self);
        self.text.unobserve(CHECK);
        let value = changed?;
        let problem = broken
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(problem) = problem {
            return Err(problem);
        }
        if self.root_names() != roots_before {
            return Err(DocError::NewRootType);
        }
        Ok(value)
    }

    /// The names of the document's root types, sorted.
    fn root_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .doc
            .transact()
            .root_refs()
            .map(|(name, _)| name.to_owned())
            .collect();
        names.sort();
        names
    }

    /// Applies v1 updates in order, each checked as [`Self::apply_update`] checks one (it
    /// decodes, applies, and leaves nothing waiting for a missing predecessor): recovery's
    /// journal replay. The updates share transactions, 32 to one, which saves
    /// most of a transaction's cleanup per update (yrs slows down again in a much longer
    /// transaction). A refusal names the index of the update refused; as with
    /// [`Self::apply_update`], the document must then be discarded.
    pub fn apply_journal(&mut self, updates: &[&[u8]]) -> Result<(), (usize, DocError)> {
        for (batch, chunk) in updates.chunks(JOURNAL_BATCH).enumerate() {
            self.apply_updates(chunk.iter().map(|bytes| decode_update(bytes)))
                .map_err(|(index, error)| (batch * JOURNAL_BATCH + index, error))?;
        }
        Ok(())
    }

    fn apply_updates(
        &mut self,
        updates: impl IntoIterator<Item = Result<Update, DocError>>,
    ) -> Result<(), (usize, DocError)> {
        let (doc, _) = self.changing();
        let mut index = 0;
        // A malformed update that decodes can still trip an assertion inside yrs; the document is
        // then refused like any other inapplicable update rather than taking the process down.
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
            let mut txn = doc.transact_mut();
            for update in updates {
                // Dropped on purpose: the update is the client's, and it is refused as
                // inapplicable.
                txn.apply_update(update?)
                    .map_err(|_| DocError::Inapplicable)?;
                let store = txn.store();
                let pending_blocks = store
                    .pending_update()
                    .is_some_and(|pending| !pending.update.is_empty());
                let pending_deletes = store.pending_ds().is_some_and(|ds| !ds.is_empty());
                if pending_blocks || pending_deletes {
                    return Err(DocError::MissingDependencies);
                }
                index += 1;
            }
            Ok(())
        }));
        outcome
            .unwrap_or(Err(DocError::Inapplicable))
            .map_err(|error| (index, error))
    }

    /// The MDX, as it reads now.
    pub fn text(&self) -> String {
        self.text.get_string(&self.doc.transact())
    }

    /// The length of the text in UTF-16 code units, the unit of every position here.
    pub fn len(&self) -> u32 {
        self.text.len(&self.doc.transact())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// SHA-256 of the canonical text, lowercase hex.
    pub fn source_hash(&self) -> String {
        source_hash(&self.text())
    }

    /// The complete state as one v1 update, encoded from the loaded document. Merging stored
    /// updates instead would cost more than linear time in the history's length.
    pub fn encode_state(&self) -> Vec<u8> {
        self.doc
            .transact()
            .encode_state_as_update_v1(&StateVector::default())
    }

    /// The state vector, v1-encoded: how much of each client's history the document holds.
    pub fn state_vector(&self) -> Vec<u8> {
        self.doc.transact().state_vector().encode_v1()
    }

    /// The size of the complete encoded state, in bytes: what a document costs to keep.
    pub fn state_size(&self) -> usize {
        self.encode_state().len()
    }

    /// The answer to a peer's sync step 1: [`Self::diff_since`], except that a peer that holds
    /// nothing is given the state the document was loaded from, as loaded, the first time
    /// (the bytes decode to exactly this document; see [`Self::from_owned_state`]).
    pub fn sync_answer(&mut self, state_vector: &[u8]) -> Result<Vec<u8>, DocError> {
        if self.loaded_state.is_some()
            && decode_state_vector(state_vector)?.is_empty()
            && let Some(state) = self.loaded_state.take()
        {
            return Ok(state);
        }
        self.diff_since(state_vector)
    }

    /// Everything this document holds that a peer at `state_vector` lacks, as one v1 update.
    pub fn diff_since(&self, state_vector: &[u8]) -> Result<Vec<u8>, DocError> {
        let vector = decode_state_vector(state_vector)?;
        Ok(self.doc.transact().encode_diff_v1(&vector))
    }

    /// Inserts `text` at `index` and returns the update that did it.
    pub fn insert(&mut self, index: u32, text: &str) -> Result<Vec<u8>, DocError> {
        let (doc, root) = self.changing();
        let mut txn = doc.transact_mut();
        let len = root.len(&txn);
        if index > len {
            return Err(DocError::OutOfRange {
                end: u64::from(index),
                len,
            });
        }
        root.insert(&mut txn, index, text);
        // Committing first makes these exactly the bytes `observe_update_v1` would deliver.
        txn.commit();
        Ok(txn.encode_update_v1())
    }

    /// Deletes `len` code units from `index` and returns the update that did it.
    pub fn delete(&mut self, index: u32, len: u32) -> Result<Vec<u8>, DocError> {
        let (doc, root) = self.changing();
        let mut txn = doc.transact_mut();
        let text_len = root.len(&txn);
        let end = u64::from(index) + u64::from(len);
        if end > u64::from(text_len) {
            return Err(DocError::OutOfRange { end, len: text_len });
        }
        if len > 0 {
            root.remove_range(&mut txn, index, len);
        }
        txn.commit();
        Ok(txn.encode_update_v1())
    }

    /// Makes the text read `text` and returns the update that did it. Only the part between the
    /// common prefix and suffix is replaced, so anchors on untouched passages keep their place.
    pub fn replace_all(&mut self, text: &str) -> Vec<u8> {
        let (doc, root) = self.changing();
        let mut txn = doc.transact_mut();
        let old = root.get_string(&txn);
        let prefix: usize = old
            .chars()
            .zip(text.chars())
            .take_while(|(a, b)| a == b)
            .map(|(a, _)| a.len_utf8())
            .sum();
        let (old_rest, new_rest) = (&old[prefix..], &text[prefix..]);
        let suffix: usize = old_rest
            .chars()
            .rev()
            .zip(new_rest.chars().rev())
            .take_while(|(a, b)| a == b)
            .map(|(a, _)| a.len_utf8())
            .sum();
        let removed = &old_rest[..old_rest.len() - suffix];
        let added = &new_rest[..new_rest.len() - suffix];
        let at = utf16_len(&old[..prefix]);
        let removed_len = utf16_len(removed);
        if removed_len > 0 {
            root.remove_range(&mut txn, at, removed_len);
        }
        root.insert(&mut txn, at, added);
        txn.commit();
        txn.encode_update_v1()
    }

    /// An anchor on the passage from `start` (inclusive) to `end` (exclusive).
    pub fn anchor(&self, start: u32, end: u32) -> Result<Anchor, DocError> {
        if start >= end {
            return Err(DocError::EmptyRange);
        }
        let txn = self.doc.transact();
        let len = self.text.len(&txn);
        let out_of_range = DocError::OutOfRange {
            end: u64::from(end),
            len,
        };
        if end > len {
            return Err(out_of_range);
        }
        let start_index = self
            .text
            .sticky_index(&txn, start, Assoc::After)
            .ok_or_else(|| out_of_range.clone())?;
        let end_index = self
            .text
            .sticky_index(&txn, end, Assoc::Before)
            .ok_or(out_of_range)?;
        let quote = utf16_slice(&self.text.get_string(&txn), start, end);
        Ok(Anchor {
            start: BASE64.encode(start_index.encode_v1()),
            end: BASE64.encode(end_index.encode_v1()),
            quote,
        })
    }

    /// Where an anchor's passage is now, as a start and an exclusive end. `None` when an index
    /// does not decode, names something this document lacks or outside its text, or when the
    /// passage is empty because its text was deleted.
    pub fn resolve(&self, anchor: &Anchor) -> Option<(u32, u32)> {
        let start = decode_sticky_index(&anchor.start)?;
        let end = decode_sticky_index(&anchor.end)?;
        let txn = self.doc.transact();
        let ours = BranchPtr::from(AsRef::<Branch>::as_ref(&self.text));
        let start = start
            .get_offset(&txn)
            .filter(|offset| offset.branch == ours)?;
        let end = end
            .get_offset(&txn)
            .filter(|offset| offset.branch == ours)?;
        (start.index < end.index && end.index <= self.text.len(&txn))
            .then_some((start.index, end.index))
    }
}

/// Checks that `bytes` decode as a v1 update, without applying them: the check a commit makes
/// before storing a client's update.
/// Whether an update carries nothing: no insertion and no deletion (what a client with nothing
/// new answers a sync step 1 with).
pub fn is_empty_update(bytes: &[u8]) -> bool {
    decode_update(bytes).is_ok_and(|update| update.is_empty())
}

pub fn validate_update(bytes: &[u8]) -> Result<(), DocError> {
    decode_update(bytes).map(|_| ())
}

/// A peer's v1-encoded state vector.
fn decode_state_vector(bytes: &[u8]) -> Result<StateVector, DocError> {
    // Dropped on purpose: the state vector is the client's, and a panic payload is no error.
    panic::catch_unwind(|| StateVector::decode_v1(bytes))
        .map_err(|_| DocError::Undecodable)?
        .map_err(|_| DocError::Undecodable)
}

/// SHA-256 of a canonical text, lowercase hex: the source hash stored beside a checkpoint.
pub fn source_hash(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let mut hex = String::with_capacity(digest.len() * 2);
    for byte in digest {
        // Writing to a String cannot fail.
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

fn decode_update(bytes: &[u8]) -> Result<Update, DocError> {
    // Decoding touches nothing but `bytes`, so catching a panic here leaves no broken state.
    match panic::catch_unwind(|| Update::decode_v1(bytes)) {
        Ok(Ok(update)) => Ok(update),
        Ok(Err(_)) | Err(_) => Err(DocError::Undecodable),
    }
}

fn decode_sticky_index(encoded: &str) -> Option<StickyIndex> {
    let bytes = BASE64.decode(encoded).ok()?;
    panic::catch_unwind(|| StickyIndex::decode_v1(&bytes))
        .ok()?
        .ok()
}

fn utf16_len(text: &str) -> u32 {
    u32::try_from(text.encode_utf16().count()).unwrap_or(u32::MAX)
}

fn utf16_slice(text: &str, start: u32, end: u32) -> String {
    let units: Vec<u16> = text.encode_utf16().collect();
    let range =
        usize::try_from(start).unwrap_or(usize::MAX)..usize::try_from(end).unwrap_or(usize::MAX);
    String::from_utf16_lossy(units.get(range).unwrap_or(&[]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc_with(text: &str) -> SourceDoc {
        let mut doc = SourceDoc::new();
        doc.insert(0, text).unwrap();
        doc
    }

    #[test]
    fn a_peer_that_holds_nothing_is_first_answered_with_the_loaded_state_until_a_change() {
        let stored = doc_with("# Plan\n").encode_state();
        let empty = StateVector::default().encode_v1();
        let mut doc = SourceDoc::from_owned_state(stored.clone()).unwrap();
        // A peer that holds something (here all of it) gets its diff, and the loaded state stays.
        let peer = doc.state_vector();
        assert!(is_empty_update(&doc.sync_answer(&peer).unwrap()));
        assert_eq!(doc.sync_answer(&empty).unwrap(), stored);
        // Handed out once: the next peer's answer is encoded, and says the same.
        let encoded = doc.sync_answer(&empty).unwrap();
        let replica = SourceDoc::from_state(&encoded).unwrap();
        assert_eq!(replica.text(), "# Plan\n");

        // Any change drops it, deletions too (they leave the state vector as it was).
        for change in [
            (|doc: &mut SourceDoc| drop(doc.delete(0, 2).unwrap())) as fn(&mut SourceDoc),
            |doc| drop(doc.insert(0, "x").unwrap()),
            |doc| drop(doc.replace_all("other")),
            |doc| {
                doc.apply_update(&doc_with("elsewhere").encode_state())
                    .unwrap()
            },
        ] {
            let mut doc = SourceDoc::from_owned_state(stored.clone()).unwrap();
            change(&mut doc);
            let answer = doc.sync_answer(&empty).unwrap();
            assert_ne!(answer, stored);
            assert_eq!(SourceDoc::from_state(&answer).unwrap().text(), doc.text());
        }
        // A state vector that does not decode is refused, whatever is kept.
        let mut doc = SourceDoc::from_owned_state(stored).unwrap();
        assert!(doc.sync_answer(&[0xff]).is_err());
    }

    /// An update a client made on its own copy of `base` with `edit` (given the root text,
    /// fetched before the transaction opens: fetching it takes a transaction of its own).
    fn client_update(
        base: &SourceDoc,
        edit: impl FnOnce(&TextRef, &mut yrs::TransactionMut),
    ) -> Vec<u8> {
        let client = Doc::with_options(Options {
            offset_kind: OffsetKind::Utf16,
            ..Options::default()
        });
        let text = client.get_or_insert_text(SOURCE_TEXT);
        client
            .transact_mut()
            .apply_update(Update::decode_v1(&base.encode_state()).unwrap())
            .unwrap();
        let before = client.transact().state_vector();
        {
            let mut txn = client.transact_mut();
            edit(&text, &mut txn);
        }
        client.transact().encode_diff_v1(&before)
    }

    #[test]
    fn a_client_update_may_change_only_the_text() {
        let base = doc_with("# Plan\n");
        let typed = client_update(&base, |text, txn| text.insert(txn, 7, "Ship it."));
        let mut doc = SourceDoc::from_state(&base.encode_state()).unwrap();
        doc.apply_client_update(&typed).unwrap();
        assert_eq!(doc.text(), "# Plan\nShip it.");

        let other_root = {
            let client = Doc::new();
            let map = client.get_or_insert_map("secrets");
            let mut txn = client.transact_mut();
            yrs::Map::insert(&map, &mut txn, "key", "value");
            drop(txn);
            client
                .transact()
                .encode_state_as_update_v1(&StateVector::default())
        };
        let nul = client_update(&base, |text, txn| text.insert(txn, 0, "a\0b"));
        let embed = client_update(&base, |text, txn| {
            text.insert_embed(txn, 0, Any::from(7.0));
        });
        let nested = client_update(&base, |text, txn| {
            text.insert_embed(txn, 0, yrs::MapPrelim::default());
        });
        let formatted = client_update(&base, |text, txn| {
            let bold = yrs::types::Attrs::from([("bold".into(), Any::Bool(true))]);
            text.format(txn, 0, 2, bold);
        });
        let formatted_insert = client_update(&base, |text, txn| {
            let bold = yrs::types::Attrs::from([("bold".into(), Any::Bool(true))]);
            text.insert_with_attributes(txn, 0, "loud", bold);
        });
        for (what, update, refusal) in [
            ("another root", other_root, DocError::NewRootType),
            ("NUL", nul, DocError::Nul),
            ("an embed", embed, DocError::NotText),
            ("a nested type", nested, DocError::NotText),
            ("formatting", formatted, DocError::Formatting),
            ("formatted text", formatted_insert, DocError::Formatting),
        ] {
            let mut doc = SourceDoc::from_state(&base.encode_state()).unwrap();
            assert_eq!(doc.apply_client_update(&update), Err(refusal), "{what}");
            // Stored history is read as it is: the same bytes apply there.
            let mut stored = SourceDoc::from_state(&base.encode_state()).unwrap();
            assert!(stored.apply_update(&update).is_ok(), "{what}");
        }
    }

    #[test]
    fn a_text_from_outside_keeps_the_same_rules() {
        let mut doc = doc_with("plain");
        assert_eq!(doc.replace_text("a\0b"), Err(DocError::Nul));
        let mut doc = doc_with("plain");
        doc.replace_text("plain, still").unwrap();
        assert_eq!(doc.text(), "plain, still");
    }

    #[test]
    fn state_round_trips() {
        let mut doc = doc_with("# Plan\n\nShip it.");
        doc.delete(0, 2).unwrap();
        let copy = SourceDoc::from_state(&doc.encode_state()).unwrap();
        assert_eq!(copy.text(), "Plan\n\nShip it.");
        assert_eq!(copy.source_hash(), doc.source_hash());
        assert_eq!(copy.encode_state(), doc.encode_state());
        assert_eq!(
            SourceDoc::from_state(&SourceDoc::new().encode_state())
                .unwrap()
                .text(),
            ""
        );
    }

    #[test]
    fn source_hash_is_sha256_hex() {
        assert_eq!(
            source_hash(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(doc_with("abc").source_hash(), source_hash("abc"));
    }

    #[test]
    fn edits_rebuild_the_same_text_elsewhere() {
        let mut doc = SourceDoc::new();
        let mut updates = vec![
            doc.insert(0, "hello world").unwrap(),
            doc.insert(5, ",").unwrap(),
            doc.delete(0, 1).unwrap(),
            doc.insert(0, "H").unwrap(),
            doc.replace_all("Hello, wide world — ok"),
            doc.insert(0, "★ ").unwrap(),
            doc.delete(0, 2).unwrap(),
        ];
        updates.push(doc.replace_all("Hello, world"));
        let mut other = SourceDoc::new();
        for update in &updates {
            other.apply_update(update).unwrap();
        }
        assert_eq!(other.text(), "Hello, world");
        assert_eq!(other.text(), doc.text());
    }

    #[test]
    fn positions_are_utf16_code_units() {
        let mut doc = doc_with("a😀b");
        assert_eq!(doc.len(), 4);
        doc.insert(3, "!").unwrap();
        assert_eq!(doc.text(), "a😀!b");
        doc.delete(1, 2).unwrap();
        assert_eq!(doc.text(), "a!b");
    }

    #[test]
    fn edits_out_of_range_are_refused() {
        let mut doc = doc_with("abc");
        assert_eq!(
            doc.insert(4, "x"),
            Err(DocError::OutOfRange { end: 4, len: 3 })
        );
        assert_eq!(
            doc.delete(2, 2),
            Err(DocError::OutOfRange { end: 4, len: 3 })
        );
        assert_eq!(
            doc.delete(u32::MAX, u32::MAX),
            Err(DocError::OutOfRange {
                end: 2 * u64::from(u32::MAX),
                len: 3
            })
        );
        assert_eq!(doc.anchor(1, 1), Err(DocError::EmptyRange));
        assert_eq!(
            doc.anchor(2, 9),
            Err(DocError::OutOfRange { end: 9, len: 3 })
        );
        assert_eq!(doc.text(), "abc");
    }

    #[test]
    fn truncated_update_is_undecodable() {
        let mut doc = SourceDoc::new();
        let update = doc
            .insert(0, "some text that makes a longer update")
            .unwrap();
        for cut in [1, update.len() / 2, update.len() - 1] {
            let mut other = SourceDoc::new();
            assert_eq!(
                other.apply_update(&update[..cut]),
                Err(DocError::Undecodable),
                "{cut}"
            );
            assert_eq!(validate_update(&update[..cut]), Err(DocError::Undecodable));
        }
        assert_eq!(
            SourceDoc::from_state(&[0xff, 0xff, 0xff]).unwrap_err(),
            DocError::Undecodable
        );
        assert_eq!(validate_update(&update), Ok(()));
    }

    #[test]
    fn hostile_bytes_never_panic() {
        // Client IDs past 53 bits trip a debug assertion inside yrs.
        let huge_client = [
            1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 4, 1, 1, b'x', 0,
        ];
        assert!(SourceDoc::new().apply_update(&huge_client).is_err());
        let mut seed: u32 = 7;
        for len in 0..200 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    (seed >> 16) as u8
                })
                .collect();
            let mut doc = SourceDoc::new();
            let _ = doc.apply_update(&bytes);
            let _ = doc.resolve(&Anchor {
                start: BASE64.encode(&bytes),
                end: BASE64.encode(&bytes),
                quote: String::new(),
            });
        }
    }

    #[test]
    fn update_with_missing_predecessor_is_refused() {
        let mut author = SourceDoc::new();
        let _first = author.insert(0, "first").unwrap();
        let second = author.insert(5, " second").unwrap();
        let mut other = SourceDoc::new();
        assert_eq!(
            other.apply_update(&second),
            Err(DocError::MissingDependencies)
        );

        // A deletion of text this document never saw is missing its dependency too.
        let mut author = doc_with("abc");
        let deletion = author.delete(0, 1).unwrap();
        assert_eq!(
            SourceDoc::new().apply_update(&deletion),
            Err(DocError::MissingDependencies)
        );
    }

    #[test]
    fn repeated_update_is_harmless() {
        let mut author = SourceDoc::new();
        let update = author.insert(0, "once").unwrap();
        let mut other = SourceDoc::new();
        other.apply_update(&update).unwrap();
        other.apply_update(&update).unwrap();
        assert_eq!(other.text(), "once");
    }

    #[test]
    fn anchors_follow_their_passage() {
        let mut doc = doc_with("alpha beta gamma");
        let anchor = doc.anchor(6, 10).unwrap();
        assert_eq!(anchor.quote, "beta");
        assert_eq!(doc.resolve(&anchor), Some((6, 10)));

        doc.insert(0, ">> ").unwrap();
        assert_eq!(doc.resolve(&anchor), Some((9, 13)));
        // Text typed right after the passage stays outside it; text inside it is covered.
        doc.insert(13, "!").unwrap();
        doc.insert(11, "-").unwrap();
        assert_eq!(doc.resolve(&anchor), Some((9, 14)));
        assert_eq!(&doc.text()[9..14], "be-ta");

        // Another copy of the document resolves the same anchor.
        let copy = SourceDoc::from_state(&doc.encode_state()).unwrap();
        assert_eq!(copy.resolve(&anchor), Some((9, 14)));

        doc.delete(9, 5).unwrap();
        assert_eq!(doc.text(), ">> alpha ! gamma");
        assert_eq!(doc.resolve(&anchor), None);
    }

    #[test]
    fn anchors_at_the_edges() {
        let mut doc = doc_with("abc");
        let whole = doc.anchor(0, 3).unwrap();
        doc.insert(3, "d").unwrap();
        doc.insert(0, "_").unwrap();
        assert_eq!(doc.resolve(&whole), Some((1, 4)));
    }

    #[test]
    fn foreign_or_broken_anchors_do_not_resolve() {
        let doc = doc_with("abc");
        let anchor = doc.anchor(0, 2).unwrap();
        // Another document's items are unknown here.
        assert_eq!(doc_with("abc").resolve(&anchor), None);
        let broken = Anchor {
            start: "not base64!".to_owned(),
            ..anchor.clone()
        };
        assert_eq!(doc.resolve(&broken), None);
        let garbage = Anchor {
            start: BASE64.encode([9, 9, 9]),
            ..anchor
        };
        assert_eq!(doc.resolve(&garbage), None);
    }

    #[test]
    fn replace_all_keeps_anchors_outside_the_change() {
        let mut doc = doc_with("one two three");
        let three = doc.anchor(8, 13).unwrap();
        let two = doc.anchor(4, 7).unwrap();
        doc.replace_all("one 2 three");
        assert_eq!(doc.resolve(&three), Some((6, 11)));
        assert_eq!(doc.resolve(&two), None);
        doc.replace_all("");
        assert_eq!(doc.text(), "");
    }
}
