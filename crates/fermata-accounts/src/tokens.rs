//! API tokens for programs.

use fermata_crypto::SecretToken;
use fermata_store::{ApiToken, ApiTokenId, NewApiToken, Role, User, UserId};

use crate::sessions::hash_of;
use crate::{
    API_TOKEN_PREFIX, AccountError, Accounts, MINTING_TOKEN_PREFIX, Principal, Via, check_label,
    new_id,
};

/// What an API token may do besides acting as its user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TokenScope {
    /// Everything its user may do, but create tokens or machines.
    #[default]
    Standard,
    /// Also create API tokens and pair or re-authorize machines (the `tokens` scope).
    Issuing,
}

impl Accounts {
    /// Creates a standard token for `user` (see [`Self::create_scoped_api_token`]).
    pub async fn create_api_token(
        &self,
        user: &User,
        label: &str,
    ) -> Result<(ApiToken, SecretToken), AccountError> {
        self.create_scoped_api_token(user, label, TokenScope::Standard)
            .await
    }

    /// Creates a token for `user` with `scope`, within the user's cap of unrevoked tokens. The
    /// secret is returned once and never stored.
    pub async fn create_scoped_api_token(
        &self,
        user: &User,
        label: &str,
        scope: TokenScope,
    ) -> Result<(ApiToken, SecretToken), AccountError> {
        let label = check_label(label, "token label")?;
        let _issuing = self.issuing.lock().await;
        let live = self
            .storage
            .api_tokens()
            .api_tokens_of(&user.id)
            .await?
            .iter()
            .filter(|token| token.revoked_at.is_none())
            .count();
        if live >= self.settings.max_api_tokens {
            tracing::warn!(user = %user.name, live, "refused an API token over the cap");
            return Err(AccountError::TooMany(format!(
                "a user holds at most {} API tokens: revoke one first",
                self.settings.max_api_tokens
            )));
        }
        let prefix = match scope {
            TokenScope::Standard => API_TOKEN_PREFIX,
            TokenScope::Issuing => MINTING_TOKEN_PREFIX,
        };
        let secret = SecretToken::generate(prefix);
        let token = self
            .storage
            .api_tokens()
            .create_api_token(&NewApiToken {
                id: ApiTokenId(new_id()),
                user: user.id.clone(),
                label: label.to_owned(),
                secret_hash: hash_of(&secret),
            })
            .await?;
        tracing::info!(user = %user.name, token = %token.id, "created an API token");
        Ok((token, secret))
    }

    /// The principal behind an API token, if it is live and its user exists.
    pub async fn authenticate_api_token(
        &self,
        secret: &SecretToken,
    ) -> Result<Option<Principal>, AccountError> {
        let issuing = secret.expose().starts_with(MINTING_TOKEN_PREFIX);
        if !issuing && !secret.expose().starts_with(API_TOKEN_PREFIX) {
            return Ok(None);
        }
        let Some(token) = self
            .storage
            .api_tokens()
            .use_api_token(&hash_of(secret))
            .await?
        else {
            return Ok(None);
        };
        let user = self.storage.users().user_by_id(&token.user).await?;
        Ok(user.map(|user| Principal {
            user,
            via: Via::ApiToken(token),
            may_issue_credentials: issuing,
        }))
    }

    pub async fn api_tokens(&self, user: &UserId) -> Result<Vec<ApiToken>, AccountError> {
        Ok(self.storage.api_tokens().api_tokens_of(user).await?)
    }

    /// Revokes a token owned by `by`, or any token when `by` is a system administrator or the
    /// operator at the command line (`None`). Someone else's token is `NotFound`, as if it did
    /// not exist.
    pub async fn revoke_api_token(
        &self,
        by: Option<&User>,
        id: &ApiTokenId,
    ) -> Result<(), AccountError> {
        let token = self
            .storage
            .api_tokens()
            .api_token(id)
            .await?
            .filter(|token| {
                by.is_none_or(|by| token.user == by.id || by.has_role(Role::SystemAdmin))
            })
            .ok_or(AccountError::NotFound("API token"))?;
        self.storage
            .api_tokens()
            .revoke_api_token(&token.id)
            .await?;
        // The live connections it opened end before this returns.
        self.watch.recheck_user(&token.user).await;
        let by = by.map_or("the operator", |by| by.name.as_str());
        tracing::info!(by, token = %token.id, "revoked an API token");
        Ok(())
    }
}
