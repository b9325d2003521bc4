//! Discovery against the real MariaDB server the test command provisions
//! (`FERMATA_TEST_MYSQL_URL`, an account that may create databases and users): what a snapshot
//! account sees, exactly, and the safe errors of a wrong password, a closed port and TLS the
//! server does not offer.

use crate::support;

use fermata_schema::{TlsMode, discover};
use fermata_store::schema::{ErrorCode, ErrorStage, SafeError};
use sqlx::Executor;
use support::{
    RESTRICTED_MYSQL_URL_VAR, admin, admin_options_of, quoted, restricted_admin, settings,
    settings_on, snapshot_account, unique,
};

fn assert_safe(error: &SafeError, code: ErrorCode, stage: ErrorStage, secrets: &[&str]) {
    assert_eq!((error.code(), error.stage()), (code, stage), "{error}");
    let json = error.to_json();
    for secret in secrets {
        assert!(!json.contains(secret), "{json} shows {secret}");
    }
}

#[tokio::test]
async fn a_snapshot_account_sees_exactly_its_databases_in_byte_order() {
    let mut admin = admin().await;
    let prefix = unique("db");
    let visible: Vec<String> = [
        "Zeta",
        "alpha",
        "with space",
        "back`tick",
        "ünïcödé_名前",
        "music ♪ (BMP only: identifiers are utf8mb3)",
        "under_score",
        "per%cent",
    ]
    .iter()
    .map(|name| format!("{prefix}{name}"))
    .collect();
    // `underXscore` would match the `under_score` grant if `_` were left a wildcard.
    let hidden = [format!("{prefix}hidden"), format!("{prefix}underXscore")];
    for database in visible.iter().chain(&hidden) {
        admin
            .execute(format!("CREATE DATABASE {}", quoted(database)).as_str())
            .await
            .unwrap();
    }
    let (user, password) = snapshot_account(&mut admin, &visible).await;

    let mut connection = settings(&user, &password).connect().await.unwrap();
    let discovery = discover(&mut connection).await.unwrap();
    assert!(!discovery.server_version.is_empty());
    let seen: Vec<&str> = discovery
        .databases
        .iter()
        .map(|name| name.as_str())
        .filter(|name| name.starts_with(&prefix))
        .collect();
    let mut expected: Vec<&str> = visible.iter().map(String::as_str).collect();
    expected.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    assert_eq!(seen, expected);
    assert_eq!(
        seen.first().copied(),
        Some(format!("{prefix}Zeta").as_str())
    );
    for system in ["information_schema", "mysql", "performance_schema", "sys"] {
        assert!(
            discovery
                .databases
                .iter()
                .all(|name| name.as_str() != system),
            "{system} listed"
        );
    }

    for database in visible.iter().chain(&hidden) {
        admin
            .execute(format!("DROP DATABASE {}", quoted(database)).as_str())
            .await
            .unwrap();
    }
    admin
        .execute(format!("DROP USER '{user}'@'127.0.0.1'").as_str())
        .await
        .unwrap();
}

#[tokio::test]
async fn an_account_without_grants_sees_no_user_database() {
    let mut admin = admin().await;
    let database = unique("private");
    admin
        .execute(format!("CREATE DATABASE {}", quoted(&database)).as_str())
        .await
        .unwrap();
    let (user, password) = snapshot_account(&mut admin, &[]).await;
    let mut connection = settings(&user, &password).connect().await.unwrap();
    let discovery = discover(&mut connection).await.unwrap();
    assert!(
        discovery
            .databases
            .iter()
            .all(|name| name.as_str() != database),
        "{:?}",
        discovery.databases
    );
    admin
        .execute(format!("DROP DATABASE {}", quoted(&database)).as_str())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_wrong_password_is_an_authentication_error_that_shows_nothing() {
    let mut admin = admin().await;
    let (user, password) = snapshot_account(&mut admin, &[]).await;
    let wrong = format!("{password}-but-wrong");
    let error = settings(&user, &wrong).connect().await.unwrap_err();
    assert_safe(
        &error,
        ErrorCode::AuthenticationFailed,
        ErrorStage::Permission,
        &[&wrong, &user, "127.0.0.1", "Access denied"],
    );
    assert!(!error.retryable());
}

#[tokio::test]
async fn a_missing_show_databases_privilege_is_a_permission_error() {
    // On a server started with --skip-show-database, listing databases needs the privilege.
    let mut admin = restricted_admin().await;
    let database = unique("granted");
    admin
        .execute(format!("CREATE DATABASE {}", quoted(&database)).as_str())
        .await
        .unwrap();
    let (user, password) = snapshot_account(&mut admin, std::slice::from_ref(&database)).await;
    let source = settings_on(
        &admin_options_of(RESTRICTED_MYSQL_URL_VAR),
        &user,
        &password,
    );
    let mut connection = source.connect().await.unwrap();
    let error = discover(&mut connection).await.unwrap_err();
    assert_safe(
        &error,
        ErrorCode::PermissionDenied,
        ErrorStage::Permission,
        &[&password, &user, "SHOW DATABASES", "Access denied"],
    );
    assert!(!error.retryable());
    admin
        .execute(format!("DROP DATABASE {}", quoted(&database)).as_str())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_closed_port_is_a_connection_error() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let mut source = settings("snap", "pw");
    source.port = port;
    let error = source.connect().await.unwrap_err();
    assert_safe(
        &error,
        ErrorCode::ConnectionRefused,
        ErrorStage::Connection,
        &[&port.to_string(), "refused", "os error"],
    );
    assert!(error.retryable());
}

#[tokio::test]
async fn tls_the_server_does_not_offer_is_a_tls_error() {
    let mut admin = admin().await;
    let tls_offered: Option<(String, String)> = sqlx::query_as("SHOW VARIABLES LIKE 'have_ssl'")
        .fetch_optional(&mut admin)
        .await
        .unwrap();
    let (user, password) = snapshot_account(&mut admin, &[]).await;
    let mut source = settings(&user, &password);
    source.tls = TlsMode::Required;
    let result = source.connect().await;
    match tls_offered.as_ref().map(|(_, value)| value.as_str()) {
        Some("YES") => assert!(result.is_ok(), "TLS is offered and required"),
        _ => assert_safe(
            &result.unwrap_err(),
            ErrorCode::TlsFailed,
            ErrorStage::Tls,
            &[&password],
        ),
    }
}

#[test]
fn settings_are_checked_before_connecting_and_never_show_the_password() {
    let mut source = settings("snap", "hunter2-secret");
    assert!(!format!("{source:?}").contains("hunter2"));
    source.tls = TlsMode::VerifyIdentity;
    assert!(source.validate().unwrap_err().contains("ca_file"));
    source.ca_file = Some("/nonexistent/ca.pem".into());
    assert!(source.validate().is_err());
    // verify_ca would accept any publicly trusted certificate for any name.
    source.tls = TlsMode::VerifyCa;
    assert!(source.validate().unwrap_err().contains("verify_identity"));
    source.tls = TlsMode::Disabled;
    source.ca_file = None;
    source.host = " ".to_owned();
    assert!(source.validate().is_err());
    for (text, mode) in [
        ("disabled", TlsMode::Disabled),
        ("preferred", TlsMode::Preferred),
        ("required", TlsMode::Required),
        ("verify_ca", TlsMode::VerifyCa),
        ("verify_identity", TlsMode::VerifyIdentity),
    ] {
        assert_eq!(text.parse::<TlsMode>(), Ok(mode));
    }
    assert!("REQUIRED".parse::<TlsMode>().is_err());
}
