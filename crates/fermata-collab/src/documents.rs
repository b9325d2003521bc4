//! The documents service: what the HTTP API does with documents. Creation (browser style, or a
//! program's with an idempotency key and its first text), reads by ID or slug with the canonical
//! text, renames and rewrites (through the document's room, so clients see them only once
//! saved), archive, restore, delete, lists and children; and activity history: its sessions,
//! and restoring one through the same rewrite, credited to whoever restored it.

use std::sync::Arc;

use fermata_docs::{Sidecar, SourceDoc, recover};
use fermata_store::{
    Channel, ChannelFilter, ChannelId, CreationKey, NewChannel, NewCheckpoint, PublishedChannel,
    Repository, Slug, Storage, StoreError, UserId, Version,
};

use crate::fence::WriterFence;
use crate::rooms::RoomManager;

/// A document as read: its metadata and counters, and its canonical text.
#[derive(Debug, Clone)]
pub struct DocumentView {
    pub channel: Channel,
    pub text: String,
    pub source_hash: String,
}

/// A page of a list, most recently updated first.
#[derive(Debug, Clone)]
pub struct Page {
    pub documents: Vec<Channel>,
    /// Pass back to get the next page; absent on the last.
    pub next: Option<String>,
}

/// The complete revision-zero checkpoint of a document created with `text`: its Yjs state,
/// canonical text and hash, and an empty sidecar. Program creation and research publication
/// both start a document from one.
pub(crate) fn initial_checkpoint(text: &str) -> NewCheckpoint {
    let mut doc = SourceDoc::new();
    doc.replace_all(text);
    NewCheckpoint {
        epoch: 1,
        through_sequence: 0,
        revision: 0,
        canonical_text: doc.text(),
        source_hash: doc.source_hash(),
        state: doc.encode_state(),
        sidecar: Some(Sidecar::default().to_state()),
    }
}

/// The documents service.
#[derive(Debug, Clone)]
pub struct Documents {
    storage: Arc<dyn Storage>,
    fence: WriterFence,
    rooms: RoomManager,
}

impl Documents {
    pub fn new(storage: Arc<dyn Storage>, fence: WriterFence, rooms: RoomManager) -> Self {
        Documents {
            storage,
            fence,
            rooms,
        }
    }

    pub fn rooms(&self) -> &RoomManager {
        &self.rooms
    }

    /// Creates a document the way a browser does: metadata only, no text until first opened.
    pub async fn create(
        &self,
        repository: Repository,
        title: String,
        parent: Option<ChannelId>,
    ) -> Result<Channel, StoreError> {
        let fence = self.fence.current()?;
        self.storage
            .collaboration()
            .create_channel(
                &fence,
                &NewChannel {
                    id: ChannelId::random(),
                    repository,
                    title,
                    parent,
                },
            )
            .await
    }

    /// Creates a document the way a program does: at the ID its idempotency key determines, with
    /// its first text published atomically. A repeat returns the existing document, and whether it
    /// was created now.
    pub async fn create_with_key(
        &self,
        repository: Repository,
        key: CreationKey,
        title: String,
        parent: Option<ChannelId>,
        text: &str,
    ) -> Result<(Channel, bool), StoreError> {
        let limit = self.rooms.settings().max_document_bytes;
        if text.len() > limit {
            return Err(StoreError::invalid(
                "the text is larger than this server keeps",
            ));
        }
        let fence = self.fence.current()?;
        let id = ChannelId::for_creation_key(&repository, &key);
        if let Some(existing) = self.storage.collaboration().channel(&id).await? {
            return Ok((existing, false));
        }
        let checkpoint = initial_checkpoint(text);
        let channel = self
            .storage
            .collaboration()
            .create_published(
                &fence,
                &PublishedChannel {
                    repository,
                    key,
                    title,
                    parent,
                    checkpoint,
                },
            )
            .await?;
        Ok((channel, true))
    }

    /// A document by ID, with its canonical text (from its open room, or recovered from storage).
    pub async fn read(&self, id: &ChannelId) -> Result<DocumentView, StoreError> {
        let snapshot = self.storage.collaboration().recovery_snapshot(id).await?;
        if let Some((text, revision)) = self.rooms.read_open(id).await
            && revision >= snapshot.channel.revision
        {
            let channel = self
                .storage
                .collaboration()
                .channel(id)
                .await?
                .unwrap_or(snapshot.channel);
            return Ok(DocumentView {
                source_hash: fermata_docs::source_hash(&text),
                text,
                channel,
            });
        }
        let open = recover(&snapshot)?;
        Ok(DocumentView {
            text: open.doc.text(),
            source_hash: open.doc.source_hash(),
            channel: snapshot.channel,
        })
    }

