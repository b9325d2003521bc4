//! Benchmark: a snapshot (introspection plus canonical rendering) of a generated database of many
//! tables, and a refresh of that database as a user runs it with the real `fermata` binary,
//! each against `mariadb-dump --no-data --routines --triggers --events --skip-lock-tables` (how a
//! schema-only dump runs against a live server) of the same database, in the same run, on the
//! MariaDB server `scripts/bench` provisions (`FERMATA_TEST_MYSQL_URL`).
//!
//! The database has `FERMATA_BENCH_TABLES` tables (default 2000), each with six columns of
//! mixed types, a primary key, a unique key, a two-column key with a prefix, a comment and a
//! foreign key to the table before it; a view joining two tables for every 20 tables, a trigger
//! for every 10 tables and a stored procedure for every 20 tables.
//!
//! Each of the three runs `FERMATA_BENCH_ROUNDS` times (default 3), interleaved, and the median
//! wall time is reported with the ratio, and the spread of the rounds' own ratios. Statements are
//! the server's global `Questions` counter before and after each run (it counts each statement of
//! a request that carries several), divided by the number of objects; the snapshot also opens its
//! connections (8, prepared once) inside the timed region, as a refresh does.
//!
//! The refresh: every round makes a fresh data folder (an embedded SQLite database) with an
//! administrator, an empty package (a local git repository) and an inventory, untimed; then
//! `fermata schema refresh --inventory ID DATABASE` is timed from its start to its exit at
//! `awaiting_review` (the snapshot, its verification over new connections, the candidate staged,
//! the review artifact sealed), and `fermata schema approve`, which publishes the pull request,
//! is timed apart. The refresh's peak resident memory is watched as it runs, and it runs with
//! `-v`, so that the phases of its database step (the snapshot, the candidate written, the
//! verifier's pass, the notes and staging) are printed from its log.
//!
//! Last, the scale step: the database is made again with `FERMATA_BENCH_SCALE_TABLES` tables
//! (default 20,000; 0 leaves the step out) and refreshed as many rounds, each from a fresh data
//! folder, the median wall time and peak memory set against the median refresh of the first
//! database (with the spread of the rounds), with linear growth as the goal.

#[path = "../tests/it/support/mod.rs"]
mod support;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fermata_schema::DatabaseName;
use fermata_schema::snapshot::{prepare, snapshot};
use fermata_store_sql::testing::bench::Figure;
use serde_json::Value;
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection};
use sqlx::{ConnectOptions, Executor, Row};
use support::{Target, USER_PASSWORD, add_source, add_user, configure, empty_package};

const DATABASE: &str = "fermata_bench_snapshot";
/// The tables of the scale step (`FERMATA_BENCH_SCALE_TABLES`, 0 to leave it out): ten times
/// the default database.
const SCALE_TABLES: usize = 20_000;
const CONNECTIONS: usize = 8;
/// The password of the account `scripts/bench` provisions on its MariaDB.
const MYSQL_PASSWORD: &str = "fermata";
/// What `mariadb-dump` is asked for: the schema only, without locking, as a refresh reads.
const DUMP: &str = "mariadb-dump --no-data --routines --triggers --events --skip-lock-tables";

