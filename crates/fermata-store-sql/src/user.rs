//! The SQL user store.

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;
use fermata_store::{
    ErrorKind, NewUser, Role, StoreError, StoreResult, StoreResultExt, User, UserId, UserName,
    UserStore,
};
use sqlx::AnyConnection;
use sqlx::any::AnyRow;

use crate::SqlStorage;
use crate::dialect::Dialect;
use crate::error::StoreContext;
use crate::row::{column, instant};

/// The user statements, rendered for one dialect.
#[derive(Debug)]
pub(crate) struct Statements {
    insert: String,
    insert_role: String,
    delete_roles: String,
    by_name: String,
    by_id: String,
    all: String,
    roles_of: String,
    all_roles: String,
    set_password: String,
    end_sessions: String,
    touch: String,
}

const COLUMNS: &str = "id, name, password_hash, created_at, updated_at";

impl Statements {
    pub(crate) fn new(dialect: Dialect) -> Self {
        Statements {
            insert: dialect.render(&format!(
                "INSERT INTO users ({COLUMNS}) VALUES ($1, $2, $3, {{now}}, {{now}})"
            )),
            insert_role: dialect.render("INSERT INTO user_roles (user_id, role) VALUES ($1, $2)"),
            delete_roles: dialect.render("DELETE FROM user_roles WHERE user_id = $1"),
            by_name: dialect.render(&format!("SELECT {COLUMNS} FROM users WHERE name = $1")),
            by_id: dialect.render(&format!("SELECT {COLUMNS} FROM users WHERE id = $1")),
            all: dialect.render(&format!("SELECT {COLUMNS} FROM users ORDER BY name")),
            roles_of: dialect.render("SELECT role FROM user_roles WHERE user_id = $1"),
            all_roles: dialect.render("SELECT user_id, role FROM user_roles"),
            set_password: dialect
                .render("UPDATE users SET password_hash = $2, updated_at = {now} WHERE id = $1"),
            end_sessions: dialect.render("DELETE FROM web_sessions WHERE user_id = $1"),
            touch: dialect.render("UPDATE users SET updated_at = {now} WHERE id = $1"),
        }
    }
}

fn parse_role(text: &str) -> StoreResult<Role> {
    Role::parse(text).ok_or_else(|| StoreError::corrupt("a stored role is unknown"))
}

fn user_from(row: &AnyRow, roles: BTreeSet<Role>, action: &str) -> StoreResult<User> {
    Ok(User {
        id: UserId(column(row, 0, action)?),
        name: UserName::new(column::<String>(row, 1, action)?)
            .or_corrupt("a stored user name is invalid")?,
        password_hash: column(row, 2, action)?,
        roles,
        created_at: instant(row, 3, action)?,
        updated_at: instant(row, 4, action)?,
    })
}

impl SqlStorage {
    /// The user in `row` with its roles, read over `conn`.
    async fn with_roles(
        &self,
        conn: &mut AnyConnection,
        row: &AnyRow,
        action: &str,
    ) -> StoreResult<User> {
        let id: String = column(row, 0, action)?;
        let roles: Vec<String> = sqlx::query_scalar(&self.inner.user_sql.roles_of)
            .bind(&id)
            .fetch_all(conn)
            .await
            .context(action)?;
        let roles = roles
            .iter()
            .map(|r| parse_role(r))
            .collect::<StoreResult<_>>()?;
        user_from(row, roles, action)
    }

    async fn user_where(&self, sql: &str, key: &str, action: &str) -> StoreResult<Option<User>> {
        let mut conn = self.inner.pool.acquire().await.context(action)?;
        let row = sqlx::query(sql)
            .bind(key)
            .fetch_optional(&mut *conn)
            .await
            .context(action)?;
        match row {
            Some(row) => Ok(Some(self.with_roles(&mut conn, &row, action).await?)),
            None => Ok(None),
        }
    }

