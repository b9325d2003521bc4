//! Research publication under faults, on SQLite and PostgreSQL: a failure injected inside the
//! publication's transaction after the child's rows were written, and a real publishing process
//! killed with SIGKILL in the middle of that transaction, both leave neither the child nor the
//! request's link; a publication that committed is returned again by every repeat, from this
//! process or another.
//!
//! The failure and the pause are triggers on `research_workspaces` that fire when the link is
//! set, which the publication does after it created the child. The same binary is the publishing
//! process when started with `--publisher`.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use fermata_store::{
    Acquisition, Channel, ChannelId, ErrorKind, Fence, JobId, JobKind, JobLink, LeaseName,
    NewChannel, NewCheckpoint, NewJob, Publication, Repository, RequestKey, ResearchDraft,
    Settlement, Storage, StoreOptions,
};
use fermata_store_sql::testing::ScratchDatabase;
use fermata_store_sql::{Database, Dialect, SqlStorage};
use sqlx::Executor;

/// The publishing process's lease lives this long, so this process takes over soon after a kill.
const LEASE_TTL: Duration = Duration::from_secs(2);
const PATIENCE: Duration = Duration::from_secs(30);
const KEY: &str = "offer-1";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--publisher") {
        publisher(&args[at + 1], &args[at + 2], &args[at + 3], &args[at + 4]);
        return;
    }
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let mut passed = 0;
    for engine in ["sqlite", "postgres"] {
        runtime.block_on(an_injected_failure_leaves_neither_half(engine));
        println!("publication with an injected failure on {engine}: ok");
        passed += 1;
        runtime.block_on(a_killed_publisher_leaves_neither_half(engine));
        println!("publication killed with SIGKILL on {engine}: ok");
        passed += 1;
    }
    println!("{passed} passed, 0 failed");
}

fn database(engine: &str, place: &str) -> Database {
    match engine {
        "sqlite" => Database::Sqlite { path: place.into() },
        _ => Database::Postgres {
            url: place.to_owned(),
        },
    }
}

fn place(scratch: &ScratchDatabase) -> String {
    match &scratch.database {
        Database::Sqlite { path } => path.display().to_string(),
        Database::Postgres { url } => url.clone(),
    }
}

