//! Shared by the tests that need the MariaDB server the test command provisions
//! (`FERMATA_TEST_MYSQL_URL`, an account that may create databases and users): connecting as its
//! administrator, unique names, quoting, and snapshot accounts that see chosen databases only.

#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicU32, Ordering};

use fermata_schema::{SourceSettings, TlsMode};
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection};
use sqlx::{ConnectOptions, Executor};
use zeroize::Zeroizing;

pub const MYSQL_URL_VAR: &str = "FERMATA_TEST_MYSQL_URL";
/// The second server, started with `--skip-show-database`.
pub const RESTRICTED_MYSQL_URL_VAR: &str = "FERMATA_TEST_MYSQL_RESTRICTED_URL";

/// The administrator's options on the server `var` names; a test that needs it fails when it is
/// not there.
pub fn admin_options_of(var: &str) -> MySqlConnectOptions {
    let url = std::env::var(var)
        .unwrap_or_else(|_| panic!("{var} is not set; run the tests with scripts/test"));
    url.parse().expect("a MySQL URL")
}

/// The administrator's options on the main test server.
pub fn admin_options() -> MySqlConnectOptions {
    admin_options_of(MYSQL_URL_VAR)
}

pub async fn admin() -> MySqlConnection {
    admin_options()
        .connect()
        .await
        .expect("the test MariaDB answers")
}

/// The administrator of the `--skip-show-database` server.
pub async fn restricted_admin() -> MySqlConnection {
    admin_options_of(RESTRICTED_MYSQL_URL_VAR)
        .connect()
        .await
        .expect("the restricted test MariaDB answers")
}

/// A prefix no other test of this run uses, so tests can share the server.
pub fn unique(tag: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "fm{}{}{tag}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

pub fn quoted(identifier: &str) -> String {
    format!("`{}`", identifier.replace('`', "``"))
}

/// A database name as a GRANT pattern: `_` and `%` are wildcards there.
pub fn grant_pattern(database: &str) -> String {
    quoted(
        &database
            .replace('\\', "\\\\")
            .replace('_', "\\_")
            .replace('%', "\\%"),
    )
}

pub fn settings(user: &str, password: &str) -> SourceSettings {
    settings_on(&admin_options(), user, password)
}

/// Source settings for `user` on the server `admin` reaches.
pub fn settings_on(admin: &MySqlConnectOptions, user: &str, password: &str) -> SourceSettings {
    SourceSettings {
        host: admin.get_host().to_owned(),
        port: admin.get_port(),
        user: user.to_owned(),
        password: Zeroizing::new(password.to_owned()),
        tls: TlsMode::Disabled,
        ca_file: None,
    }
}

/// Creates a snapshot account allowed to read `visible` only.
pub async fn snapshot_account(admin: &mut MySqlConnection, visible: &[String]) -> (String, String) {
    let user = unique("snap");
    create_account(admin, user, visible).await
}

/// Creates a snapshot account whose name starts with `prefix`, allowed to read nothing.
pub async fn snapshot_account_named(admin: &mut MySqlConnection, prefix: &str) -> (String, String) {
    create_account(admin, format!("{prefix}{}", unique("")), &[]).await
}

async fn create_account(
    admin: &mut MySqlConnection,
    user: String,
    visible: &[String],
) -> (String, String) {
    let password = format!("pw '{user}' \"secret\"");
    admin
        .execute(
            format!(
                "CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY '{}'",
                password.replace('\\', "\\\\").replace('\'', "\\'")
            )
            .as_str(),
        )
        .await
        .unwrap();
    for database in visible {
        admin
            .execute(
                format!(
                    "GRANT SELECT, SHOW VIEW ON {}.* TO '{user}'@'127.0.0.1'",
                    grant_pattern(database)
                )
                .as_str(),
            )
            .await
            .unwrap();
    }
    (user, password)
}
