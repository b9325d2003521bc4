//! The memory adapter's repository store: repositories, members, audited overrides, the owners
//! of creation keys, and pages of documents in the SQL adapters' order.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::{MemoryStorage, State};
use fermata_store::channel::{Channel, ChannelId, Repository};
use fermata_store::collaboration::PublishedChannel;
use fermata_store::error::{StoreError, StoreResult};
use fermata_store::lease::Fence;
use fermata_store::repository::{
    CreationOrigin, DocumentCursor, DocumentScope, KeyedCreation, MAX_PAGE, Member, NewOverride,
    Override, RepositoryRecord, RepositoryRole, RepositoryStore, check_admin_kept,
};
use fermata_store::user::UserId;

/// Everything the repository store keeps, in memory.
#[derive(Debug, Default)]
pub(super) struct Repositories {
    records: BTreeMap<Repository, RepositoryRecord>,
    members: BTreeMap<(Repository, UserId), Member>,
    overrides: Vec<Override>,
    origins: BTreeMap<ChannelId, CreationOrigin>,
}

impl Repositories {
    /// Forgets what went with a deleted document (its foreign keys cascade in SQL).
    pub(super) fn forget_channel(&mut self, id: &ChannelId) {
        self.origins.remove(id);
    }

    fn record(&self, name: &Repository) -> StoreResult<&RepositoryRecord> {
        self.records
            .get(name)
            .ok_or_else(|| StoreError::missing(format!("no repository {name}")))
    }

    pub(super) fn role(&self, name: &Repository, user: &UserId) -> Option<RepositoryRole> {
        self.members
            .get(&(name.clone(), user.clone()))
            .map(|m| m.role)
    }

    fn admins(&self, name: &Repository) -> usize {
        self.members
            .values()
            .filter(|m| &m.repository == name && m.role == RepositoryRole::Admin)
            .count()
    }
}

fn repos(state: &mut State) -> &mut Repositories {
    &mut state.repositories
}

#[async_trait]
impl RepositoryStore for MemoryStorage {
    async fn create_repository(
        &self,
        fence: &Fence,
        name: &Repository,
        creator: &UserId,
    ) -> StoreResult<(RepositoryRecord, bool)> {
        self.inner
            .fenced(fence, |state, now| {
                if let Some(existing) = state.repositories.records.get(name) {
                    return Ok((existing.clone(), false));
                }
                let record = RepositoryRecord {
                    name: name.clone(),
                    created_at: now,
                    created_by: Some(creator.clone()),
                };
                let repositories = repos(state);
                repositories.records.insert(name.clone(), record.clone());
                repositories.members.insert(
                    (name.clone(), creator.clone()),
                    Member {
                        repository: name.clone(),
                        user: creator.clone(),
                        role: RepositoryRole::Admin,
                        added_at: now,
                    },
                );
                state.access_changed();
                Ok((record, true))
            })
            .await
    }

    async fn repository(&self, name: &Repository) -> StoreResult<Option<RepositoryRecord>> {
        Ok(self.inner.state().repositories.records.get(name).cloned())
    }

    async fn role_of(
        &self,
        name: &Repository,
        user: &UserId,
    ) -> StoreResult<Option<RepositoryRole>> {
        Ok(self.inner.state().repositories.role(name, user))
    }

    async fn set_member(
        &self,
        fence: &Fence,
        name: &Repository,
        user: &UserId,
        role: RepositoryRole,
    ) -> StoreResult<Member> {
        self.inner
            .fenced(fence, |state, now| {
                state.repositories.record(name)?;
                if !state.users.contains_key(user) {
                    return Err(StoreError::missing("no such user"));
                }
                let key = (name.clone(), user.clone());
                let current = state.repositories.role(name, user);
                if current == Some(role) {
                    return Ok(state.repositories.members[&key].clone());
                }
                check_admin_kept(
                    state.repositories.admins(name),
                    current == Some(RepositoryRole::Admin),
                    Some(role),
                )?;
                let member = Member {
                    repository: name.clone(),
                    user: user.clone(),
                    role,
                    added_at: now,
                };
                repos(state).members.insert(key, member.clone());
                state.access_changed();
                Ok(member)
            })
            .await
    }

    async fn remove_member(
        &self,
        fence: &Fence,
        name: &Repository,
        user: &UserId,
    ) -> StoreResult<bool> {
        self.inner
            .fenced(fence, |state, _now| {
                state.repositories.record(name)?;
                let Some(current) = state.repositories.role(name, user) else {
                    return Ok(false);
                };
                check_admin_kept(
                    state.repositories.admins(name),
                    current == RepositoryRole::Admin,
                    None,
                )?;
                repos(state).members.remove(&(name.clone(), user.clone()));
                state.access_changed();
                Ok(true)
            })
            .await
    }

