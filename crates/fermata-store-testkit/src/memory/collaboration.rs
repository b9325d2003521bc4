//! The memory adapter's collaboration store.

use std::collections::{BTreeMap, HashSet};

use async_trait::async_trait;

use super::{MemoryStorage, State};
use fermata_store::channel::{
    Channel, ChannelFilter, ChannelId, DescriptionDraft, NewChannel, Repository, Slug, check_title,
    choose_slug, updated_at_after_commit,
};
use fermata_store::cluster::ShardCount;
use fermata_store::collaboration::{
    Checkpoint, CollaborationStore, Commit, Committed, Event, JournalUpdate, NewCheckpoint,
    PublishedChannel, RecoveryHead, RecoveryReceiver, SidecarState,
};
use fermata_store::collaboration_rules::{
    check_checkpoint, check_commit, check_epoch_replacement, check_initial_checkpoint,
    check_new_channel, describe, repeated,
};
use fermata_store::error::{StoreError, StoreResult};
use fermata_store::lease::Fence;
use fermata_store::search::indexed_text;
use fermata_store::time::UnixMillis;
use fermata_store::user::UserId;

/// Everything the collaboration store keeps, in memory.
#[derive(Debug, Default)]
pub(super) struct Documents {
    channels: BTreeMap<ChannelId, Channel>,
    /// (repository, slug) → channel, with the order slugs were promoted in.
    slugs: BTreeMap<(Repository, Slug), (ChannelId, u64)>,
    promotions: u64,
    sidecars: BTreeMap<ChannelId, SidecarState>,
    updates: BTreeMap<(ChannelId, i64), JournalUpdate>,
    events: BTreeMap<(ChannelId, i64, usize), Event>,
    operations: BTreeMap<(ChannelId, String), Operation>,
    checkpoints: BTreeMap<ChannelId, Checkpoint>,
    navigation: BTreeMap<UserId, ChannelId>,
    /// Each document's text as the search index holds it.
    texts: BTreeMap<ChannelId, SearchText>,
}

/// A document's text as the search index holds it.
#[derive(Debug, Clone, Default)]
pub(super) struct SearchText {
    pub(super) body: String,
    /// The text may be behind the journal: a commit brought an update without its text, or an
    /// upgrade indexed it from a checkpoint (see the SQL migration).
    pub(super) stale: bool,
}

impl SearchText {
    fn current(text: &str) -> Self {
        SearchText {
            body: indexed_text(text),
            stale: false,
        }
    }
}

#[derive(Debug, Clone)]
struct Operation {
    fingerprint: [u8; 32],
    revision: i64,
    sequence: i64,
    has_update: bool,
}

fn unavailable(id: &ChannelId) -> StoreError {
    StoreError::missing(format!("document {id} is unavailable"))
}

impl Documents {
    /// `Missing` unless the document exists: the check of every store whose rows go with it.
    pub(super) fn require(&self, id: &ChannelId) -> StoreResult<()> {
        if self.channels.contains_key(id) {
            Ok(())
        } else {
            Err(unavailable(id))
        }
    }

    fn channel_mut(&mut self, id: &ChannelId) -> StoreResult<&mut Channel> {
        self.channels.get_mut(id).ok_or_else(|| unavailable(id))
    }

    fn own_slugs(&self, id: &ChannelId) -> Vec<Slug> {
        let mut own: Vec<(&Slug, u64)> = self
            .slugs
            .iter()
            .filter(|(_, (owner, _))| owner == id)
            .map(|((_, slug), (_, order))| (slug, *order))
            .collect();
        own.sort_by_key(|(_, order)| std::cmp::Reverse(*order));
        own.into_iter().map(|(slug, _)| slug.clone()).collect()
    }