fn setting(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

async fn connect(options: &MySqlConnectOptions) -> MySqlConnection {
    options
        .connect()
        .await
        .expect("the benchmark's MariaDB answers")
}

async fn questions(admin: &mut MySqlConnection) -> u64 {
    let row = sqlx::query("SHOW GLOBAL STATUS LIKE 'Questions'")
        .fetch_one(&mut *admin)
        .await
        .unwrap();
    let value: String = row.try_get(1).unwrap();
    value.parse().unwrap()
}

/// Creates the database and returns its number of objects.
async fn create(admin: &mut MySqlConnection, tables: usize) -> usize {
    admin
        .execute(format!("DROP DATABASE IF EXISTS {DATABASE}").as_str())
        .await
        .unwrap();
    admin
        .execute(format!("CREATE DATABASE {DATABASE} CHARACTER SET utf8mb4").as_str())
        .await
        .unwrap();
    admin
        .execute(format!("USE {DATABASE}").as_str())
        .await
        .unwrap();
    admin.execute("SET foreign_key_checks = 0").await.unwrap();
    for i in 0..tables {
        let parent = if i == 0 {
            String::new()
        } else {
            format!(
                ", CONSTRAINT fk_{i} FOREIGN KEY (parent_id) REFERENCES t{} (id) ON DELETE CASCADE",
                i - 1
            )
        };
        admin
            .execute(
                format!(
                    "CREATE TABLE t{i} (id bigint unsigned NOT NULL AUTO_INCREMENT, \
                     parent_id bigint unsigned, code varchar(64) NOT NULL, \
                     amount decimal(12,2) NOT NULL DEFAULT 0.00, note text, \
                     created timestamp NOT NULL DEFAULT current_timestamp(), \
                     PRIMARY KEY (id), UNIQUE KEY code_{i} (code), \
                     KEY pair_{i} (parent_id, code(16)){parent}) \
                     ENGINE=InnoDB COMMENT='table {i}'"
                )
                .as_str(),
            )
            .await
            .unwrap();
    }
    let mut objects = tables;
    for i in (0..tables).step_by(20) {
        let other = (i + 1).min(tables - 1);
        let statements = [
            format!(
                "CREATE VIEW v{i} AS SELECT a.id, a.code, b.amount FROM t{i} a \
                 JOIN t{other} b ON b.parent_id = a.id WHERE a.amount > 0"
            ),
            format!(
                "CREATE PROCEDURE p{i}(IN wanted varchar(64), OUT found bigint) READS SQL DATA \
                 BEGIN SELECT id INTO found FROM t{i} WHERE code = wanted; END"
            ),
        ];
        for statement in statements {
            admin.execute(statement.as_str()).await.unwrap();
            objects += 1;
        }
    }
    for i in (0..tables).step_by(10) {
        admin
            .execute(
                format!(
                    "CREATE TRIGGER tr{i} BEFORE INSERT ON t{i} FOR EACH ROW \
                     SET NEW.code = upper(NEW.code)"
                )
                .as_str(),
            )
            .await
            .unwrap();
        objects += 1;
    }
    objects
}

/// `fermata WORDS... --json` on `target`, with `input` on its standard input: the JSON it printed,
/// once it succeeded.
fn fermata_json(target: &Target, words: &[&str], input: &str) -> Value {
    let mut words = words.to_vec();
    words.push("--json");
    let (status, out, err) = target.run_with_input(&words, input);
    assert!(status.success(), "fermata {words:?} failed: {out}{err}");
    serde_json::from_str(&out).expect("fermata prints JSON")
}

/// A data folder with an administrator, the benchmark's MariaDB as its source, an empty package
/// and an inventory (the refresh's ID).
fn refresh_target(options: &MySqlConnectOptions) -> (Target, String) {
    let target = Target::sqlite();
    add_source(
        &target,
        options.get_host(),
        options.get_port(),
        options.get_username(),
        MYSQL_PASSWORD,
    );
    let package = empty_package(&target.config().with_file_name("package"));
    configure(
        &target,
        &format!(
            "\n[schema.package]\nrepository = {}\n",
            Value::from(package.display().to_string())
        ),
    );
    add_user(&target, "ada", true);
    let inventory = fermata_json(&target, &["schema", "inventory", "--as", "ada"], "");
    let id = inventory["inventory"]["id"].as_str().unwrap().to_owned();
    (target, id)
}

/// The words of `fermata schema refresh` of the database to its review, as ada.
fn refresh_words(inventory: &str) -> [&str; 7] {
    [
        "schema",
        "refresh",
        "--inventory",
        inventory,
        DATABASE,
        "--as",
        "ada",
    ]
}

/// `fermata schema approve` of the refresh that answered `refreshed`, which publishes it: its
/// wall time.
fn approve(target: &Target, refreshed: &Value) -> Duration {
    let operation = refreshed["id"].as_str().unwrap();
    let start = Instant::now();
    let approved = fermata_json(
        target,
        &["schema", "approve", operation, "--as", "ada"],
        &format!("{USER_PASSWORD}\n"),
    );
    let approve = start.elapsed();
    assert_eq!(approved["state"], "succeeded", "{approved}");
    approve
}

/// A refresh as the benchmark watched it.
struct Watched {
    elapsed: Duration,
    /// The peak resident memory in MiB.
    peak_mib: f64,
    /// What the command printed.
    refreshed: Value,
    /// Where its database step's time went, from its log ([`phases`]).
    phases: String,
}

/// `fermata schema refresh` of the database to its review, watched: its wall time and its peak
/// resident memory (the kernel's high-water mark, `VmHWM`, read every 10 ms while it runs),
/// what it printed, and the phases of its database step, which it logs at `-v`.
async fn watched_refresh(target: &Target, inventory: &str) -> Watched {
    let mut words = refresh_words(inventory).to_vec();
    words.extend(["--json", "-v"]);
    let start = Instant::now();
    let mut child = target
        .command_words(&words)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fermata runs");
    let (mut stdout, mut stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        stdout.read_to_string(&mut text).map(|_| text)
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).map(|_| text)
    });
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0_u64;
    let status = loop {
        if let Some(kib) = std::fs::read_to_string(&status_file)
            .ok()
            .and_then(|status| high_water_kib(&status))
        {
            peak_kib = peak_kib.max(kib);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let elapsed = start.elapsed();
    let (out, err) = (out.join().unwrap().unwrap(), err.join().unwrap().unwrap());
    assert!(status.success(), "fermata {words:?} failed: {out}{err}");
    let refreshed: Value = serde_json::from_str(&out).expect("fermata prints JSON");
    assert_eq!(refreshed["state"], "awaiting_review", "{refreshed}");
    #[allow(clippy::cast_precision_loss)]
    Watched {
        elapsed,
        peak_mib: peak_kib as f64 / 1024.0,
        refreshed,
        phases: phases(&err),
    }
}

/// The phases of a refresh's database step, from the fields of its `database snapshotted` log
/// line: the snapshot, writing the candidate, the verifier's second pass, the review notes and the
/// candidate's sealing (which run beside the verifier's pass), and what follows the pass (the
/// staging, and the database's result recorded).
fn phases(log: &str) -> String {
    let Some(line) = log
        .lines()
        .find(|line| line.contains("database snapshotted"))
    else {
        return "its database step logged no phases".to_owned();
    };
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|word| word.strip_prefix(&format!("{name}=")))
            .unwrap_or("?")
            .to_owned()
    };
    format!(
        "snapshot {} ms, candidate written {} ms, verified {} ms (the review prepared beside it in \
         {} ms), staging {} ms",
        field("snapshot_ms"),
        field("written_ms"),
        field("verified_ms"),
        field("review_ms"),
        field("staged_ms")
    )
}

