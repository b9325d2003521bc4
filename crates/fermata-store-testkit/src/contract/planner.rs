//! Contract cases for the Planner store, machine choices and favorites, and MCP sessions; and
//! [`Opened`], which lets a harness find the concrete store behind a `dyn Storage` it opened, to
//! seed an earlier release's rows with plain writes.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::lease::{grant, plain};
use super::{Harness, eventually};
use fermata_store::channel::{ChannelId, CreationKey, NewChannel, Repository};
use fermata_store::collaboration::{
    Commit, NewCheckpoint, OperationId, PublishedChannel, SidecarState,
};
use fermata_store::error::ErrorKind;
use fermata_store::lease::{Fence, FencingToken, Lease};
use fermata_store::machine::{MachineId, NewMachine};
use fermata_store::mcp_session::{McpClient, McpSessionId};
use fermata_store::planner::{
    ChoiceName, ClearedChild, DeferredTurn, DeferredTurnRetirement, DeferredTurnState,
    HeldSessions, HoldOwner, NewLinkHold, NewModelChoice, NewPlannerCredential, PlannerKey,
    PlannerStatus,
};
use fermata_store::session::{NewSession, SecretHash, SessionId};
use fermata_store::user::{NewUser, UserId, UserName};
use fermata_store::{Channel, ChildConversation, Storage};

/// The stores a harness opened, so it can find the concrete one behind a `dyn Storage`.
#[derive(Debug)]
pub struct Opened<T> {
    stores: Mutex<Vec<Arc<T>>>,
}

impl<T> Default for Opened<T> {
    fn default() -> Self {
        Opened {
            stores: Mutex::default(),
        }
    }
}