    /// Chooses and records the canonical slug for `title`.
    fn promote_slug(&mut self, id: &ChannelId, repository: &Repository, title: &str) -> Slug {
        let own = self.own_slugs(id);
        let taken: HashSet<Slug> = self
            .slugs
            .iter()
            .filter(|((repo, _), (owner, _))| repo == repository && owner != id)
            .map(|((_, slug), _)| slug.clone())
            .collect();
        let slug = choose_slug(&Slug::from_title(title), &own, &taken);
        self.promotions += 1;
        self.slugs.insert(
            (repository.clone(), slug.clone()),
            (id.clone(), self.promotions),
        );
        slug
    }

    fn insert_channel(
        &mut self,
        fence: &Fence,
        new: &NewChannel,
        now: UnixMillis,
    ) -> StoreResult<Channel> {
        check_title(&new.title)?;
        let parent = match &new.parent {
            Some(parent) => Some(
                self.channels
                    .get(parent)
                    .ok_or_else(|| StoreError::invalid("the parent document does not exist"))?,
            ),
            None => None,
        };
        let shard = check_new_channel(new, parent, ShardCount::DEFAULT)?;
        fence.check_covers(shard, "creating a document")?;
        if self.channels.contains_key(&new.id) {
            return Err(StoreError::conflict(format!(
                "document {} already exists",
                new.id
            )));
        }
        let slug = self.promote_slug(&new.id, &new.repository, &new.title);
        let channel = Channel {
            id: new.id.clone(),
            repository: new.repository.clone(),
            title: new.title.clone(),
            slug,
            parent: new.parent.clone(),
            shard,
            archived_at: None,
            created_at: now,
            updated_at: now,
            revision: 0,
            sequence: 0,
            epoch: 1,
            description: None,
        };
        self.channels.insert(new.id.clone(), channel.clone());
        self.texts.insert(new.id.clone(), SearchText::default());
        Ok(channel)
    }

    fn install_checkpoint(
        &mut self,
        id: &ChannelId,
        checkpoint: &NewCheckpoint,
        now: UnixMillis,
    ) -> Checkpoint {
        let generation = self.checkpoints.get(id).map_or(0, |c| c.generation) + 1;
        let stored = Checkpoint {
            epoch: checkpoint.epoch,
            generation,
            through_sequence: checkpoint.through_sequence,
            revision: checkpoint.revision,
            canonical_text: checkpoint.canonical_text.clone(),
            source_hash: checkpoint.source_hash.clone(),
            state: checkpoint.state.clone(),
            sidecar: checkpoint.sidecar.clone(),
            created_at: now,
        };
        self.checkpoints.insert(id.clone(), stored.clone());
        self.updates.retain(|(channel, sequence), _| {
            channel != id || *sequence > checkpoint.through_sequence
        });
        stored
    }
}

impl Documents {
    pub(super) fn contains(&self, id: &ChannelId) -> bool {
        self.channels.contains_key(id)
    }

    pub(super) fn get(&self, id: &ChannelId) -> Option<Channel> {
        self.channels.get(id).cloned()
    }

    /// Every channel, in no particular order.
    pub(super) fn all(&self) -> impl Iterator<Item = &Channel> {
        self.channels.values()
    }

    /// Every document's indexed text, by ID.
    pub(super) fn texts(&self) -> &BTreeMap<ChannelId, SearchText> {
        &self.texts
    }

    pub(super) fn text_mut(&mut self, id: &ChannelId) -> Option<&mut SearchText> {
        self.texts.get_mut(id)
    }

    /// Creates a program's channel with its revision-zero checkpoint, or returns the channel its
    /// creation key already names: `create_published`, and the research store's publication.
    pub(super) fn publish(
        &mut self,
        fence: &Fence,
        channel: &PublishedChannel,
        now: UnixMillis,
    ) -> StoreResult<Channel> {
        let id = ChannelId::for_creation_key(&channel.repository, &channel.key);
        if let Some(existing) = self.channels.get(&id) {
            fence.check_covers(existing.shard, "creating a document")?;
            return Ok(existing.clone());
        }
        check_initial_checkpoint(&channel.checkpoint)?;
        let created = self.insert_channel(
            fence,
            &NewChannel {
                id: id.clone(),
                repository: channel.repository.clone(),
                title: channel.title.clone(),
                parent: channel.parent.clone(),
            },
            now,
        )?;
        self.install_checkpoint(&id, &channel.checkpoint, now);
        if let Some(sidecar) = &channel.checkpoint.sidecar {
            self.sidecars.insert(id.clone(), sidecar.clone());
        }
        self.texts.insert(
            id.clone(),
            SearchText::current(&channel.checkpoint.canonical_text),
        );
        Ok(created)
    }
}

