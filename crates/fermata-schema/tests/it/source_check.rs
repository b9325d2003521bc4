//! The source check against the test MariaDB: an account with the minimum grants of every kind
//! reads everything; a narrowed one is told each privilege it lacks, per kind and database; a
//! role's grants count; `ignore_databases` leaves databases out of the check; a server that hides
//! its databases needs `SHOW DATABASES`. No report shows the password.

use fermata_schema::check_source;
use fermata_schema::filter::{Filter, Pattern};
use fermata_schema::source_check::{CheckedKind, SourceCheck};
use sqlx::Executor;

use crate::support::{
    RESTRICTED_MYSQL_URL_VAR, admin, admin_options_of, full_snapshot_account, grant, quoted,
    restricted_admin, settings, settings_on, snapshot_account, unique,
};

/// Creates each database anew.
async fn create_databases(admin: &mut sqlx::mysql::MySqlConnection, names: &[String]) {
    for name in names {
        admin
            .execute(format!("CREATE DATABASE {}", quoted(name)).as_str())
            .await
            .unwrap();
    }
}

/// Each kind's missing grants as `PRIVILEGE ON target` texts.
fn missing(check: &SourceCheck, kind: CheckedKind) -> Vec<String> {
    let report = check
        .kinds
        .iter()
        .find(|report| report.kind == kind)
        .unwrap_or_else(|| panic!("no {kind:?} in {check:?}"));
    assert_eq!(report.readable, report.missing.is_empty());
    report
        .missing
        .iter()
        .map(|missing| format!("{} ON {}", missing.privilege, missing.on))
        .collect()
}

fn assert_shows_no_secret(check: &SourceCheck, password: &str) {
    let json = serde_json::to_string(check).unwrap();
    assert!(!json.contains(password), "{json}");
    assert!(!json.contains("PASSWORD"), "{json}");
    assert!(!check.to_text().contains(password));
}

#[tokio::test]
async fn an_account_with_the_minimum_grants_reads_every_kind() {
    let mut admin = admin().await;
    let prefix = unique("full");
    let databases = vec![format!("{prefix}shop"), format!("{prefix}under_score")];
    create_databases(&mut admin, &databases).await;
    let (user, password) = full_snapshot_account(&mut admin, &databases).await;

    let check = check_source(&settings(&user, &password), &Filter::default())
        .await
        .unwrap();
    assert!(check.complete, "{}", check.to_text());
    assert_eq!(check.missing_count(), 0);
    assert_eq!(
        check
            .databases
            .iter()
            .map(|name| name.as_str().to_owned())
            .collect::<Vec<_>>(),
        databases
    );
    assert_eq!(check.account, format!("{user}@127.0.0.1"));
    let kinds: Vec<_> = check.kinds.iter().map(|report| report.kind).collect();
    assert_eq!(
        kinds,
        [
            CheckedKind::Databases,
            CheckedKind::Tables,
            CheckedKind::Views,
            CheckedKind::Sequences,
            CheckedKind::Routines,
            CheckedKind::Triggers,
            CheckedKind::Events,
        ]
    );
    assert_shows_no_secret(&check, &password);
}