impl<T: Storage + 'static> Opened<T> {
    /// Keeps `store` and returns it as the suite sees it.
    pub fn keep(&self, store: T) -> Arc<dyn Storage> {
        let store = Arc::new(store);
        self.lock().push(Arc::clone(&store));
        store
    }

    /// The kept store `store` is.
    pub fn find(&self, store: &dyn Storage) -> Arc<T> {
        let wanted = std::ptr::from_ref(store).cast::<()>();
        self.lock()
            .iter()
            .find(|kept| Arc::as_ptr(kept).cast::<()>() == wanted)
            .cloned()
            .expect("a store this harness opened")
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<T>>> {
        self.stores
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

const LONG: Duration = Duration::from_secs(3600);
const SHORT: Duration = Duration::from_millis(400);

/// A store under a writer lease, with one user.
struct World {
    store: Arc<dyn Storage>,
    lease: Lease,
    fence: Fence,
    ada: UserId,
}

fn key(text: &str) -> PlannerKey {
    PlannerKey::new(text).unwrap()
}

fn held(json: &str) -> HeldSessions {
    HeldSessions::new(json).unwrap()
}

fn choice(text: &str) -> ChoiceName {
    ChoiceName::new(text).unwrap()
}

fn sidecar(json: &str) -> SidecarState {
    SidecarState {
        version: 2,
        json: json.to_owned(),
        unanswered_decisions: 1,
    }
}

impl World {
    async fn open(harness: &dyn Harness) -> Self {
        let store = plain(harness).await;
        let lease = grant(&*store, "writer", LONG).await;
        let fence = lease.fence();
        let world = World {
            store,
            lease,
            fence,
            ada: UserId("user-ada".to_owned()),
        };
        world.user("ada").await;
        world
    }

    async fn user(&self, name: &str) -> UserId {
        let id = UserId(format!("user-{name}"));
        self.store
            .users()
            .create_user(&NewUser {
                id: id.clone(),
                name: UserName::new(name).unwrap(),
                password_hash: format!("$argon2id$hash-of-{name}"),
                roles: BTreeSet::new(),
            })
            .await
            .unwrap();
        id
    }

    /// A login session: `secret` false makes it metadata-only; `credentials` gives it some.
    async fn session(&self, id: &str, secret: bool, credentials: bool, ttl: Duration) -> SessionId {
        let mut secret_bytes = [0xA5; 32];
        for (index, byte) in id.bytes().enumerate() {
            secret_bytes[index % 32] ^= byte;
        }
        let session = NewSession {
            id: SessionId(id.to_owned()),
            user: self.ada.clone(),
            secret_hash: secret.then_some(SecretHash(secret_bytes)),
            ttl,
            credentials: credentials.then(|| b"sealed".to_vec()),
            verified_password_hash: None,
        };
        self.store
            .sessions()
            .create_session(&session)
            .await
            .unwrap()
            .id
    }

    async fn live_session(&self, id: &str) -> SessionId {
        self.session(id, true, true, LONG).await
    }

    async fn machine(&self, id: &str, owner: &UserId, secret: u8) -> MachineId {
        self.store
            .machines()
            .pair_machine(&NewMachine {
                id: MachineId(id.to_owned()),
                owner: owner.clone(),
                name: format!("{id} laptop"),
                secret_hash: SecretHash([secret; 32]),
            })
            .await
            .unwrap()
            .id
    }

    async fn document(&self, title: &str, parent: Option<&ChannelId>) -> ChannelId {
        self.store
            .collaboration()
            .create_channel(
                &self.fence,
                &NewChannel {
                    id: ChannelId::random(),
                    repository: Repository::new("acme/app").unwrap(),
                    title: title.to_owned(),
                    parent: parent.cloned(),
                },
            )
            .await
            .unwrap()
            .id
    }

    async fn delete(&self, channel: &ChannelId) {
        let collaboration = self.store.collaboration();
        collaboration.archive(&self.fence, channel).await.unwrap();
        collaboration
            .delete_archived(&self.fence, channel)
            .await
            .unwrap();
    }

    fn hold(&self, channel: &ChannelId, owner: HoldOwner, generation: i64) -> NewLinkHold {
        NewLinkHold {
            channel: channel.clone(),
            owner,
            user: self.ada.clone(),
            generation,
            held_sessions: held(r#"[{"id":"s1","waitingRequests":[],"heldStops":[]}]"#),
            handover: None,
        }
    }

    /// Releases this world's lease and grants it to a successor, returning its fence.
    async fn successor(&self) -> Fence {
        self.store.leases().release(&self.lease).await.unwrap();
        grant(&*self.store, "successor", LONG).await.fence()
    }

    /// Waits until the session has expired.
    async fn until_expired(&self, session: &SessionId) {
        eventually("the session to expire", || async {
            self.store
                .sessions()
                .session(session)
                .await
                .unwrap()
                .is_none()
        })
        .await;
    }
}

pub async fn a_planner_claim_raises_the_generation_and_only_its_holder_changes_it(
    harness: &dyn Harness,
) {
    let world = World::open(harness).await;
    let planner = world.store.planner();
    let doc = world.document("Doc", None).await;
    assert_eq!(planner.agent_state(&doc).await.unwrap(), None);
    let first = world.live_session("first").await;
    let second = world.live_session("second").await;

    let claimed = planner
        .claim_planner(&world.fence, &doc, &first)
        .await
        .unwrap();
    assert_eq!(claimed.owner.as_ref(), Some(&first));
    assert_eq!(claimed.status, PlannerStatus::Starting);
    assert_eq!(claimed.generation, 1);
    assert_eq!(planner.agent_state(&doc).await.unwrap(), Some(claimed));

    let taken = planner
        .claim_planner(&world.fence, &doc, &second)
        .await
        .unwrap_err();
    assert_eq!(taken.kind(), ErrorKind::Conflict);

    let ready = planner
        .set_planner_status(&world.fence, &doc, 1, PlannerStatus::Ready)
        .await
        .unwrap();
    assert_eq!((ready.status, ready.generation), (PlannerStatus::Ready, 1));

    let handed = planner
        .hand_over_planner(&world.fence, &doc, 1, &second)
        .await
        .unwrap();
    assert_eq!(
        (handed.owner.as_ref(), handed.generation),
        (Some(&second), 2)
    );

    // The first owner's generation is stale now.
    for error in [
        planner
            .set_planner_status(&world.fence, &doc, 1, PlannerStatus::Working)
            .await
            .unwrap_err(),
        planner
            .hand_over_planner(&world.fence, &doc, 1, &first)
            .await
            .unwrap_err(),
        planner
            .release_planner(&world.fence, &doc, 1)
            .await
            .unwrap_err(),
    ] {
        assert_eq!(error.kind(), ErrorKind::Conflict, "{error}");
    }

    let released = planner
        .release_planner(&world.fence, &doc, 2)
        .await
        .unwrap();
    assert_eq!(
        (released.owner, released.status, released.generation),
        (None, PlannerStatus::Unavailable, 2)
    );
    let again = planner
        .release_planner(&world.fence, &doc, 2)
        .await
        .unwrap_err();
    assert_eq!(again.kind(), ErrorKind::Conflict);
    let reclaimed = planner
        .claim_planner(&world.fence, &doc, &first)
        .await
        .unwrap();
    assert_eq!(reclaimed.generation, 3);

    let nowhere = planner
        .claim_planner(&world.fence, &ChannelId::random(), &first)
        .await
        .unwrap_err();
    assert_eq!(nowhere.kind(), ErrorKind::Missing);
    let other = world.document("Other", None).await;
    let nobody = planner
        .claim_planner(&world.fence, &other, &SessionId("nobody".to_owned()))
        .await
        .unwrap_err();
    assert_eq!(nobody.kind(), ErrorKind::Invalid);
}

pub async fn concurrent_planner_claims_let_exactly_one_win(harness: &dyn Harness) {
    let world = Arc::new(World::open(harness).await);
    let doc = world.document("Doc", None).await;
    let mut sessions = Vec::new();
    for claimant in 0..8 {
        sessions.push(world.live_session(&format!("claimant-{claimant}")).await);
    }
    let mut tasks = Vec::new();
    for session in sessions {
        let world = Arc::clone(&world);
        let doc = doc.clone();
        tasks.push(tokio::spawn(async move {
            world
                .store
                .planner()
                .claim_planner(&world.fence, &doc, &session)
                .await
        }));
    }
    let mut winners = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            Ok(state) => winners.push(state),
            Err(error) => assert_eq!(error.kind(), ErrorKind::Conflict, "{error}"),
        }
    }
    assert_eq!(winners.len(), 1);
    assert_eq!(winners[0].generation, 1);
    let stored = world.store.planner().agent_state(&doc).await.unwrap();
    assert_eq!(stored.as_ref(), Some(&winners[0]));
}

pub async fn an_owner_whose_session_ends_is_cleared_and_the_generation_stays(
    harness: &dyn Harness,
) {
    let world = World::open(harness).await;
    let planner = world.store.planner();
    let doc = world.document("Doc", None).await;
    let session = world.live_session("owner").await;
    planner
        .claim_planner(&world.fence, &doc, &session)
        .await
        .unwrap();
    assert!(
        world
            .store
            .sessions()
            .delete_session(&session)
            .await
            .unwrap()
    );
    let state = planner.agent_state(&doc).await.unwrap().unwrap();
    assert_eq!((state.owner, state.generation), (None, 1));
    let next = world.live_session("next").await;
    let claimed = planner
        .claim_planner(&world.fence, &doc, &next)
        .await
        .unwrap();
    assert_eq!(claimed.generation, 2);
}

pub async fn planner_writes_under_a_lost_lease_are_fenced(harness: &dyn Harness) {
    let world = World::open(harness).await;
    let doc = world.document("Doc", None).await;
    let session = world.live_session("owner").await;
    let machine = world.machine("m1", &world.ada, 1).await;
    let stale = world.fence.clone();
    let fresh = world.successor().await;
    let planner = world.store.planner();
    let choices = world.store.machine_choices();
    let mcp = world.store.mcp_sessions();
    let client = McpClient::new("client", "1.0").unwrap();
    let mcp_id = McpSessionId::new("mcp-1").unwrap();
    let results = [
        planner
            .claim_planner(&stale, &doc, &session)
            .await
            .map(drop),
        planner
            .write_link_hold(
                &stale,
                &world.hold(&doc, HoldOwner::Session(session.clone()), 1),
            )
            .await
            .map(drop),
        planner.remove_link_hold(&stale, &doc).await.map(drop),
        planner.take_link_holds(&stale).await.map(drop),
        planner
            .record_planner_credential(
                &stale,
                &NewPlannerCredential {
                    digest: SecretHash([9; 32]),
                    machine: machine.clone(),
                    channel: doc.clone(),
                    ttl: LONG,
                },
            )
            .await
            .map(drop),
        planner
            .withdraw_planner_credentials(&stale, &machine)
            .await
            .map(drop),
        planner.sweep_planner_credentials(&stale).await.map(drop),
        planner
            .choose_model(
                &stale,
                &NewModelChoice {
                    channel: doc.clone(),
                    model: Some(choice("model-a")),
                    thinking_level: None,
                    chosen_by: world.ada.clone(),
                },
            )
            .await
            .map(drop),
        planner
            .save_decision_answer(&stale, &doc, &key("d1"), 1)
            .await
            .map(drop),
        planner
            .claim_decision_answers(&stale, &doc, &key("t1"))
            .await
            .map(drop),
        planner
            .deliver_decision_answers(&stale, &doc, &key("t1"))
            .await
            .map(drop),
        planner.retire_deferred_turns(&stale).await.map(drop),
        planner.reset_owners(&stale).await.map(drop),
        planner
            .replace_child_sidecars(
                &stale,
                &ClearedChild {
                    channel: doc.clone(),
                    state: None,
                    snapshot: None,
                },
            )
            .await
            .map(drop),
        choices
            .set_machine_shared(&stale, &machine, &world.ada, true)
            .await
            .map(drop),
        choices
            .choose_machine(&stale, &world.ada, &doc, Some(&machine))
            .await
            .map(drop),
        choices
            .set_favorite_machine(&stale, &world.ada, Some(&machine))
            .await
            .map(drop),
        mcp.create_mcp_session(&stale, &mcp_id, &world.ada, &client)
            .await
            .map(drop),
        mcp.touch_mcp_session(&stale, &mcp_id).await.map(drop),
        mcp.delete_mcp_session(&stale, &mcp_id).await.map(drop),
        mcp.sweep_idle_mcp_sessions(&stale, LONG).await.map(drop),
    ];
    for (index, result) in results.into_iter().enumerate() {
        let error = result.expect_err("a write under a lost lease");
        assert_eq!(error.kind(), ErrorKind::Fenced, "write {index}: {error}");
    }
    assert_eq!(planner.agent_state(&doc).await.unwrap(), None);
    assert_eq!(planner.link_hold(&doc).await.unwrap(), None);
    assert_eq!(planner.model_choice(&doc).await.unwrap(), None);
    assert!(planner.decision_answers(&doc).await.unwrap().is_empty());
    assert_eq!(choices.favorite_machine(&world.ada).await.unwrap(), None);
    assert!(!choices.machine_shared(&machine).await.unwrap());
    assert_eq!(mcp.mcp_session(&mcp_id).await.unwrap(), None);
    // The successor writes.
    planner.claim_planner(&fresh, &doc, &session).await.unwrap();
}

pub async fn link_holds_are_replaced_whole_under_their_fencing_token(harness: &dyn Harness) {
    let world = World::open(harness).await;
    let planner = world.store.planner();
    let doc = world.document("Doc", None).await;
    let session = world.live_session("owner").await;
    let owner = HoldOwner::Session(session.clone());

    let first = planner
        .write_link_hold(&world.fence, &world.hold(&doc, owner.clone(), 1))
        .await
        .unwrap();
    assert_eq!(first.fencing_token, world.fence.token);
    assert_eq!((first.owner.clone(), first.generation), (owner.clone(), 1));
    assert_eq!(first.handover, None);
    assert_eq!(planner.link_hold(&doc).await.unwrap(), Some(first.clone()));

    // The cut: the same hold written again with a hand-over window keeps when it was suspended.
    let cut = NewLinkHold {
        held_sessions: held(
            r#"[{"id":"s1","waitingRequests":[{"requestId":"r1","question":{"kind":"decision","decisions":["d1"]}}],"unacknowledgedAnswers":["a1"],"heldStops":["x"]}]"#,
        ),
        handover: Some(Duration::from_millis(30_000)),
        ..world.hold(&doc, owner.clone(), 1)
    };
    let rewritten = planner.write_link_hold(&world.fence, &cut).await.unwrap();
    assert_eq!(rewritten.suspended_at, first.suspended_at);
    assert_eq!(rewritten.held_sessions, cut.held_sessions);
    assert_eq!(rewritten.handover, Some(Duration::from_millis(30_000)));

    // Another generation is another hold: replaced whole, the window gone with the old one.
    let machine = world.machine("m1", &world.ada, 1).await;
    let replaced = planner
        .write_link_hold(
            &world.fence,
            &world.hold(&doc, HoldOwner::Machine(machine.clone()), 2),
        )
        .await
        .unwrap();
    assert_eq!(replaced.owner, HoldOwner::Machine(machine));
    assert_eq!((replaced.generation, replaced.handover), (2, None));
    assert!(replaced.suspended_at >= first.suspended_at);

    assert!(planner.remove_link_hold(&world.fence, &doc).await.unwrap());
    assert!(!planner.remove_link_hold(&world.fence, &doc).await.unwrap());
    assert_eq!(planner.link_hold(&doc).await.unwrap(), None);

    for bad in ["{}", "[1]", "not json", r#"[{"id":"s"}, "x"]"#] {
        let error = HeldSessions::new(bad).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Invalid, "{bad}");
    }
    let unknown = planner
        .write_link_hold(
            &world.fence,
            &world.hold(&doc, HoldOwner::Session(SessionId("gone".to_owned())), 1),
        )
        .await
        .unwrap_err();
    assert_eq!(unknown.kind(), ErrorKind::Invalid);
}

