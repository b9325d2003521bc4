//! The repository store: document repositories (`OWNER/NAME`) as records, their members with a
//! role each, the audit rows of every `system_admin` use in a repository they are not a member
//! of, the keyset pages of documents a reader may list, the callers that own program creation
//! keys, and the access generation: a counter every change of who may do what raises, which a
//! serving process polls to re-check its open connections (a change made by another process,
//! such as `fermata user passwd`, included).
//!
//! The rules every adapter applies before it writes are here, once: a repository keeps at least
//! one admin ([`check_admin_kept`]), and what a repeated creation key is ([`creation_fingerprint`]).

use std::fmt;

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use crate::channel::{Channel, ChannelId, Repository};
use crate::collaboration::PublishedChannel;
use crate::error::{StoreError, StoreResult};
use crate::lease::Fence;
use crate::time::UnixMillis;
use crate::user::UserId;

/// What a member may do in a repository. Each role includes the ones below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RepositoryRole {
    /// Reads documents, their history, images and attachments; opens live connections (which
    /// are read-only) and sends presence.
    Viewer,
    /// Edits text live or through the API, renames, creates documents, uploads files.
    Editor,
    /// Archives, restores and deletes documents, manages members, mints client tokens.
    Admin,
}

impl RepositoryRole {
    pub const ALL: [RepositoryRole; 3] = [
        RepositoryRole::Viewer,
        RepositoryRole::Editor,
        RepositoryRole::Admin,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RepositoryRole::Viewer => "viewer",
            RepositoryRole::Editor => "editor",
            RepositoryRole::Admin => "admin",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|role| role.as_str() == text)
    }
}

impl fmt::Display for RepositoryRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A repository as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepositoryRecord {
    pub name: Repository,
    pub created_at: UnixMillis,
    /// Who created it; absent for a repository that existed before repositories were records.
    pub created_by: Option<UserId>,
}

/// One member of a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub repository: Repository,
    pub user: UserId,
    pub role: RepositoryRole,
    /// When the member was added or last given a role.
    pub added_at: UnixMillis,
}

/// A use of a repository by a `system_admin` who is not one of its members, to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewOverride {
    pub repository: Repository,
    pub user: UserId,
    /// What was done: the route (`GET /api/v1/documents/{id}`) or `sync`.
    pub action: String,
    /// The document it concerned, if one.
    pub document: Option<ChannelId>,
}

/// A recorded use of a repository by a `system_admin` who is not one of its members. Never
/// changes once written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    /// Ascending in the order the rows were written.
    pub id: i64,
    pub repository: Repository,
    pub user: UserId,
    pub action: String,
    pub document: Option<ChannelId>,
    pub at: UnixMillis,
}

impl NewOverride {
    /// The checks every adapter makes before it records a use.
    pub fn check(&self) -> StoreResult<()> {
        if self.action.is_empty() || self.action.len() > 300 || self.action.contains('\0') {
            return Err(StoreError::invalid(
                "an audited action is 1 to 300 bytes of text",
            ));
        }
        Ok(())
    }
}

/// Whose documents a page lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocumentScope {
    /// Every repository the user is a member of.
    MemberOf(UserId),
    /// One repository (the caller's access to it was checked before).
    Repository(Repository),
}

/// Where a page of documents starts: after this document in the order most recently updated
/// first, ties by ID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentCursor {
    pub updated_at: UnixMillis,
    pub id: ChannelId,
}

impl DocumentCursor {
    /// Whether `channel` comes after this cursor in the list's order.
    pub fn precedes(&self, channel: &Channel) -> bool {
        channel.updated_at < self.updated_at
            || (channel.updated_at == self.updated_at && channel.id > self.id)
    }
}

/// Who created a document with a creation key, and what they asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreationOrigin {
    pub caller: UserId,
    /// [`creation_fingerprint`] of the request.
    pub fingerprint: [u8; 32],
}

/// What a keyed creation found or made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyedCreation {
    pub channel: Channel,
    /// Who owns the key; absent for a document made before creation keys had owners, or by
    /// research publication.
    pub origin: Option<CreationOrigin>,
    /// True when this call created the document.
    pub created: bool,
}

/// A digest of what a keyed creation asks for, so a repeated key with another body is told
/// apart from a retry.
pub fn creation_fingerprint(
    repository: &Repository,
    title: &str,
    parent: Option<&ChannelId>,
    text: &str,
) -> [u8; 32] {
    let mut hash = Sha256::new();
    let mut field = |bytes: &[u8]| {
        hash.update((bytes.len() as u64).to_be_bytes());
        hash.update(bytes);
    };
    field(repository.as_str().as_bytes());
    field(title.as_bytes());
    field(parent.map_or(b"\xff-none".as_slice(), |p| p.0.as_bytes()));
    field(text.as_bytes());
    hash.finalize().into()
}

/// The most rows one page returns.
pub const MAX_PAGE: usize = 500;

