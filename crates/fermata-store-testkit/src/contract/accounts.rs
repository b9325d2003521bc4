//! Contract cases for users, sessions, API tokens and paired machines.

use std::collections::BTreeSet;
use std::time::Duration;

use super::lease::{grant, plain};
use super::{Harness, eventually};
use fermata_store::Storage;
use fermata_store::api_token::{ApiTokenId, NewApiToken};
use fermata_store::error::ErrorKind;
use fermata_store::machine::{MachineId, NewMachine};
use fermata_store::session::{NewSession, SecretHash, SessionId, SessionSweep};
use fermata_store::user::{NewUser, Role, User, UserId, UserName};

const LONG: Duration = Duration::from_secs(3600);
const SHORT: Duration = Duration::from_millis(400);

async fn user(store: &dyn Storage, name: &str) -> User {
    store
        .users()
        .create_user(&NewUser {
            id: UserId(format!("user-{name}")),
            name: UserName::new(name).unwrap(),
            password_hash: format!("$argon2id$hash-of-{name}"),
            roles: BTreeSet::new(),
        })
        .await
        .unwrap()
}

fn hash(seed: u8) -> SecretHash {
    SecretHash([seed; 32])
}

fn new_session(id: &str, user: &User, secret: Option<u8>, ttl: Duration) -> NewSession {
    NewSession {
        id: SessionId(id.to_owned()),
        user: user.id.clone(),
        secret_hash: secret.map(hash),
        ttl,
        credentials: None,
        verified_password_hash: None,
    }
}

fn new_machine(id: &str, owner: &User, secret: u8) -> NewMachine {
    NewMachine {
        id: MachineId(id.to_owned()),
        owner: owner.id.clone(),
        name: format!("{id} laptop"),
        secret_hash: hash(secret),
    }
}

pub async fn user_names_are_unique_and_roles_are_kept(harness: &dyn Harness) {
    let store = plain(harness).await;
    let admin = NewUser {
        id: UserId("u1".to_owned()),
        name: UserName::new("ada").unwrap(),
        password_hash: "$argon2id$x".to_owned(),
        roles: BTreeSet::from([Role::SystemAdmin]),
    };
    let created = store.users().create_user(&admin).await.unwrap();
    assert!(created.has_role(Role::SystemAdmin));
    let again = NewUser {
        id: UserId("u2".to_owned()),
        ..admin.clone()
    };
    let error = store.users().create_user(&again).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Conflict);

    let found = store
        .users()
        .user_by_name(&admin.name)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found, created);
    assert_eq!(
        store.users().user_by_id(&admin.id).await.unwrap(),
        Some(created)
    );
    let nobody = UserName::new("nobody").unwrap();
    assert_eq!(store.users().user_by_name(&nobody).await.unwrap(), None);
    user(&*store, "bob").await;
    let names: Vec<_> = store
        .users()
        .list_users()
        .await
        .unwrap()
        .into_iter()
        .map(|u| u.name.to_string())
        .collect();
    assert_eq!(names, ["ada", "bob"]);
}

pub async fn user_passwords_and_roles_change(harness: &dyn Harness) {
    let store = plain(harness).await;
    let ada = user(&*store, "ada").await;
    let changed = store
        .users()
        .set_password_hash(&ada.id, "$argon2id$new")
        .await
        .unwrap();
    assert_eq!(changed.password_hash, "$argon2id$new");
    let promoted = store
        .users()
        .set_roles(&ada.id, &BTreeSet::from([Role::SystemAdmin]))
        .await
        .unwrap();
    assert!(promoted.has_role(Role::SystemAdmin));
    let demoted = store
        .users()
        .set_roles(&ada.id, &BTreeSet::new())
        .await
        .unwrap();
    assert!(demoted.roles.is_empty());
    assert_eq!(
        store.users().user_by_id(&ada.id).await.unwrap(),
        Some(demoted)
    );

    let ghost = UserId("ghost".to_owned());
    let error = store
        .users()
        .set_password_hash(&ghost, "x")
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Missing);
    let error = store
        .users()
        .set_roles(&ghost, &BTreeSet::new())
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Missing);
}