pub async fn a_link_hold_goes_with_its_session_its_machine_or_its_document(harness: &dyn Harness) {
    let world = World::open(harness).await;
    let planner = world.store.planner();
    let by_session = world.document("By session", None).await;
    let by_machine = world.document("By machine", None).await;
    let by_document = world.document("By document", None).await;
    let session = world.live_session("owner").await;
    let machine = world.machine("m1", &world.ada, 1).await;
    for (doc, owner) in [
        (&by_session, HoldOwner::Session(session.clone())),
        (&by_machine, HoldOwner::Machine(machine.clone())),
        (&by_document, HoldOwner::Session(session.clone())),
    ] {
        planner
            .write_link_hold(&world.fence, &world.hold(doc, owner, 1))
            .await
            .unwrap();
    }
    world.delete(&by_document).await;
    assert_eq!(planner.link_hold(&by_document).await.unwrap(), None);
    assert!(planner.link_hold(&by_session).await.unwrap().is_some());

    world
        .store
        .sessions()
        .delete_session(&session)
        .await
        .unwrap();
    assert_eq!(planner.link_hold(&by_session).await.unwrap(), None);
    assert!(planner.link_hold(&by_machine).await.unwrap().is_some());

    world
        .store
        .machines()
        .revoke_machine(&machine, &world.ada)
        .await
        .unwrap();
    assert_eq!(planner.link_hold(&by_machine).await.unwrap(), None);
}

