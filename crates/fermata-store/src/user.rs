//! Local accounts and their roles.

use std::collections::BTreeSet;
use std::fmt;

use async_trait::async_trait;

use crate::error::{StoreError, StoreResult};
use crate::time::UnixMillis;

/// A user's stable ID (a UUID).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UserId(pub String);

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A login name: 1 to 64 characters of `a-z`, `0-9`, `.`, `_` and `-`, starting with a letter or
/// digit.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UserName(String);

impl UserName {
    pub fn new(name: impl Into<String>) -> StoreResult<Self> {
        let name = name.into();
        let allowed =
            |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-');
        let starts_well = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric());
        if name.len() > 64 || !starts_well || !name.chars().all(allowed) {
            return Err(StoreError::invalid(
                "a user name has 1 to 64 characters of a-z, 0-9, '.', '_' and '-', starting with a letter or digit",
            ));
        }
        Ok(UserName(name))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for UserName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a user may do beyond the basics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// Administers the server: schema snapshots, other users.
    SystemAdmin,
}

impl Role {
    pub const ALL: [Role; 1] = [Role::SystemAdmin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::SystemAdmin => "system_admin",
        }
    }

    pub fn parse(text: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|role| role.as_str() == text)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A user as stored. The password hash is an argon2id PHC string, never a password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: UserId,
    pub name: UserName,
    pub password_hash: String,
    pub roles: BTreeSet<Role>,
    pub created_at: UnixMillis,
    pub updated_at: UnixMillis,
}

impl User {
    pub fn has_role(&self, role: Role) -> bool {
        self.roles.contains(&role)
    }
}

/// A user to create.
#[derive(Debug, Clone)]
pub struct NewUser {
    pub id: UserId,
    pub name: UserName,
    pub password_hash: String,
    pub roles: BTreeSet<Role>,
}

/// The user store.
#[async_trait]
pub trait UserStore: Send + Sync {
    /// Creates a user; a taken name is `Conflict`.
    async fn create_user(&self, user: &NewUser) -> StoreResult<User>;

    async fn user_by_name(&self, name: &UserName) -> StoreResult<Option<User>>;

    async fn user_by_id(&self, id: &UserId) -> StoreResult<Option<User>>;

    /// Replaces the password hash and, in the same step, ends every session of the user, so a
    /// stolen session does not outlive the password it was opened with. API tokens and paired
    /// machines are separate credentials and stay. `Missing` when the user does not exist.
    async fn set_password_hash(&self, id: &UserId, password_hash: &str) -> StoreResult<User>;

    /// Replaces the roles; `Missing` when the user does not exist.
    async fn set_roles(&self, id: &UserId, roles: &BTreeSet<Role>) -> StoreResult<User>;

    /// Every user, by name.
    async fn list_users(&self) -> StoreResult<Vec<User>>;
}
