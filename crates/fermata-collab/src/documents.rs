//! The documents service: what the HTTP API does with documents. Creation (browser style, or a
//! program's with an idempotency key, owned by the caller who first used it, and its first
//! text), reads by ID or slug with the canonical text or as one Yjs update, renames, rewrites and
//! program updates (through the document's room, so clients see them only once saved, and
//! refused at a stale revision when the caller names one), archive, restore, delete, keyset
//! pages and children; full-text search in keyset pages; and activity history: its sessions,
//! and restoring one through the same rewrite, credited to whoever restored it.

use std::sync::Arc;

use fermata_docs::{OpenDocument, Recovering, Sidecar, SourceDoc};
use fermata_store::repository::creation_fingerprint;
use fermata_store::search::MAX_SEARCH_PAGE;
use fermata_store::{
    Channel, ChannelFilter, ChannelId, CreationKey, CreationOrigin, DocumentCursor, DocumentScope,
    Fence, NewChannel, NewCheckpoint, PublishedChannel, Repository, SearchCursor, SearchHit,
    SearchQuery, SearchTerms, Slug, Storage, StoreError, UnixMillis, UserId, Version,
};

use crate::document_fences::Route;
use crate::fence::WriterFence;
use crate::repositories::Repositories;
use crate::room::EditError;
use crate::rooms::RoomManager;

/// How long a search waits for the open rooms to index what their live edits saved.
const INDEX_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// A document as read: its metadata and counters, and its canonical text.
#[derive(Debug, Clone)]
pub struct DocumentView {
    pub channel: Channel,
    pub text: String,
    pub source_hash: String,
}

/// What a program's creation with an idempotency key came to.
#[derive(Debug, Clone)]
pub enum KeyedOutcome {
    /// The document was created now.
    Created(Channel),
    /// The same caller sent the same request before: the document it created.
    Repeated(Channel),
    /// The key was used first by another caller (or before keys had owners): nothing changed.
    AnotherCaller,
    /// The same caller used the key before with another body: nothing changed.
    AnotherBody,
}

/// A page of a list, most recently updated first.
#[derive(Debug, Clone)]
pub struct Page {
    pub documents: Vec<Channel>,
    /// Pass back to get the next page; absent on the last.
    pub next: Option<String>,
}

/// A page of search hits, best first.
#[derive(Debug, Clone)]
pub struct SearchPage {
    pub hits: Vec<SearchHit>,
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
    rooms: RoomManager,
    /// Who may do what in the documents' repositories.
    repositories: Repositories,
}

/// Refuses a text that breaks the rules every edit from outside keeps (no NUL, plain text), with
/// the check a rewrite runs in the room: for a caller that checks everything before it writes
/// anything, as an import does.
pub fn check_text(text: &str) -> Result<(), fermata_docs::DocError> {
    fermata_docs::SourceDoc::new().replace_text(text).map(drop)
}

impl Documents {
    pub fn new(storage: Arc<dyn Storage>, fence: WriterFence, rooms: RoomManager) -> Self {
        Documents {
            repositories: Repositories::new(Arc::clone(&storage), fence),
            storage,
            rooms,
        }
    }

    pub fn rooms(&self) -> &RoomManager {
        &self.rooms
    }

    /// Where document `id` is written: here, or by another member of the cluster.
    pub async fn route(&self, id: &ChannelId) -> Result<Route, StoreError> {
        self.rooms.fences().route(id).await
    }

    /// Where a document created in `repository` with `key` and `parent` is written: in its
    /// parent's shard, else in the shard of the ID its creation key determines. One with neither
    /// gets an ID this process writes, so it is created here.
    pub async fn route_of_new(
        &self,
        repository: &Repository,
        key: Option<&CreationKey>,
        parent: Option<&ChannelId>,
    ) -> Result<Route, StoreError> {
        let fences = self.rooms.fences();
        match (parent, key) {
            (Some(parent), _) => fences.route(parent).await,
            (None, Some(key)) => {
                Ok(fences.route_of_new(&ChannelId::for_creation_key(repository, key)))
            }
            (None, None) => Ok(Route::Here),
        }
    }

