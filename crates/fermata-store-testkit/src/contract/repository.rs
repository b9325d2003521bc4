//! Contract cases for repositories: creation with the creator as admin, members and the last
//! admin, keyset pages of repositories and documents, the audit of overrides, the owners of
//! creation keys, the access generation every change of access raises, and fencing.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::Harness;
use super::lease::{grant, plain};
use fermata_store::api_token::{ApiTokenId, NewApiToken};
use fermata_store::channel::{ChannelId, CreationKey, NewChannel, Repository};
use fermata_store::collaboration::{NewCheckpoint, PublishedChannel};
use fermata_store::error::ErrorKind;
use fermata_store::lease::{Fence, Lease};
use fermata_store::repository::{
    CreationOrigin, DocumentCursor, DocumentScope, NewOverride, RepositoryRole,
    creation_fingerprint,
};
use fermata_store::session::{NewSession, SecretHash, SessionId};
use fermata_store::user::{NewUser, Role, User, UserId, UserName};
use fermata_store::{Channel, Storage};

const LONG: Duration = Duration::from_secs(3600);

struct Repos {
    store: Arc<dyn Storage>,
    lease: Lease,
    fence: Fence,
}

fn repo(name: &str) -> Repository {
    Repository::new(name).unwrap()
}

impl Repos {
    async fn open(harness: &dyn Harness) -> Self {
        let store = plain(harness).await;
        let lease = grant(&*store, "writer", LONG).await;
        let fence = lease.fence();
        Repos {
            store,
            lease,
            fence,
        }
    }

