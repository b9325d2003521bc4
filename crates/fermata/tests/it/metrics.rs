//! `/metrics` after a scripted session against the real binary, on SQLite and PostgreSQL: a
//! login, a document created and edited by a real Yjs client that stays connected, a garbage and
//! an oversized message refused, and an inventory of a live MariaDB run by the server's worker.
//! Every family the scrape must show is then there with figures the session explains, no route
//! label is a raw path, no secret is in the text, and every metric the Grafana dashboard in
//! `deploy/grafana/fermata.json` queries is one the scrape has.

use crate::interop::{Session, start};
use crate::mysql;
use crate::schema::{configure_source, login, poll_until_terminal, start_inventory};
use crate::support::{self, Target, add_user, configure, node, node_spawn, node_wait, request};

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};
use sqlx::Executor;

/// The figures of one scrape: each sample line's series (name and labels) and value, and each
/// family's type.
struct Scrape {
    text: String,
    samples: BTreeMap<String, f64>,
    types: BTreeMap<String, String>,
}

impl Scrape {
    fn parse(text: String) -> Self {
        let mut samples = BTreeMap::new();
        let mut types = BTreeMap::new();
        for line in text.lines() {
            if let Some(declared) = line.strip_prefix("# TYPE ") {
                let (name, kind) = declared.split_once(' ').expect("a TYPE line names a type");
                types.insert(name.to_owned(), kind.to_owned());
            } else if !line.starts_with('#') {
                let (series, value) = line.rsplit_once(' ').expect("a sample has a value");
                samples.insert(series.to_owned(), value.parse().expect("a numeric value"));
            }
        }
        Scrape {
            text,
            samples,
            types,
        }
    }

    /// The value of `series`, exactly as the text writes it (`name{label="value",...}`).
    fn value(&self, series: &str) -> f64 {
        *self
            .samples
            .get(series)
            .unwrap_or_else(|| panic!("no {series} in:\n{}", self.text))
    }

    /// Every series of family `name` (its samples named `name` with labels).
    fn series_of(&self, name: &str) -> Vec<(&str, f64)> {
        let prefix = format!("{name}{{");
        self.samples
            .iter()
            .filter(|(series, _)| series.starts_with(&prefix))
            .map(|(series, value)| (series.as_str(), *value))
            .collect()
    }

    /// Whether the text has the metric `name` a query would use: a sample of that name, or a
    /// declared family whose samples take that name (a counter's `_total`, a histogram's
    /// `_bucket`, `_sum` and `_count`, an info's `_info`), even before it has any.
    fn has_metric(&self, name: &str) -> bool {
        let sampled = self
            .samples
            .keys()
            .any(|series| series.split('{').next() == Some(name));
        let declared = [
            ("_total", "counter"),
            ("_bucket", "histogram"),
            ("_sum", "histogram"),
            ("_count", "histogram"),
            ("_info", "info"),
            ("", "gauge"),
        ]
        .iter()
        .any(|(suffix, kind)| {
            name.strip_suffix(suffix)
                .and_then(|family| self.types.get(family))
                .is_some_and(|declared| declared == kind)
        });
        sampled || declared
    }
}

fn scrape(address: SocketAddr) -> Scrape {
    let answer = request(address, "GET", "/metrics", &[], None);
    assert_eq!(answer.status, 200, "{}", answer.body);
    Scrape::parse(answer.body)
}

