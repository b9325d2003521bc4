//! Forwarding between the members of a cluster, with two servers on one scratch database and
//! real sockets: B serves alone (it holds the writer lease and writes every document); A is a
//! member of a cluster that writes no shard and knows B as the holder of every one. Yjs-protocol
//! clients connect to either; what A forwards must behave exactly as if the client had connected
//! to B: edits are shared and committed, a viewer stays read-only, a revoked session is cut off,
//! and the documents API answers with B's answers. With no holder, a request already forwarded
//! once, or a holder that cannot be reached, A answers 1013 or 503 and names no address.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use fermata_accounts::KeyringHandle;
use fermata_collab::{DocumentFences, WriterFence, close, protocol};
use fermata_crypto::{Keyring, SecretToken};
use fermata_http::{HttpState, ServerLimits};
use fermata_store::{Acquisition, ChannelId, LeaseName, ShardCount, Storage, StoreOptions};
use fermata_store_sql::testing::{ScratchDatabase, ScratchStorage};
use futures::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use yrs::sync::{Message as YMessage, SyncMessage};
use yrs::updates::decoder::Decode as _;
use yrs::updates::encoder::Encode as _;
use yrs::{GetString as _, ReadTxn as _, Text as _, Transact as _, Update};

use crate::support::{self, Answer, Caller, PAGES_PASSWORD};

/// How long anything the tests wait for may take.
const PATIENCE: Duration = Duration::from_secs(10);

/// The header a forwarded request carries.
const FORWARDED: &str = "x-fermata-forwarded";

/// One server on a loopback port; it stops when dropped.
struct Server {
    state: HttpState,
    address: SocketAddr,
    _stop: oneshot::Sender<()>,
}

async fn serve(state: HttpState) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(fermata_http::serve(
        listener,
        fermata_http::router(state.clone()),
        ServerLimits::default(),
        Arc::clone(&state.metrics),
        async move {
            let _ = stopped.await;
        },
    ));
    Server {
        state,
        address,
        _stop: stop,
    }
}

/// B, A, A's document fences, and a document of `ada/notes` where `ada` is admin and `vic` a
/// viewer, each logged in.
struct Cluster {
    a: Server,
    b: Server,
    fences: DocumentFences,
    ada: Caller,
    vic: Caller,
    document: String,
    _storage: ScratchStorage,
}

impl Cluster {
    async fn start() -> Self {
        let storage = ScratchDatabase::sqlite()
            .open(StoreOptions::default())
            .await;
        let shared: Arc<dyn Storage> = Arc::new(storage.clone());
        let fence = WriterFence::default();
        let Acquisition::Granted(lease) = storage
            .leases()
            .acquire(&LeaseName::WRITER, "b", Duration::from_secs(3600))
            .await
            .unwrap()
        else {
            panic!("the writer lease is held");
        };
        fence.set(Some(lease.fence()));
        let keyring = Arc::new(KeyringHandle::new(Keyring::generate(), None));
        let b = serve(support::member_state(
            Arc::clone(&shared),
            fence.clone(),
            DocumentFences::whole(fence.clone()),
            Arc::clone(&keyring),
        ))
        .await;
        let fences = DocumentFences::sharded(Arc::clone(&shared), ShardCount::DEFAULT);
        let a = serve(support::member_state(
            shared,
            fence,
            fences.clone(),
            keyring,
        ))
        .await;
        let cluster = Cluster {
            fences,
            ada: Caller::default(),
            vic: Caller::default(),
            document: String::new(),
            a,
            b,
            _storage: storage,
        };
        cluster.hold_every_shard(Some(&format!("http://{}", cluster.b.address)));
        cluster.with_members().await
    }

