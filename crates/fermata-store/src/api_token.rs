//! API tokens for programs: shown once, stored as a hash, scoped to a user, revocable.

use std::fmt;

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::session::SecretHash;
use crate::time::UnixMillis;
use crate::user::UserId;

/// An API token's stable ID (a UUID); safe to show and to name in a revocation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ApiTokenId(pub String);

impl fmt::Display for ApiTokenId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A token to create.
#[derive(Debug, Clone)]
pub struct NewApiToken {
    pub id: ApiTokenId,
    pub user: UserId,
    /// What the token is for, as its owner wrote it.
    pub label: String,
    pub secret_hash: SecretHash,
}

/// A token as stored (never the secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiToken {
    pub id: ApiTokenId,
    pub user: UserId,
    pub label: String,
    pub created_at: UnixMillis,
    pub last_used_at: Option<UnixMillis>,
    pub revoked_at: Option<UnixMillis>,
}

/// The API token store.
#[async_trait]
pub trait ApiTokenStore: Send + Sync {
    async fn create_api_token(&self, token: &NewApiToken) -> StoreResult<ApiToken>;

    /// The unrevoked token whose secret hashes to `hash`, marked as used now.
    async fn use_api_token(&self, hash: &SecretHash) -> StoreResult<Option<ApiToken>>;

    async fn api_token(&self, id: &ApiTokenId) -> StoreResult<Option<ApiToken>>;

    /// A user's tokens, newest first, revoked ones included.
    async fn api_tokens_of(&self, user: &UserId) -> StoreResult<Vec<ApiToken>>;

    /// Revokes a token; it stops working at once. Returns false when it was already revoked or
    /// does not exist.
    async fn revoke_api_token(&self, id: &ApiTokenId) -> StoreResult<bool>;
}