/// Scrapes until `ready` holds of the scrape, for at most ten seconds.
async fn scrape_until(address: SocketAddr, ready: impl Fn(&Scrape) -> bool) -> Scrape {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let scraped = scrape(address);
        if ready(&scraped) {
            return scraped;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the scrape never showed what the session did:\n{}",
            scraped.text
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every metric name the dashboard's queries use (panel targets and template variables).
fn dashboard_metrics() -> BTreeSet<String> {
    fn walk(value: &Value, key: Option<&str>, queries: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, value) in map {
                    walk(value, Some(key), queries);
                }
            }
            Value::Array(items) => items.iter().for_each(|item| walk(item, key, queries)),
            Value::String(text) if matches!(key, Some("expr" | "query" | "definition")) => {
                queries.push(text.clone());
            }
            _ => {}
        }
    }
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/grafana/fermata.json");
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("read the dashboard"))
            .expect("the dashboard is JSON");
    let mut queries = Vec::new();
    walk(&dashboard, None, &mut queries);
    assert!(queries.len() > 20, "{queries:?}");
    let mut names = BTreeSet::new();
    for query in &queries {
        let mut rest = query.as_str();
        while let Some(at) = rest.find("fermata_") {
            let name: String = rest[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest = &rest[at + name.len()..];
            names.insert(name);
        }
    }
    names
}

