//! The stop keeps its budget, with the real binary on SQLite and on PostgreSQL: SIGTERM reaches a
//! process whose room is busy (two Yjs clients typing over `/sync`), whose sweeps run, and whose
//! worker is inside a workflow step (an inventory connected to a source that never answers),
//! while a fenced write holds the database's write locks, so every other write of the room, the
//! sweeps and the worker waits behind it. The process exits within `drain_timeout` and a stated
//! allowance, releases its lease, and every update a client saw acknowledged is kept.

use crate::support;

use std::io::Write as _;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::json;
use support::{
    PATIENCE, Target, Typist, add_user, create_document, request, session_headers, text_of,
    typed_lines, wait_for_file,
};
use tokio::time::Instant;

/// The writer lease timings of this test: a drain of a second, long enough that parts drained
/// one after another would be seen to overrun it.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(1);
const LEASE: &str = "[writer_lease]\n\
    ttl = \"5s\"\nrenew_every = \"1s\"\nattempt_timeout = \"400ms\"\n\
    abandon_after = \"500ms\"\nsafety_deadline = \"3s\"\ndrain_timeout = \"1s\"\n";

/// What the stop may take beyond the drain: stopping the lease keeper (a renewal in flight ends
/// within `abandon_after`), closing the tenure, releasing the lease and exiting, seen by a test
/// that polls the process on a machine busy with other tests.
const STOP_ALLOWANCE: Duration = Duration::from_secs(1);

/// A source server that accepts connections and never answers: a step connected to it waits
/// (for its connect timeout) with nothing to show. Each accepted connection is reported.
fn silent_source() -> (u16, mpsc::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (accepted, connections) = mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().map_while(Result::ok) {
            held.push(stream);
            if accepted.send(()).is_err() {
                return;
            }
        }
    });
    (port, connections)
}

/// Writes this test's configuration: its lease timings and a source at `port`.
fn configure(target: &Target, port: u16) {
    let password_file = target.config().with_file_name("source-password");
    std::fs::write(&password_file, "a password nobody checks\n").unwrap();
    std::fs::set_permissions(&password_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut config = std::fs::File::create(target.config()).unwrap();
    write!(
        config,
        "{LEASE}\n[schema.source]\nhost = \"127.0.0.1\"\nport = {port}\nuser = \"snapshot\"\n\
         password_file = \"{}\"\ntls = \"disabled\"\n",
        password_file.display()
    )
    .unwrap();
}

/// Waits until the stored text holds lines from both typists, so the room commits both.
async fn wait_for_both(address: std::net::SocketAddr, token: &str, document: &str) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let text = text_of(address, token, document);
        if typed_lines(&text, "a-").len() >= 3 && typed_lines(&text, "b-").len() >= 3 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the typing never arrived: {text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn the_stop_keeps_its_budget_under_load(target: Target) {
    let (port, connections) = silent_source();
    configure(&target, port);
    add_user(&target, "ada", true);
    let (status, token, err) = target.run_with_input(&["token", "create", "--user", "ada"], "");
    assert!(status.success(), "{err}");
    let token = token.trim().to_owned();
    let marker = target.data_dir().join("pause-fenced-writes");
    let entered = target.data_dir().join("pause-fenced-writes.entered");
    let mut server = target.serve_with_env(
        &[],
        &[
            ("FERMATA_TEST_PAUSE_FENCED_WRITES", marker.as_os_str()),
            ("FERMATA_TEST_SWEEP_EVERY", "50ms".as_ref()),
        ],
    );
    server.wait_ready().await;
    let address = server.address().await;
    let bearer = format!("Bearer {token}");
    let created = create_document(address, &[("Authorization", &bearer)], "ada/app", "Busy");
    assert_eq!(created.status, 201, "{}", created.body);
    let document = created.json()["id"].as_str().unwrap().to_owned();

    // A busy room: two clients typing a line every 50 ms each.
    let a = Typist::spawn(address, &document, &token, "a-", 60_000);
    let b = Typist::spawn(address, &document, &token, "b-", 60_000);
    let (mut seen_a, mut seen_b) = (Vec::new(), Vec::new());
    a.event("synced", &mut seen_a);
    b.event("synced", &mut seen_b);
    wait_for_both(address, &token, &document).await;

    // A workflow step in flight: an inventory whose source accepted its connection and never
    // answers.
    let login = request(
        address,
        "POST",
        "/api/v1/session",
        &[],
        Some(&json!({"name": "ada", "password": support::USER_PASSWORD})),
    );
    assert_eq!(login.status, 200, "{}", login.body);
    let cookie = login.cookie("fermata_session").unwrap();
    let csrf = login.json()["csrf_token"].as_str().unwrap().to_owned();
    let [c, x] = session_headers(&cookie, &csrf);
    let inventory = request(
        address,
        "POST",
        "/api/v1/schema/inventory",
        &[(c.0, c.1.as_str()), (x.0, x.1.as_str())],
        Some(&json!({"request_key": "stop-under-load"})),
    );
    assert_eq!(inventory.status, 202, "{}", inventory.body);
    connections
        .recv_timeout(PATIENCE)
        .expect("the inventory never connected to its source");

    // The next fenced write (a commit of the room or a sweep, both running every 50 ms) holds
    // the database's write locks from now on, and everything else that writes waits behind it.
    std::fs::write(&marker, b"").unwrap();
    wait_for_file(&entered).await;

    let asked = Instant::now();
    server.terminate();
    let deadline = asked + PATIENCE;
    while server.is_running() {
        assert!(
            Instant::now() < deadline,
            "did not exit:\n{}",
            server.output()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = asked.elapsed();
    let status = server.wait_exit().await;
    let output = server.output();
    assert_eq!(status.code(), Some(0), "{output}");
    assert!(
        took <= DRAIN_TIMEOUT + STOP_ALLOWANCE,
        "the stop took {took:?}; the drain timeout is {DRAIN_TIMEOUT:?} \
         (+{STOP_ALLOWANCE:?} to close):\n{output}"
    );
    // What missed the deadline was abandoned, and the lease was still released.
    assert!(
        output.contains("after the drain timeout were abandoned")
            || output.contains("after the drain timeout was cut off"),
        "{output}"
    );
    assert!(
        output.contains("released the writer lease; stopped"),
        "{output}"
    );
    eprintln!("the stop took {took:?}");

    // Every line one client saw from the other was acknowledged (a room broadcasts only what
    // was committed), so a fresh start serves it.
    let done_a = a.event("done", &mut seen_a);
    let done_b = b.event("done", &mut seen_b);
    let acknowledged_a = typed_lines(done_b["text"].as_str().unwrap(), "a-");
    let acknowledged_b = typed_lines(done_a["text"].as_str().unwrap(), "b-");
    assert!(
        !acknowledged_a.is_empty() && !acknowledged_b.is_empty(),
        "{done_a} {done_b}"
    );
    let restarted = target.serve(&[]);
    restarted.wait_ready().await;
    let stored = text_of(restarted.address().await, &token, &document);
    let (stored_a, stored_b) = (typed_lines(&stored, "a-"), typed_lines(&stored, "b-"));
    for line in &acknowledged_a {
        assert!(
            stored_a.contains(line),
            "a-{line} was acknowledged and lost"
        );
    }
    for line in &acknowledged_b {
        assert!(
            stored_b.contains(line),
            "b-{line} was acknowledged and lost"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_the_stop_keeps_its_budget_under_load() {
    the_stop_keeps_its_budget_under_load(Target::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_the_stop_keeps_its_budget_under_load() {
    the_stop_keeps_its_budget_under_load(Target::postgres().await).await;
}