fn docs(state: &mut State) -> &mut Documents {
    &mut state.documents
}

#[async_trait]
impl CollaborationStore for MemoryStorage {
    async fn create_channel(&self, fence: &Fence, channel: &NewChannel) -> StoreResult<Channel> {
        self.inner
            .fenced(fence, |state, now| {
                docs(state).insert_channel(fence, channel, now)
            })
            .await
    }

    async fn create_published(
        &self,
        fence: &Fence,
        channel: &PublishedChannel,
    ) -> StoreResult<Channel> {
        self.inner
            .fenced(fence, |state, now| docs(state).publish(fence, channel, now))
            .await
    }

    async fn channel(&self, id: &ChannelId) -> StoreResult<Option<Channel>> {
        Ok(self.inner.state().documents.channels.get(id).cloned())
    }

    async fn list_channels(&self, filter: &ChannelFilter) -> StoreResult<Vec<Channel>> {
        let state = self.inner.state();
        let mut channels: Vec<Channel> = state
            .documents
            .channels
            .values()
            .filter(|c| filter.include_archived || c.archived_at.is_none())
            .filter(|c| {
                filter
                    .repository
                    .as_ref()
                    .is_none_or(|r| &c.repository == r)
            })
            .cloned()
            .collect();
        channels.sort_by(|a, b| {
            b.updated_at
                .cmp(&a.updated_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok(channels)
    }

    async fn resolve_slug(
        &self,
        repository: &Repository,
        slug: &Slug,
    ) -> StoreResult<Option<Channel>> {
        let state = self.inner.state();
        let documents = &state.documents;
        Ok(documents
            .slugs
            .get(&(repository.clone(), slug.clone()))
            .and_then(|(id, _)| documents.channels.get(id))
            .cloned())
    }

    async fn slugs_of(&self, id: &ChannelId) -> StoreResult<Vec<Slug>> {
        let state = self.inner.state();
        let Some(channel) = state.documents.channels.get(id) else {
            return Ok(Vec::new());
        };
        let mut slugs = vec![channel.slug.clone()];
        slugs.extend(
            state
                .documents
                .own_slugs(id)
                .into_iter()
                .filter(|s| s != &channel.slug),
        );
        Ok(slugs)
    }

    async fn children_of(
        &self,
        id: &ChannelId,
        include_archived: bool,
    ) -> StoreResult<Vec<Channel>> {
        let state = self.inner.state();
        let mut children: Vec<Channel> = state
            .documents
            .channels
            .values()
            .filter(|c| {
                c.parent.as_ref() == Some(id) && (include_archived || c.archived_at.is_none())
            })
            .cloned()
            .collect();
        children.sort_by(|a, b| {
            a.created_at
                .cmp(&b.created_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok(children)
    }

    async fn commit(&self, fence: &Fence, commit: &Commit) -> StoreResult<Committed> {
        self.inner
            .fenced(fence, |state, now| {
                let docs = docs(state);
                let channel = docs
                    .channels
                    .get(&commit.channel)
                    .cloned()
                    .ok_or_else(|| unavailable(&commit.channel))?;
                fence.check_covers(channel.shard, "committing to a document")?;
                let key = (commit.channel.clone(), commit.operation.as_str().to_owned());
                let fingerprint = commit.fingerprint();
                if let Some(done) = docs.operations.get(&key) {
                    return repeated(done.fingerprint, done.revision, done.sequence, fingerprint);
                }
                check_commit(&channel, commit)?;
                let slug = match &commit.title {
                    Some(title) => Some(docs.promote_slug(&channel.id, &channel.repository, title)),
                    None => None,
                };
                let revision = channel.revision + 1;
                let sequence = channel.sequence + 1;
                let stored = docs.channel_mut(&commit.channel)?;
                stored.revision = revision;
                stored.sequence = sequence;
                stored.updated_at = updated_at_after_commit(stored.updated_at, now);
                if let (Some(title), Some(slug)) = (&commit.title, slug) {
                    stored.title = title.clone();
                    stored.slug = slug;
                }
                if let Some(update) = &commit.update {
                    docs.updates.insert(
                        (commit.channel.clone(), sequence),
                        JournalUpdate {
                            sequence,
                            epoch: channel.epoch,
                            bytes: update.clone(),
                        },
                    );
                }
                if let Some(sidecar) = &commit.sidecar {
                    docs.sidecars
                        .insert(commit.channel.clone(), sidecar.clone());
                }
                if let Some(text) = &commit.text {
                    docs.texts
                        .insert(commit.channel.clone(), SearchText::current(text));
                } else if commit.update.is_some()
                    && let Some(indexed) = docs.texts.get_mut(&commit.channel)
                {
                    // An update without its text leaves the indexed text behind (a live room's
                    // batch, indexed when its writers pause).
                    indexed.stale = true;
                }
                for (ordinal, event) in commit.events.iter().enumerate() {
                    docs.events.insert(
                        (commit.channel.clone(), sequence, ordinal),
                        Event {
                            sequence,
                            kind: event.kind.clone(),
                            payload: event.payload.clone(),
                            created_at: now,
                        },
                    );
                }
                docs.operations.insert(
                    key,
                    Operation {
                        fingerprint,
                        revision,
                        sequence,
                        has_update: commit.update.is_some(),
                    },
                );
                Ok(Committed {
                    revision,
                    sequence,
                    repeated: false,
                })
            })
            .await
    }

    async fn updates_after(
        &self,
        id: &ChannelId,
        sequence: i64,
    ) -> StoreResult<Vec<JournalUpdate>> {
        let state = self.inner.state();
        Ok(state
            .documents
            .updates
            .range((id.clone(), sequence + 1)..)
            .take_while(|((channel, _), _)| channel == id)
            .map(|(_, update)| update.clone())
            .collect())
    }

    async fn events_after(&self, id: &ChannelId, sequence: i64) -> StoreResult<Vec<Event>> {
        let state = self.inner.state();
        Ok(events_after(&state.documents, id, sequence))
    }

    async fn save_checkpoint(
        &self,
        fence: &Fence,
        id: &ChannelId,
        checkpoint: &NewCheckpoint,
    ) -> StoreResult<Checkpoint> {
        self.inner
            .fenced(fence, |state, now| {
                let docs = docs(state);
                let channel = docs
                    .channels
                    .get(id)
                    .cloned()
                    .ok_or_else(|| unavailable(id))?;
                fence.check_covers(channel.shard, "saving a checkpoint")?;
                let current = docs.checkpoints.get(id).map(|c| c.through_sequence);
                check_checkpoint(&channel, current, checkpoint)?;
                Ok(docs.install_checkpoint(id, checkpoint, now))
            })
            .await
    }

    async fn replace_epoch(
        &self,
        fence: &Fence,
        id: &ChannelId,
        expected_revision: i64,
        checkpoint: &NewCheckpoint,
    ) -> StoreResult<Committed> {
        self.inner
            .fenced(fence, |state, now| {
                let docs = docs(state);
                let channel = docs
                    .channels
                    .get(id)
                    .cloned()
                    .ok_or_else(|| unavailable(id))?;
                fence.check_covers(channel.shard, "replacing a document's history")?;
                let (revision, sequence) =
                    check_epoch_replacement(&channel, expected_revision, checkpoint)?;
                let stored = docs.channel_mut(id)?;
                stored.revision = revision;
                stored.sequence = sequence;
                stored.epoch = checkpoint.epoch;
                stored.updated_at = now;
                docs.updates.retain(|(channel, _), _| channel != id);
                let installed = NewCheckpoint {
                    through_sequence: sequence,
                    revision,
                    ..checkpoint.clone()
                };
                docs.install_checkpoint(id, &installed, now);
                if let Some(sidecar) = &checkpoint.sidecar {
                    docs.sidecars.insert(id.clone(), sidecar.clone());
                }
                docs.texts
                    .insert(id.clone(), SearchText::current(&checkpoint.canonical_text));
                Ok(Committed {
                    revision,
                    sequence,
                    repeated: false,
                })
            })
            .await
    }

    async fn read_for_recovery(
        &self,
        id: &ChannelId,
        receiver: &mut dyn RecoveryReceiver,
    ) -> StoreResult<()> {
        let state = self.inner.state();
        let docs = &state.documents;
        let channel = docs
            .channels
            .get(id)
            .cloned()
            .ok_or_else(|| unavailable(id))?;
        let checkpoint = docs.checkpoints.get(id).cloned();
        let after = checkpoint.as_ref().map_or(0, |c| c.through_sequence);
        let mut expected: Vec<i64> = docs
            .operations
            .iter()
            .filter(|((channel, _), op)| channel == id && op.has_update && op.sequence > after)
            .map(|(_, op)| op.sequence)
            .collect();
        expected.sort_unstable();
        receiver.head(RecoveryHead {
            sidecar: docs.sidecars.get(id).cloned(),
            channel,
            checkpoint,
            expected_update_sequences: expected,
        });
        receiver.journal(
            docs.updates
                .range((id.clone(), after + 1)..)
                .take_while(|((channel, _), _)| channel == id)
                .map(|(_, update)| update.clone())
                .collect(),
        );
        receiver.rest(events_after(docs, id, after));
        Ok(())
    }

    async fn archive(&self, fence: &Fence, id: &ChannelId) -> StoreResult<Channel> {
        self.inner
            .fenced(fence, |state, now| {
                let channel = docs(state).channel_mut(id)?;
                fence.check_covers(channel.shard, "archiving a document")?;
                let changed = channel.archived_at.is_none();
                if changed {
                    channel.archived_at = Some(now);
                    channel.updated_at = now;
                }
                let channel = channel.clone();
                if changed {
                    state.access_changed();
                }
                Ok(channel)
            })
            .await
    }

    async fn restore(&self, fence: &Fence, id: &ChannelId) -> StoreResult<Channel> {
        self.inner
            .fenced(fence, |state, now| {
                let channel = docs(state).channel_mut(id)?;
                fence.check_covers(channel.shard, "restoring a document")?;
                let changed = channel.archived_at.is_some();
                if changed {
                    channel.archived_at = None;
                    channel.updated_at = now;
                }
                let channel = channel.clone();
                if changed {
                    state.access_changed();
                }
                Ok(channel)
            })
            .await
    }

    async fn delete_archived(&self, fence: &Fence, id: &ChannelId) -> StoreResult<()> {
        self.inner
            .fenced(fence, |state, _now| {
                state.research.refuse_published_child(id)?;
                let docs = docs(state);
                let channel = docs.channels.get(id).ok_or_else(|| unavailable(id))?;
                fence.check_covers(channel.shard, "deleting a document")?;
                if channel.archived_at.is_none() {
                    return Err(StoreError::conflict(
                        "only an archived document can be deleted",
                    ));
                }
                if docs
                    .channels
                    .values()
                    .any(|c| c.parent.as_ref() == Some(id))
                {
                    return Err(StoreError::conflict(
                        "a document with children cannot be deleted",
                    ));
                }
                docs.channels.remove(id);
                docs.slugs.retain(|_, (owner, _)| owner != id);
                docs.sidecars.remove(id);
                docs.updates.retain(|(channel, _), _| channel != id);
                docs.events.retain(|(channel, _, _), _| channel != id);
                docs.operations.retain(|(channel, _), _| channel != id);
                docs.checkpoints.remove(id);
                docs.texts.remove(id);
                docs.navigation.retain(|_, channel| channel != id);
                state.jobs.forget_channel(id);
                state.research.forget_channel(id);
                super::history::forget_channel(state, id);
                state.planner.forget_channel(id);
                state.media.forget_channel(id);
                state.repositories.forget_channel(id);
                state.access_changed();
                Ok(())
            })
            .await
    }

    async fn publish_description(
        &self,
        fence: &Fence,
        id: &ChannelId,
        draft: &DescriptionDraft,
    ) -> StoreResult<bool> {
        self.inner
            .fenced(fence, |state, now| {
                let channel = docs(state).channel_mut(id)?;
                fence.check_covers(channel.shard, "publishing a description")?;
                if channel
                    .description
                    .as_ref()
                    .is_some_and(|d| d.job_id == draft.job_id)
                {
                    return Ok(false);
                }
                channel.description = Some(describe(channel.description.as_ref(), draft, now));
                Ok(true)
            })
            .await
    }

    async fn set_navigation(&self, user: &UserId, channel: Option<&ChannelId>) -> StoreResult<()> {
        self.inner.gate("set navigation")?;
        let mut state = self.inner.state();
        if !state.users.contains_key(user) {
            return Err(StoreError::invalid(
                "a navigation reference needs an existing user",
            ));
        }
        match channel {
            Some(channel) => {
                if !state.documents.channels.contains_key(channel) {
                    return Err(unavailable(channel));
                }
                state
                    .documents
                    .navigation
                    .insert(user.clone(), channel.clone());
            }
            None => {
                state.documents.navigation.remove(user);
            }
        }
        Ok(())
    }

    async fn navigation(&self, user: &UserId) -> StoreResult<Option<ChannelId>> {
        Ok(self.inner.state().documents.navigation.get(user).cloned())
    }
}

fn events_after(docs: &Documents, id: &ChannelId, after: i64) -> Vec<Event> {
    docs.events
        .range((id.clone(), after + 1, 0)..)
        .take_while(|((channel, _, _), _)| channel == id)
        .map(|(_, event)| event.clone())
        .collect()
}

// planner: what the Planner store reads and rewrites of the documents.
impl Documents {
    pub(super) fn exists(&self, id: &ChannelId) -> bool {
        self.channels.contains_key(id)
    }

    /// Whether the document is a child; `None` when there is no such document.
    pub(super) fn is_child(&self, id: &ChannelId) -> Option<bool> {
        self.channels
            .get(id)
            .map(|channel| channel.parent.is_some())
    }

    /// Every child's ID with its state sidecar and its checkpoint's sidecar.
    pub(super) fn child_sidecars(
        &self,
    ) -> Vec<(ChannelId, Option<SidecarState>, Option<SidecarState>)> {
        self.channels
            .values()
            .filter(|channel| channel.parent.is_some())
            .map(|channel| {
                (
                    channel.id.clone(),
                    self.sidecars.get(&channel.id).cloned(),
                    self.checkpoints
                        .get(&channel.id)
                        .and_then(|checkpoint| checkpoint.sidecar.clone()),
                )
            })
            .collect()
    }

    pub(super) fn state_sidecar_mut(&mut self, id: &ChannelId) -> Option<&mut SidecarState> {
        self.sidecars.get_mut(id)
    }

    pub(super) fn snapshot_sidecar_mut(&mut self, id: &ChannelId) -> Option<&mut SidecarState> {
        self.checkpoints
            .get_mut(id)
            .and_then(|checkpoint| checkpoint.sidecar.as_mut())
    }
}