pub async fn a_password_change_ends_the_users_sessions(harness: &dyn Harness) {
    let store = plain(harness).await;
    let ada = user(&*store, "ada").await;
    let bob = user(&*store, "bob").await;
    let sessions = store.sessions();
    for (id, owner, secret) in [("ada-1", &ada, 1), ("ada-2", &ada, 2), ("bob-1", &bob, 3)] {
        sessions
            .create_session(&new_session(id, owner, Some(secret), LONG))
            .await
            .unwrap();
    }
    store
        .users()
        .set_password_hash(&ada.id, "$argon2id$new")
        .await
        .unwrap();
    for id in ["ada-1", "ada-2"] {
        let ended = sessions.session(&SessionId(id.to_owned())).await.unwrap();
        assert!(ended.is_none(), "{id} outlived the password change");
    }
    assert!(
        sessions
            .session_by_secret(&hash(1))
            .await
            .unwrap()
            .is_none()
    );
    let kept = sessions
        .session(&SessionId("bob-1".to_owned()))
        .await
        .unwrap();
    assert!(kept.is_some(), "another user's session is untouched");

    // A login that verified the old password, finishing after the change, opens nothing.
    let mut late = new_session("ada-late", &ada, Some(4), LONG);
    late.verified_password_hash = Some(ada.password_hash.clone());
    let error = sessions.create_session(&late).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Conflict);
    assert!(
        sessions
            .session_by_secret(&hash(4))
            .await
            .unwrap()
            .is_none()
    );
    late.verified_password_hash = Some("$argon2id$new".to_owned());
    sessions.create_session(&late).await.unwrap();
}

pub async fn sessions_are_found_by_secret_hash_until_they_expire(harness: &dyn Harness) {
    let store = plain(harness).await;
    let ada = user(&*store, "ada").await;
    let session = store
        .sessions()
        .create_session(&new_session("s1", &ada, Some(1), SHORT))
        .await
        .unwrap();
    assert!(!session.metadata_only);
    assert_eq!(session.authenticated_at, session.created_at);
    let found = store
        .sessions()
        .session_by_secret(&hash(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.session, session);
    assert!(found.now < session.expires_at);
    assert_eq!(
        store.sessions().session_by_secret(&hash(2)).await.unwrap(),
        None
    );

    eventually("the session to expire", || async {
        store
            .sessions()
            .session_by_secret(&hash(1))
            .await
            .unwrap()
            .is_none()
    })
    .await;
    assert_eq!(store.sessions().session(&session.id).await.unwrap(), None);
    let error = store
        .sessions()
        .reauthenticate(&session.id, &hash(3))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Missing);
}

pub async fn session_secrets_and_ids_are_unique(harness: &dyn Harness) {
    let store = plain(harness).await;
    let ada = user(&*store, "ada").await;
    store
        .sessions()
        .create_session(&new_session("s1", &ada, Some(1), LONG))
        .await
        .unwrap();
    for clash in [
        new_session("s2", &ada, Some(1), LONG),
        new_session("s1", &ada, Some(2), LONG),
    ] {
        let error = store.sessions().create_session(&clash).await.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Conflict, "{clash:?}");
    }
}

pub async fn session_credential_rotation_is_revision_checked(harness: &dyn Harness) {
    let store = plain(harness).await;
    let ada = user(&*store, "ada").await;
    let session = store
        .sessions()
        .create_session(&new_session("s1", &ada, Some(1), LONG))
        .await
        .unwrap();
    let sessions = store.sessions();
    let rotated = sessions
        .rotate_session_credentials(&session.id, session.revision, Some(b"sealed-1"))
        .await
        .unwrap();
    assert_eq!(rotated.revision, session.revision + 1);
    assert_eq!(rotated.credentials.as_deref(), Some(&b"sealed-1"[..]));

    let error = sessions
        .rotate_session_credentials(&session.id, session.revision, Some(b"sealed-stale"))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Conflict);
    let current = sessions
        .session(&session.id)
        .await
        .unwrap()
        .unwrap()
        .session;
    assert_eq!(current, rotated, "a stale rotation changed the session");

    let cleared = sessions
        .rotate_session_credentials(&session.id, rotated.revision, None)
        .await
        .unwrap();
    assert_eq!(cleared.credentials, None);
}