    async fn with_members(mut self) -> Self {
        let b = &self.b.state;
        for name in ["ada", "vic"] {
            b.accounts
                .add_user(
                    name,
                    Some(SecretToken::from_given(PAGES_PASSWORD)),
                    BTreeSet::new(),
                )
                .await
                .unwrap();
        }
        self.ada = support::login(b, "ada", PAGES_PASSWORD).await;
        self.vic = support::login(b, "vic", PAGES_PASSWORD).await;
        let made = support::call(
            b,
            &self.ada,
            "POST",
            "/api/v1/repositories",
            Some(json!({"name": "ada/notes"})),
        )
        .await;
        assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
        let viewer = support::call(
            b,
            &self.ada,
            "PUT",
            "/api/v1/repositories/ada/notes/members/vic",
            Some(json!({"role": "viewer"})),
        )
        .await;
        assert_eq!(viewer.status, StatusCode::OK, "{}", viewer.body);
        let created = support::call(
            b,
            &self.ada,
            "POST",
            "/api/v1/documents",
            Some(json!({"repository": "ada/notes", "title": "Plans"})),
        )
        .await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
        self.document = created.json()["id"].as_str().unwrap().to_owned();
        self
    }

    /// Records `holder` as the holder of every shard, in A's view.
    fn hold_every_shard(&self, holder: Option<&str>) {
        for shard in ShardCount::DEFAULT.shards() {
            self.fences.set_holder(shard, holder.map(str::to_owned));
        }
    }

    /// The document's text as stored: A opens no room for it, so it reads it from the database.
    async fn stored_text(&self) -> String {
        let id = ChannelId::parse(&self.document).unwrap();
        self.a.state.documents.read(&id).await.unwrap().text
    }

