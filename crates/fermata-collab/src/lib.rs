//! Live collaboration on documents: rooms that speak the y-websocket protocol to real Yjs
//! clients, with persistence before publication (an update is committed before anyone sees it),
//! batching, a checkpoint policy, limits, and closing on a lost writer lease; and the documents
//! service, with each document's activity history (recorded after acknowledgement, restored
//! through the ordinary rewrite), and the media service (a document's images, Chat attachments)
//! the HTTP API uses; the repositories service (members, roles, the audited `system_admin`
//! override); the background-job services (generated descriptions, research publication); the
//! startup sequence and the periodic sweeps a serving process runs under the writer lease; a
//! repository written as files (its manifest and export).
//!
//! The HTTP layer upgrades a WebSocket and shuttles bytes between it and a [`Connection`]; all
//! protocol and storage work happens here.

mod decode_threads;
pub mod descriptions;
mod document_fences;
mod documents;
mod fairness;
mod fence;
mod gather;
mod history;
mod media;
mod outbound;
pub mod protocol;
mod repositories;
pub mod repository_files;
pub mod research;
mod room;
mod rooms;
mod search_index;
mod settings;
mod spread;
pub mod startup;
pub mod storage_outage;
pub mod sweeps;
pub mod verification;

pub use descriptions::Descriptions;
pub use document_fences::{DocumentFences, Route};
pub use documents::{DocumentView, Documents, KeyedOutcome, Page, SearchPage, check_text};
pub use fence::WriterFence;
/// The line diffs between history sessions, for the pages that show them: the HTTP layer reaches
/// documents only through this crate.
pub use fermata_docs::{DiffLine, DiffRow, LineChange, LineDiff, line_diff};
pub use media::{
    ImageSource, Media, MediaFailure, MediaSettings, ServedFile, StoredImageUpload,
    UploadReservation, default_decode_concurrency,
};
pub use outbound::OutboundReceiver;
pub use repositories::{NamedMember, Repositories, Standing, may_create};
pub use research::Research;
pub use room::{EditError, Outbound, Refusal, close};
pub use rooms::{Connection, RoomInbox, RoomManager};
pub use settings::CollabSettings;
pub use sweeps::{SWEEP_EVERY, Sweeps};
