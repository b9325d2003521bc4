//! The process lifecycle with the real binary, on SQLite and on PostgreSQL: one serving process
//! per database, hand-over, takeover after a crash, and stopping when renewals cannot get through.

use crate::support;

use std::time::Duration;

use fermata_store::{
    Acquisition, ErrorKind, LeaseName, NewSession, NewUser, Role, SecretHash, SessionId, Storage,
    TenureEnd, UserId, UserName,
};
use sqlx::{Connection, Executor};
use support::{PATIENCE, Target};

async fn second_serve_refuses(target: Target) {
    let first = target.serve(&[]);
    first.wait_ready().await;
    // The hint is logged after the server is ready, so it is waited for, not read at once.
    first
        .wait_for_output(
            "no administrator yet: create one with `fermata user add NAME --role system_admin`",
        )
        .await;
    let (status, output) = target.run("serve");
    assert_eq!(status.code(), Some(3), "{output}");
    assert!(
        output.contains("another fermata process is serving this database")
            && output.contains("held by")
            && output.contains("--handover wait"),
        "{output}"
    );
    assert_eq!(first.readyz().await.map(|(code, _)| code), Some(200));
}

async fn handover_wait_takes_over_after_sigterm(target: Target) {
    let mut first = target.serve(&[]);
    first.wait_ready().await;
    let mut second = target.serve(&["--handover", "wait"]);
    second
        .wait_for_output("waiting for the writer lease to be released")
        .await;
    assert_eq!(
        second.readyz().await,
        Some((503, "waiting for the writer lease\n".to_owned()))
    );

    first.terminate();
    let status = first.wait_exit().await;
    assert_eq!(status.code(), Some(0), "{}", first.output());
    assert!(first.output().contains("released the writer lease"));
    second.wait_ready().await;

    let store = target.store().await;
    let tenures = store
        .tenures()
        .recent(&LeaseName::WRITER, 10)
        .await
        .unwrap();
    let ends: Vec<_> = tenures.iter().map(|t| (t.token.0, t.end)).collect();
    assert_eq!(ends, [(2, None), (1, Some(TenureEnd::Stopped))]);
    second.terminate();
    assert_eq!(second.wait_exit().await.code(), Some(0));
}

async fn takeover_after_kill_waits_for_expiry_and_fences_the_old_token(target: Target) {
    let mut first = target.serve(&[]);
    first.wait_ready().await;
    let store = target.store().await;
    let old = store.leases().peek(&LeaseName::WRITER).await.unwrap();
    let old = old
        .live_holder()
        .expect("the first process holds the lease")
        .clone();

    first.kill();
    // Until the lease expires, a newcomer is refused.
    let (status, output) = target.run("serve");
    assert_eq!(status.code(), Some(3), "{output}");

    let second = target.serve(&["--handover", "wait"]);
    second.wait_ready().await;
    let new = store.leases().peek(&LeaseName::WRITER).await.unwrap();
    let new = new.live_holder().unwrap().clone();
    assert!(new.token > old.token);
    assert!(
        new.acquired_at >= old.expires_at,
        "taken over before expiry"
    );

    // A write under the dead process's token is refused and changes nothing.
    let old_fence = fermata_store::Fence {
        lease: LeaseName::WRITER,
        token: old.token,
    };
    let before = store
        .tenures()
        .recent(&LeaseName::WRITER, 10)
        .await
        .unwrap();
    let error = store.tenures().close(&old_fence).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Fenced);
    let after = store
        .tenures()
        .recent(&LeaseName::WRITER, 10)
        .await
        .unwrap();
    assert_eq!(after, before);
    assert_eq!(after[1].end, Some(TenureEnd::Superseded), "{after:?}");

    let (_, status) = target.run("status");
    assert!(
        status.contains("superseded (crashed or lost the lease)"),
        "{status}"
    );
}

/// Holds the database's lock on the lease row until dropped, so renewals get no reply.
enum Blocker {
    Postgres { _conn: sqlx::PgConnection },
    Sqlite { _conn: sqlx::SqliteConnection },
}

async fn block_renewals(target: &Target) -> Blocker {
    match target.database() {
        fermata_store_sql::Database::Postgres { url } => {
            let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
            conn.execute("BEGIN").await.unwrap();
            conn.execute("LOCK TABLE leases IN ACCESS EXCLUSIVE MODE")
                .await
                .unwrap();
            Blocker::Postgres { _conn: conn }
        }
        fermata_store_sql::Database::Sqlite { path } => {
            let options = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
            let mut conn = sqlx::SqliteConnection::connect_with(&options)
                .await
                .unwrap();
            conn.execute("BEGIN EXCLUSIVE").await.unwrap();
            Blocker::Sqlite { _conn: conn }
        }
    }
}

