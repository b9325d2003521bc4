//! The SQL API token store.

use async_trait::async_trait;
use fermata_store::{
    ApiToken, ApiTokenId, ApiTokenStore, NewApiToken, SecretHash, StoreError, StoreResult,
    UnixMillis, UserId, needs_marking,
};
use sqlx::any::AnyRow;

use crate::SqlStorage;
use crate::dialect::Dialect;
use crate::error::StoreContext;
use crate::row::{column, instant, optional_instant};

/// The API token statements, rendered for one dialect.
#[derive(Debug)]
pub(crate) struct Statements {
    insert: String,
    use_live: String,
    live: String,
    by_id: String,
    of_user: String,
    revoke: String,
}

const COLUMNS: &str = "id, user_id, label, created_at, last_used_at, revoked_at";

impl Statements {
    pub(crate) fn new(dialect: Dialect) -> Self {
        Statements {
            insert: dialect.render(
                "INSERT INTO api_tokens (id, user_id, label, secret_hash, created_at) \
                 VALUES ($1, $2, $3, $4, {now})",
            ),
            use_live: dialect.render(&format!(
                "UPDATE api_tokens SET last_used_at = {{now}} \
                 WHERE secret_hash = $1 AND revoked_at IS NULL RETURNING {COLUMNS}"
            )),
            live: dialect.render(&format!(
                "SELECT {COLUMNS} FROM api_tokens WHERE secret_hash = $1 AND revoked_at IS NULL"
            )),
            by_id: dialect.render(&format!("SELECT {COLUMNS} FROM api_tokens WHERE id = $1")),
            of_user: dialect.render(&format!(
                "SELECT {COLUMNS} FROM api_tokens WHERE user_id = $1 \
                 ORDER BY created_at DESC, id DESC"
            )),
            revoke: dialect.render(
                "UPDATE api_tokens SET revoked_at = {now} WHERE id = $1 AND revoked_at IS NULL",
            ),
        }
    }
}

fn token_from(row: &AnyRow, action: &str) -> StoreResult<ApiToken> {
    Ok(ApiToken {
        id: ApiTokenId(column(row, 0, action)?),
        user: UserId(column(row, 1, action)?),
        label: column(row, 2, action)?,
        created_at: instant(row, 3, action)?,
        last_used_at: optional_instant(row, 4, action)?,
        revoked_at: optional_instant(row, 5, action)?,
    })
}

#[async_trait]
impl ApiTokenStore for SqlStorage {
    async fn create_api_token(&self, token: &NewApiToken) -> StoreResult<ApiToken> {
        let action = "creating an API token";
        let mut tx = self.inner.begin_write(action).await?;
        sqlx::query(&self.inner.api_token_sql.insert)
            .bind(&token.id.0)
            .bind(&token.user.0)
            .bind(&token.label)
            .bind(token.secret_hash.0.to_vec())
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        self.api_token(&token.id)
            .await?
            .ok_or_else(|| StoreError::unavailable("the new API token vanished"))
    }

    async fn use_api_token(&self, hash: &SecretHash) -> StoreResult<Option<ApiToken>> {
        let action = "using an API token";
        // A read first: a token marked within the minute is answered without a write.
        let found = sqlx::query(&self.inner.api_token_sql.live)
            .bind(hash.0.to_vec())
            .fetch_optional(&self.inner.pool)
            .await
            .context(action)?
            .map(|row| token_from(&row, action))
            .transpose()?;
        match found {
            Some(token) if !needs_marking(token.last_used_at, UnixMillis::now()) => {
                return Ok(Some(token));
            }
            None => return Ok(None),
            Some(_) => {}
        }
        let mut tx = self.inner.begin_write(action).await?;
        let row = sqlx::query(&self.inner.api_token_sql.use_live)
            .bind(hash.0.to_vec())
            .fetch_optional(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        row.map(|row| token_from(&row, action)).transpose()
    }

    async fn api_token(&self, id: &ApiTokenId) -> StoreResult<Option<ApiToken>> {
        let action = "reading an API token";
        let row = sqlx::query(&self.inner.api_token_sql.by_id)
            .bind(&id.0)
            .fetch_optional(&self.inner.pool)
            .await
            .context(action)?;
        row.map(|row| token_from(&row, action)).transpose()
    }

    async fn api_tokens_of(&self, user: &UserId) -> StoreResult<Vec<ApiToken>> {
        let action = "listing API tokens";
        let rows = sqlx::query(&self.inner.api_token_sql.of_user)
            .bind(&user.0)
            .fetch_all(&self.inner.pool)
            .await
            .context(action)?;
        rows.iter().map(|row| token_from(row, action)).collect()
    }

    async fn revoke_api_token(&self, id: &ApiTokenId) -> StoreResult<bool> {
        let action = "revoking an API token";
        let mut tx = self.inner.begin_write(action).await?;
        let done = sqlx::query(&self.inner.api_token_sql.revoke)
            .bind(&id.0)
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        Ok(done.rows_affected() == 1)
    }
}
