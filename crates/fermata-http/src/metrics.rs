//! The process's Prometheus metrics, in OpenMetrics text.

use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

/// How one renewal attempt of the writer lease ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RenewalOutcome {
    /// Renewed within the attempt timeout.
    Renewed,
    /// Renewed, but too late to count: retried at once.
    Slow,
    /// Failed with an error; retried until the safety deadline.
    Failed,
    /// Got no reply at all; its connection was abandoned.
    Abandoned,
}

impl RenewalOutcome {
    fn as_str(self) -> &'static str {
        match self {
            RenewalOutcome::Renewed => "renewed",
            RenewalOutcome::Slow => "slow",
            RenewalOutcome::Failed => "failed",
            RenewalOutcome::Abandoned => "abandoned",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

/// A limit that turned a client away or cut it short.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    /// A connection over the cap of its peer address (served from the health reserve).
    PeerConnections,
    /// A connection over the total cap (served from the health reserve, or closed).
    Connections,
    /// A connection whose request head did not arrive in time.
    HeaderTimeout,
    /// A request body that fell behind the minimum rate.
    BodyRate,
    /// A decode or thumbnail that waited its whole queue time for a turn.
    DecodeQueue,
    /// A login or re-authentication refused while its name or address was locked.
    Login,
}

impl Limit {
    fn as_str(self) -> &'static str {
        match self {
            Limit::PeerConnections => "peer_connections",
            Limit::Connections => "connections",
            Limit::HeaderTimeout => "header_timeout",
            Limit::BodyRate => "body_rate",
            Limit::DecodeQueue => "decode_queue",
            Limit::Login => "login",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct LimitLabel {
    limit: &'static str,
}

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
}

/// Counts kept by the services themselves, copied into the metrics when they are read.
#[derive(Debug, Clone, Copy, Default)]
pub struct Observed {
    pub logins: fermata_accounts::LoginCounts,
    /// Decodes turned away after waiting their whole queue time.
    pub decodes_turned_away: u64,
}

impl Metrics {
    pub fn new(version: &str) -> Self {
        let lease_held = Gauge::default();
        let lease_token = Gauge::default();
        let lease_expires_at = Gauge::<f64, AtomicU64>::default();
        let renewals = Family::<OutcomeLabel, Counter>::default();
        let limited = Family::<LimitLabel, Counter>::default();
        let login_failures = Counter::default();
        let login_locks = Counter::default();
        let mut registry = Registry::with_prefix("fermata");
        registry.register(
            "build",
            "The release that is running",
            Info::new(vec![("version".to_owned(), version.to_owned())]),
        );
        registry.register(
            "writer_lease_held",
            "1 while this process holds the writer lease",
            lease_held.clone(),
        );
        let mut sensitive = Registry::with_prefix("fermata");
        sensitive.register(
            "writer_lease_token",
            "The fencing token of the writer lease this process holds or last held",
            lease_token.clone(),
        );
        registry.register(
            "writer_lease_expires_at_seconds",
            "When the writer lease expires unless renewed, as Unix seconds on the database clock",
            lease_expires_at.clone(),
        );
        registry.register(
            "writer_lease_renewals",
            "Writer lease renewal attempts by outcome",
            renewals.clone(),
        );
        registry.register(
            "limited",
            "Clients turned away or cut short, by the limit that did it",
            limited.clone(),
        );
        registry.register(
            "login_failures",
            "Logins and re-authentications with a wrong password or an unknown name",
            login_failures.clone(),
        );
        registry.register(
            "login_locks",
            "Failed logins that locked (or kept locking) an account name, an address or a device",
            login_locks.clone(),
        );
        Metrics {
            registry,
            sensitive,
            lease_held,
            lease_token,
            lease_expires_at,
            renewals,
            limited,
            login_failures,
            login_locks,
        }
    }

    /// Copies the counts the services keep into the metrics.
    pub fn observe(&self, observed: Observed) {
        self.login_failures
            .inner()
            .store(observed.logins.failures, Ordering::Relaxed);
        self.login_locks
            .inner()
            .store(observed.logins.locks, Ordering::Relaxed);
        for (limit, value) in [
            (Limit::Login, observed.logins.throttled),
            (Limit::DecodeQueue, observed.decodes_turned_away),
        ] {
            self.limited
                .get_or_create(&LimitLabel {
                    limit: limit.as_str(),
                })
                .inner()
                .store(value, Ordering::Relaxed);
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
