//! The process's Prometheus metrics: one registry with every metric handle, and its OpenMetrics
//! text.
//!
//! The crates where events happen record them here: the rooms (`fermata-collab`: rooms open,
//! connections, commits, checkpoints, recoveries, refused updates), the workflow runner
//! (`fermata-workflow`: step attempts), the HTTP layer (requests, connections, limits) and the
//! writer lease keeper. None of them depends on the HTTP crate, and none of them names a
//! prometheus type: they call the methods below with the closed label sets of `labels.rs`, so
//! every family's number of series is bounded. Counts that only a store or a service knows (the
//! schema operations by kind and state, the login counts) are copied in on each scrape
//! ([`Observed`]).
//!
//! The writer lease's fencing token is kept in a registry of its own, rendered only for a
//! scraper that presented the scrape token.

mod labels;
mod storage_health;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

use labels::{
    AttemptLabels, CauseLabel, ForwardLabels, KindLabel, LimitLabel, OperationLabels, OutcomeLabel,
    PerLabel, ReasonLabel, RequestLabels,
};
pub use labels::{
    AttemptOutcome, CommitOutcome, ForwardKind, ForwardOutcome, Limit, RenewalOutcome,
    UpdateRefusal,
};
use storage_health::StorageHealth;
pub use storage_health::{Recovered, StorageCause};

/// Every metric the process exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// What only a scraper with the token sees: the writer lease's fencing token.
    sensitive: Registry,
    lease_held: Gauge,
    lease_token: Gauge,
    lease_expires_at: Gauge<f64, AtomicU64>,
    renewals: Family<OutcomeLabel, Counter>,
    limited: Family<LimitLabel, Counter>,
    login_failures: Counter,
    login_locks: Counter,
    /// Open HTTP connections (WebSockets included) and the caps they are held to.
    http_connections: Gauge,
    http_connection_limits: Family<PerLabel, Gauge>,
    http_requests: Family<RequestLabels, Counter>,
    /// Requests and live connections for documents this process does not write, and how long
    /// reaching the member that writes them took.
    forwarded: Family<ForwardLabels, Counter>,
    forward_reach_duration: Family<KindLabel, Histogram, fn() -> Histogram>,
    /// Rooms open in this process and the clients joined to them, with the room caps.
    rooms_open: Gauge,
    room_connections: Gauge,
    room_connection_limits: Family<PerLabel, Gauge>,
    commit_duration: Histogram,
    commit_batch_updates: Histogram,
    commit_bytes: Histogram,
    commits: Family<OutcomeLabel, Counter>,
    checkpoints: Family<OutcomeLabel, Counter>,
    checkpoint_duration: Histogram,
    recovery_duration: Histogram,
    updates_refused: Family<ReasonLabel, Counter>,
    step_attempts: Family<AttemptLabels, Counter>,
    schema_operations: Family<OperationLabels, Gauge>,
    storage_health: StorageHealth,
    storage_available: Gauge,
    storage_failures: Family<CauseLabel, Counter>,
    /// A member of a cluster: the live members it sees, the shards it holds, and the shards it
    /// took and handed over.
    cluster_members: Gauge,
    cluster_shards_held: Gauge,
    cluster_shards_taken: Counter,
    cluster_handover_duration: Histogram,
}

/// Counts kept by the services and the store, copied into the metrics when they are read.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// Logins and re-authentications with a wrong password or an unknown name.
    pub login_failures: u64,
    /// Failures that locked (or kept locking) a name, an address or a device.
    pub login_locks: u64,
    /// Attempts refused while a lock held them.
    pub login_throttled: u64,
    /// Decodes turned away after waiting their whole queue time.
    pub decodes_turned_away: u64,
    /// Schema operations by kind and state, as the database counts them; `None` when they could
    /// not be read, which leaves the last figures in place.
    pub schema_operations: Option<Vec<SchemaOperationCount>>,
}

/// How many schema operations of one kind are in one state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaOperationCount {
    pub kind: &'static str,
    pub state: &'static str,
    pub count: u64,
}