    async fn members(&self, name: &Repository) -> StoreResult<Vec<Member>> {
        let state = self.inner.state();
        let mut members: Vec<Member> = state
            .repositories
            .members
            .values()
            .filter(|m| &m.repository == name)
            .cloned()
            .collect();
        members.sort_by(|a, b| {
            b.role
                .cmp(&a.role)
                .then_with(|| a.added_at.cmp(&b.added_at))
                .then_with(|| a.user.cmp(&b.user))
        });
        Ok(members)
    }

    async fn repositories_of(
        &self,
        user: &UserId,
        after: Option<&Repository>,
        limit: usize,
    ) -> StoreResult<Vec<(RepositoryRecord, RepositoryRole)>> {
        let state = self.inner.state();
        let repositories = &state.repositories;
        Ok(repositories
            .records
            .values()
            .filter(|r| after.is_none_or(|after| r.name.as_str() > after.as_str()))
            .filter_map(|r| {
                repositories
                    .role(&r.name, user)
                    .map(|role| (r.clone(), role))
            })
            .take(limit.min(MAX_PAGE))
            .collect())
    }

    async fn all_repositories(
        &self,
        after: Option<&Repository>,
        limit: usize,
    ) -> StoreResult<Vec<RepositoryRecord>> {
        let state = self.inner.state();
        Ok(state
            .repositories
            .records
            .values()
            .filter(|r| after.is_none_or(|after| r.name.as_str() > after.as_str()))
            .take(limit.min(MAX_PAGE))
            .cloned()
            .collect())
    }

    async fn record_override(&self, fence: &Fence, entry: &NewOverride) -> StoreResult<Override> {
        entry.check()?;
        self.inner
            .fenced(fence, |state, now| {
                state.repositories.record(&entry.repository)?;
                let repositories = repos(state);
                let id = repositories.overrides.last().map_or(1, |o| o.id + 1);
                let recorded = Override {
                    id,
                    repository: entry.repository.clone(),
                    user: entry.user.clone(),
                    action: entry.action.clone(),
                    document: entry.document.clone(),
                    at: now,
                };
                repositories.overrides.push(recorded.clone());
                Ok(recorded)
            })
            .await
    }

    async fn overrides(&self, name: &Repository, limit: usize) -> StoreResult<Vec<Override>> {
        let state = self.inner.state();
        Ok(state
            .repositories
            .overrides
            .iter()
            .rev()
            .filter(|o| &o.repository == name)
            .take(limit.min(MAX_PAGE))
            .cloned()
            .collect())
    }

    async fn documents_page(
        &self,
        scope: &DocumentScope,
        include_archived: bool,
        after: Option<&DocumentCursor>,
        limit: usize,
    ) -> StoreResult<Vec<Channel>> {
        let state = self.inner.state();
        let in_scope = |channel: &Channel| match scope {
            DocumentScope::MemberOf(user) => {
                state.repositories.role(&channel.repository, user).is_some()
            }
            DocumentScope::Repository(name) => &channel.repository == name,
        };
        let mut page: Vec<Channel> = state
            .documents
            .all()
            .filter(|c| include_archived || c.archived_at.is_none())
            .filter(|c| in_scope(c))
            .filter(|c| after.is_none_or(|cursor| cursor.precedes(c)))
            .cloned()
            .collect();
        page.sort_by(|a, b| {
            b.updated_at
                .cmp(&a.updated_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        page.truncate(limit.min(MAX_PAGE));
        Ok(page)
    }

    async fn create_keyed(
        &self,
        fence: &Fence,
        channel: &PublishedChannel,
        origin: &CreationOrigin,
    ) -> StoreResult<KeyedCreation> {
        self.inner
            .fenced(fence, |state, now| {
                let id = ChannelId::for_creation_key(&channel.repository, &channel.key);
                if let Some(existing) = state.documents.get(&id) {
                    return Ok(KeyedCreation {
                        channel: existing,
                        origin: state.repositories.origins.get(&id).cloned(),
                        created: false,
                    });
                }
                let created = state.documents.publish(fence, channel, now)?;
                repos(state).origins.insert(id, origin.clone());
                Ok(KeyedCreation {
                    channel: created,
                    origin: Some(origin.clone()),
                    created: true,
                })
            })
            .await
    }

    async fn access_generation(&self) -> StoreResult<i64> {
        Ok(self.inner.state().access_generation)
    }
}
