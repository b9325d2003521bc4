//! Contract cases for the write gate: a store opened with a writer fence makes every write
//! (accounts, navigation, workflow runs, schema operations, not only the writes that name a
//! fence) under that fence, refusing them while the fence is empty and refusing them on the
//! database once the fence's lease was released or taken over.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::Harness;
use super::lease::grant;
use fermata_store::api_token::{ApiTokenId, NewApiToken};
use fermata_store::channel::{ChannelId, NewChannel, Repository};
use fermata_store::error::{ErrorKind, StoreResult};
use fermata_store::session::{NewSession, SecretHash, SessionId};
use fermata_store::user::{NewUser, UserId, UserName};
use fermata_store::workflow::{NewRun, RunId};
use fermata_store::{Storage, StoreOptions, WriterFence};

const LONG: Duration = Duration::from_secs(300);

async fn gated(harness: &dyn Harness) -> (Arc<dyn Storage>, WriterFence) {
    let writer = WriterFence::default();
    let options = StoreOptions {
        writer_fence: Some(writer.clone()),
        ..StoreOptions::default()
    };
    (harness.open(options).await, writer)
}

fn new_user(name: &str) -> NewUser {
    NewUser {
        id: UserId(format!("user-{name}")),
        name: UserName::new(name).unwrap(),
        password_hash: format!("$argon2id$hash-of-{name}"),
        roles: BTreeSet::new(),
    }
}

fn new_session(id: &str, user: &UserId, seed: u8) -> NewSession {
    NewSession {
        id: SessionId(id.to_owned()),
        user: user.clone(),
        secret_hash: Some(SecretHash([seed; 32])),
        ttl: LONG,
        credentials: None,
        verified_password_hash: None,
    }
}

fn new_token(id: &str, user: &UserId, seed: u8) -> NewApiToken {
    NewApiToken {
        id: ApiTokenId(id.to_owned()),
        user: user.clone(),
        label: "ci".to_owned(),
        secret_hash: SecretHash([seed; 32]),
    }
}

fn new_run(id: &str) -> NewRun {
    NewRun {
        id: RunId(id.to_owned()),
        workflow: "contract".to_owned(),
        input: "{}".to_owned(),
    }
}

fn assert_fenced<T: std::fmt::Debug>(result: StoreResult<T>, what: &str) {
    match result {
        Err(error) => assert_eq!(error.kind(), ErrorKind::Fenced, "{what}: {error}"),
        Ok(value) => panic!("{what} was written without the writer lease: {value:?}"),
    }
}

pub async fn a_gated_store_writes_nothing_before_it_holds_the_writer_lease(harness: &dyn Harness) {
    let (store, _writer) = gated(harness).await;
    assert_fenced(store.users().create_user(&new_user("ada")).await, "a user");
    // Refused before any statement runs, so the rows they name need not exist.
    let ada = UserId("user-ada".to_owned());
    assert_fenced(
        store
            .sessions()
            .create_session(&new_session("s1", &ada, 1))
            .await,
        "a login",
    );
    assert_fenced(
        store
            .api_tokens()
            .create_api_token(&new_token("t1", &ada, 2))
            .await,
        "a token",
    );
    assert_fenced(
        store.collaboration().set_navigation(&ada, None).await,
        "navigation",
    );
    assert_fenced(store.workflows().create_run(&new_run("r1")).await, "a run");
    assert_eq!(store.users().list_users().await.unwrap(), []);
    assert_eq!(
        store
            .workflows()
            .run(&RunId("r1".to_owned()))
            .await
            .unwrap(),
        None
    );
}

pub async fn a_gated_store_writes_under_the_lease_and_is_refused_once_it_is_lost(
    harness: &dyn Harness,
) {
    let (store, writer) = gated(harness).await;
    let lease = grant(&*store, "alpha", LONG).await;
    writer.set(Some(lease.fence()));

    // Held: accounts, navigation and runs are written.
    let user = store.users().create_user(&new_user("ada")).await.unwrap();
    let session = store
        .sessions()
        .create_session(&new_session("s1", &user.id, 1))
        .await
        .unwrap();
    let token = store
        .api_tokens()
        .create_api_token(&new_token("t1", &user.id, 2))
        .await
        .unwrap();
    assert!(
        store
            .api_tokens()
            .use_api_token(&SecretHash([2; 32]))
            .await
            .unwrap()
            .is_some()
    );
    let channel = store
        .collaboration()
        .create_channel(
            &lease.fence(),
            &NewChannel {
                id: ChannelId("c1".to_owned()),
                repository: Repository::new("acme/app").unwrap(),
                title: "Plan".to_owned(),
                parent: None,
            },
        )
        .await
        .unwrap();
    store
        .collaboration()
        .set_navigation(&user.id, Some(&channel.id))
        .await
        .unwrap();
    store.workflows().create_run(&new_run("r1")).await.unwrap();

    // Lost without this process noticing (its fence is still set): the database refuses.
    assert!(store.leases().release(&lease).await.unwrap());
    let successor = grant(&*store, "beta", LONG).await;
    assert!(successor.token > lease.token);
    assert_fenced(
        store
            .sessions()
            .create_session(&new_session("s2", &user.id, 3))
            .await,
        "a login",
    );
    assert_fenced(
        store.sessions().delete_session(&session.id).await,
        "a logout",
    );
    assert_fenced(
        store
            .api_tokens()
            .create_api_token(&new_token("t2", &user.id, 4))
            .await,
        "a token",
    );
    assert_fenced(
        store.api_tokens().revoke_api_token(&token.id).await,
        "a revocation",
    );
    assert_fenced(
        store
            .users()
            .set_password_hash(&user.id, "$argon2id$new")
            .await,
        "a password change",
    );
    assert_fenced(
        store.collaboration().set_navigation(&user.id, None).await,
        "navigation",
    );
    assert_fenced(store.workflows().create_run(&new_run("r2")).await, "a run");

    // Nothing of it reached the rows.
    let sessions = store.sessions();
    assert!(sessions.session(&session.id).await.unwrap().is_some());
    assert!(
        sessions
            .session(&SessionId("s2".to_owned()))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        store
            .api_tokens()
            .api_tokens_of(&user.id)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        store
            .api_tokens()
            .api_token(&token.id)
            .await
            .unwrap()
            .unwrap()
            .revoked_at,
        None
    );
    assert_eq!(
        store.collaboration().navigation(&user.id).await.unwrap(),
        Some(channel.id.clone())
    );
    let unchanged = store.users().user_by_id(&user.id).await.unwrap().unwrap();
    assert_eq!(unchanged.password_hash, user.password_hash);
    assert_eq!(
        store
            .workflows()
            .run(&RunId("r2".to_owned()))
            .await
            .unwrap(),
        None
    );

    // The successor's fence writes again.
    writer.set(Some(successor.fence()));
    store.sessions().delete_session(&session.id).await.unwrap();
}