async fn a_scripted_session_shows_every_family(target: Target) {
    let mut mariadb = mysql::admin().await;
    let database = format!("{}app", mysql::unique("metrics"));
    mariadb
        .execute(format!("CREATE DATABASE {}", mysql::quoted(&database)).as_str())
        .await
        .unwrap();
    let (user, password) = mysql::snapshot_account(&mut mariadb, &[database]).await;
    configure_source(&target, &user, &password);
    // Every commit with an update checkpoints, so the session shows checkpoints.
    configure(&target, "\n[documents]\ncheckpoint_every_commits = 1\n");
    add_user(&target, "ada", true);
    let (status, token, err) = target.run_with_input(&["token", "create", "--user", "ada"], "");
    assert!(status.success(), "{err}");
    let token = token.trim().to_owned();

    let Session {
        server: _server,
        address,
        document,
        ..
    } = start(&target, &token, "Metrics").await;
    let (cookie, csrf) = login(address, "ada");

    // A real Yjs client writes and stays connected while the server is scraped.
    let sync = format!("ws://{address}/sync");
    let client = node_spawn(
        "client.mjs",
        &[
            "--server",
            &sync,
            "--room",
            &document,
            "--token",
            &token,
            "--insert",
            "counted\n",
            "--expect",
            "counted",
            "--linger",
            "4000",
        ]
        .map(str::to_owned),
    );
    let live = scrape_until(address, |s| {
        s.samples.get("fermata_room_connections") >= Some(&1.0)
            && s.samples
                .get("fermata_document_commits_total{outcome=\"committed\"}")
                >= Some(&1.0)
    })
    .await;
    assert_eq!(live.value("fermata_rooms_open"), 1.0);

    // A garbage and an oversized message are refused.
    let url = format!("ws://{address}/sync/{document}?token={token}");
    for (args, code) in [
        (&["--garbage"][..], 1008),
        (&["--oversized", "1200000"][..], 1009),
    ] {
        let all: Vec<String> = ["--url", url.as_str()]
            .iter()
            .chain(args)
            .map(|arg| (*arg).to_owned())
            .collect();
        let (_, out) = node("raw.mjs", &all);
        assert_eq!(out["closed"], json!(code), "{out}");
    }

    // An inventory of the live MariaDB, run by the server's worker.
    let [c, x] = support::session_headers(&cookie, &csrf);
    let session = [(c.0, c.1.as_str()), (x.0, x.1.as_str())];
    let started = start_inventory(address, &session, "metrics-1");
    assert_eq!(started.status, 202, "{}", started.body);
    let id = started.json()["id"].as_str().unwrap().to_owned();
    let (_, done) = poll_until_terminal(address, &session, &id);
    assert_eq!(done["state"], "succeeded", "{done}");
    let (ok, out) = node_wait(client);
    assert!(ok, "{out}");

    let s = scrape_until(address, |s| {
        s.samples
            .get("fermata_document_updates_refused_total{reason=\"message_too_large\"}")
            >= Some(&1.0)
    })
    .await;
    // Rooms and connections with their caps (the defaults of `[documents]` and `[http]`).
    assert_eq!(s.value("fermata_rooms_open"), 1.0);
    assert_eq!(
        s.value("fermata_room_connections_limit{per=\"room\"}"),
        64.0
    );
    assert_eq!(
        s.value("fermata_room_connections_limit{per=\"member\"}"),
        8.0
    );
    assert!(
        s.value("fermata_http_connections") >= 1.0,
        "the scrape's own"
    );
    assert_eq!(
        s.value("fermata_http_connections_limit{per=\"peer\"}"),
        256.0
    );
    assert!(s.value("fermata_http_connections_limit{per=\"process\"}") >= 64.0);
    // Commits, their latency and batches, checkpoints and the recovery that opened the room.
    let committed = s.value("fermata_document_commits_total{outcome=\"committed\"}");
    assert!(committed >= 1.0);
    assert!(s.value("fermata_document_commit_duration_seconds_count") >= committed);
    assert!(s.value("fermata_document_commit_duration_seconds_sum") > 0.0);
    assert!(s.value("fermata_document_commit_batch_updates_count") >= 1.0);
    assert!(s.value("fermata_document_commit_batch_updates_sum") >= 1.0);
    assert!(s.value("fermata_document_commit_bytes_count") >= 1.0);
    assert!(s.value("fermata_document_commit_bytes_bucket{le=\"+Inf\"}") >= 1.0);
    assert!(s.value("fermata_document_checkpoints_total{outcome=\"saved\"}") >= 1.0);
    assert!(s.value("fermata_document_checkpoint_duration_seconds_count") >= 1.0);
    assert!(s.value("fermata_document_recovery_duration_seconds_count") >= 1.0);
    // Refusals by reason.
    assert_eq!(
        s.value("fermata_document_updates_refused_total{reason=\"malformed\"}"),
        1.0
    );
    assert_eq!(
        s.value("fermata_document_updates_refused_total{reason=\"message_too_large\"}"),
        1.0
    );
    // Requests by route template: the document's own ID is in no label.
    for series in [
        "fermata_http_requests_total{method=\"POST\",route=\"/api/v1/session\",status=\"200\"}",
        "fermata_http_requests_total{method=\"POST\",route=\"/api/v1/documents\",status=\"201\"}",
        "fermata_http_requests_total{method=\"GET\",route=\"/sync/{*room}\",status=\"101\"}",
        "fermata_http_requests_total{method=\"GET\",route=\"/api/v1/schema/operations/{id}\",status=\"200\"}",
    ] {
        assert!(s.value(series) >= 1.0, "{series}");
    }
    assert!(!s.text.contains(&document), "{}", s.text);
    assert!(!s.text.contains(&id), "{}", s.text);
    // The schema operation by kind and state, and the workflow's step attempts.
    assert_eq!(
        s.value("fermata_schema_operations{kind=\"inventory\",state=\"succeeded\"}"),
        1.0
    );
    let attempts = s.series_of("fermata_workflow_step_attempts_total");
    assert!(
        attempts.iter().any(|(series, value)| *series
            == "fermata_workflow_step_attempts_total{workflow=\"schema-inventory\",outcome=\"succeeded\"}"
            && *value >= 4.0),
        "{attempts:?}"
    );
    // The writer lease, renewed every second.
    assert_eq!(s.value("fermata_writer_lease_held"), 1.0);
    assert!(s.value("fermata_writer_lease_renewals_total{outcome=\"renewed\"}") >= 1.0);
    // No secret: the API token, the session, the CSRF token, the passwords.
    for secret in [
        token.as_str(),
        cookie.as_str(),
        csrf.as_str(),
        password.as_str(),
        support::USER_PASSWORD,
    ] {
        assert!(!s.text.contains(secret), "a secret is in the metrics");
    }

    // The dashboard queries only what a real scrape has.
    let missing: Vec<String> = dashboard_metrics()
        .into_iter()
        .filter(|name| !s.has_metric(name))
        .collect();
    assert!(missing.is_empty(), "{missing:?} not in:\n{}", s.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_scripted_session_shows_every_family() {
    a_scripted_session_shows_every_family(Target::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_scripted_session_shows_every_family() {
    a_scripted_session_shows_every_family(Target::postgres().await).await;
}