    /// The fence document `id` is written under, or `Unavailable` while this process does not
    /// write it.
    async fn fence_of(&self, id: &ChannelId) -> Result<Fence, StoreError> {
        self.rooms.fences().for_document(id).await?.0.current()
    }

    /// The fence a new document `id` is written under: its parent's, or its own shard's.
    async fn fence_for_new(
        &self,
        id: &ChannelId,
        parent: Option<&ChannelId>,
    ) -> Result<Fence, StoreError> {
        match parent {
            Some(parent) => self.fence_of(parent).await,
            None => self.rooms.fences().for_new(id),
        }
    }

    /// The repositories the documents belong to, with their members.
    pub fn repositories(&self) -> &Repositories {
        &self.repositories
    }

    /// A document's metadata by ID, archived or not, if it exists.
    pub async fn find(&self, id: &ChannelId) -> Result<Option<Channel>, StoreError> {
        self.storage.collaboration().channel(id).await
    }

    /// Creates a document the way a browser does: metadata only, no text until first opened.
    pub async fn create(
        &self,
        repository: Repository,
        title: String,
        parent: Option<ChannelId>,
    ) -> Result<Channel, StoreError> {
        let id = match parent {
            Some(_) => ChannelId::random(),
            None => self.rooms.fences().local_id()?,
        };
        self.create_at(id, repository, title, parent).await
    }

    /// [`Documents::create`] under a chosen ID (an import keeps the exported one where it is
    /// free); an ID already taken is `Conflict`.
    pub async fn create_at(
        &self,
        id: ChannelId,
        repository: Repository,
        title: String,
        parent: Option<ChannelId>,
    ) -> Result<Channel, StoreError> {
        let fence = self.fence_for_new(&id, parent.as_ref()).await?;
        self.storage
            .collaboration()
            .create_channel(
                &fence,
                &NewChannel {
                    id,
                    repository,
                    title,
                    parent,
                },
            )
            .await
    }

    /// Every document of a repository, archived ones too, in no particular order.
    pub async fn all_in(&self, repository: &Repository) -> Result<Vec<Channel>, StoreError> {
        self.storage
            .collaboration()
            .list_channels(&ChannelFilter {
                repository: Some(repository.clone()),
                include_archived: true,
            })
            .await
    }

    /// Every slug of a document: the canonical one first, then its former ones.
    pub async fn slugs(&self, id: &ChannelId) -> Result<Vec<Slug>, StoreError> {
        self.storage.collaboration().slugs_of(id).await
    }

    /// Creates a document the way a program does: at the ID its idempotency key determines, with
    /// its first text published atomically. The key belongs to the caller who used it first: a
    /// repeat by that caller with the same request returns the document, and anything else
    /// changes nothing.
    pub async fn create_with_key(
        &self,
        repository: Repository,
        key: CreationKey,
        title: String,
        parent: Option<ChannelId>,
        text: &str,
        caller: &UserId,
    ) -> Result<KeyedOutcome, StoreError> {
        let limit = self.rooms.settings().max_document_bytes;
        if text.len() > limit {
            return Err(StoreError::invalid(
                "the text is larger than this server keeps",
            ));
        }
        let id = ChannelId::for_creation_key(&repository, &key);
        let fence = self.fence_for_new(&id, parent.as_ref()).await?;
        let origin = CreationOrigin {
            caller: caller.clone(),
            fingerprint: creation_fingerprint(&repository, &title, parent.as_ref(), text),
        };
        let found = self
            .storage
            .repositories()
            .create_keyed(
                &fence,
                &PublishedChannel {
                    repository,
                    key,
                    title,
                    parent,
                    checkpoint: initial_checkpoint(text),
                },
                &origin,
            )
            .await?;
        Ok(match found.origin {
            _ if found.created => KeyedOutcome::Created(found.channel),
            Some(first) if first == origin => KeyedOutcome::Repeated(found.channel),
            Some(first) if first.caller == origin.caller => KeyedOutcome::AnotherBody,
            _ => KeyedOutcome::AnotherCaller,
        })
    }

    /// A document recovered from storage as it is read (a long journal replayed while the rest
    /// is read), with its channel as read.
    async fn recovered(&self, id: &ChannelId) -> Result<(Channel, OpenDocument), StoreError> {
        let mut recovering = Recovering::new(id);
        self.storage
            .collaboration()
            .read_for_recovery(id, &mut recovering)
            .await?;
        Ok(recovering.finish()?)
    }

