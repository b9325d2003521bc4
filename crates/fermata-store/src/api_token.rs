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

/// How exactly a token's `last_used_at` tells when it was last used.
pub const LAST_USED_PRECISION: std::time::Duration = std::time::Duration::from_secs(60);

/// Whether a token last marked used at `last_used_at` needs marking again at `now`.
pub fn needs_marking(last_used_at: Option<UnixMillis>, now: UnixMillis) -> bool {
    let precision = i64::try_from(LAST_USED_PRECISION.as_millis()).unwrap_or(i64::MAX);
    last_used_at.is_none_or(|at| now.0.saturating_sub(at.0) >= precision)
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

    /// The unrevoked token whose secret hashes to `hash`, marked as used now unless it was
    /// marked less than [`LAST_USED_PRECISION`] ago: a client that authenticates many times a
    /// minute (a reconnecting crowd, a busy script) costs one write a minute, not one each.
    async fn use_api_token(&self, hash: &SecretHash) -> StoreResult<Option<ApiToken>>;

    async fn api_token(&self, id: &ApiTokenId) -> StoreResult<Option<ApiToken>>;

    /// A user's tokens, newest first, revoked ones included.
    async fn api_tokens_of(&self, user: &UserId) -> StoreResult<Vec<ApiToken>>;

    /// Revokes a token; it stops working at once. Returns false when it was already revoked or
    /// does not exist.
    async fn revoke_api_token(&self, id: &ApiTokenId) -> StoreResult<bool>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_marked_when_never_used_or_last_marked_a_minute_ago() {
        let now = UnixMillis(10_000_000);
        assert!(needs_marking(None, now));
        assert!(!needs_marking(Some(UnixMillis(now.0 - 59_999)), now));
        assert!(needs_marking(Some(UnixMillis(now.0 - 60_000)), now));
        // A mark from the future (another clock) is not rewritten until the minute is past.
        assert!(!needs_marking(Some(UnixMillis(now.0 + 5_000)), now));
    }
}
