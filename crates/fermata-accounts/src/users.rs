//! Creating users, changing their passwords and roles.

use std::collections::BTreeSet;

use fermata_crypto::{SecretToken, hash_password};
use fermata_store::{NewUser, Role, User, UserId, UserName};

use crate::{AccountError, Accounts, blocking, new_id};

impl Accounts {
    /// Creates a user. Without a password, one is generated and returned: show it once.
    pub async fn add_user(
        &self,
        name: &str,
        password: Option<SecretToken>,
        roles: BTreeSet<Role>,
    ) -> Result<(User, Option<SecretToken>), AccountError> {
        let name =
            UserName::new(name).map_err(|e| AccountError::Invalid(e.message().to_owned()))?;
        let (password, generated) = match password {
            Some(password) => (password, false),
            None => (SecretToken::generate(""), true),
        };
        let password_hash = hash(password.clone()).await?;
        let user = self
            .storage
            .users()
            .create_user(&NewUser {
                id: UserId(new_id()),
                name,
                password_hash,
                roles,
            })
            .await?;
        Ok((user, generated.then_some(password)))
    }

    /// Sets a user's password (and so, on their next login, a new hash).
    pub async fn set_password(
        &self,
        name: &str,
        password: SecretToken,
    ) -> Result<User, AccountError> {
        let user = self.user_named(name).await?;
        let password_hash = hash(password).await?;
        Ok(self
            .storage
            .users()
            .set_password_hash(&user.id, &password_hash)
            .await?)
    }

    /// Adds and removes roles.
    pub async fn change_roles(
        &self,
        name: &str,
        add: &[Role],
        remove: &[Role],
    ) -> Result<User, AccountError> {
        let user = self.user_named(name).await?;
        let mut roles = user.roles.clone();
        roles.extend(add.iter().copied());
        for role in remove {
            roles.remove(role);
        }
        Ok(self.storage.users().set_roles(&user.id, &roles).await?)
    }

    pub async fn users(&self) -> Result<Vec<User>, AccountError> {
        Ok(self.storage.users().list_users().await?)
    }

    /// Whether any user can administer the server.
    pub async fn has_system_admin(&self) -> Result<bool, AccountError> {
        Ok(self
            .users()
            .await?
            .iter()
            .any(|user| user.has_role(Role::SystemAdmin)))
    }

    pub async fn user_named(&self, name: &str) -> Result<User, AccountError> {
        // Dropped on purpose: text that is not a user name names no user.
        let name = UserName::new(name).map_err(|_| AccountError::NotFound("user"))?;
        self.storage
            .users()
            .user_by_name(&name)
            .await?
            .ok_or(AccountError::NotFound("user"))
    }
}

async fn hash(password: SecretToken) -> Result<String, AccountError> {
    blocking(move || hash_password(password.expose()))
        .await
        .map_err(|e| AccountError::Invalid(e.to_string()))
}