/// The `VmHWM` line of a `/proc/PID/status`, in KiB.
fn high_water_kib(status: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn median<T: Copy + PartialOrd>(mut samples: Vec<T>) -> T {
    samples.sort_by(|a, b| a.partial_cmp(b).expect("samples are numbers"));
    samples[samples.len() / 2]
}

#[tokio::main]
async fn main() {
    let url = std::env::var("FERMATA_TEST_MYSQL_URL")
        .expect("FERMATA_TEST_MYSQL_URL is not set: run scripts/bench");
    let options: MySqlConnectOptions = url.parse().unwrap();
    let tables = setting("FERMATA_BENCH_TABLES", 2000);
    let rounds = setting("FERMATA_BENCH_ROUNDS", 3);
    let mut admin = connect(&options).await;
    let started = Instant::now();
    let objects = create(&mut admin, tables).await;
    println!(
        "snapshot: created {tables} tables and {} views, routines and triggers in {:.1?}",
        objects - tables,
        started.elapsed()
    );
    let name = DatabaseName::new(DATABASE).unwrap();

    let (mut ours, mut refreshes, mut approvals, mut dumps) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut refresh_peaks = Vec::new();
    // Each round's own ratios to its dump: the snapshot, the refresh, the refresh and approval.
    let mut round_ratios: [Vec<f64>; 3] = Default::default();
    let (mut our_questions, mut refresh_questions, mut dump_questions) = (0, 0, 0);
    let mut snapshot_hash = String::new();
    for _ in 0..rounds {
        let before = questions(&mut admin).await;
        let start = Instant::now();
        let mut connections = Vec::with_capacity(CONNECTIONS);
        for _ in 0..CONNECTIONS {
            let mut connection = connect(&options).await;
            prepare(&mut connection).await.unwrap();
            connections.push(connection);
        }
        let taken = snapshot(&mut connections, &name, "bench").await.unwrap();
        ours.push(start.elapsed());
        our_questions = questions(&mut admin).await - before - 1;
        drop(connections);
        assert_eq!(taken.model.tables.len(), tables);
        let model = &taken.model;
        assert_eq!(
            model.tables.len() + model.views.len() + model.routines.len() + model.triggers.len(),
            objects
        );
        snapshot_hash = taken.snapshot_hash;

        let (target, inventory) = refresh_target(&options);
        let before = questions(&mut admin).await;
        let Watched {
            elapsed: refresh_time,
            peak_mib: peak,
            refreshed,
            phases,
        } = watched_refresh(&target, &inventory).await;
        println!("snapshot: refresh {}: {phases}", refreshes.len() + 1);
        let approve_time = approve(&target, &refreshed);
        refresh_peaks.push(peak);
        refreshes.push(refresh_time);
        approvals.push(refresh_time + approve_time);
        refresh_questions = questions(&mut admin).await - before - 1;
        drop(target);

        let before = questions(&mut admin).await;
        let start = Instant::now();
        let output = Command::new("mariadb-dump")
            .args([
                "--no-defaults",
                "--no-data",
                "--routines",
                "--triggers",
                "--events",
                "--skip-lock-tables",
            ])
            .arg(format!("--host={}", options.get_host()))
            .arg(format!("--port={}", options.get_port()))
            .arg(format!("--user={}", options.get_username()))
            .arg(format!("--password={MYSQL_PASSWORD}"))
            .arg(DATABASE)
            .output()
            .expect("mariadb-dump runs");
        let dump = start.elapsed();
        dumps.push(dump);
        assert!(output.status.success(), "mariadb-dump failed");
        for (ratios, times) in round_ratios.iter_mut().zip([&ours, &refreshes, &approvals]) {
            let this_round = times.last().expect("this round's time");
            ratios.push(this_round.as_secs_f64() / dump.as_secs_f64());
        }
        dump_questions = questions(&mut admin).await - before - 1;
    }
    let (ours, refreshes, approvals, dumps) = (
        median(ours),
        median(refreshes),
        median(approvals),
        median(dumps),
    );
    let ms = |duration: Duration| duration.as_secs_f64() * 1000.0;
    let ratio = |duration: Duration| duration.as_secs_f64() / dumps.as_secs_f64();
    println!(
        "snapshot: {objects} objects ({tables} tables), median of {rounds}: snapshot {:.0} ms ({:.2}x), \
         refresh {:.0} ms ({:.2}x), refresh then approval and publication {:.0} ms ({:.2}x), \
         mariadb-dump {:.0} ms",
        ms(ours),
        ratio(ours),
        ms(refreshes),
        ratio(refreshes),
        ms(approvals),
        ratio(approvals),
        ms(dumps),
    );
    let figures = [
        (
            "snapshot of 2,000 tables (8 connections), median",
            ours,
            None,
        ),
        (
            "refresh of 2,000 tables end to end (`fermata schema refresh` to its review), median",
            refreshes,
            Some("<= 0.25"),
        ),
        (
            "refresh, then `fermata schema approve` publishing it, median",
            approvals,
            None,
        ),
    ];
    for ((figure, measured, goal), ratios) in figures.into_iter().zip(&round_ratios) {
        Figure {
            group: "snapshot/mariadb".to_owned(),
            name: figure,
            unit: "ms",
            measured: ms(measured),
            floor: ms(dumps),
            floor_name: DUMP,
            goal,
        }
        .record_over_rounds(ratios);
    }
    #[allow(clippy::cast_precision_loss)]
    let per_object = |questions: u64| questions as f64 / objects as f64;
    println!(
        "snapshot: statements: snapshot {our_questions} ({:.2} per object), refresh \
         {refresh_questions} ({:.2} per object), mariadb-dump {dump_questions} ({:.2} per object); \
         snapshot hash {snapshot_hash}",
        per_object(our_questions),
        per_object(refresh_questions),
        per_object(dump_questions)
    );
    refresh_peaks.sort_by(f64::total_cmp);
    let smaller = Scale {
        tables,
        refresh: refreshes,
        peak_mib: refresh_peaks[refresh_peaks.len() / 2],
    };
    let scale_tables = setting("FERMATA_BENCH_SCALE_TABLES", SCALE_TABLES);
    if scale_tables > 0 {
        scale(&mut admin, &options, scale_tables, rounds, &smaller).await;
    }
    admin
        .execute(format!("DROP DATABASE {DATABASE}").as_str())
        .await
        .unwrap();
}

/// What a refresh of a database of `tables` tables took: its wall time and peak memory.
struct Scale {
    tables: usize,
    refresh: Duration,
    peak_mib: f64,
}

/// The scale step: a database of `tables` tables made in place of the first, refreshed `rounds`
/// times (each from a fresh data folder), its median wall time and peak memory recorded against
/// `smaller`'s with the spread of the rounds (linear growth is the goal).
async fn scale(
    admin: &mut MySqlConnection,
    options: &MySqlConnectOptions,
    tables: usize,
    rounds: usize,
    smaller: &Scale,
) {
    let started = Instant::now();
    create(admin, tables).await;
    println!(
        "snapshot: scale: created {tables} tables and their views, routines and triggers in \
         {:.1?}",
        started.elapsed()
    );
    let (mut times, mut peaks) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        let (target, inventory) = refresh_target(options);
        let Watched {
            elapsed,
            peak_mib,
            phases,
            ..
        } = watched_refresh(&target, &inventory).await;
        println!(
            "snapshot: scale: refresh {round} of {tables} tables: {:.0} ms, peak memory \
             {peak_mib:.0} MiB; {phases}",
            elapsed.as_secs_f64() * 1000.0
        );
        times.push(elapsed.as_secs_f64() * 1000.0);
        peaks.push(peak_mib);
    }
    let (refresh, peak_mib) = (median(times.clone()), median(peaks.clone()));
    let smaller_ms = smaller.refresh.as_secs_f64() * 1000.0;
    #[allow(clippy::cast_precision_loss)]
    let growth = tables as f64 / smaller.tables as f64;
    println!(
        "snapshot: scale: refresh of {tables} tables, median of {rounds}: {refresh:.0} ms, peak \
         memory {peak_mib:.0} MiB; of {} tables {smaller_ms:.0} ms, {:.0} MiB ({growth:.0}x the \
         tables: {:.2}x the time, {:.2}x the memory)",
        smaller.tables,
        smaller.peak_mib,
        refresh / smaller_ms,
        peak_mib / smaller.peak_mib,
    );
    // Linear, with a margin of 5% of the growth.
    let goal = format!("<= {:.2}", growth * 1.05);
    for (figure, unit, measured, floor, floor_name, samples) in [
        (
            format!("refresh of {tables} tables end to end"),
            "ms",
            refresh,
            smaller_ms,
            format!("refresh of {} tables, median", smaller.tables),
            &times,
        ),
        (
            format!("peak resident memory of a refresh of {tables} tables"),
            "MiB",
            peak_mib,
            smaller.peak_mib,
            format!("the same of {} tables, median", smaller.tables),
            &peaks,
        ),
    ] {
        let ratios: Vec<f64> = samples.iter().map(|sample| sample / floor).collect();
        Figure {
            group: "snapshot/mariadb".to_owned(),
            name: &figure,
            unit,
            measured,
            floor,
            floor_name: &floor_name,
            goal: Some(&goal),
        }
        .record_over_rounds(&ratios);
    }
}
