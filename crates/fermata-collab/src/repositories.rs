//! The repositories service: who may do what in a document repository. A caller's standing is
//! their membership role, or, for a `system_admin` who is not a member, an override that acts as
//! an admin and is recorded in the repository's audit every time it is used. New repositories
//! are named `OWNER/NAME` with the creator's own user name as OWNER (a `system_admin` may create
//! any), and their creator becomes their admin. Every write is fenced by the writer lease.

use std::sync::Arc;

use fermata_store::{
    ChannelId, Member, NewOverride, Override, Repository, RepositoryRecord, RepositoryRole, Role,
    Storage, StoreError, User, UserId, UserName,
};

use crate::fence::WriterFence;

/// A caller's standing in a repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    pub role: RepositoryRole,
    /// A `system_admin` acting in a repository they are not a member of: every use is audited.
    pub overriding: bool,
}

/// A member with their user name.
#[derive(Debug, Clone)]
pub struct NamedMember {
    pub member: Member,
    /// Absent when the user is gone (their membership goes with them).
    pub name: Option<UserName>,
}

/// The repositories service.
#[derive(Debug, Clone)]
pub struct Repositories {
    storage: Arc<dyn Storage>,
    fence: WriterFence,
}

/// Whether `user` may create the repository `name`: it is `OWNER/NAME` with their own user name
/// as OWNER, or they are a `system_admin`.
pub fn may_create(user: &User, name: &Repository) -> bool {
    name.owner_and_name()
        .is_some_and(|(owner, _)| owner == user.name.as_str() || user.has_role(Role::SystemAdmin))
}

impl Repositories {
    pub fn new(storage: Arc<dyn Storage>, fence: WriterFence) -> Self {
        Repositories { storage, fence }
    }

    /// The user's standing in the repository: their role as a member, an audited admin
    /// override for a `system_admin` who is not one, or none.
    pub async fn standing(
        &self,
        user: &User,
        repository: &Repository,
    ) -> Result<Option<Standing>, StoreError> {
        let store = self.storage.repositories();
        if let Some(role) = store.role_of(repository, &user.id).await? {
            return Ok(Some(Standing {
                role,
                overriding: false,
            }));
        }
        if user.has_role(Role::SystemAdmin) && store.repository(repository).await?.is_some() {
            return Ok(Some(Standing {
                role: RepositoryRole::Admin,
                overriding: true,
            }));
        }
        Ok(None)
    }

    /// Records a `system_admin`'s use of a repository they are not a member of.
    pub async fn record_override(
        &self,
        user: &User,
        repository: &Repository,
        action: &str,
        document: Option<&ChannelId>,
    ) -> Result<Override, StoreError> {
        let fence = self.fence.current()?;
        let recorded = self
            .storage
            .repositories()
            .record_override(
                &fence,
                &NewOverride {
                    repository: repository.clone(),
                    user: user.id.clone(),
                    action: action.to_owned(),
                    document: document.cloned(),
                },
            )
            .await?;
        tracing::info!(user = %user.name, repository = %repository, action, "system_admin override");
        Ok(recorded)
    }

    /// Creates a repository with `creator` as its admin; the caller checked [`may_create`]. An
    /// existing one is returned unchanged, with `false`.
    pub async fn create(
        &self,
        creator: &User,
        name: &Repository,
    ) -> Result<(RepositoryRecord, bool), StoreError> {
        let fence = self.fence.current()?;
        self.storage
            .repositories()
            .create_repository(&fence, name, &creator.id)
            .await
    }

    /// The creator's standing where a document is created: their standing there, or, where the
    /// repository does not exist yet and they may create it, a new repository they administer.
    pub async fn standing_for_creation(
        &self,
        creator: &User,
        name: &Repository,
    ) -> Result<Option<Standing>, StoreError> {
        if let Some(standing) = self.standing(creator, name).await? {
            return Ok(Some(standing));
        }
        if !may_create(creator, name)
            || self
                .storage
                .repositories()
                .repository(name)
                .await?
                .is_some()
        {
            return Ok(None);
        }
        self.create(creator, name).await?;
        self.standing(creator, name).await
    }

    pub async fn repository(
        &self,
        name: &Repository,
    ) -> Result<Option<RepositoryRecord>, StoreError> {
        self.storage.repositories().repository(name).await
    }

    /// Gives the user named `user` a role in the repository, adding them if needed.
    pub async fn set_member(
        &self,
        name: &Repository,
        user: &UserName,
        role: RepositoryRole,
    ) -> Result<Member, StoreError> {
        let fence = self.fence.current()?;
        let user = self.user_named(user).await?;
        self.storage
            .repositories()
            .set_member(&fence, name, &user, role)
            .await
    }

    /// Removes the user named `user` from the repository; false when they were not a member.
    pub async fn remove_member(
        &self,
        name: &Repository,
        user: &UserName,
    ) -> Result<bool, StoreError> {
        let fence = self.fence.current()?;
        let user = self.user_named(user).await?;
        self.storage
            .repositories()
            .remove_member(&fence, name, &user)
            .await
    }

    async fn user_named(&self, name: &UserName) -> Result<UserId, StoreError> {
        self.storage
            .users()
            .user_by_name(name)
            .await?
            .map(|user| user.id)
            .ok_or_else(|| StoreError::missing("no such user"))
    }

    /// A repository's members with their names, admins first.
    pub async fn members(&self, name: &Repository) -> Result<Vec<NamedMember>, StoreError> {
        let members = self.storage.repositories().members(name).await?;
        let mut named = Vec::with_capacity(members.len());
        for member in members {
            let name = self
                .storage
                .users()
                .user_by_id(&member.user)
                .await?
                .map(|user| user.name);
            named.push(NamedMember { member, name });
        }
        Ok(named)
    }

    /// The repositories `user` is a member of, with their role, by name.
    pub async fn of_member(
        &self,
        user: &UserId,
        after: Option<&Repository>,
        limit: usize,
    ) -> Result<Vec<(RepositoryRecord, RepositoryRole)>, StoreError> {
        self.storage
            .repositories()
            .repositories_of(user, after, limit)
            .await
    }

    /// Every repository, by name.
    pub async fn all(
        &self,
        after: Option<&Repository>,
        limit: usize,
    ) -> Result<Vec<RepositoryRecord>, StoreError> {
        self.storage
            .repositories()
            .all_repositories(after, limit)
            .await
    }

    /// The repository's audited overrides, newest first.
    pub async fn overrides(
        &self,
        name: &Repository,
        limit: usize,
    ) -> Result<Vec<Override>, StoreError> {
        self.storage.repositories().overrides(name, limit).await
    }

    /// The access generation, raised by every change of who may do what.
    pub async fn access_generation(&self) -> Result<i64, StoreError> {
        self.storage.repositories().access_generation().await
    }
}