    async fn write_roles(
        &self,
        conn: &mut AnyConnection,
        id: &UserId,
        roles: &BTreeSet<Role>,
        action: &str,
    ) -> StoreResult<()> {
        let sql = &self.inner.user_sql;
        sqlx::query(&sql.delete_roles)
            .bind(&id.0)
            .execute(&mut *conn)
            .await
            .context(action)?;
        for role in roles {
            sqlx::query(&sql.insert_role)
                .bind(&id.0)
                .bind(role.as_str())
                .execute(&mut *conn)
                .await
                .context(action)?;
        }
        Ok(())
    }
}

fn user_missing(id: &UserId) -> StoreError {
    StoreError::missing(format!("no user with ID {id}"))
}

#[async_trait]
impl UserStore for SqlStorage {
    async fn create_user(&self, user: &NewUser) -> StoreResult<User> {
        let action = "creating a user";
        let mut tx = self.inner.begin_write(action).await?;
        let inserted = sqlx::query(&self.inner.user_sql.insert)
            .bind(&user.id.0)
            .bind(user.name.as_str())
            .bind(&user.password_hash)
            .execute(&mut *tx)
            .await
            .context(action);
        match inserted {
            Err(error) if error.kind() == ErrorKind::Conflict => {
                return Err(StoreError::conflict(format!(
                    "the user name `{}` is taken",
                    user.name
                )));
            }
            other => other?,
        };
        self.write_roles(&mut tx, &user.id, &user.roles, action)
            .await?;
        tx.commit().await.context(action)?;
        self.user_by_id(&user.id)
            .await?
            .ok_or_else(|| StoreError::unavailable("the new user vanished"))
    }

    async fn user_by_name(&self, name: &UserName) -> StoreResult<Option<User>> {
        self.user_where(
            &self.inner.user_sql.by_name,
            name.as_str(),
            "reading a user",
        )
        .await
    }

    async fn user_by_id(&self, id: &UserId) -> StoreResult<Option<User>> {
        self.user_where(&self.inner.user_sql.by_id, &id.0, "reading a user")
            .await
    }

    async fn set_password_hash(&self, id: &UserId, password_hash: &str) -> StoreResult<User> {
        let action = "changing a password";
        let mut tx = self.inner.begin_write(action).await?;
        let done = sqlx::query(&self.inner.user_sql.set_password)
            .bind(&id.0)
            .bind(password_hash)
            .execute(&mut *tx)
            .await
            .context(action)?;
        if done.rows_affected() == 0 {
            return Err(user_missing(id));
        }
        sqlx::query(&self.inner.user_sql.end_sessions)
            .bind(&id.0)
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        self.user_by_id(id).await?.ok_or_else(|| user_missing(id))
    }

    async fn set_roles(&self, id: &UserId, roles: &BTreeSet<Role>) -> StoreResult<User> {
        let action = "changing roles";
        let mut tx = self.inner.begin_write(action).await?;
        let touched = sqlx::query(&self.inner.user_sql.touch)
            .bind(&id.0)
            .execute(&mut *tx)
            .await
            .context(action)?;
        if touched.rows_affected() == 0 {
            return Err(user_missing(id));
        }
        self.write_roles(&mut tx, id, roles, action).await?;
        tx.commit().await.context(action)?;
        self.user_by_id(id).await?.ok_or_else(|| user_missing(id))
    }

    async fn list_users(&self) -> StoreResult<Vec<User>> {
        let action = "listing users";
        let sql = &self.inner.user_sql;
        let rows = sqlx::query(&sql.all)
            .fetch_all(&self.inner.pool)
            .await
            .context(action)?;
        let role_rows: Vec<(String, String)> = sqlx::query_as(&sql.all_roles)
            .fetch_all(&self.inner.pool)
            .await
            .context(action)?;
        let mut roles: BTreeMap<String, BTreeSet<Role>> = BTreeMap::new();
        for (user, role) in role_rows {
            roles.entry(user).or_default().insert(parse_role(&role)?);
        }
        rows.iter()
            .map(|row| {
                let id: String = column(row, 0, action)?;
                user_from(row, roles.remove(&id).unwrap_or_default(), action)
            })
            .collect()
    }
}