pub async fn the_next_process_is_given_the_handover_window_once(harness: &dyn Harness) {
    let world = World::open(harness).await;
    let planner = world.store.planner();
    let windowed = world.document("Windowed", None).await;
    let plain_doc = world.document("Plain", None).await;
    let session = world.live_session("owner").await;
    let owner = HoldOwner::Session(session);
    planner
        .write_link_hold(
            &world.fence,
            &NewLinkHold {
                handover: Some(Duration::from_millis(45_000)),
                ..world.hold(&windowed, owner.clone(), 1)
            },
        )
        .await
        .unwrap();
    planner
        .write_link_hold(&world.fence, &world.hold(&plain_doc, owner, 1))
        .await
        .unwrap();

    let next = world.successor().await;
    let mut taken = planner.take_link_holds(&next).await.unwrap();
    taken.sort_by(|a, b| a.channel.cmp(&b.channel));
    let mut expected = vec![
        (windowed.clone(), Some(Duration::from_millis(45_000))),
        (plain_doc.clone(), None),
    ];
    expected.sort();
    let seen: Vec<_> = taken
        .iter()
        .map(|hold| (hold.channel.clone(), hold.handover))
        .collect();
    assert_eq!(seen, expected);

    let stored = planner.link_hold(&windowed).await.unwrap().unwrap();
    assert_eq!((stored.handover, stored.fencing_token), (None, next.token));
    let untouched = planner.link_hold(&plain_doc).await.unwrap().unwrap();
    assert_eq!(untouched.fencing_token, world.fence.token);

    let later = planner.take_link_holds(&next).await.unwrap();
    assert_eq!(later.len(), 2);
    assert!(later.iter().all(|hold| hold.handover.is_none()));
}

