//! Crash safety with a real process, on SQLite and PostgreSQL: a writer process commits a stream
//! of Yjs updates (each with a sidecar that counts them) and reports every acknowledged revision;
//! it is killed with SIGKILL at a random moment; recovery must then hold every acknowledged update,
//! and either all or nothing of the one in flight: never a partial commit.
//!
//! The same binary is the writer when started with `--writer`, so no other program is needed.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use fermata_docs::{Sidecar, SourceDoc, recover};
use fermata_store::{
    Acquisition, ChannelId, Commit, LeaseName, NewChannel, OperationId, Repository, Storage,
    StoreOptions,
};
use fermata_store_sql::testing::ScratchDatabase;
use fermata_store_sql::{Database, SqlStorage};
use rand::Rng;

/// Kills per engine.
const ROUNDS: usize = 4;
/// The writer's lease lives this long, so the next writer takes over soon after a kill.
const LEASE_TTL: Duration = Duration::from_secs(3);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--writer") {
        writer(&args[at + 1], &args[at + 2], &args[at + 3]);
        return;
    }
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let mut passed = 0;
    for engine in ["sqlite", "postgres"] {
        runtime.block_on(crash_rounds(engine));
        println!("crash safety on {engine}: {ROUNDS} kills survived");
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

/// The writer process: takes the writer lease once it is free, then commits forever.
fn writer(engine: &str, place: &str, channel: &str) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let store = SqlStorage::connect(&database(engine, place), StoreOptions::default())
            .await
            .expect("connect");
        let fence = loop {
            match store
                .leases()
                .acquire(&LeaseName::WRITER, "crash writer", LEASE_TTL)
                .await
                .expect("acquire")
            {
                Acquisition::Granted(lease) => break lease.fence(),
                Acquisition::Held(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        let id = ChannelId(channel.to_owned());
        let collaboration = store.collaboration();
        let mut open = recover(
            &collaboration
                .recovery_snapshot(&id)
                .await
                .expect("snapshot"),
        )
        .expect("recover");
        let mut out = std::io::stdout().lock();
        loop {
            let next = open.revision + 1;
            let update = open
                .doc
                .insert(open.doc.len(), &format!("line {next}\n"))
                .expect("insert");
            open.sidecar.document_sequence = u64::try_from(next).expect("positive");
            writeln!(out, "SEND {next} {}", STANDARD.encode(&update)).expect("stdout");
            out.flush().expect("stdout");
            let commit = Commit {
                channel: id.clone(),
                operation: OperationId::new(format!("crash-{next}-{}", std::process::id()))
                    .expect("id"),
                expected_revision: open.revision,
                update: Some(update),
                sidecar: Some(open.sidecar.to_state()),
                events: Vec::new(),
                title: None,
                text: None,
            };
            let committed = collaboration.commit(&fence, &commit).await.expect("commit");
            open.revision = committed.revision;
            open.sequence = committed.sequence;
            writeln!(out, "ACK {}", committed.revision).expect("stdout");
            out.flush().expect("stdout");
            if committed.revision % 20 == 0 {
                collaboration
                    .save_checkpoint(&fence, &id, &open.checkpoint())
                    .await
                    .expect("checkpoint");
            }
        }
    });
}

async fn crash_rounds(engine: &str) {
    let scratch = match engine {
        "sqlite" => ScratchDatabase::sqlite(),
        _ => ScratchDatabase::postgres().await,
    };
    let place = match &scratch.database {
        Database::Sqlite { path } => path.display().to_string(),
        Database::Postgres { url } => url.clone(),
    };
    let store = scratch.open(StoreOptions::default()).await;
    let channel = {
        let lease = match store
            .leases()
            .acquire(&LeaseName::WRITER, "setup", LEASE_TTL)
            .await
            .unwrap()
        {
            Acquisition::Granted(lease) => lease,
            Acquisition::Held(record) => panic!("held by {record:?}"),
        };
        let channel = store
            .collaboration()
            .create_channel(
                &lease.fence(),
                &NewChannel {
                    id: ChannelId::random(),
                    repository: Repository::new("acme/crash").unwrap(),
                    title: "Crash".to_owned(),
                    parent: None,
                },
            )
            .await
            .unwrap();
        store.leases().release(&lease).await.unwrap();
        channel
    };

    // Every update any writer sent, by the revision it would get, and what recovery must show.
    let mut sent: Vec<(i64, Vec<u8>)> = Vec::new();
    let mut durable = 0;
    for round in 0..ROUNDS {
        let kill_after = rand::thread_rng().gen_range(3..60);
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--writer", engine, &place, &channel.id.0])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let (lines, received) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let mut acked = durable;
        let mut transcript = Vec::new();
        while acked < durable + kill_after {
            let line = received
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("{engine} round {round}: the writer went quiet"));
            transcript.push(line.clone());
            if let Some(ack) = line.strip_prefix("ACK ") {
                acked = ack.parse().unwrap();
            }
        }
        // Let it get into its next commit, then kill it without warning: the pause is the point,
        // a random moment inside the writer's next commit, not a wait for a condition.
        #[expect(
            clippy::disallowed_methods,
            reason = "a random kill moment, not a wait"
        )]
        std::thread::sleep(Duration::from_micros(rand::thread_rng().gen_range(0..3000)));
        child.kill().unwrap();
        child.wait().unwrap();
        reader.join().unwrap();
        transcript.extend(received.try_iter());
        for line in &transcript {
            if let Some(rest) = line.strip_prefix("SEND ") {
                let (revision, update) = rest.split_once(' ').unwrap();
                sent.push((revision.parse().unwrap(), STANDARD.decode(update).unwrap()));
            } else if let Some(ack) = line.strip_prefix("ACK ") {
                acked = acked.max(ack.parse().unwrap());
            }
        }

        let snapshot = store
            .collaboration()
            .recovery_snapshot(&channel.id)
            .await
            .unwrap();
        let open = recover(&snapshot).unwrap_or_else(|e| panic!("{engine} round {round}: {e}"));
        let in_flight = sent.iter().any(|(revision, _)| *revision == acked + 1);
        assert!(
            open.revision == acked || (in_flight && open.revision == acked + 1),
            "{engine} round {round}: recovered revision {} but {acked} were acknowledged",
            open.revision
        );
        // The committed updates are exactly those sent up to the recovered revision; the one in
        // flight beyond it never happened.
        sent.retain(|(revision, _)| *revision <= open.revision);
        let mut model = SourceDoc::new();
        for (_, update) in &sent {
            model.apply_update(update).unwrap();
        }
        assert_eq!(
            open.doc.text(),
            model.text(),
            "{engine} round {round}: recovered text differs"
        );
        let expected = Sidecar {
            document_sequence: u64::try_from(open.revision).unwrap(),
            ..open.sidecar.clone()
        };
        assert_eq!(
            open.sidecar, expected,
            "{engine} round {round}: the sidecar and the update parted"
        );
        durable = open.revision;
    }
    assert!(durable >= i64::try_from(ROUNDS * 3).unwrap());
}
