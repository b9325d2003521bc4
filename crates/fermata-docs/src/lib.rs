//! Documents: the domain model of a collaborative document, without IO.
//!
//! A document is a Yjs document whose root text `source` holds its MDX ([`SourceDoc`]), plus a
//! versioned sidecar of domain records ([`Sidecar`]) that commits store atomically with it.
//! This crate decodes and checks what the storage port keeps as opaque bytes and text: it turns a
//! [`fermata_store::RecoverySnapshot`] into an [`OpenDocument`] ([`recover`]), or into a
//! `Corrupt` failure naming the document and what was wrong, and it computes what the store keeps
//! beside the bytes (canonical text, source hash, sidecar version, unanswered-decision count) for
//! checkpoints and commits, and the line diffs between two of a document's texts that its history
//! shows ([`line_diff`]). It never touches a database, a socket or a file.

mod child_conversation;
mod diff;
mod recovering;
mod recovery;
mod sidecar;
mod source;

pub use child_conversation::{
    CHAT_CITATION_FIELDS, CHILD_CONVERSATION_FIELDS, ChildClearing, clear_child_conversation,
};
pub use diff::{CONTEXT_LINES, DiffLine, DiffRow, LineChange, LineDiff, line_diff};
pub use recovering::{OVERLAP_FROM, Recovering};
pub use recovery::{OpenDocument, RecoveryError, RecoveryProblem, Stored, recover};
pub use sidecar::{
    Comment, GraphEdge, GraphNode, ImplementationGraph, Question, QuestionStatus, Restored,
    SIDECAR_VERSION, Sidecar, SidecarError, restore,
};
pub use source::{Anchor, DocError, SourceDoc, is_empty_update, source_hash, validate_update};