/// Keeps a gauge one higher while it lives: a room open, a connection joined.
#[derive(Debug)]
pub struct Held(Gauge);

impl Held {
    fn new(gauge: &Gauge) -> Self {
        gauge.inc();
        Held(gauge.clone())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.dec();
    }
}

fn seconds_buckets() -> Histogram {
    // 0.5 ms to about 8 s.
    Histogram::new(exponential_buckets(0.0005, 2.0, 15))
}

fn updates_buckets() -> Histogram {
    // 1 to 64 updates: a room's batch is at most `max_batch` (64 by default).
    Histogram::new(exponential_buckets(1.0, 2.0, 7))
}

fn bytes_buckets() -> Histogram {
    // 64 bytes to 16 MiB.
    Histogram::new(exponential_buckets(64.0, 4.0, 10))
}

/// The outcomes of a checkpoint: saved, or failed.
const CHECKPOINT_OUTCOMES: [&str; 2] = ["saved", "failed"];

/// Sets each cap of a `per` family.
fn set_caps(family: &Family<PerLabel, Gauge>, caps: [(&'static str, usize); 2]) {
    for (per, cap) in caps {
        family
            .get_or_create(&PerLabel { per })
            .set(i64::try_from(cap).unwrap_or(i64::MAX));
    }
}

fn seconds(duration: Duration) -> f64 {
    duration.as_secs_f64()
}

impl Default for Metrics {
    /// Metrics for this release that nobody may read: what a service records into when the
    /// process serves no `/metrics` (a command that runs workflows itself, a test).
    fn default() -> Self {
        Metrics::new(env!("CARGO_PKG_VERSION"))
    }
}

impl Metrics {
    pub fn new(version: &str) -> Self {
        let metrics = Metrics {
            registry: Registry::with_prefix("fermata"),
            sensitive: Registry::with_prefix("fermata"),
            lease_held: Gauge::default(),
            lease_token: Gauge::default(),
            lease_expires_at: Gauge::<f64, AtomicU64>::default(),
            renewals: Family::default(),
            limited: Family::default(),
            login_failures: Counter::default(),
            login_locks: Counter::default(),
            http_connections: Gauge::default(),
            http_connection_limits: Family::default(),
            http_requests: Family::default(),
            forwarded: Family::default(),
            forward_reach_duration: Family::new_with_constructor(seconds_buckets),
            rooms_open: Gauge::default(),
            room_connections: Gauge::default(),
            room_connection_limits: Family::default(),
            commit_duration: seconds_buckets(),
            commit_batch_updates: updates_buckets(),
            commit_bytes: bytes_buckets(),
            commits: Family::default(),
            checkpoints: Family::default(),
            checkpoint_duration: seconds_buckets(),
            recovery_duration: seconds_buckets(),
            updates_refused: Family::default(),
            step_attempts: Family::default(),
            schema_operations: Family::default(),
            storage_health: StorageHealth::default(),
            storage_available: Gauge::default(),
            storage_failures: Family::default(),
            cluster_members: Gauge::default(),
            cluster_shards_held: Gauge::default(),
            cluster_shards_taken: Counter::default(),
            cluster_handover_duration: seconds_buckets(),
        };
        metrics.start_at_zero();
        metrics.register(version)
    }

    /// Creates every series whose labels come from a closed set, at zero, so each family is in
    /// the first scrape and a rate has a start to count from.
    fn start_at_zero(&self) {
        // Creating a series is all that is wanted: the read guard it returns goes at once.
        for outcome in RenewalOutcome::ALL {
            drop(self.renewals.get_or_create(&OutcomeLabel {
                outcome: outcome.as_str(),
            }));
        }
        for limit in Limit::ALL {
            drop(self.limited.get_or_create(&LimitLabel {
                limit: limit.as_str(),
            }));
        }
        for outcome in CommitOutcome::ALL {
            drop(self.commits.get_or_create(&OutcomeLabel {
                outcome: outcome.as_str(),
            }));
        }
        for outcome in CHECKPOINT_OUTCOMES {
            drop(self.checkpoints.get_or_create(&OutcomeLabel { outcome }));
        }
        for reason in UpdateRefusal::ALL {
            drop(self.updates_refused.get_or_create(&ReasonLabel {
                reason: reason.as_str(),
            }));
        }
        for kind in ForwardKind::ALL {
            drop(self.forward_reach_duration.get_or_create(&KindLabel {
                kind: kind.as_str(),
            }));
            for outcome in ForwardOutcome::ALL {
                drop(self.forwarded.get_or_create(&ForwardLabels {
                    kind: kind.as_str(),
                    outcome: outcome.as_str(),
                }));
            }
        }
        for cause in StorageCause::ALL {
            drop(self.storage_failures.get_or_create(&CauseLabel {
                cause: cause.as_str(),
            }));
        }
        self.storage_available.set(1);
    }

    /// Registers every handle under its name and help text.
    fn register(mut self, version: &str) -> Self {
        let r = &mut self.registry;
        r.register(
            "build",
            "The release that is running",
            Info::new(vec![("version".to_owned(), version.to_owned())]),
        );
        r.register(
            "writer_lease_held",
            "1 while this process holds the writer lease",
            self.lease_held.clone(),
        );
        self.sensitive.register(
            "writer_lease_token",
            "The fencing token of the writer lease this process holds or last held",
            self.lease_token.clone(),
        );
        r.register(
            "writer_lease_expires_at_seconds",
            "When the writer lease expires unless renewed, as Unix seconds on the database clock",
            self.lease_expires_at.clone(),
        );
        r.register(
            "writer_lease_renewals",
            "Writer lease renewal attempts by outcome",
            self.renewals.clone(),
        );
        r.register(
            "limited",
            "Clients turned away or cut short, by the limit that did it",
            self.limited.clone(),
        );
        r.register(
            "login_failures",
            "Logins and re-authentications with a wrong password or an unknown name",
            self.login_failures.clone(),
        );
        r.register(
            "login_locks",
            "Failed logins that locked (or kept locking) an account name, an address or a device",
            self.login_locks.clone(),
        );
        r.register(
            "http_connections",
            "HTTP connections open, WebSockets included",
            self.http_connections.clone(),
        );
        r.register(
            "http_connections_limit",
            "The caps on open HTTP connections: per process and per peer address",
            self.http_connection_limits.clone(),
        );
        r.register(
            "http_requests",
            "HTTP requests answered, by method, route template and status",
            self.http_requests.clone(),
        );
        r.register(
            "forwarded_requests",
            "Requests and live connections for documents another member writes (or none does), by kind and outcome",
            self.forwarded.clone(),
        );
        r.register(
            "forward_reach_duration_seconds",
            "How long reaching the member that writes a document took: a live connection's upgrade, or a request's answer head",
            self.forward_reach_duration.clone(),
        );
        r.register(
            "rooms_open",
            "Documents open for live editing in this process",
            self.rooms_open.clone(),
        );
        r.register(
            "room_connections",
            "Live connections joined to the open rooms",
            self.room_connections.clone(),
        );
        r.register(
            "room_connections_limit",
            "The caps on a room's connections: per room and per member of a room",
            self.room_connection_limits.clone(),
        );
        r.register(
            "document_commit_duration_seconds",
            "How long a document commit took, its retries included",
            self.commit_duration.clone(),
        );
        r.register(
            "document_commit_batch_updates",
            "Client updates merged into one commit",
            self.commit_batch_updates.clone(),
        );
        r.register(
            "document_commit_bytes",
            "Bytes of the Yjs update one commit saved",
            self.commit_bytes.clone(),
        );
        r.register(
            "document_commits",
            "Document commits by outcome",
            self.commits.clone(),
        );
        r.register(
            "document_checkpoints",
            "Document checkpoints by outcome",
            self.checkpoints.clone(),
        );
        r.register(
            "document_checkpoint_duration_seconds",
            "How long saving a document checkpoint took",
            self.checkpoint_duration.clone(),
        );
        r.register(
            "cluster_members",
            "The live members of this process's cluster, as it last saw them (0 when it serves alone)",
            self.cluster_members.clone(),
        );
        r.register(
            "cluster_shards_held",
            "The shards whose writer lease this process holds (0 when it serves alone)",
            self.cluster_shards_held.clone(),
        );
        r.register(
            "cluster_shards_taken",
            "Shard writer leases this process took",
            self.cluster_shards_taken.clone(),
        );
        r.register(
            "cluster_handover_duration_seconds",
            "How long handing one shard over took: its rooms closed, its lease released",
            self.cluster_handover_duration.clone(),
        );
        r.register(
            "document_recovery_duration_seconds",
            "How long recovering a document (its checkpoint and the updates after it) took",
            self.recovery_duration.clone(),
        );
        r.register(
            "document_updates_refused",
            "Client messages and program updates to a document refused or dropped, by reason",
            self.updates_refused.clone(),
        );
        r.register(
            "workflow_step_attempts",
            "Workflow step attempts by workflow and outcome",
            self.step_attempts.clone(),
        );
        r.register(
            "schema_operations",
            "Schema operations in the database by kind and state",
            self.schema_operations.clone(),
        );
        r.register(
            "storage_available",
            "1 while the application database takes this process's work, 0 during an outage",
            self.storage_available.clone(),
        );
        r.register(
            "storage_failures",
            "Commits, checkpoints, document loads and lease renewals the database did not take, by cause",
            self.storage_failures.clone(),
        );
        self
    }

    /// Copies the counts the services and the store keep into the metrics.
    pub fn observe(&self, observed: &Observed) {
        self.login_failures
            .inner()
            .store(observed.login_failures, Ordering::Relaxed);
        self.login_locks
            .inner()
            .store(observed.login_locks, Ordering::Relaxed);
        for (limit, value) in [
            (Limit::Login, observed.login_throttled),
            (Limit::DecodeQueue, observed.decodes_turned_away),
        ] {
            self.limited
                .get_or_create(&LimitLabel {
                    limit: limit.as_str(),
                })
                .inner()
                .store(value, Ordering::Relaxed);
        }
        if let Some(counts) = &observed.schema_operations {
            // A pair that has no rows any more must not keep its old figure.
            self.schema_operations.clear();
            for count in counts {
                self.schema_operations
                    .get_or_create(&OperationLabels {
                        kind: count.kind,
                        state: count.state,
                    })
                    .set(i64::try_from(count.count).unwrap_or(i64::MAX));
            }
        }
    }

    /// The writer lease was granted or renewed: `expires_at_millis` on the database clock.
    pub fn lease_granted(&self, token: i64, expires_at_millis: i64) {
        self.lease_held.set(1);
        self.lease_token.set(token);
        #[allow(clippy::cast_precision_loss)]
        // milliseconds fit a double exactly until year 287396
        self.lease_expires_at.set(expires_at_millis as f64 / 1000.0);
    }

    /// The writer lease was released or lost.
    pub fn lease_dropped(&self) {
        self.lease_held.set(0);
    }

    /// The database did not take work of `cause` (it is unavailable); true when this begins an
    /// outage of that cause, which the caller then logs, once.
    pub fn storage_failed(&self, cause: StorageCause) -> bool {
        self.storage_failures
            .get_or_create(&CauseLabel {
                cause: cause.as_str(),
            })
            .inc();
        let began = self.storage_health.failed(cause, std::time::Instant::now());
        self.storage_available
            .set(i64::from(self.storage_health.available()));
        began
    }

    /// The database took work of `cause` sent at `sent`; returns the outages this ended (see
    /// `storage_health.rs` for which a success ends), for the caller to log.
    pub fn storage_answered(
        &self,
        cause: StorageCause,
        sent: std::time::Instant,
    ) -> Vec<Recovered> {
        let ended = self.storage_health.answered(cause, sent);
        self.storage_available
            .set(i64::from(self.storage_health.available()));
        ended
    }

    /// Whether the database takes this process's work: no cause is in an outage.
    pub fn storage_available(&self) -> bool {
        self.storage_health.available()
    }

    pub fn renewal(&self, outcome: RenewalOutcome) {
        self.renewals
            .get_or_create(&OutcomeLabel {
                outcome: outcome.as_str(),
            })
            .inc();
    }

    /// A client was turned away or cut short by `limit`.
    pub fn limited(&self, limit: Limit) {
        self.limited
            .get_or_create(&LimitLabel {
                limit: limit.as_str(),
            })
            .inc();
    }

    /// The HTTP server's connection caps, in total and per peer address.
    pub fn http_connection_limits(&self, total: usize, per_peer: usize) {
        set_caps(
            &self.http_connection_limits,
            [("process", total), ("peer", per_peer)],
        );
    }

    /// An HTTP connection opened; it counts until the returned value is dropped.
    pub fn http_connection(&self) -> Held {
        Held::new(&self.http_connections)
    }

    /// A request was answered. `route` is the template it matched (bounded by the route table),
    /// never the path a client sent.
    pub fn http_request(&self, method: &'static str, route: &str, status: u16) {
        self.http_requests
            .get_or_create(&RequestLabels {
                method,
                route: route.to_owned(),
                status,
            })
            .inc();
    }

    /// A request or live connection of `kind` for a document this process does not write ended
    /// with `outcome`.
    pub fn forwarded(&self, kind: ForwardKind, outcome: ForwardOutcome) {
        self.forwarded
            .get_or_create(&ForwardLabels {
                kind: kind.as_str(),
                outcome: outcome.as_str(),
            })
            .inc();
    }

    /// The member that writes a document answered a forwarded request of `kind` after `took`.
    pub fn forward_reached(&self, kind: ForwardKind, took: Duration) {
        self.forward_reach_duration
            .get_or_create(&KindLabel {
                kind: kind.as_str(),
            })
            .observe(seconds(took));
    }

    /// The caps on a room's connections, in the room and per member.
    pub fn room_limits(&self, per_room: usize, per_member: usize) {
        set_caps(
            &self.room_connection_limits,
            [("room", per_room), ("member", per_member)],
        );
    }

    /// A room opened; it counts until the returned value is dropped.
    pub fn room_opened(&self) -> Held {
        Held::new(&self.rooms_open)
    }

    /// A connection joined a room; it counts until the returned value is dropped.
    pub fn room_joined(&self) -> Held {
        Held::new(&self.room_connections)
    }

    /// A commit ended after `took`, with `bytes` of update when it carried one.
    pub fn commit(&self, outcome: CommitOutcome, took: Duration, bytes: Option<usize>) {
        self.commits
            .get_or_create(&OutcomeLabel {
                outcome: outcome.as_str(),
            })
            .inc();
        self.commit_duration.observe(seconds(took));
        if let Some(bytes) = bytes {
            #[allow(clippy::cast_precision_loss)]
            // a commit's bytes are far below 2^52
            self.commit_bytes.observe(bytes as f64);
        }
    }

    /// A room committed `updates` client updates as one commit.
    pub fn commit_batch(&self, updates: usize) {
        #[allow(clippy::cast_precision_loss)]
        // a batch is at most a few hundred updates
        self.commit_batch_updates.observe(updates as f64);
    }

    /// A checkpoint was saved (or failed to be) after `took`.
    pub fn checkpoint(&self, saved: bool, took: Duration) {
        let [saved_label, failed_label] = CHECKPOINT_OUTCOMES;
        let outcome = if saved { saved_label } else { failed_label };
        self.checkpoints
            .get_or_create(&OutcomeLabel { outcome })
            .inc();
        self.checkpoint_duration.observe(seconds(took));
    }

    /// A document was recovered in `took`.
    pub fn recovery(&self, took: Duration) {
        self.recovery_duration.observe(seconds(took));
    }

    /// How many live members this process's cluster has, as it last saw them.
    pub fn cluster_members(&self, members: usize) {
        self.cluster_members
            .set(i64::try_from(members).unwrap_or(i64::MAX));
    }

    /// How many shards this process holds.
    pub fn cluster_shards_held(&self, shards: usize) {
        self.cluster_shards_held
            .set(i64::try_from(shards).unwrap_or(i64::MAX));
    }

    /// This process took a shard's writer lease.
    pub fn cluster_shard_taken(&self) {
        self.cluster_shards_taken.inc();
    }

    /// This process handed a shard over, in `took`.
    pub fn cluster_handed_over(&self, took: Duration) {
        self.cluster_handover_duration.observe(seconds(took));
    }

    /// A client's message or a program's update was refused or dropped.
    pub fn update_refused(&self, reason: UpdateRefusal) {
        self.updates_refused
            .get_or_create(&ReasonLabel {
                reason: reason.as_str(),
            })
            .inc();
    }

    /// An attempt of a step of a `workflow` run ended.
    pub fn step_attempt(&self, workflow: &str, outcome: AttemptOutcome) {
        self.step_attempts
            .get_or_create(&AttemptLabels {
                workflow: workflow.to_owned(),
                outcome: outcome.as_str(),
            })
            .inc();
    }

    /// The OpenMetrics text of every metric.
    pub fn render(&self) -> String {
        self.render_for(true)
    }

    /// The OpenMetrics text, with the fencing token only when `full`.
    pub fn render_for(&self, full: bool) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        encode_registry(&mut text, &self.registry).unwrap_or_default();
        if full {
            encode_registry(&mut text, &self.sensitive).unwrap_or_default();
        }
        encode_eof(&mut text).unwrap_or_default();
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_gauges_count_while_held() {
        let metrics = Metrics::new("test");
        let room = metrics.room_opened();
        let first = metrics.room_joined();
        let second = metrics.room_joined();
        drop(first);
        let text = metrics.render();
        assert!(text.contains("fermata_rooms_open 1\n"), "{text}");
        assert!(text.contains("fermata_room_connections 1\n"), "{text}");
        drop((room, second));
        let text = metrics.render();
        assert!(text.contains("fermata_rooms_open 0\n"), "{text}");
        assert!(text.contains("fermata_room_connections 0\n"), "{text}");
    }

    #[test]
    fn forwarding_is_in_the_first_scrape_and_counts_by_kind_and_outcome() {
        let metrics = Metrics::new("test");
        let text = metrics.render();
        assert!(
            text.contains(
                "fermata_forwarded_requests_total{kind=\"http\",outcome=\"unplaced\"} 0\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("# TYPE fermata_forward_reach_duration_seconds histogram\n"),
            "{text}"
        );
        metrics.forwarded(ForwardKind::Sync, ForwardOutcome::Forwarded);
        metrics.forward_reached(ForwardKind::Sync, Duration::from_millis(3));
        let text = metrics.render();
        assert!(
            text.contains(
                "fermata_forwarded_requests_total{kind=\"sync\",outcome=\"forwarded\"} 1\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("fermata_forward_reach_duration_seconds_count{kind=\"sync\"} 1\n"),
            "{text}"
        );
    }

    #[test]
    fn schema_operation_counts_replace_the_last_ones() {
        let metrics = Metrics::new("test");
        let running = SchemaOperationCount {
            kind: "inventory",
            state: "running",
            count: 1,
        };
        metrics.observe(&Observed {
            schema_operations: Some(vec![running]),
            ..Observed::default()
        });
        let succeeded = SchemaOperationCount {
            state: "succeeded",
            ..running
        };
        metrics.observe(&Observed {
            schema_operations: Some(vec![succeeded]),
            ..Observed::default()
        });
        let text = metrics.render();
        assert!(
            text.contains("fermata_schema_operations{kind=\"inventory\",state=\"succeeded\"} 1\n"),
            "{text}"
        );
        assert!(!text.contains("state=\"running\""), "{text}");
        // Unreadable counts leave the last figures.
        metrics.observe(&Observed::default());
        assert!(metrics.render().contains("state=\"succeeded\""));
    }
}