pub async fn planner_credentials_keep_a_digest_until_they_expire(harness: &dyn Harness) {
    let world = World::open(harness).await;
    let planner = world.store.planner();
    let doc = world.document("Doc", None).await;
    let machine = world.machine("m1", &world.ada, 1).await;
    let lasting = NewPlannerCredential {
        digest: SecretHash([1; 32]),
        machine: machine.clone(),
        channel: doc.clone(),
        ttl: LONG,
    };
    let recorded = planner
        .record_planner_credential(&world.fence, &lasting)
        .await
        .unwrap();
    assert_eq!(
        (recorded.digest, &recorded.machine, &recorded.channel),
        (lasting.digest, &machine, &doc)
    );
    assert_eq!(
        recorded.expires_at.0 - recorded.created_at.0,
        i64::try_from(LONG.as_millis()).unwrap()
    );
    assert_eq!(
        planner.planner_credential(&lasting.digest).await.unwrap(),
        Some(recorded)
    );
    let again = planner
        .record_planner_credential(&world.fence, &lasting)
        .await
        .unwrap_err();
    assert_eq!(again.kind(), ErrorKind::Conflict);
    let unknown = planner
        .record_planner_credential(
            &world.fence,
            &NewPlannerCredential {
                digest: SecretHash([3; 32]),
                machine: MachineId("no-such-machine".to_owned()),
                ..lasting.clone()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(unknown.kind(), ErrorKind::Invalid);

    let brief = NewPlannerCredential {
        digest: SecretHash([2; 32]),
        ttl: SHORT,
        ..lasting.clone()
    };
    planner
        .record_planner_credential(&world.fence, &brief)
        .await
        .unwrap();
    eventually("the brief credential to expire", || async {
        planner
            .planner_credential(&brief.digest)
            .await
            .unwrap()
            .is_none()
    })
    .await;
    assert_eq!(
        planner
            .sweep_planner_credentials(&world.fence)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        planner
            .sweep_planner_credentials(&world.fence)
            .await
            .unwrap(),
        0
    );
    assert!(
        planner
            .planner_credential(&lasting.digest)
            .await
            .unwrap()
            .is_some()
    );
}

pub async fn planner_credentials_go_with_withdrawal_the_machine_and_the_document(
    harness: &dyn Harness,
) {
    let world = World::open(harness).await;
    let planner = world.store.planner();
    let doc = world.document("Doc", None).await;
    let doomed = world.document("Doomed", None).await;
    let first = world.machine("m1", &world.ada, 1).await;
    let second = world.machine("m2", &world.ada, 2).await;
    let record = |seed: u8, machine: &MachineId, channel: &ChannelId| NewPlannerCredential {
        digest: SecretHash([seed; 32]),
        machine: machine.clone(),
        channel: channel.clone(),
        ttl: LONG,
    };
    for credential in [
        record(1, &first, &doc),
        record(2, &first, &doc),
        record(3, &second, &doc),
        record(4, &second, &doomed),
    ] {
        planner
            .record_planner_credential(&world.fence, &credential)
            .await
            .unwrap();
    }
    let present = |seed: u8| async move {
        planner
            .planner_credential(&SecretHash([seed; 32]))
            .await
            .unwrap()
            .is_some()
    };
    assert_eq!(
        planner
            .withdraw_planner_credentials(&world.fence, &first)
            .await
            .unwrap(),
        2
    );
    assert!(!present(1).await && !present(2).await && present(3).await);
    world.delete(&doomed).await;
    assert!(!present(4).await && present(3).await);
    world
        .store
        .machines()
        .revoke_machine(&second, &world.ada)
        .await
        .unwrap();
    assert!(!present(3).await);
}

pub async fn model_choices_are_replaced_whole_and_neither_removes_the_row(harness: &dyn Harness) {
    let world = World::open(harness).await;
    let planner = world.store.planner();
    let doc = world.document("Doc", None).await;
    let bob = world.user("bob").await;
    let both = planner
        .choose_model(
            &world.fence,
            &NewModelChoice {
                channel: doc.clone(),
                model: Some(choice("a-model-that-may-go")),
                thinking_level: Some(choice("high")),
                chosen_by: world.ada.clone(),
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(both.fencing_token, world.fence.token);
    assert_eq!(
        planner.model_choice(&doc).await.unwrap(),
        Some(both.clone())
    );

    let next = world.successor().await;
    let thinking_only = planner
        .choose_model(
            &next,
            &NewModelChoice {
                channel: doc.clone(),
                model: None,
                thinking_level: Some(choice("low")),
                chosen_by: bob.clone(),
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(thinking_only.model, None, "replaced whole, not merged");
    assert_eq!(thinking_only.thinking_level, Some(choice("low")));
    assert_eq!(
        (&thinking_only.chosen_by, thinking_only.fencing_token),
        (&bob, next.token)
    );
    assert!(thinking_only.chosen_at >= both.chosen_at);

    let removed = planner
        .choose_model(
            &next,
            &NewModelChoice {
                channel: doc.clone(),
                model: None,
                thinking_level: None,
                chosen_by: bob,
            },
        )
        .await
        .unwrap();
    assert_eq!(removed, None);
    assert_eq!(planner.model_choice(&doc).await.unwrap(), None);

    for bad in [String::new(), "x".repeat(201), "tab\there".to_owned()] {
        assert_eq!(ChoiceName::new(bad).unwrap_err().kind(), ErrorKind::Invalid);
    }
    assert!(ChoiceName::new("é".repeat(200)).is_ok());
}

pub async fn mcp_sessions_are_touched_and_swept_when_idle(harness: &dyn Harness) {
    let world = World::open(harness).await;
    let mcp = world.store.mcp_sessions();
    let client = McpClient::new("editor", "2.1.0").unwrap();
    let idle = McpSessionId::new("mcp-idle").unwrap();
    let busy = McpSessionId::new("mcp-busy").unwrap();
    let created = mcp
        .create_mcp_session(&world.fence, &idle, &world.ada, &client)
        .await
        .unwrap();
    assert_eq!(created.created_at, created.last_seen_at);
    assert_eq!(
        (created.client.name(), created.client.version()),
        ("editor", "2.1.0")
    );
    assert_eq!(mcp.mcp_session(&idle).await.unwrap(), Some(created.clone()));
    let reused = mcp
        .create_mcp_session(&world.fence, &idle, &world.ada, &client)
        .await
        .unwrap_err();
    assert_eq!(reused.kind(), ErrorKind::Conflict);
    mcp.create_mcp_session(&world.fence, &busy, &world.ada, &client)
        .await
        .unwrap();

    tokio::time::sleep(SHORT).await;
    let touched = mcp.touch_mcp_session(&world.fence, &busy).await.unwrap();
    assert!(touched.last_seen_at > touched.created_at);
    assert_eq!(
        mcp.sweep_idle_mcp_sessions(&world.fence, SHORT / 2)
            .await
            .unwrap(),
        1
    );
    assert_eq!(mcp.mcp_session(&idle).await.unwrap(), None);
    assert!(mcp.mcp_session(&busy).await.unwrap().is_some());
    assert_eq!(
        mcp.sweep_idle_mcp_sessions(&world.fence, LONG)
            .await
            .unwrap(),
        0
    );
    let gone = mcp
        .touch_mcp_session(&world.fence, &idle)
        .await
        .unwrap_err();
    assert_eq!(gone.kind(), ErrorKind::Missing);
    assert!(mcp.delete_mcp_session(&world.fence, &busy).await.unwrap());
    assert!(!mcp.delete_mcp_session(&world.fence, &busy).await.unwrap());
    assert!(McpClient::new("x".repeat(201), "1").is_err());
    assert!(McpSessionId::new("").is_err());
}

pub async fn a_newer_decision_answer_replaces_the_row_and_waits_again(harness: &dyn Harness) {
    let world = World::open(harness).await;
    let planner = world.store.planner();
    let doc = world.document("Doc", None).await;
    let decision = key("decision-1");
    assert!(
        planner
            .save_decision_answer(&world.fence, &doc, &decision, 2)
            .await
            .unwrap()
    );
    let claimed = planner
        .claim_decision_answers(&world.fence, &doc, &key("turn-1"))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].claimed_by, Some(key("turn-1")));

    for stale in [2, 1] {
        assert!(
            !planner
                .save_decision_answer(&world.fence, &doc, &decision, stale)
                .await
                .unwrap()
        );
    }
    let kept = planner.decision_answers(&doc).await.unwrap();
    assert_eq!(
        (kept[0].generation, kept[0].claimed_by.clone()),
        (2, Some(key("turn-1")))
    );

    assert!(
        planner
            .save_decision_answer(&world.fence, &doc, &decision, 3)
            .await
            .unwrap()
    );
    let waiting = planner.decision_answers(&doc).await.unwrap();
    assert_eq!(waiting.len(), 1);
    assert_eq!(
        (
            waiting[0].generation,
            &waiting[0].claimed_by,
            waiting[0].delivered_at
        ),
        (3, &None, None)
    );
    assert!(waiting[0].saved_at >= kept[0].saved_at);
    let unknown = planner
        .save_decision_answer(&world.fence, &ChannelId::random(), &decision, 1)
        .await
        .unwrap_err();
    assert_eq!(unknown.kind(), ErrorKind::Invalid);
}

pub async fn a_delivered_decision_answer_never_runs_twice(harness: &dyn Harness) {
    let world = World::open(harness).await;
    let planner = world.store.planner();
    let doc = world.document("Doc", None).await;
    for decision in ["d1", "d2"] {
        planner
            .save_decision_answer(&world.fence, &doc, &key(decision), 1)
            .await
            .unwrap();
    }
    let first = planner
        .claim_decision_answers(&world.fence, &doc, &key("turn-1"))
        .await
        .unwrap();
    assert_eq!(first.len(), 2);
    // Claimed by another turn: not taken; the same turn sees its claim again.
    assert!(
        planner
            .claim_decision_answers(&world.fence, &doc, &key("turn-2"))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        planner
            .claim_decision_answers(&world.fence, &doc, &key("turn-1"))
            .await
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        planner
            .deliver_decision_answers(&world.fence, &doc, &key("turn-1"))
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        planner
            .deliver_decision_answers(&world.fence, &doc, &key("turn-1"))
            .await
            .unwrap(),
        0
    );
    for turn in ["turn-1", "turn-3"] {
        assert!(
            planner
                .claim_decision_answers(&world.fence, &doc, &key(turn))
                .await
                .unwrap()
                .is_empty(),
            "a delivered answer was claimed again by {turn}"
        );
    }
    let stored = planner.decision_answers(&doc).await.unwrap();
    assert!(stored.iter().all(|answer| answer.delivered_at.is_some()
        && answer.claimed_by == Some(key("turn-1"))));
    assert_eq!(
        stored
            .iter()
            .map(|a| a.decision.as_str())
            .collect::<Vec<_>>(),
        ["d1", "d2"]
    );
    // A newer answer to a delivered decision is a new answer: it waits again.
    assert!(
        planner
            .save_decision_answer(&world.fence, &doc, &key("d1"), 2)
            .await
            .unwrap()
    );
    let renewed = planner
        .claim_decision_answers(&world.fence, &doc, &key("turn-3"))
        .await
        .unwrap();
    let renewed: Vec<_> = renewed
        .iter()
        .map(|a| (a.decision.as_str(), a.generation))
        .collect();
    assert_eq!(renewed, [("d1", 2)]);
}

pub async fn people_choose_and_favor_their_own_or_shared_machines(harness: &dyn Harness) {
    let world = World::open(harness).await;
    let choices = world.store.machine_choices();
    let doc = world.document("Doc", None).await;
    let bob = world.user("bob").await;
    let adas = world.machine("ada-m", &world.ada, 1).await;
    let bobs = world.machine("bob-m", &bob, 2).await;

    assert_eq!(
        choices.machine_choice(&world.ada, &doc).await.unwrap(),
        None
    );
    assert_eq!(choices.favorite_machine(&world.ada).await.unwrap(), None);
    choices
        .choose_machine(&world.fence, &world.ada, &doc, Some(&adas))
        .await
        .unwrap();
    choices
        .set_favorite_machine(&world.fence, &world.ada, Some(&adas))
        .await
        .unwrap();
    assert_eq!(
        choices.machine_choice(&world.ada, &doc).await.unwrap(),
        Some(adas.clone())
    );
    assert_eq!(
        choices.favorite_machine(&world.ada).await.unwrap(),
        Some(adas.clone())
    );

    // Bob's machine is not shared: Ada can neither choose nor favor it.
    assert!(!choices.machine_shared(&bobs).await.unwrap());
    for error in [
        choices
            .set_favorite_machine(&world.fence, &world.ada, Some(&bobs))
            .await
            .unwrap_err(),
        choices
            .choose_machine(&world.fence, &world.ada, &doc, Some(&bobs))
            .await
            .unwrap_err(),
    ] {
        assert_eq!(error.kind(), ErrorKind::Missing, "{error}");
    }
    assert_eq!(
        choices.favorite_machine(&world.ada).await.unwrap(),
        Some(adas.clone())
    );
    // Only its owner shares it.
    let not_owner = choices
        .set_machine_shared(&world.fence, &bobs, &world.ada, true)
        .await
        .unwrap_err();
    assert_eq!(not_owner.kind(), ErrorKind::Missing);
    choices
        .set_machine_shared(&world.fence, &bobs, &bob, true)
        .await
        .unwrap();
    choices
        .set_machine_shared(&world.fence, &bobs, &bob, true)
        .await
        .unwrap();
    assert!(choices.machine_shared(&bobs).await.unwrap());
    choices
        .set_favorite_machine(&world.fence, &world.ada, Some(&bobs))
        .await
        .unwrap();
    choices
        .choose_machine(&world.fence, &world.ada, &doc, Some(&bobs))
        .await
        .unwrap();
    assert_eq!(
        choices.favorite_machine(&world.ada).await.unwrap(),
        Some(bobs.clone())
    );

    // Back to automatic and no favorite.
    choices
        .choose_machine(&world.fence, &world.ada, &doc, None)
        .await
        .unwrap();
    choices
        .set_favorite_machine(&world.fence, &world.ada, None)
        .await
        .unwrap();
    assert_eq!(
        choices.machine_choice(&world.ada, &doc).await.unwrap(),
        None
    );
    assert_eq!(choices.favorite_machine(&world.ada).await.unwrap(), None);
    let unknown = choices
        .machine_shared(&MachineId("none".to_owned()))
        .await
        .unwrap_err();
    assert_eq!(unknown.kind(), ErrorKind::Missing);
}

pub async fn unsharing_removes_teammates_favorites_and_revoking_removes_all(harness: &dyn Harness) {
    let world = World::open(harness).await;
    let choices = world.store.machine_choices();
    let doc = world.document("Doc", None).await;
    let bob = world.user("bob").await;
    let bobs = world.machine("bob-m", &bob, 2).await;
    choices
        .set_machine_shared(&world.fence, &bobs, &bob, true)
        .await
        .unwrap();
    for user in [&world.ada, &bob] {
        choices
            .set_favorite_machine(&world.fence, user, Some(&bobs))
            .await
            .unwrap();
        choices
            .choose_machine(&world.fence, user, &doc, Some(&bobs))
            .await
            .unwrap();
    }
    choices
        .set_machine_shared(&world.fence, &bobs, &bob, false)
        .await
        .unwrap();
    assert!(!choices.machine_shared(&bobs).await.unwrap());
    assert_eq!(choices.favorite_machine(&world.ada).await.unwrap(), None);
    assert_eq!(
        choices.machine_choice(&world.ada, &doc).await.unwrap(),
        None
    );
    assert_eq!(
        choices.favorite_machine(&bob).await.unwrap(),
        Some(bobs.clone()),
        "the owner's own favorite stays"
    );
    assert_eq!(
        choices.machine_choice(&bob, &doc).await.unwrap(),
        Some(bobs.clone())
    );

    world
        .store
        .machines()
        .revoke_machine(&bobs, &bob)
        .await
        .unwrap();
    assert_eq!(choices.favorite_machine(&bob).await.unwrap(), None);
    assert_eq!(choices.machine_choice(&bob, &doc).await.unwrap(), None);
}

pub async fn deleting_a_document_removes_its_planner_rows_and_machine_choices(
    harness: &dyn Harness,
) {
    let world = World::open(harness).await;
    let planner = world.store.planner();
    let doc = world.document("Doc", None).await;
    let session = world.live_session("owner").await;
    let machine = world.machine("m1", &world.ada, 1).await;
    planner
        .claim_planner(&world.fence, &doc, &session)
        .await
        .unwrap();
    planner
        .write_link_hold(
            &world.fence,
            &world.hold(&doc, HoldOwner::Session(session), 1),
        )
        .await
        .unwrap();
    planner
        .choose_model(
            &world.fence,
            &NewModelChoice {
                channel: doc.clone(),
                model: Some(choice("m")),
                thinking_level: None,
                chosen_by: world.ada.clone(),
            },
        )
        .await
        .unwrap();
    planner
        .save_decision_answer(&world.fence, &doc, &key("d1"), 1)
        .await
        .unwrap();
    world
        .store
        .machine_choices()
        .choose_machine(&world.fence, &world.ada, &doc, Some(&machine))
        .await
        .unwrap();
    harness
        .seed_deferred_turns(
            &*world.store,
            &[deferred("t1", &doc, DeferredTurnState::Waiting)],
        )
        .await;

    world.delete(&doc).await;
    assert_eq!(planner.agent_state(&doc).await.unwrap(), None);
    assert_eq!(planner.link_hold(&doc).await.unwrap(), None);
    assert_eq!(planner.model_choice(&doc).await.unwrap(), None);
    assert!(planner.decision_answers(&doc).await.unwrap().is_empty());
    assert_eq!(
        world
            .store
            .machine_choices()
            .machine_choice(&world.ada, &doc)
            .await
            .unwrap(),
        None
    );
    assert!(harness.deferred_turns(&*world.store).await.is_empty());
}

fn deferred(id: &str, channel: &ChannelId, state: DeferredTurnState) -> DeferredTurn {
    DeferredTurn {
        id: id.to_owned(),
        channel: channel.clone(),
        kind: "composer".to_owned(),
        state,
        fencing_token: FencingToken(1),
        resolved_at: None,
    }
}

pub async fn retiring_deferred_turns_closes_the_open_ones_once(harness: &dyn Harness) {
    let world = World::open(harness).await;
    let doc = world.document("Doc", None).await;
    harness
        .seed_deferred_turns(
            &*world.store,
            &[
                deferred("a-waiting", &doc, DeferredTurnState::Waiting),
                deferred("b-waiting", &doc, DeferredTurnState::Waiting),
                deferred("c-started", &doc, DeferredTurnState::Started),
                deferred("d-ended", &doc, DeferredTurnState::Ended),
            ],
        )
        .await;
    let planner = world.store.planner();
    let retired = planner.retire_deferred_turns(&world.fence).await.unwrap();
    assert_eq!(
        retired,
        DeferredTurnRetirement {
            cancelled: 2,
            interrupted: 1
        }
    );
    let turns = harness.deferred_turns(&*world.store).await;
    let states: Vec<_> = turns
        .iter()
        .map(|turn| (turn.id.as_str(), turn.state, turn.fencing_token))
        .collect();
    let token = world.fence.token;
    assert_eq!(
        states,
        [
            ("a-waiting", DeferredTurnState::Cancelled, token),
            ("b-waiting", DeferredTurnState::Cancelled, token),
            ("c-started", DeferredTurnState::Interrupted, token),
            ("d-ended", DeferredTurnState::Ended, FencingToken(1)),
        ]
    );
    assert!(turns[..3].iter().all(|turn| turn.resolved_at.is_some()));
    assert_eq!(turns[3].resolved_at, None);
    assert_eq!(
        planner.retire_deferred_turns(&world.fence).await.unwrap(),
        DeferredTurnRetirement::default()
    );
    assert_eq!(harness.deferred_turns(&*world.store).await, turns);
}

pub async fn the_owner_reset_keeps_only_owners_whose_hold_names_a_kept_session(
    harness: &dyn Harness,
) {
    let world = World::open(harness).await;
    let planner = world.store.planner();
    let kept_session = world.live_session("kept").await;
    let expiring = world.session("expiring", true, true, SHORT).await;
    let metadata_only = world.session("metadata-only", false, true, LONG).await;
    let without_credentials = world.session("no-credentials", true, false, LONG).await;
    let delegated = world.session("delegated", false, false, LONG).await;
    let plain_owner = world.live_session("plain").await;
    let machine = world.machine("m1", &world.ada, 1).await;

    let mut docs = Vec::new();
    for (title, owner, hold) in [
        (
            "kept",
            &kept_session,
            Some(HoldOwner::Session(kept_session.clone())),
        ),
        (
            "expired",
            &expiring,
            Some(HoldOwner::Session(expiring.clone())),
        ),
        (
            "metadata",
            &metadata_only,
            Some(HoldOwner::Session(metadata_only.clone())),
        ),
        (
            "no credentials",
            &without_credentials,
            Some(HoldOwner::Session(without_credentials.clone())),
        ),
        (
            "machine",
            &delegated,
            Some(HoldOwner::Machine(machine.clone())),
        ),
        ("plain", &plain_owner, None),
        // A hold naming a session that is not the owner keeps nothing.
        (
            "other hold",
            &plain_owner,
            Some(HoldOwner::Session(kept_session.clone())),
        ),
    ] {
        let doc = world.document(title, None).await;
        planner
            .claim_planner(&world.fence, &doc, owner)
            .await
            .unwrap();
        planner
            .set_planner_status(&world.fence, &doc, 1, PlannerStatus::Ready)
            .await
            .unwrap();
        if let Some(hold) = hold {
            planner
                .write_link_hold(&world.fence, &world.hold(&doc, hold, 1))
                .await
                .unwrap();
        }
        harness
            .seed_reserved_context(&*world.store, &doc, &format!("summary of {title}"), 7)
            .await;
        docs.push(doc);
    }
    world.until_expired(&expiring).await;

    let reset = planner.reset_owners(&world.fence).await.unwrap();
    assert_eq!(reset.sessions.expired, 1);
    assert_eq!(reset.sessions.metadata_only, 2);
    assert_eq!((reset.owners_cleared, reset.owners_kept), (6, 1));

    for (index, doc) in docs.iter().enumerate() {
        let state = planner.agent_state(doc).await.unwrap().unwrap();
        let expected_owner = (index == 0).then(|| kept_session.clone());
        assert_eq!(state.owner, expected_owner, "document {index}");
        assert_eq!(state.status, PlannerStatus::Unavailable, "document {index}");
        assert_eq!(state.generation, 1, "document {index}");
        assert_eq!(state.transcript_cursor, Some(7), "document {index}");
        assert!(state.summary.is_some(), "document {index}");
    }
    // Holds go with the sessions the reset removed; the machine's and the kept ones stay.
    let holds: Vec<bool> = {
        let mut present = Vec::new();
        for doc in &docs {
            present.push(planner.link_hold(doc).await.unwrap().is_some());
        }
        present
    };
    assert_eq!(holds, [true, false, false, true, true, false, true]);

    let again = planner.reset_owners(&world.fence).await.unwrap();
    assert_eq!(
        (
            again.sessions.expired,
            again.sessions.metadata_only,
            again.owners_cleared,
            again.owners_kept
        ),
        (0, 0, 0, 1)
    );
    assert_eq!(
        planner.agent_state(&docs[0]).await.unwrap().unwrap().owner,
        Some(kept_session)
    );
}

/// A child published with a snapshot and a state sidecar, and one more commit of the state.
async fn child_with_sidecars(world: &World, parent: &ChannelId, key_text: &str) -> Channel {
    let collaboration = world.store.collaboration();
    let child = collaboration
        .create_published(
            &world.fence,
            &PublishedChannel {
                repository: Repository::new("acme/app").unwrap(),
                key: CreationKey::new(key_text).unwrap(),
                title: format!("Child {key_text}"),
                parent: Some(parent.clone()),
                checkpoint: NewCheckpoint {
                    epoch: 1,
                    through_sequence: 0,
                    revision: 0,
                    canonical_text: "text".to_owned(),
                    source_hash: "hash-of-text".to_owned(),
                    state: b"text".to_vec(),
                    sidecar: Some(sidecar(r#"{"transcript":["snapshot"]}"#)),
                },
            },
        )
        .await
        .unwrap();
    collaboration
        .commit(
            &world.fence,
            &Commit {
                channel: child.id.clone(),
                operation: OperationId::new(format!("{key_text}-state")).unwrap(),
                expected_revision: child.revision,
                update: None,
                sidecar: Some(sidecar(r#"{"transcript":["state"]}"#)),
                events: Vec::new(),
                title: None,
                text: None,
            },
        )
        .await
        .unwrap();
    collaboration.channel(&child.id).await.unwrap().unwrap()
}

pub async fn child_sidecars_are_read_and_replaced_without_moving_a_counter(harness: &dyn Harness) {
    let world = World::open(harness).await;
    let planner = world.store.planner();
    let collaboration = world.store.collaboration();
    let parent = world.document("Parent", None).await;
    let bare_child = world.document("Bare child", Some(&parent)).await;
    let child = child_with_sidecars(&world, &parent, "child-1").await;
    harness
        .seed_reserved_context(&*world.store, &child.id, "summary", 3)
        .await;
    harness
        .seed_reserved_context(&*world.store, &parent, "parent summary", 4)
        .await;

    let mut listed = planner.child_conversations().await.unwrap();
    listed.sort_by(|a, b| a.channel.cmp(&b.channel));
    let mut expected = vec![
        ChildConversation {
            channel: child.id.clone(),
            state: Some(sidecar(r#"{"transcript":["state"]}"#)),
            snapshot: Some(sidecar(r#"{"transcript":["snapshot"]}"#)),
            has_reserved_context: true,
        },
        ChildConversation {
            channel: bare_child.clone(),
            state: None,
            snapshot: None,
            has_reserved_context: false,
        },
    ];
    expected.sort_by(|a, b| a.channel.cmp(&b.channel));
    assert_eq!(listed, expected);

    let before = collaboration.recovery_snapshot(&child.id).await.unwrap();
    let cleared = ClearedChild {
        channel: child.id.clone(),
        state: Some(sidecar(r#"{"transcript":[]}"#)),
        snapshot: Some(sidecar(r#"{"transcript":[],"kept":true}"#)),
    };
    planner
        .replace_child_sidecars(&world.fence, &cleared)
        .await
        .unwrap();
    let after = collaboration.recovery_snapshot(&child.id).await.unwrap();
    assert_eq!(
        after.channel, before.channel,
        "a channel counter or time moved"
    );
    assert_eq!(after.sidecar, cleared.state);
    let (old, new) = (before.checkpoint.unwrap(), after.checkpoint.unwrap());
    assert_eq!(new.sidecar, cleared.snapshot);
    assert_eq!(
        (
            new.epoch,
            new.generation,
            new.revision,
            new.through_sequence,
            new.created_at
        ),
        (
            old.epoch,
            old.generation,
            old.revision,
            old.through_sequence,
            old.created_at
        )
    );
    let state = planner.agent_state(&child.id).await.unwrap().unwrap();
    assert_eq!((state.summary, state.transcript_cursor), (None, None));
    let parent_state = planner.agent_state(&parent).await.unwrap().unwrap();
    assert_eq!(parent_state.transcript_cursor, Some(4));

    let not_child = planner
        .replace_child_sidecars(
            &world.fence,
            &ClearedChild {
                channel: parent.clone(),
                ..cleared.clone()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(not_child.kind(), ErrorKind::Invalid);
    let no_sidecar = planner
        .replace_child_sidecars(
            &world.fence,
            &ClearedChild {
                channel: bare_child,
                ..cleared
            },
        )
        .await
        .unwrap_err();
    assert_eq!(no_sidecar.kind(), ErrorKind::Missing);
}