async fn holder_stops_when_renewals_cannot_get_through(target: Target) {
    let mut holder = target.serve(&[]);
    holder.wait_ready().await;
    let blocker = block_renewals(&target).await;

    let status = holder.wait_exit().await;
    let output = holder.output();
    assert_eq!(status.code(), Some(4), "{output}");
    assert!(
        output.contains("writer lease renewal abandoned"),
        "{output}"
    );
    assert!(
        output.contains("lost the writer lease: the safety deadline passed"),
        "{output}"
    );
    assert!(output.contains("last renewed at"), "{output}");
    drop(blocker);

    // The lease was never released: it expires, and then a newcomer takes over.
    let store = target.store().await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        match store
            .leases()
            .acquire(&LeaseName::WRITER, "newcomer", Duration::from_secs(60))
            .await
            .unwrap()
        {
            Acquisition::Granted(lease) => {
                assert_eq!(lease.token.0, 2);
                break;
            }
            Acquisition::Held(_) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the lease never expired"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

async fn an_edited_migration_stops_serve_before_anything_runs(target: Target) {
    let (status, output) = target.run("migrate");
    assert!(status.success(), "{output}");
    let store = target.store().await;
    match target.database() {
        fermata_store_sql::Database::Postgres { url } => {
            let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
            conn.execute("UPDATE _sqlx_migrations SET checksum = '\\x00'::bytea WHERE version = 1")
                .await
                .unwrap();
        }
        fermata_store_sql::Database::Sqlite { path } => {
            let options = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
            let mut conn = sqlx::SqliteConnection::connect_with(&options)
                .await
                .unwrap();
            conn.execute("UPDATE _sqlx_migrations SET checksum = x'00' WHERE version = 1")
                .await
                .unwrap();
        }
    }
    let (status, output) = target.run("serve");
    assert_eq!(status.code(), Some(1), "{output}");
    assert!(
        output.contains("migration file")
            && output.contains("/0001_leases.sql was changed after it was applied"),
        "{output}"
    );
    let peek = store.leases().peek(&LeaseName::WRITER).await.unwrap();
    assert_eq!(
        peek.record, None,
        "serve took the lease despite the corrupt schema"
    );
}

/// A database a newer release migrated (a migration this build does not know) is refused by
/// `serve` and `migrate` alike, naming the migration and the way out, and nothing is written:
/// no lease is taken and no migration is recorded.
async fn a_migration_from_a_newer_release_is_refused(target: Target) {
    let (status, output) = target.run("migrate");
    assert!(status.success(), "{output}");
    let store = target.store().await;
    let future = "INSERT INTO _sqlx_migrations \
        (version, description, success, checksum, execution_time) \
        VALUES (9001, 'shards and their leases', TRUE, $1, 0)";
    target.execute(future, vec![0u8; 48]).await;
    let recorded = target.count_rows("_sqlx_migrations").await;
    for command in ["serve", "migrate"] {
        let (status, output) = target.run(command);
        assert_eq!(status.code(), Some(1), "{command}: {output}");
        assert!(
            output.contains("migration 9001 (shards and their leases) applied")
                && output.contains("a newer release wrote it. Run that release or a later one"),
            "{command}: {output}"
        );
    }
    assert_eq!(target.count_rows("_sqlx_migrations").await, recorded);
    let peek = store.leases().peek(&LeaseName::WRITER).await.unwrap();
    assert_eq!(
        peek.record, None,
        "serve took the lease from a database a newer release migrated"
    );
}

async fn startup_removes_sessions_a_restart_cannot_keep(target: Target) {
    let (status, output) = target.run("migrate");
    assert!(status.success(), "{output}");
    let store = target.store().await;
    let user = store
        .users()
        .create_user(&NewUser {
            id: UserId("u1".to_owned()),
            name: UserName::new("ada").unwrap(),
            password_hash: "$argon2id$placeholder".to_owned(),
            roles: [Role::SystemAdmin].into(),
        })
        .await
        .unwrap();
    let session = |id: &str, secret: Option<u8>, ttl: Duration| NewSession {
        id: SessionId(id.to_owned()),
        user: user.id.clone(),
        secret_hash: secret.map(|seed| SecretHash([seed; 32])),
        ttl,
        credentials: None,
        verified_password_hash: None,
    };
    let sessions = store.sessions();
    sessions
        .create_session(&session("kept", Some(1), Duration::from_secs(3600)))
        .await
        .unwrap();
    sessions
        .create_session(&session("delegated", None, Duration::from_secs(3600)))
        .await
        .unwrap();
    sessions
        .create_session(&session("expiring", Some(2), Duration::from_millis(1)))
        .await
        .unwrap();

    let mut first = target.serve(&[]);
    first.wait_ready().await;
    first
        .wait_for_output(
            "startup reset under the writer lease expired_sessions=1 metadata_only_sessions=1",
        )
        .await;
    assert!(
        !first.output().contains("no administrator yet"),
        "{}",
        first.output()
    );
    for (id, alive) in [("kept", true), ("delegated", false), ("expiring", false)] {
        let found = sessions.session(&SessionId(id.to_owned())).await.unwrap();
        assert_eq!(found.is_some(), alive, "{id}");
    }
    first.terminate();
    assert_eq!(first.wait_exit().await.code(), Some(0));

    // The next start finds nothing more to remove.
    let mut second = target.serve(&[]);
    second
        .wait_for_output(
            "startup reset under the writer lease expired_sessions=0 metadata_only_sessions=0",
        )
        .await;
    second.terminate();
    assert_eq!(second.wait_exit().await.code(), Some(0));
    assert!(
        sessions
            .session(&SessionId("kept".to_owned()))
            .await
            .unwrap()
            .is_some()
    );
}

on_both!(
    second_serve_refuses,
    handover_wait_takes_over_after_sigterm,
    takeover_after_kill_waits_for_expiry_and_fences_the_old_token,
    holder_stops_when_renewals_cannot_get_through,
    an_edited_migration_stops_serve_before_anything_runs,
    a_migration_from_a_newer_release_is_refused,
    startup_removes_sessions_a_restart_cannot_keep,
);