    /// Waits until the stored text holds `wanted`.
    async fn until_stored(&self, wanted: &str) -> String {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let text = self.stored_text().await;
            if text.contains(wanted) {
                return text;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{wanted:?} was never stored: {text:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The count of A's forwarded requests of `kind` that ended with `outcome`.
    fn forwarded(&self, kind: &str, outcome: &str) -> f64 {
        let series =
            format!("fermata_forwarded_requests_total{{kind=\"{kind}\",outcome=\"{outcome}\"}} ");
        let text = self.a.state.metrics.render();
        text.lines()
            .find_map(|line| line.strip_prefix(&series))
            .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
            .parse()
            .unwrap()
    }
}

/// How a client authenticates its live connection.
enum Credential<'a> {
    /// The session's secret in `?token=`.
    Token(&'a Caller),
    /// The session cookie, as a browser on the same origin sends it.
    Cookie(&'a Caller),
}

/// A Yjs client of the y-websocket protocol with its own copy of the document.
struct Peer {
    socket: WebSocketStream<MaybeTlsStream<TcpStream>>,
    doc: yrs::Doc,
    /// What the server said when it refused an edit of a read-only connection.
    refused: Option<String>,
}

impl Peer {
    /// Connects to `/sync/{document}` at `address` and sends sync step 1.
    async fn connect(
        address: SocketAddr,
        document: &str,
        credential: &Credential<'_>,
        extra: &[(&str, &str)],
    ) -> Self {
        let mut socket = Self::open(address, document, credential, extra)
            .await
            .unwrap_or_else(|error| panic!("the upgrade was refused: {error}"));
        let doc = yrs::Doc::new();
        let vector = doc.transact().state_vector().encode_v1();
        socket
            .send(Message::binary(protocol::sync_step1(&vector)))
            .await
            .unwrap();
        Peer {
            socket,
            doc,
            refused: None,
        }
    }

    async fn open(
        address: SocketAddr,
        document: &str,
        credential: &Credential<'_>,
        extra: &[(&str, &str)],
    ) -> Result<WebSocketStream<MaybeTlsStream<TcpStream>>, tungstenite::Error> {
        let query = match credential {
            Credential::Token(caller) => format!("?token={}", caller.cookie.as_deref().unwrap()),
            Credential::Cookie(_) => String::new(),
        };
        let mut request = format!("ws://{address}/sync/{document}{query}")
            .into_client_request()
            .unwrap();
        if let Credential::Cookie(caller) = credential {
            let cookie = format!("fermata_session={}", caller.cookie.as_deref().unwrap());
            request
                .headers_mut()
                .insert("cookie", HeaderValue::from_str(&cookie).unwrap());
        }
        for (name, value) in extra {
            request.headers_mut().insert(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        tokio_tungstenite::connect_async(request)
            .await
            .map(|(socket, _)| socket)
    }

    fn text(&self) -> String {
        let text = self.doc.get_or_insert_text("source");
        text.get_string(&self.doc.transact())
    }

    /// Appends `words` to the local copy and sends the change.
    async fn append(&mut self, words: &str) {
        let text = self.doc.get_or_insert_text("source");
        let before = self.doc.transact().state_vector();
        {
            let mut txn = self.doc.transact_mut();
            let end = text.len(&txn);
            text.insert(&mut txn, end, words);
        }
        let update = self.doc.transact().encode_state_as_update_v1(&before);
        self.socket
            .send(Message::binary(protocol::update(update)))
            .await
            .unwrap();
    }

    /// Takes one message from the server: applies an update, answers sync step 1, notes a
    /// refusal. `Err` with the close code and reason when the server closed.
    async fn take(&mut self, message: Message) -> Result<(), (u16, String)> {
        match message {
            Message::Binary(bytes) => match YMessage::decode_v1(&bytes).unwrap() {
                YMessage::Sync(SyncMessage::SyncStep1(vector)) => {
                    let update = self.doc.transact().encode_state_as_update_v1(&vector);
                    self.socket
                        .send(Message::binary(protocol::sync_step2(update)))
                        .await
                        .unwrap();
                }
                YMessage::Sync(SyncMessage::SyncStep2(update) | SyncMessage::Update(update)) => {
                    self.doc
                        .transact_mut()
                        .apply_update(Update::decode_v1(&update).unwrap())
                        .unwrap();
                }
                YMessage::Auth(reason) => self.refused = reason,
                _ => {}
            },
            Message::Close(frame) => {
                return Err(frame.map_or((1005, String::new()), |frame| {
                    (u16::from(frame.code), frame.reason.as_str().to_owned())
                }));
            }
            _ => {}
        }
        Ok(())
    }

    /// Reads until `done` holds of the client, within [`PATIENCE`].
    async fn until(&mut self, what: &str, done: impl Fn(&Peer) -> bool) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while !done(self) {
            match tokio::time::timeout_at(deadline, self.socket.next()).await {
                Ok(Some(Ok(message))) => {
                    if let Err(closed) = self.take(message).await {
                        panic!("closed {closed:?} while waiting for {what}");
                    }
                }
                other => panic!("never saw {what}: {other:?}; text {:?}", self.text()),
            }
        }
    }

    /// Reads until the server closes the connection, within [`PATIENCE`]: its code and reason.
    async fn closed(&mut self) -> (u16, String) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            match tokio::time::timeout_at(deadline, self.socket.next()).await {
                Ok(Some(Ok(message))) => {
                    if let Err(closed) = self.take(message).await {
                        return closed;
                    }
                }
                other => panic!("the connection was never closed: {other:?}"),
            }
        }
    }
}

/// A `/sync` connection to `address` that the server closes at once: its code and reason.
async fn closed_at_once(
    address: SocketAddr,
    document: &str,
    caller: &Caller,
    extra: &[(&str, &str)],
) -> (u16, String) {
    let mut peer = Peer::connect(address, document, &Credential::Token(caller), extra).await;
    peer.closed().await
}

async fn get(server: &Server, caller: &Caller, uri: &str, extra: &[(&str, &str)]) -> Answer {
    let mut request = axum::http::Request::builder().method("GET").uri(uri);
    if let Some(cookie) = &caller.cookie {
        request = request.header("cookie", format!("fermata_session={cookie}"));
    }
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    support::send(
        &server.state,
        request.body(axum::body::Body::empty()).unwrap(),
    )
    .await
}

#[tokio::test]
async fn edits_through_a_member_that_does_not_write_the_document_reach_its_writer() {
    let cluster = Cluster::start().await;
    let mut through_a = Peer::connect(
        cluster.a.address,
        &cluster.document,
        &Credential::Token(&cluster.ada),
        &[],
    )
    .await;
    let mut at_b = Peer::connect(
        cluster.b.address,
        &cluster.document,
        &Credential::Cookie(&cluster.ada),
        &[],
    )
    .await;
    through_a.append("from A. ").await;
    at_b.until("the edit made through A", |peer| {
        peer.text().contains("from A.")
    })
    .await;
    at_b.append("from B. ").await;
    through_a
        .until("the edit made at B", |peer| peer.text().contains("from B."))
        .await;
    let stored = cluster.until_stored("from B.").await;
    assert!(stored.contains("from A."), "{stored:?}");
    // A opened no room: B wrote both edits.
    let rooms = cluster.a.state.metrics.render();
    assert!(rooms.contains("fermata_rooms_open 0\n"), "{rooms}");
    assert_eq!(cluster.forwarded("sync", "forwarded"), 1.0);
}

#[tokio::test]
async fn the_writer_applies_the_read_only_rule_and_revocation_to_forwarded_connections() {
    let cluster = Cluster::start().await;
    let mut viewer = Peer::connect(
        cluster.a.address,
        &cluster.document,
        &Credential::Cookie(&cluster.vic),
        &[],
    )
    .await;
    let mut editor = Peer::connect(
        cluster.b.address,
        &cluster.document,
        &Credential::Token(&cluster.ada),
        &[],
    )
    .await;
    viewer.append("the viewer's words. ").await;
    viewer
        .until("the read-only notice", |peer| peer.refused.is_some())
        .await;
    editor.append("the editor's words. ").await;
    let stored = cluster.until_stored("the editor's words.").await;
    assert!(!stored.contains("the viewer's words."), "{stored:?}");
    viewer
        .until("the editor's edit", |peer| {
            peer.text().contains("the editor's words.")
        })
        .await;
    assert!(!editor.text().contains("the viewer's words."));

    // The viewer logs out through A; B, which holds the connection's access watch, cuts it.
    let logout = support::call(
        &cluster.a.state,
        &cluster.vic,
        "DELETE",
        "/api/v1/session",
        None,
    )
    .await;
    assert_eq!(logout.status, StatusCode::NO_CONTENT, "{}", logout.body);
    let (code, _) = viewer.closed().await;
    assert_eq!(code, close::REVOKED);
    assert_eq!(cluster.forwarded("sync", "forwarded"), 1.0);
}

#[tokio::test]
async fn the_documents_api_through_a_member_answers_with_the_writers_answers() {
    let cluster = Cluster::start().await;
    let uri = format!("/api/v1/documents/{}", cluster.document);
    let direct = get(&cluster.b, &cluster.ada, &uri, &[]).await;
    let forwarded = get(&cluster.a, &cluster.ada, &uri, &[]).await;
    assert_eq!(forwarded.status, StatusCode::OK, "{}", forwarded.body);
    assert_eq!(forwarded.json(), direct.json());
    assert_eq!(forwarded.headers["etag"], direct.headers["etag"]);
    // A client token in `?token=`, which A's authorization layer takes out, reaches B too.
    let minted = support::call(
        &cluster.b.state,
        &cluster.ada,
        "POST",
        &format!("/api/v1/documents/{}/client-tokens", cluster.document),
        Some(json!({"access": "read"})),
    )
    .await;
    assert_eq!(minted.status, StatusCode::CREATED, "{}", minted.body);
    let token = minted.json()["token"].as_str().unwrap().to_owned();
    let by_token = get(
        &cluster.a,
        &Caller::default(),
        &format!("{uri}/state?token={token}"),
        &[],
    )
    .await;
    assert_eq!(by_token.status, StatusCode::OK, "{}", by_token.body);

    let renamed = support::call(
        &cluster.a.state,
        &cluster.ada,
        "PATCH",
        &uri,
        Some(json!({"title": "Renamed through A"})),
    )
    .await;
    assert_eq!(renamed.status, StatusCode::OK, "{}", renamed.body);
    let read = get(&cluster.b, &cluster.ada, &uri, &[]).await;
    assert_eq!(read.json()["title"], "Renamed through A");
    // A viewer is refused by B, through A.
    let refused = support::call(
        &cluster.a.state,
        &cluster.vic,
        "PATCH",
        &uri,
        Some(json!({"title": "Not allowed"})),
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert_eq!(cluster.forwarded("http", "forwarded"), 3.0);
}

/// `POST /api/v1/documents` with `body` as `caller` at `server`, with an `Idempotency-Key` when
/// `key` is given.
async fn create(server: &Server, caller: &Caller, body: Value, key: Option<&str>) -> Answer {
    let mut request = axum::http::Request::builder()
        .method("POST")
        .uri("/api/v1/documents")
        .header("content-type", "application/json");
    if let Some(cookie) = &caller.cookie {
        request = request.header("cookie", format!("fermata_session={cookie}"));
    }
    if let Some(csrf) = &caller.csrf {
        request = request.header("x-csrf-token", csrf);
    }
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    support::send(
        &server.state,
        request
            .body(axum::body::Body::from(body.to_string()))
            .unwrap(),
    )
    .await
}

/// A creation with an idempotency key or a parent names, in its body, the shard its document
/// goes in: sent to a member that does not write that shard, it is made by the one that does,
/// repeated there, and refused there to a caller without the right.
#[tokio::test]
async fn creations_with_a_key_or_a_parent_through_a_member_are_made_by_the_writer() {
    let cluster = Cluster::start().await;
    let keyed = json!({"repository": "ada/notes", "title": "Keyed", "text": "first words\n"});
    let created = create(&cluster.a, &cluster.ada, keyed.clone(), Some("k-1")).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let id = created.json()["id"].as_str().unwrap().to_owned();
    let repeated = create(&cluster.a, &cluster.ada, keyed.clone(), Some("k-1")).await;
    assert_eq!(repeated.status, StatusCode::OK, "{}", repeated.body);
    assert_eq!(repeated.json()["id"], id.as_str());
    let stored = cluster
        .b
        .state
        .documents
        .read(&ChannelId::parse(&id).unwrap())
        .await
        .unwrap();
    assert_eq!(stored.text, "first words\n");

    let child = json!({"repository": "ada/notes", "title": "Child", "parent": cluster.document});
    let made = create(&cluster.a, &cluster.ada, child.clone(), None).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    assert_eq!(made.json()["parent"], cluster.document.as_str());
    // The writer checks the caller's right itself: a viewer creates nothing.
    let refused = create(&cluster.a, &cluster.vic, child, None).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert_eq!(cluster.forwarded("http", "forwarded"), 3.0);
    // Without a holder for the shard, the answer is to try again.
    cluster.hold_every_shard(None);
    let unplaced = create(&cluster.a, &cluster.ada, keyed, Some("k-2")).await;
    assert_eq!(
        unplaced.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        unplaced.body
    );
    assert!(unplaced.headers.contains_key("retry-after"));
}

#[tokio::test]
async fn without_a_holder_a_member_answers_try_again_later() {
    let cluster = Cluster::start().await;
    cluster.hold_every_shard(None);
    let (code, reason) =
        closed_at_once(cluster.a.address, &cluster.document, &cluster.ada, &[]).await;
    assert_eq!(code, close::TRY_AGAIN_LATER);
    assert!(reason.contains("handed over"), "{reason}");
    let uri = format!("/api/v1/documents/{}", cluster.document);
    let answer = get(&cluster.a, &cluster.ada, &uri, &[]).await;
    assert_eq!(
        answer.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        answer.body
    );
    assert_eq!(answer.code(), "handing_over");
    assert!(answer.headers.contains_key("retry-after"));
    assert_eq!(cluster.forwarded("sync", "unplaced"), 1.0);
    assert_eq!(cluster.forwarded("http", "unplaced"), 1.0);
}

#[tokio::test]
async fn a_request_forwarded_once_is_never_forwarded_again() {
    let cluster = Cluster::start().await;
    let marked = [(FORWARDED, "1")];
    let (code, reason) =
        closed_at_once(cluster.a.address, &cluster.document, &cluster.ada, &marked).await;
    assert_eq!(code, close::TRY_AGAIN_LATER);
    assert!(reason.contains("handed over"), "{reason}");
    let uri = format!("/api/v1/documents/{}", cluster.document);
    let answer = get(&cluster.a, &cluster.ada, &uri, &marked).await;
    assert_eq!(
        answer.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        answer.body
    );
    assert!(answer.headers.contains_key("retry-after"));
    assert_eq!(cluster.forwarded("sync", "already_forwarded"), 1.0);
    assert_eq!(cluster.forwarded("http", "already_forwarded"), 1.0);
    assert_eq!(cluster.forwarded("sync", "forwarded"), 0.0);
    // The writer itself serves a marked request as any other.
    let at_b = get(&cluster.b, &cluster.ada, &uri, &marked).await;
    assert_eq!(at_b.status, StatusCode::OK, "{}", at_b.body);
}

#[tokio::test]
async fn a_holder_that_cannot_be_reached_gets_try_again_later_and_names_no_address() {
    let cluster = Cluster::start().await;
    // An address where nothing listens any more.
    let gone = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    cluster.hold_every_shard(Some(&format!("http://operator:hunter2@{gone}")));
    let (code, reason) =
        closed_at_once(cluster.a.address, &cluster.document, &cluster.ada, &[]).await;
    assert_eq!(code, close::TRY_AGAIN_LATER);
    let uri = format!("/api/v1/documents/{}", cluster.document);
    let answer = get(&cluster.a, &cluster.ada, &uri, &[]).await;
    assert_eq!(
        answer.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        answer.body
    );
    assert_eq!(answer.code(), "unavailable");
    assert!(answer.headers.contains_key("retry-after"));
    for said in [&reason, &answer.body] {
        for secret in ["hunter2", "operator", &gone.to_string(), "127.0.0.1"] {
            assert!(!said.contains(secret), "{said:?} names {secret}");
        }
    }
    assert_eq!(cluster.forwarded("sync", "unreachable"), 1.0);
    assert_eq!(cluster.forwarded("http", "unreachable"), 1.0);
}

/// A page's form that changes a document (here, renaming it) posted to A is answered by B, which
/// checks the session and its CSRF token itself; the page it redirects to is read at A.
#[tokio::test]
async fn a_page_form_through_a_member_is_answered_by_the_writer() {
    let cluster = Cluster::start().await;
    let post = |caller: &Caller, title: &str| {
        let csrf = caller.csrf.clone().unwrap_or_default();
        let body =
            serde_urlencoded::to_string([("title", title), ("csrf", csrf.as_str())]).unwrap();
        let mut request = axum::http::Request::builder()
            .method("POST")
            .uri(format!("/documents/{}/rename", cluster.document))
            .header("content-type", "application/x-www-form-urlencoded");
        if let Some(cookie) = &caller.cookie {
            request = request.header("cookie", format!("fermata_session={cookie}"));
        }
        support::send(
            &cluster.a.state,
            request.body(axum::body::Body::from(body)).unwrap(),
        )
    };
    let renamed = post(&cluster.ada, "Renamed by form").await;
    assert_eq!(renamed.status, StatusCode::SEE_OTHER, "{}", renamed.body);
    let uri = format!("/api/v1/documents/{}", cluster.document);
    let read = get(&cluster.b, &cluster.ada, &uri, &[]).await;
    assert_eq!(read.json()["title"], "Renamed by form");
    // The viewer's form is refused by B, through A.
    let refused = post(&cluster.vic, "Not allowed").await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    // A page is read where it is asked for: nothing to forward.
    let before = cluster.forwarded("http", "forwarded");
    let page = get(
        &cluster.a,
        &cluster.ada,
        "/d/ada/notes/renamed-by-form",
        &[],
    )
    .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert_eq!(cluster.forwarded("http", "forwarded"), before);
}