    /// A document by ID, with its canonical text: from its open room when the room is at least
    /// at the stored revision (one row read, no recovery), otherwise recovered from storage.
    pub async fn read(&self, id: &ChannelId) -> Result<DocumentView, StoreError> {
        if let Some((text, revision)) = self.rooms.read_open(id).await {
            let channel = self.channel(id).await?;
            if revision >= channel.revision {
                return Ok(DocumentView {
                    source_hash: fermata_docs::source_hash(&text),
                    text,
                    channel,
                });
            }
        }
        let (channel, open) = self.recovered(id).await?;
        Ok(DocumentView {
            text: open.doc.text(),
            source_hash: open.doc.source_hash(),
            channel,
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

    /// Renames a document, refused with [`EditError::Stale`] unless it is still at `expected`
    /// (when given).
    pub async fn rename(
        &self,
        id: &ChannelId,
        title: String,
        expected: Option<i64>,
    ) -> Result<Channel, EditError> {
        fermata_store::channel::check_title(&title)?;
        self.rooms.rename(id, title, expected).await?;
        Ok(self.channel(id).await?)
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

    /// [`Documents::rewrite`], refused with [`EditError::Stale`] unless the document is still at
    /// `expected` (when given) as its room applies the rewrite. Without `expected`, whatever
    /// was edited since the caller read the text is replaced.
    pub async fn rewrite_at(
        &self,
        id: &ChannelId,
        text: String,
        author: Option<UserId>,
        expected: Option<i64>,
    ) -> Result<Channel, EditError> {
        self.rooms.rewrite_at(id, text, author, expected).await?;
        Ok(self.channel(id).await?)
    }

    /// Merges a program's Yjs update the way a live client's is merged (validated, committed,
    /// then broadcast), credited in history to `author`. Concurrent edits are kept: nothing is
    /// reverted.
    pub async fn apply_update(
        &self,
        id: &ChannelId,
        update: Vec<u8>,
        author: Option<UserId>,
    ) -> Result<Channel, EditError> {
        self.rooms.apply_update(id, update, author).await?;
        Ok(self.channel(id).await?)
    }

    /// The document as one Yjs update (v1), or the difference from `vector` (a v1 state vector)
    /// when given, with the revision it reflects: from its open room when the room is at least at
    /// the stored revision (one row read, no recovery), otherwise recovered from storage.
    pub async fn state(
        &self,
        id: &ChannelId,
        vector: Option<Vec<u8>>,
    ) -> Result<(Vec<u8>, i64), EditError> {
        if let Some(open) = self.rooms.state_open(id, vector.clone()).await {
            let (bytes, revision) = open.map_err(EditError::Refused)?;
            if revision >= self.channel(id).await?.revision {
                return Ok((bytes, revision));
            }
        }
        let (_, open) = self.recovered(id).await?;
        let bytes = match vector {
            Some(vector) => open.doc.diff_since(&vector).map_err(EditError::Refused)?,
            None => open.doc.encode_state(),
        };
        Ok((bytes, open.revision))
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
        self.restore_version_at(id, number, by, None)
            .await
            .map_err(|error| match error {
                EditError::Store(error) => error,
                other => StoreError::invalid(other.to_string()),
            })
    }

    /// [`Documents::restore_version`], refused with [`EditError::Stale`] unless the document is
    /// still at `expected` (when given).
    pub async fn restore_version_at(
        &self,
        id: &ChannelId,
        number: i64,
        by: UserId,
        expected: Option<i64>,
    ) -> Result<Channel, EditError> {
        let version = self
            .storage
            .history()
            .version(id, number)
            .await?
            .ok_or_else(|| StoreError::missing("no such version of this document"))?;
        self.rewrite_at(id, version.text, Some(by), expected).await
    }

    /// Archives first, then closes the room: a room that opens meanwhile refuses the archived
    /// document, and an edit committed meanwhile is refused by storage.
    pub async fn archive(&self, id: &ChannelId) -> Result<Channel, StoreError> {
        let fence = self.fence_of(id).await?;
        let archived = self.storage.collaboration().archive(&fence, id).await?;
        self.rooms.close(id, "the document was archived").await;
        Ok(archived)
    }

    pub async fn restore(&self, id: &ChannelId) -> Result<Channel, StoreError> {
        let fence = self.fence_of(id).await?;
        self.storage.collaboration().restore(&fence, id).await
    }

    pub async fn delete(&self, id: &ChannelId) -> Result<(), StoreError> {
        let fence = self.fence_of(id).await?;
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

    /// A page of the documents in `scope`, most recently updated first, read as one keyset page
    /// in storage. `after` is a previous page's `next`.
    pub async fn list(
        &self,
        scope: &DocumentScope,
        include_archived: bool,
        limit: usize,
        after: Option<&str>,
    ) -> Result<Page, StoreError> {
        let cursor = after.map(parse_cursor).transpose()?;
        // One more than asked for tells whether another page follows.
        let mut documents = self
            .storage
            .repositories()
            .documents_page(scope, include_archived, cursor.as_ref(), limit + 1)
            .await?;
        let more = documents.len() > limit;
        documents.truncate(limit);
        let next = more
            .then(|| {
                documents
                    .last()
                    .map(|c| format!("{}.{}", c.updated_at.0, c.id.0))
            })
            .flatten();
        Ok(Page { documents, next })
    }

    /// A page of the documents in `scope` that match the search `text` and that `reader` may
    /// read, decided by the store in the same query (a `system_admin` reads a repository the
    /// scope names only after the caller recorded the override), best first, read as one keyset
    /// page in storage, at most [`MAX_SEARCH_PAGE`] hits. `after` is a previous page's `next`.
    /// An empty or malformed search is refused as invalid.
    pub async fn search(
        &self,
        reader: &UserId,
        scope: &DocumentScope,
        text: &str,
        include_archived: bool,
        limit: usize,
        after: Option<&str>,
    ) -> Result<SearchPage, StoreError> {
        let limit = limit.clamp(1, MAX_SEARCH_PAGE);
        let query = SearchQuery {
            reader: reader.clone(),
            terms: SearchTerms::parse(text)?,
            repository: match scope {
                DocumentScope::MemberOf(_) => None,
                DocumentScope::Repository(name) => Some(name.clone()),
            },
            include_archived,
            after: after.map(parse_search_cursor).transpose()?,
            // One more than asked for tells whether another page follows.
            limit: limit + 1,
        };
        // What live rooms saved but have not indexed yet is indexed first.
        self.rooms.index_open_texts(INDEX_PATIENCE).await;
        let mut hits = self.storage.search().search(&query).await?;
        let more = hits.len() > limit;
        hits.truncate(limit);
        let next = more
            .then(|| {
                hits.last()
                    .map(|hit| format!("{:016x}.{}", hit.score.to_bits(), hit.id.0))
            })
            .flatten();
        Ok(SearchPage { hits, next })
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

/// A search page's cursor: the last hit's score (its bits, in hex) and ID.
fn parse_search_cursor(cursor: &str) -> Result<SearchCursor, StoreError> {
    let invalid = || StoreError::invalid("the page cursor is not one this server gave");
    let (bits, id) = cursor.split_once('.').ok_or_else(invalid)?;
    // Dropped on purpose: a cursor this server did not give is refused as such.
    let score = u64::from_str_radix(bits, 16)
        .map(f64::from_bits)
        .map_err(|_| invalid())?;
    if !score.is_finite() {
        return Err(invalid());
    }
    Ok(SearchCursor {
        score,
        id: ChannelId::parse(id).map_err(|_| invalid())?,
    })
}

fn parse_cursor(cursor: &str) -> Result<DocumentCursor, StoreError> {
    let invalid = || StoreError::invalid("the page cursor is not one this server gave");
    let (at, id) = cursor.split_once('.').ok_or_else(invalid)?;
    // Dropped on purpose: a cursor this server did not give is refused as such.
    Ok(DocumentCursor {
        updated_at: UnixMillis(at.parse().map_err(|_| invalid())?),
        id: ChannelId::parse(id).map_err(|_| invalid())?,
    })
}