    /// The document a canonical or former slug names.
    pub async fn resolve(
        &self,
        repository: &Repository,
        slug: &Slug,
    ) -> Result<Option<Channel>, StoreError> {
        self.storage
            .collaboration()
            .resolve_slug(repository, slug)
            .await
    }

    pub async fn rename(&self, id: &ChannelId, title: String) -> Result<Channel, StoreError> {
        fermata_store::channel::check_title(&title)?;
        self.rooms.rename(id, title).await?;
        self.channel(id).await
    }

    /// Replaces the canonical text (the program update path), credited in history to `author`
    /// (the calling user; `None` for a server edit).
    pub async fn rewrite(
        &self,
        id: &ChannelId,
        text: String,
        author: Option<UserId>,
    ) -> Result<Channel, StoreError> {
        self.rooms.rewrite(id, text, author).await?;
        self.channel(id).await
    }

    /// A document's activity history, newest session first, at most `limit`.
    pub async fn versions(&self, id: &ChannelId, limit: usize) -> Result<Vec<Version>, StoreError> {
        self.channel(id).await?;
        self.storage.history().versions(id, limit).await
    }

    /// Restores a session's text through the same fenced rewrite as a program update, credited
    /// to `by`. Only the text changes: the sidecar (decisions, questionnaires, research and
    /// investigations) is carried across as it is today.
    pub async fn restore_version(
        &self,
        id: &ChannelId,
        number: i64,
        by: UserId,
    ) -> Result<Channel, StoreError> {
        let version = self
            .storage
            .history()
            .version(id, number)
            .await?
            .ok_or_else(|| StoreError::missing("no such version of this document"))?;
        self.rewrite(id, version.text, Some(by)).await
    }

    /// Archives first, then closes the room: a room that opens meanwhile refuses the archived
    /// document, and an edit committed meanwhile is refused by storage.
    pub async fn archive(&self, id: &ChannelId) -> Result<Channel, StoreError> {
        let fence = self.fence.current()?;
        let archived = self.storage.collaboration().archive(&fence, id).await?;
        self.rooms.close(id, "the document was archived").await;
        Ok(archived)
    }

    pub async fn restore(&self, id: &ChannelId) -> Result<Channel, StoreError> {
        let fence = self.fence.current()?;
        self.storage.collaboration().restore(&fence, id).await
    }

    pub async fn delete(&self, id: &ChannelId) -> Result<(), StoreError> {
        let fence = self.fence.current()?;
        self.rooms.close(id, "the document was deleted").await;
        self.storage
            .collaboration()
            .delete_archived(&fence, id)
            .await
    }

    pub async fn channel(&self, id: &ChannelId) -> Result<Channel, StoreError> {
        self.storage
            .collaboration()
            .channel(id)
            .await?
            .ok_or_else(|| StoreError::missing(format!("document {id} is unavailable")))
    }

    /// A page of documents, most recently updated first. `after` is a previous page's `next`.
    pub async fn list(
        &self,
        filter: &ChannelFilter,
        limit: usize,
        after: Option<&str>,
    ) -> Result<Page, StoreError> {
        let all = self.storage.collaboration().list_channels(filter).await?;
        let start = match after {
            None => 0,
            Some(cursor) => {
                // The list runs newest first, ties by ID: the page starts after the cursor's place.
                let (at, id) = parse_cursor(cursor)?;
                all.iter()
                    .position(|c| c.updated_at.0 < at || (c.updated_at.0 == at && c.id.0 > id))
                    .unwrap_or(all.len())
            }
        };
        let documents: Vec<Channel> = all.iter().skip(start).take(limit).cloned().collect();
        let next = (start + documents.len() < all.len())
            .then(|| {
                documents
                    .last()
                    .map(|c| format!("{}.{}", c.updated_at.0, c.id.0))
            })
            .flatten();
        Ok(Page { documents, next })
    }

    pub async fn children(
        &self,
        id: &ChannelId,
        include_archived: bool,
    ) -> Result<Vec<Channel>, StoreError> {
        self.channel(id).await?;
        self.storage
            .collaboration()
            .children_of(id, include_archived)
            .await
    }
}

fn parse_cursor(cursor: &str) -> Result<(i64, String), StoreError> {
    let invalid = || StoreError::invalid("the page cursor is not one this server gave");
    let (at, id) = cursor.split_once('.').ok_or_else(invalid)?;
    // Dropped on purpose: a cursor this server did not give is refused as such.
    Ok((
        at.parse().map_err(|_| invalid())?,
        ChannelId::parse(id).map_err(|_| invalid())?.0,
    ))
}