pub async fn a_deleted_session_is_never_recreated(harness: &dyn Harness) {
    let store = plain(harness).await;
    let ada = user(&*store, "ada").await;
    let session = store
        .sessions()
        .create_session(&new_session("s1", &ada, Some(1), LONG))
        .await
        .unwrap();
    assert!(store.sessions().delete_session(&session.id).await.unwrap());
    assert!(!store.sessions().delete_session(&session.id).await.unwrap());
    let error = store
        .sessions()
        .rotate_session_credentials(&session.id, session.revision, Some(b"sealed"))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Missing);
    assert_eq!(store.sessions().session(&session.id).await.unwrap(), None);
    assert_eq!(
        store.sessions().session_by_secret(&hash(1)).await.unwrap(),
        None
    );
    assert!(
        store
            .sessions()
            .sessions_with_credentials()
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn reauthentication_makes_a_session_fresh_under_a_new_secret(harness: &dyn Harness) {
    let store = plain(harness).await;
    let ada = user(&*store, "ada").await;
    let session = store
        .sessions()
        .create_session(&new_session("s1", &ada, Some(1), LONG))
        .await
        .unwrap();
    eventually("the clock to move", || async {
        let now = store
            .sessions()
            .session(&session.id)
            .await
            .unwrap()
            .unwrap()
            .now;
        now > session.authenticated_at
    })
    .await;
    let fresh = store
        .sessions()
        .reauthenticate(&session.id, &hash(2))
        .await
        .unwrap();
    assert!(fresh.authenticated_at > session.authenticated_at);
    assert_eq!(
        fresh.revision, session.revision,
        "freshness is not a credential change"
    );
    assert_eq!(fresh.id, session.id, "the session keeps its ID");
    assert_eq!(
        store.sessions().session_by_secret(&hash(1)).await.unwrap(),
        None,
        "the old secret no longer finds it"
    );
    let found = store
        .sessions()
        .session_by_secret(&hash(2))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.session.id, session.id);
}

pub async fn the_session_sweep_removes_expired_and_metadata_only_sessions_once(
    harness: &dyn Harness,
) {
    let store = plain(harness).await;
    let ada = user(&*store, "ada").await;
    let sessions = store.sessions();
    sessions
        .create_session(&new_session("kept", &ada, Some(1), LONG))
        .await
        .unwrap();
    sessions
        .create_session(&new_session("expired", &ada, Some(2), SHORT))
        .await
        .unwrap();
    let delegated = sessions
        .create_session(&new_session("delegated", &ada, None, LONG))
        .await
        .unwrap();
    assert!(delegated.metadata_only);
    eventually("the short session to expire", || async {
        sessions
            .session(&SessionId("expired".to_owned()))
            .await
            .unwrap()
            .is_none()
    })
    .await;

    let writer = grant(&*store, "alpha", LONG).await;
    let first = sessions.sweep_sessions(&writer.fence()).await.unwrap();
    assert_eq!(
        first,
        SessionSweep {
            expired: 1,
            metadata_only: 1
        }
    );
    let second = sessions.sweep_sessions(&writer.fence()).await.unwrap();
    assert_eq!(
        second,
        SessionSweep::default(),
        "the sweep is not idempotent"
    );
    assert!(
        sessions
            .session(&SessionId("kept".to_owned()))
            .await
            .unwrap()
            .is_some()
    );
    assert!(sessions.session(&delegated.id).await.unwrap().is_none());

    store.leases().release(&writer).await.unwrap();
    sessions
        .create_session(&new_session("later", &ada, None, LONG))
        .await
        .unwrap();
    let error = sessions.sweep_sessions(&writer.fence()).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Fenced);
    assert!(
        sessions
            .session(&SessionId("later".to_owned()))
            .await
            .unwrap()
            .is_some()
    );
}

pub async fn api_tokens_work_until_revoked(harness: &dyn Harness) {
    let store = plain(harness).await;
    let ada = user(&*store, "ada").await;
    let tokens = store.api_tokens();
    let created = tokens
        .create_api_token(&NewApiToken {
            id: ApiTokenId("t1".to_owned()),
            user: ada.id.clone(),
            label: "ci".to_owned(),
            secret_hash: hash(7),
        })
        .await
        .unwrap();
    assert_eq!(created.last_used_at, None);
    let used = tokens.use_api_token(&hash(7)).await.unwrap().unwrap();
    assert_eq!(used.user, ada.id);
    assert!(used.last_used_at.is_some());
    // Used again within the minute: answered as it was marked, not marked again.
    let again = tokens.use_api_token(&hash(7)).await.unwrap().unwrap();
    assert_eq!(again.last_used_at, used.last_used_at);
    assert_eq!(tokens.use_api_token(&hash(8)).await.unwrap(), None);

    let clash = NewApiToken {
        id: ApiTokenId("t2".to_owned()),
        user: ada.id.clone(),
        label: "again".to_owned(),
        secret_hash: hash(7),
    };
    assert_eq!(
        tokens.create_api_token(&clash).await.unwrap_err().kind(),
        ErrorKind::Conflict
    );

    assert!(tokens.revoke_api_token(&created.id).await.unwrap());
    assert!(!tokens.revoke_api_token(&created.id).await.unwrap());
    assert_eq!(tokens.use_api_token(&hash(7)).await.unwrap(), None);
    let listed = tokens.api_tokens_of(&ada.id).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].revoked_at.is_some());
    assert_eq!(
        tokens.api_token(&created.id).await.unwrap(),
        Some(listed[0].clone())
    );
}