#[tokio::test]
async fn a_narrowed_account_is_told_every_privilege_it_lacks() {
    let mut admin = admin().await;
    let prefix = unique("narrow");
    let (shop, other) = (format!("{prefix}shop"), format!("{prefix}other"));
    create_databases(&mut admin, &[shop.clone(), other.clone()]).await;
    // SELECT and SHOW VIEW on both; nothing for routines, triggers or events.
    let (user, password) = snapshot_account(&mut admin, &[shop.clone(), other.clone()]).await;

    let check = check_source(&settings(&user, &password), &Filter::default())
        .await
        .unwrap();
    assert!(!check.complete);
    let on = |database: &str| format!("{}.*", quoted(database));
    assert_eq!(
        missing(&check, CheckedKind::Databases),
        Vec::<String>::new()
    );
    assert_eq!(missing(&check, CheckedKind::Tables), Vec::<String>::new());
    assert_eq!(missing(&check, CheckedKind::Views), Vec::<String>::new());
    assert_eq!(
        missing(&check, CheckedKind::Sequences),
        Vec::<String>::new()
    );
    assert_eq!(
        missing(&check, CheckedKind::Routines),
        ["SELECT ON `mysql`.`proc`"]
    );
    // `other` sorts before `shop`: the databases are checked in inventory order.
    assert_eq!(
        missing(&check, CheckedKind::Triggers),
        [
            format!("TRIGGER ON {}", on(&other)),
            format!("TRIGGER ON {}", on(&shop))
        ]
    );
    assert_eq!(
        missing(&check, CheckedKind::Events),
        [
            format!("EVENT ON {}", on(&other)),
            format!("EVENT ON {}", on(&shop))
        ]
    );
    assert_eq!(check.missing_count(), 5);
    let text = check.to_text();
    assert!(
        text.contains(&format!("events    missing EVENT ON {}", on(&other))),
        "{text}"
    );
    assert!(
        text.contains(
            "routines  missing SELECT ON `mysql`.`proc` (unless the account defines every routine)"
        ),
        "{text}"
    );
    assert_shows_no_secret(&check, &password);

    // A default role brings the trigger and event grants on `shop`; `ignore_databases` leaves
    // `other` out of the check.
    let role = unique("role");
    admin
        .execute(format!("CREATE ROLE {}", quoted(&role)).as_str())
        .await
        .unwrap();
    admin
        .execute(
            format!(
                "GRANT TRIGGER, EVENT ON {}.* TO {}",
                quoted(&shop),
                quoted(&role)
            )
            .as_str(),
        )
        .await
        .unwrap();
    grant(&mut admin, &quoted(&role), &user).await;
    admin
        .execute(
            format!(
                "SET DEFAULT ROLE {} FOR '{user}'@'127.0.0.1'",
                quoted(&role)
            )
            .as_str(),
        )
        .await
        .unwrap();
    let filter = Filter {
        ignore_databases: vec![Pattern::new(other.clone()).unwrap()],
        ..Filter::default()
    };
    let check = check_source(&settings(&user, &password), &filter)
        .await
        .unwrap();
    assert_eq!(
        check
            .databases
            .iter()
            .map(|name| name.as_str())
            .collect::<Vec<_>>(),
        [shop.as_str()]
    );
    assert_eq!(missing(&check, CheckedKind::Triggers), Vec::<String>::new());
    assert_eq!(missing(&check, CheckedKind::Events), Vec::<String>::new());
    assert_eq!(
        missing(&check, CheckedKind::Routines),
        ["SELECT ON `mysql`.`proc`"]
    );
}

#[tokio::test]
async fn an_account_that_sees_no_database_is_told_so() {
    let mut admin = admin().await;
    let (user, password) = snapshot_account(&mut admin, &[]).await;
    let check = check_source(&settings(&user, &password), &Filter::default())
        .await
        .unwrap();
    assert!(check.databases.is_empty());
    assert_eq!(
        missing(&check, CheckedKind::Databases),
        ["SELECT ON each database to snapshot"]
    );
    assert!(!check.complete);
}

#[tokio::test]
async fn a_server_that_hides_databases_needs_show_databases() {
    let mut admin = restricted_admin().await;
    let database = unique("hidden");
    create_databases(&mut admin, std::slice::from_ref(&database)).await;
    let (user, password) = full_snapshot_account(&mut admin, std::slice::from_ref(&database)).await;
    let source = settings_on(
        &admin_options_of(RESTRICTED_MYSQL_URL_VAR),
        &user,
        &password,
    );
    let check = check_source(&source, &Filter::default()).await.unwrap();
    // The databases its grants name are still checked.
    assert_eq!(
        check
            .databases
            .iter()
            .map(|name| name.as_str())
            .collect::<Vec<_>>(),
        [database.as_str()]
    );
    assert_eq!(
        missing(&check, CheckedKind::Databases),
        ["SHOW DATABASES ON *.*"]
    );
    assert_eq!(check.missing_count(), 1);
    grant(&mut admin, "SHOW DATABASES ON *.*", &user).await;
    let check = check_source(&source, &Filter::default()).await.unwrap();
    assert!(check.complete, "{}", check.to_text());
}