    async fn user(&self, name: &str) -> User {
        self.store
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

    async fn create(&self, name: &str, creator: &User) {
        self.store
            .repositories()
            .create_repository(&self.fence, &repo(name), &creator.id)
            .await
            .unwrap();
    }

    async fn document(&self, repository: &str, title: &str) -> Channel {
        self.store
            .collaboration()
            .create_channel(
                &self.fence,
                &NewChannel {
                    id: ChannelId::random(),
                    repository: repo(repository),
                    title: title.to_owned(),
                    parent: None,
                },
            )
            .await
            .unwrap()
    }

    async fn role(&self, name: &str, user: &User) -> Option<RepositoryRole> {
        self.store
            .repositories()
            .role_of(&repo(name), &user.id)
            .await
            .unwrap()
    }

    async fn generation(&self) -> i64 {
        self.store.repositories().access_generation().await.unwrap()
    }
}

pub async fn creating_a_repository_makes_its_creator_admin_once(harness: &dyn Harness) {
    let repos = Repos::open(harness).await;
    let ann = repos.user("ann").await;
    let bob = repos.user("bob").await;
    let store = repos.store.repositories();
    let (record, created) = store
        .create_repository(&repos.fence, &repo("ann/app"), &ann.id)
        .await
        .unwrap();
    assert!(created);
    assert_eq!(record.name, repo("ann/app"));
    assert_eq!(record.created_by, Some(ann.id.clone()));
    let (again, created) = store
        .create_repository(&repos.fence, &repo("ann/app"), &bob.id)
        .await
        .unwrap();
    assert!(!created, "a repeated creation created again");
    assert_eq!(again, record);
    assert_eq!(
        repos.role("ann/app", &ann).await,
        Some(RepositoryRole::Admin)
    );
    assert_eq!(
        repos.role("ann/app", &bob).await,
        None,
        "the repeat made a member"
    );
    assert_eq!(store.repository(&record.name).await.unwrap(), Some(record));
    assert_eq!(store.repository(&repo("ann/none")).await.unwrap(), None);
}

pub async fn members_get_roles_and_the_last_admin_stays(harness: &dyn Harness) {
    let repos = Repos::open(harness).await;
    let ann = repos.user("ann").await;
    let bob = repos.user("bob").await;
    let cy = repos.user("cy").await;
    repos.create("ann/app", &ann).await;
    let store = repos.store.repositories();
    let name = repo("ann/app");
    store
        .set_member(&repos.fence, &name, &bob.id, RepositoryRole::Viewer)
        .await
        .unwrap();
    let cy_member = store
        .set_member(&repos.fence, &name, &cy.id, RepositoryRole::Editor)
        .await
        .unwrap();
    assert_eq!(cy_member.role, RepositoryRole::Editor);
    assert_eq!(
        repos.role("ann/app", &bob).await,
        Some(RepositoryRole::Viewer)
    );
    let listed: Vec<(UserId, RepositoryRole)> = store
        .members(&name)
        .await
        .unwrap()
        .into_iter()
        .map(|m| (m.user, m.role))
        .collect();
    assert_eq!(
        listed,
        vec![
            (ann.id.clone(), RepositoryRole::Admin),
            (cy.id.clone(), RepositoryRole::Editor),
            (bob.id.clone(), RepositoryRole::Viewer),
        ]
    );

    // Giving the same role again writes nothing.
    let before = repos.generation().await;
    let same = store
        .set_member(&repos.fence, &name, &cy.id, RepositoryRole::Editor)
        .await
        .unwrap();
    assert_eq!(same, cy_member);
    assert_eq!(repos.generation().await, before);

    // The last admin can neither leave nor be lowered.
    for refused in [
        store
            .set_member(&repos.fence, &name, &ann.id, RepositoryRole::Editor)
            .await
            .map(|_| ()),
        store
            .remove_member(&repos.fence, &name, &ann.id)
            .await
            .map(|_| ()),
    ] {
        assert_eq!(refused.unwrap_err().kind(), ErrorKind::Conflict);
    }
    assert_eq!(
        repos.role("ann/app", &ann).await,
        Some(RepositoryRole::Admin)
    );
    store
        .set_member(&repos.fence, &name, &bob.id, RepositoryRole::Admin)
        .await
        .unwrap();
    assert!(
        store
            .remove_member(&repos.fence, &name, &ann.id)
            .await
            .unwrap()
    );
    assert!(
        !store
            .remove_member(&repos.fence, &name, &ann.id)
            .await
            .unwrap()
    );
    assert_eq!(repos.role("ann/app", &ann).await, None);

    let ghost = UserId("user-ghost".to_owned());
    assert_eq!(
        store
            .set_member(&repos.fence, &name, &ghost, RepositoryRole::Viewer)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Missing
    );
    assert_eq!(
        store
            .set_member(
                &repos.fence,
                &repo("ann/none"),
                &cy.id,
                RepositoryRole::Viewer
            )
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Missing
    );
}

pub async fn repositories_and_documents_are_listed_in_keyset_pages(harness: &dyn Harness) {
    let repos = Repos::open(harness).await;
    let ann = repos.user("ann").await;
    let bob = repos.user("bob").await;
    for name in ["ann/c", "ann/a", "ann/b", "bob/x"] {
        repos
            .create(name, if name.starts_with("ann") { &ann } else { &bob })
            .await;
    }
    let store = repos.store.repositories();
    store
        .set_member(
            &repos.fence,
            &repo("ann/b"),
            &bob.id,
            RepositoryRole::Viewer,
        )
        .await
        .unwrap();
    let first = store.repositories_of(&ann.id, None, 2).await.unwrap();
    let names = |page: &[(fermata_store::RepositoryRecord, RepositoryRole)]| {
        page.iter()
            .map(|(r, role)| (r.name.to_string(), *role))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(&first),
        [
            ("ann/a".to_owned(), RepositoryRole::Admin),
            ("ann/b".to_owned(), RepositoryRole::Admin)
        ]
    );
    let second = store
        .repositories_of(&ann.id, Some(&first[1].0.name), 2)
        .await
        .unwrap();
    assert_eq!(
        names(&second),
        [("ann/c".to_owned(), RepositoryRole::Admin)]
    );
    assert_eq!(
        names(&store.repositories_of(&bob.id, None, 10).await.unwrap()),
        [
            ("ann/b".to_owned(), RepositoryRole::Viewer),
            ("bob/x".to_owned(), RepositoryRole::Admin)
        ]
    );
    let all: Vec<String> = store
        .all_repositories(Some(&repo("ann/b")), 10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.name.to_string())
        .collect();
    assert_eq!(all, ["ann/c", "bob/x"]);

    // Documents: bob reads ann/b and bob/x, not ann/a; archived ones only when asked for.
    let mut made = Vec::new();
    for (n, name) in ["ann/a", "ann/b", "bob/x", "ann/b", "bob/x", "ann/b"]
        .iter()
        .enumerate()
    {
        made.push(repos.document(name, &format!("Doc {n}")).await);
    }
    let archived = repos
        .store
        .collaboration()
        .archive(&repos.fence, &made[1].id)
        .await
        .unwrap();
    let mut expected: Vec<Channel> = made
        .iter()
        .filter(|c| c.repository.as_str() != "ann/a" && c.id != archived.id)
        .cloned()
        .collect();
    expected.sort_by(|a, b| {
        b.updated_at
            .cmp(&a.updated_at)
            .then_with(|| a.id.cmp(&b.id))
    });
    let scope = DocumentScope::MemberOf(bob.id.clone());
    let mut paged = Vec::new();
    let mut cursor: Option<DocumentCursor> = None;
    loop {
        let page = store
            .documents_page(&scope, false, cursor.as_ref(), 2)
            .await
            .unwrap();
        assert!(page.len() <= 2);
        let Some(last) = page.last() else { break };
        cursor = Some(DocumentCursor {
            updated_at: last.updated_at,
            id: last.id.clone(),
        });
        paged.extend(page.iter().map(|c| c.id.clone()));
    }
    assert_eq!(
        paged,
        expected.iter().map(|c| c.id.clone()).collect::<Vec<_>>()
    );
    let with_archived = store.documents_page(&scope, true, None, 100).await.unwrap();
    assert_eq!(with_archived.len(), expected.len() + 1);
    assert!(with_archived.iter().any(|c| c.id == archived.id));
    let one = store
        .documents_page(&DocumentScope::Repository(repo("ann/a")), false, None, 100)
        .await
        .unwrap();
    assert_eq!(
        one.iter().map(|c| c.id.clone()).collect::<Vec<_>>(),
        [made[0].id.clone()]
    );
}

pub async fn overrides_are_recorded_newest_first_and_checked(harness: &dyn Harness) {
    let repos = Repos::open(harness).await;
    let ann = repos.user("ann").await;
    let root = repos.user("root").await;
    repos.create("ann/app", &ann).await;
    let store = repos.store.repositories();
    let entry = |action: &str| NewOverride {
        repository: repo("ann/app"),
        user: root.id.clone(),
        action: action.to_owned(),
        document: Some(ChannelId("0b6f3c1e-52a4-4d8e-9c61-7a2f0e9d4b13".to_owned())),
    };
    let mut recorded = Vec::new();
    for action in ["GET /one", "PUT /two", "sync"] {
        recorded.push(
            store
                .record_override(&repos.fence, &entry(action))
                .await
                .unwrap(),
        );
    }
    assert!(recorded.windows(2).all(|w| w[0].id < w[1].id));
    let newest = store.overrides(&repo("ann/app"), 2).await.unwrap();
    assert_eq!(
        newest.iter().map(|o| o.action.as_str()).collect::<Vec<_>>(),
        ["sync", "PUT /two"]
    );
    assert_eq!(newest[0], recorded[2]);
    assert_eq!(newest[0].user, root.id);
    let mut unknown = entry("GET /x");
    unknown.repository = repo("ann/none");
    assert_eq!(
        store
            .record_override(&repos.fence, &unknown)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Missing
    );
    assert_eq!(
        store
            .record_override(&repos.fence, &entry(""))
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Invalid
    );
    assert!(
        store
            .overrides(&repo("ann/none"), 10)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn a_creation_key_keeps_the_caller_that_used_it_first(harness: &dyn Harness) {
    let repos = Repos::open(harness).await;
    let ann = repos.user("ann").await;
    let bob = repos.user("bob").await;
    repos.create("ann/app", &ann).await;
    let store = repos.store.repositories();
    let request = PublishedChannel {
        repository: repo("ann/app"),
        key: CreationKey::new("2030-01-01").unwrap(),
        title: "Daily".to_owned(),
        parent: None,
        checkpoint: NewCheckpoint {
            epoch: 1,
            through_sequence: 0,
            revision: 0,
            canonical_text: "first".to_owned(),
            source_hash: "hash-of-first".to_owned(),
            state: b"first".to_vec(),
            sidecar: None,
        },
    };
    let origin = |user: &User, text: &str| CreationOrigin {
        caller: user.id.clone(),
        fingerprint: creation_fingerprint(&request.repository, &request.title, None, text),
    };
    let created = store
        .create_keyed(&repos.fence, &request, &origin(&ann, "first"))
        .await
        .unwrap();
    assert!(created.created);
    assert_eq!(
        created.channel.id,
        ChannelId::for_creation_key(&request.repository, &request.key)
    );
    assert_eq!(created.origin, Some(origin(&ann, "first")));
    let repeat = store
        .create_keyed(&repos.fence, &request, &origin(&bob, "other"))
        .await
        .unwrap();
    assert!(!repeat.created);
    assert_eq!(repeat.channel, created.channel);
    assert_eq!(
        repeat.origin,
        Some(origin(&ann, "first")),
        "the first caller's origin is kept"
    );

    // A document created without an origin has none; after deletion the key is free again.
    let research = PublishedChannel {
        key: CreationKey::new("research:x").unwrap(),
        ..request.clone()
    };
    let plain = repos
        .store
        .collaboration()
        .create_published(&repos.fence, &research)
        .await
        .unwrap();
    let found = store
        .create_keyed(&repos.fence, &research, &origin(&ann, "first"))
        .await
        .unwrap();
    assert_eq!(
        (found.channel.id, found.origin, found.created),
        (plain.id, None, false)
    );
    let collaboration = repos.store.collaboration();
    collaboration
        .archive(&repos.fence, &created.channel.id)
        .await
        .unwrap();
    collaboration
        .delete_archived(&repos.fence, &created.channel.id)
        .await
        .unwrap();
    let again = store
        .create_keyed(&repos.fence, &request, &origin(&bob, "other"))
        .await
        .unwrap();
    assert!(again.created);
    assert_eq!(again.origin, Some(origin(&bob, "other")));
}

pub async fn every_change_of_access_raises_the_access_generation(harness: &dyn Harness) {
    let repos = Repos::open(harness).await;
    let ann = repos.user("ann").await;
    let bob = repos.user("bob").await;
    let store = &repos.store;
    let mut last = repos.generation().await;
    let mut raised = |what: &str, now: i64| {
        assert!(now > last, "{what} did not raise the access generation");
        last = now;
    };
    repos.create("ann/app", &ann).await;
    raised("creating a repository", repos.generation().await);
    let name = repo("ann/app");
    let repositories = store.repositories();
    repositories
        .set_member(&repos.fence, &name, &bob.id, RepositoryRole::Editor)
        .await
        .unwrap();
    raised("adding a member", repos.generation().await);
    repositories
        .set_member(&repos.fence, &name, &bob.id, RepositoryRole::Viewer)
        .await
        .unwrap();
    raised("lowering a role", repos.generation().await);
    repositories
        .remove_member(&repos.fence, &name, &bob.id)
        .await
        .unwrap();
    raised("removing a member", repos.generation().await);

    let session = |id: &str, seed: u8| NewSession {
        id: SessionId(id.to_owned()),
        user: bob.id.clone(),
        secret_hash: Some(SecretHash([seed; 32])),
        ttl: LONG,
        credentials: None,
        verified_password_hash: None,
    };
    store
        .sessions()
        .create_session(&session("s1", 1))
        .await
        .unwrap();
    store
        .sessions()
        .create_session(&session("s2", 2))
        .await
        .unwrap();
    assert!(
        store
            .sessions()
            .delete_session(&SessionId("s1".to_owned()))
            .await
            .unwrap()
    );
    raised("a logout", repos.generation().await);
    store
        .users()
        .set_password_hash(&bob.id, "$argon2id$another")
        .await
        .unwrap();
    raised("a password change", repos.generation().await);
    store
        .api_tokens()
        .create_api_token(&NewApiToken {
            id: ApiTokenId("t1".to_owned()),
            user: bob.id.clone(),
            label: "script".to_owned(),
            secret_hash: SecretHash([9; 32]),
        })
        .await
        .unwrap();
    assert!(
        store
            .api_tokens()
            .revoke_api_token(&ApiTokenId("t1".to_owned()))
            .await
            .unwrap()
    );
    raised("a token revocation", repos.generation().await);
    store
        .users()
        .set_roles(&bob.id, &[Role::SystemAdmin].into())
        .await
        .unwrap();
    store
        .users()
        .set_roles(&bob.id, &BTreeSet::new())
        .await
        .unwrap();
    raised("removing system_admin", repos.generation().await);
    let document = repos.document("ann/app", "Doc").await;
    store
        .collaboration()
        .archive(&repos.fence, &document.id)
        .await
        .unwrap();
    raised("archiving", repos.generation().await);
    store
        .collaboration()
        .delete_archived(&repos.fence, &document.id)
        .await
        .unwrap();
    raised("deleting", repos.generation().await);
}

pub async fn repository_writes_under_a_lost_lease_are_fenced(harness: &dyn Harness) {
    let repos = Repos::open(harness).await;
    let ann = repos.user("ann").await;
    let bob = repos.user("bob").await;
    repos.create("ann/app", &ann).await;
    repos.store.leases().release(&repos.lease).await.unwrap();
    let successor = grant(&*repos.store, "successor", LONG).await;
    assert!(successor.token > repos.fence.token);
    let store = repos.store.repositories();
    let name = repo("ann/app");
    let stale = &repos.fence;
    let refusals = [
        store
            .create_repository(stale, &repo("bob/app"), &bob.id)
            .await
            .map(|_| ())
            .unwrap_err(),
        store
            .set_member(stale, &name, &bob.id, RepositoryRole::Editor)
            .await
            .map(|_| ())
            .unwrap_err(),
        store
            .remove_member(stale, &name, &ann.id)
            .await
            .map(|_| ())
            .unwrap_err(),
        store
            .record_override(
                stale,
                &NewOverride {
                    repository: name.clone(),
                    user: bob.id.clone(),
                    action: "sync".to_owned(),
                    document: None,
                },
            )
            .await
            .map(|_| ())
            .unwrap_err(),
    ];
    for refusal in refusals {
        assert_eq!(refusal.kind(), ErrorKind::Fenced);
    }
    assert_eq!(store.repository(&repo("bob/app")).await.unwrap(), None);
    assert_eq!(repos.role("ann/app", &bob).await, None);
    assert!(store.overrides(&name, 10).await.unwrap().is_empty());
}