pub async fn machines_are_found_by_token_hash(harness: &dyn Harness) {
    let store = plain(harness).await;
    let ada = user(&*store, "ada").await;
    let machines = store.machines();
    let paired = machines
        .pair_machine(&new_machine("m1", &ada, 3))
        .await
        .unwrap();
    assert_eq!(paired.credentials, None);
    assert_eq!(
        machines.machine_by_secret(&hash(3)).await.unwrap(),
        Some(paired.clone())
    );
    assert_eq!(machines.machine_by_secret(&hash(4)).await.unwrap(), None);
    let error = machines
        .pair_machine(&new_machine("m2", &ada, 3))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Conflict);
    assert_eq!(machines.machines_of(&ada.id).await.unwrap(), [paired]);
}

pub async fn machine_credential_rotation_is_revision_checked(harness: &dyn Harness) {
    let store = plain(harness).await;
    let ada = user(&*store, "ada").await;
    let machines = store.machines();
    let paired = machines
        .pair_machine(&new_machine("m1", &ada, 3))
        .await
        .unwrap();
    let rotated = machines
        .rotate_machine_credentials(&paired.id, paired.revision, Some(b"sealed"))
        .await
        .unwrap();
    assert_eq!(rotated.revision, paired.revision + 1);
    let error = machines
        .rotate_machine_credentials(&paired.id, paired.revision, Some(b"stale"))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Conflict);
    assert_eq!(
        machines.machines_with_credentials().await.unwrap(),
        [rotated]
    );
}

pub async fn machine_reauthorization_replaces_its_token(harness: &dyn Harness) {
    let store = plain(harness).await;
    let ada = user(&*store, "ada").await;
    let bob = user(&*store, "bob").await;
    let machines = store.machines();
    let paired = machines
        .pair_machine(&new_machine("m1", &ada, 3))
        .await
        .unwrap();

    let error = machines
        .reauthorize_machine(&paired.id, &bob.id, paired.revision, &hash(5))
        .await
        .unwrap_err();
    assert_eq!(
        error.kind(),
        ErrorKind::Missing,
        "a non-owner re-authorized a machine"
    );

    let renewed = machines
        .reauthorize_machine(&paired.id, &ada.id, paired.revision, &hash(5))
        .await
        .unwrap();
    assert_eq!(renewed.revision, paired.revision + 1);
    assert_eq!(machines.machine_by_secret(&hash(3)).await.unwrap(), None);
    assert_eq!(
        machines.machine_by_secret(&hash(5)).await.unwrap(),
        Some(renewed)
    );
    let error = machines
        .reauthorize_machine(&paired.id, &ada.id, paired.revision, &hash(6))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Conflict);
}

pub async fn only_the_owner_revokes_a_machine_and_its_credentials_go(harness: &dyn Harness) {
    let store = plain(harness).await;
    let ada = user(&*store, "ada").await;
    let bob = user(&*store, "bob").await;
    let machines = store.machines();
    let paired = machines
        .pair_machine(&new_machine("m1", &ada, 3))
        .await
        .unwrap();
    let sealed = machines
        .rotate_machine_credentials(&paired.id, paired.revision, Some(b"sealed"))
        .await
        .unwrap();

    let error = machines
        .revoke_machine(&paired.id, &bob.id)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Missing);
    assert_eq!(machines.machine(&paired.id).await.unwrap(), Some(sealed));

    machines.revoke_machine(&paired.id, &ada.id).await.unwrap();
    assert_eq!(machines.machine(&paired.id).await.unwrap(), None);
    assert_eq!(machines.machine_by_secret(&hash(3)).await.unwrap(), None);
    assert!(
        machines
            .machines_with_credentials()
            .await
            .unwrap()
            .is_empty()
    );
    let error = machines
        .revoke_machine(&paired.id, &ada.id)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Missing);
}