async fn writer_fence(store: &dyn Storage, holder: &str, ttl: Duration) -> Fence {
    let deadline = Instant::now() + PATIENCE;
    loop {
        match store
            .leases()
            .acquire(&LeaseName::WRITER, holder, ttl)
            .await
            .expect("acquire")
        {
            Acquisition::Granted(lease) => return lease.fence(),
            Acquisition::Held(_) => {
                assert!(
                    Instant::now() < deadline,
                    "the writer lease never came free"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

fn publication(parent: &ChannelId, answer_job: &JobId) -> Publication {
    let text = "# Answer\n";
    Publication {
        parent: parent.clone(),
        key: RequestKey::new(KEY).unwrap(),
        answer_generation: 1,
        answer_job: answer_job.clone(),
        title: "Answer".to_owned(),
        checkpoint: NewCheckpoint {
            epoch: 1,
            through_sequence: 0,
            revision: 0,
            canonical_text: text.to_owned(),
            source_hash: "hash".to_owned(),
            state: text.as_bytes().to_vec(),
            sidecar: None,
        },
    }
}

/// A parent document with a staged request whose answer job completed; returns the parent and
/// the answer job.
async fn answered_request(store: &SqlStorage, fence: &Fence) -> (Channel, JobId) {
    let parent = store
        .collaboration()
        .create_channel(
            fence,
            &NewChannel {
                id: ChannelId::random(),
                repository: Repository::new("acme/app").unwrap(),
                title: "Parent".to_owned(),
                parent: None,
            },
        )
        .await
        .unwrap();
    let key = RequestKey::new(KEY).unwrap();
    store
        .research()
        .stage(
            fence,
            &ResearchDraft {
                parent: parent.id.clone(),
                key: key.clone(),
                payload: r#"{"question":"why"}"#.to_owned(),
            },
        )
        .await
        .unwrap();
    let kind = JobKind::new("research-answer@1").unwrap();
    let job = store
        .jobs()
        .enqueue(
            fence,
            &NewJob {
                id: JobId::random(),
                channel: parent.id.clone(),
                kind: kind.clone(),
                input: "{}".to_owned(),
            },
        )
        .await
        .unwrap();
    store
        .research()
        .link(fence, &parent.id, &key, JobLink::Answer, &job.id)
        .await
        .unwrap();
    let claimed = store
        .jobs()
        .claim(fence, "worker", &[kind], LEASE_TTL)
        .await
        .unwrap()
        .unwrap();
    store
        .jobs()
        .settle(
            fence,
            &claimed.claim,
            &Settlement::Complete {
                artifact: r##"{"mdx":"# Answer\n"}"##.to_owned(),
            },
        )
        .await
        .unwrap();
    (parent, job.id)
}

/// Neither the child nor the link exists.
async fn neither_half(store: &SqlStorage, parent: &Channel) {
    let child = ChannelId::for_creation_key(
        &parent.repository,
        &fermata_store::research::child_key(&parent.id, &RequestKey::new(KEY).unwrap()).unwrap(),
    );
    assert!(
        store
            .collaboration()
            .channel(&child)
            .await
            .unwrap()
            .is_none(),
        "the child exists without its link"
    );
    assert!(
        store
            .collaboration()
            .children_of(&parent.id, true)
            .await
            .unwrap()
            .is_empty()
    );
    let request = store
        .research()
        .request(&parent.id, &RequestKey::new(KEY).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(request.published_channel.is_none(), "the link exists");
}

/// Installs a trigger that, when the link is set, fails (`fail`) or pauses for long.
async fn install_trigger(store: &SqlStorage, fail: bool) {
    let pool = store.pool();
    match store.dialect() {
        Dialect::Sqlite => {
            let body = if fail {
                "SELECT RAISE(ABORT, 'injected failure');".to_owned()
            } else {
                pool.execute(
                    "CREATE TABLE IF NOT EXISTS fault_numbers (n INTEGER); \
                     INSERT INTO fault_numbers WITH RECURSIVE c(x) AS \
                         (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000) SELECT x FROM c;",
                )
                .await
                .unwrap();
                "SELECT count(*) FROM fault_numbers a, fault_numbers b, fault_numbers c;".to_owned()
            };
            pool.execute(
                format!(
                    "CREATE TRIGGER publication_fault BEFORE UPDATE OF published_channel_id \
                     ON research_workspaces WHEN NEW.published_channel_id IS NOT NULL \
                     BEGIN {body} END;"
                )
                .as_str(),
            )
            .await
            .unwrap();
        }
        Dialect::Postgres => {
            let body = if fail {
                "RAISE EXCEPTION 'injected failure';"
            } else {
                "PERFORM pg_sleep(2); RETURN NEW;"
            };
            pool.execute(
                format!(
                    "CREATE FUNCTION publication_fault() RETURNS trigger LANGUAGE plpgsql AS \
                     $$ BEGIN {body} END $$"
                )
                .as_str(),
            )
            .await
            .unwrap();
            pool.execute(
                "CREATE TRIGGER publication_fault BEFORE UPDATE OF published_channel_id \
                 ON research_workspaces FOR EACH ROW WHEN (NEW.published_channel_id IS NOT NULL) \
                 EXECUTE FUNCTION publication_fault()",
            )
            .await
            .unwrap();
        }
    }
}

async fn drop_trigger(store: &SqlStorage) {
    let pool = store.pool();
    match store.dialect() {
        Dialect::Sqlite => {
            pool.execute("DROP TRIGGER publication_fault")
                .await
                .unwrap();
        }
        Dialect::Postgres => {
            pool.execute("DROP TRIGGER publication_fault ON research_workspaces")
                .await
                .unwrap();
            pool.execute("DROP FUNCTION publication_fault()")
                .await
                .unwrap();
        }
    }
}

async fn scratch(engine: &str) -> ScratchDatabase {
    match engine {
        "sqlite" => ScratchDatabase::sqlite(),
        _ => ScratchDatabase::postgres().await,
    }
}

async fn an_injected_failure_leaves_neither_half(engine: &str) {
    let scratch = scratch(engine).await;
    let database = scratch.database.clone();
    let store = scratch.open(StoreOptions::default()).await;
    let sql = &store.storage;
    let fence = writer_fence(sql, "publisher", PATIENCE).await;
    let (parent, answer) = answered_request(sql, &fence).await;
    install_trigger(sql, true).await;
    let failed = sql
        .research()
        .publish(&fence, &publication(&parent.id, &answer))
        .await
        .unwrap_err();
    assert_ne!(failed.kind(), ErrorKind::Fenced);
    assert!(!failed.message().contains("injected"), "{failed}");
    neither_half(sql, &parent).await;
    drop_trigger(sql).await;
    let child = sql
        .research()
        .publish(&fence, &publication(&parent.id, &answer))
        .await
        .unwrap();
    assert_eq!(child.parent.as_ref(), Some(&parent.id));
    // After the commit, a repeat from another connection set returns the same child.
    let other = SqlStorage::connect(&database, StoreOptions::default())
        .await
        .unwrap();
    let again = other
        .research()
        .publish(&fence, &publication(&parent.id, &answer))
        .await
        .unwrap();
    assert_eq!(again, child);
    other.close().await;
}

/// A publishing process and its output.
struct Publisher {
    child: Child,
    lines: BufReader<ChildStdout>,
}

impl Publisher {
    fn spawn(engine: &str, place: &str, parent: &ChannelId, answer: &JobId) -> Self {
        let mut child = Command::new(std::env::current_exe().expect("this test binary"))
            .args(["--publisher", engine, place, &parent.0, &answer.0])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the publishing process");
        let lines = BufReader::new(child.stdout.take().expect("piped stdout"));
        Publisher { child, lines }
    }

    /// Waits for a line starting with `start`, and returns it.
    fn expect_line(&mut self, start: &str) -> String {
        let mut got = String::new();
        self.lines.read_line(&mut got).expect("read the publisher");
        assert!(got.starts_with(start), "expected {start:?}, got {got:?}");
        got.trim_end().to_owned()
    }
}

/// Whether the publishing process's transaction is inside the pausing trigger (PostgreSQL), or
/// has had time to reach it (SQLite, whose trigger runs for minutes).
async fn paused_in_the_trigger(store: &SqlStorage) -> bool {
    match store.dialect() {
        Dialect::Sqlite => {
            tokio::time::sleep(Duration::from_millis(500)).await;
            true
        }
        Dialect::Postgres => {
            let sleeping: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'",
            )
            .fetch_one(store.pool())
            .await
            .unwrap();
            sleeping > 0
        }
    }
}

async fn a_killed_publisher_leaves_neither_half(engine: &str) {
    let scratch = scratch(engine).await;
    let place = place(&scratch);
    let store = scratch.open(StoreOptions::default()).await;
    let sql = &store.storage;
    let fence = writer_fence(sql, "setup", LEASE_TTL).await;
    let (parent, answer) = answered_request(sql, &fence).await;
    install_trigger(sql, false).await;
    let lease = sql
        .leases()
        .peek(&LeaseName::WRITER)
        .await
        .unwrap()
        .record
        .unwrap();
    sql.leases()
        .release(&fermata_store::Lease {
            name: lease.name,
            token: lease.token,
            holder: lease.holder,
            expires_at: lease.expires_at,
        })
        .await
        .unwrap();

    let mut publisher = Publisher::spawn(engine, &place, &parent.id, &answer);
    publisher.expect_line("publishing");
    let deadline = Instant::now() + PATIENCE;
    while !paused_in_the_trigger(sql).await {
        assert!(
            Instant::now() < deadline,
            "the publisher never reached the trigger"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    publisher.child.kill().expect("SIGKILL the publisher");
    publisher.child.wait().expect("reap the publisher");
    if engine == "postgres" {
        // The server ends the dead client's transaction once its pause is over.
        let deadline = Instant::now() + PATIENCE;
        while paused_in_the_trigger(sql).await {
            assert!(
                Instant::now() < deadline,
                "the dead publisher's transaction stayed"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    neither_half(sql, &parent).await;
    drop_trigger(sql).await;

    // A publisher that runs to its commit, then a repeat here, return the same child.
    let mut publisher = Publisher::spawn(engine, &place, &parent.id, &answer);
    publisher.expect_line("publishing");
    let published = publisher.expect_line("published ");
    assert!(
        publisher
            .child
            .wait()
            .expect("the publisher ends")
            .success()
    );
    let fence = writer_fence(sql, "after", LEASE_TTL).await;
    let again = sql
        .research()
        .publish(&fence, &publication(&parent.id, &answer))
        .await
        .unwrap();
    assert_eq!(published, format!("published {}", again.id));
    assert_eq!(again.parent.as_ref(), Some(&parent.id));
}

/// The publishing process: takes the writer lease once it is free, says so, and publishes.
fn publisher(engine: &str, place: &str, parent: &str, answer: &str) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let store = SqlStorage::connect(&database(engine, place), StoreOptions::default())
            .await
            .expect("connect");
        let fence = writer_fence(&store, "publisher", LEASE_TTL).await;
        println!("publishing");
        let child = store
            .research()
            .publish(
                &fence,
                &publication(&ChannelId(parent.to_owned()), &JobId(answer.to_owned())),
            )
            .await
            .expect("publish");
        println!("published {}", child.id);
    });
}