/// Refuses a change that would leave a repository without an admin: `admins` is how many it
/// has now, `was_admin` whether the member changed is one, `becomes` their new role (`None`
/// when removed).
pub fn check_admin_kept(
    admins: usize,
    was_admin: bool,
    becomes: Option<RepositoryRole>,
) -> StoreResult<()> {
    if was_admin && admins <= 1 && becomes != Some(RepositoryRole::Admin) {
        return Err(StoreError::conflict(
            "a repository keeps at least one admin: add another admin first",
        ));
    }
    Ok(())
}

/// The repository store. Every write is fenced by the writer lease.
#[async_trait]
pub trait RepositoryStore: Send + Sync {
    /// Creates a repository with `creator` as its admin, in one fenced write. An existing one is
    /// returned unchanged, with `false`.
    async fn create_repository(
        &self,
        fence: &Fence,
        name: &Repository,
        creator: &UserId,
    ) -> StoreResult<(RepositoryRecord, bool)>;

    async fn repository(&self, name: &Repository) -> StoreResult<Option<RepositoryRecord>>;

    /// The user's role in the repository, if they are a member.
    async fn role_of(
        &self,
        name: &Repository,
        user: &UserId,
    ) -> StoreResult<Option<RepositoryRole>>;

    /// Adds a member or gives them another role. `Missing` for an unknown repository or user;
    /// `Conflict` when it would leave the repository without an admin.
    async fn set_member(
        &self,
        fence: &Fence,
        name: &Repository,
        user: &UserId,
        role: RepositoryRole,
    ) -> StoreResult<Member>;

    /// Removes a member; false when they were not one. `Conflict` for the last admin.
    async fn remove_member(
        &self,
        fence: &Fence,
        name: &Repository,
        user: &UserId,
    ) -> StoreResult<bool>;

    /// A repository's members, admins first, then by when they were added.
    async fn members(&self, name: &Repository) -> StoreResult<Vec<Member>>;

    /// The repositories `user` is a member of with their role, by name, after `after`, at most
    /// `limit` (capped at [`MAX_PAGE`]).
    async fn repositories_of(
        &self,
        user: &UserId,
        after: Option<&Repository>,
        limit: usize,
    ) -> StoreResult<Vec<(RepositoryRecord, RepositoryRole)>>;

    /// Every repository, by name, after `after`, at most `limit` (capped at [`MAX_PAGE`]).
    async fn all_repositories(
        &self,
        after: Option<&Repository>,
        limit: usize,
    ) -> StoreResult<Vec<RepositoryRecord>>;

    /// Records a `system_admin`'s use of a repository they are not a member of.
    async fn record_override(&self, fence: &Fence, entry: &NewOverride) -> StoreResult<Override>;

    /// A repository's recorded overrides, newest first, at most `limit` (capped at
    /// [`MAX_PAGE`]).
    async fn overrides(&self, name: &Repository, limit: usize) -> StoreResult<Vec<Override>>;

    /// A page of documents in `scope`, most recently updated first (ties by ID), after
    /// `after`, at most `limit` (capped at [`MAX_PAGE`]); archived ones only when asked for.
    async fn documents_page(
        &self,
        scope: &DocumentScope,
        include_archived: bool,
        after: Option<&DocumentCursor>,
        limit: usize,
    ) -> StoreResult<Vec<Channel>>;

    /// Creates a document at its creation key's ID with `origin` as the key's owner, in one
    /// fenced write, or finds the document already there with the owner recorded for it.
    async fn create_keyed(
        &self,
        fence: &Fence,
        channel: &PublishedChannel,
        origin: &CreationOrigin,
    ) -> StoreResult<KeyedCreation>;

    /// The access generation: raised by every logout, session removal, password change, API
    /// token revocation, role change, membership change, archive or deletion of a document, in
    /// the same transaction, whoever writes it.
    async fn access_generation(&self) -> StoreResult<i64>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_order_and_parse() {
        assert!(RepositoryRole::Viewer < RepositoryRole::Editor);
        assert!(RepositoryRole::Editor < RepositoryRole::Admin);
        for role in RepositoryRole::ALL {
            assert_eq!(RepositoryRole::parse(role.as_str()), Some(role));
        }
        assert_eq!(RepositoryRole::parse("owner"), None);
    }

    #[test]
    fn the_last_admin_stays() {
        use RepositoryRole::*;
        assert!(check_admin_kept(1, true, None).is_err());
        assert!(check_admin_kept(1, true, Some(Editor)).is_err());
        assert!(check_admin_kept(1, true, Some(Admin)).is_ok());
        assert!(check_admin_kept(2, true, None).is_ok());
        assert!(check_admin_kept(1, false, None).is_ok());
    }

    #[test]
    fn fingerprints_tell_bodies_apart() {
        let repo = Repository::new("ann/app").unwrap();
        let one = creation_fingerprint(&repo, "Plan", None, "text");
        assert_eq!(one, creation_fingerprint(&repo, "Plan", None, "text"));
        assert_ne!(one, creation_fingerprint(&repo, "Plan", None, "other"));
        assert_ne!(one, creation_fingerprint(&repo, "Plan ", None, "text"));
        assert_ne!(
            creation_fingerprint(&repo, "ab", None, "c"),
            creation_fingerprint(&repo, "a", None, "bc")
        );
    }
}
