//! The HTTP surface of `fermata serve`: liveness, readiness and Prometheus metrics.
//!
//! The server is started with a listener and a shutdown future as parameters, so tests run it on
//! port 0 or call the router directly without a socket.

mod metrics;
mod readiness;

use std::future::Future;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;

pub use metrics::{Metrics, RenewalOutcome};
pub use readiness::{Phase, Readiness};

/// What the handlers share.
#[derive(Debug, Clone)]
pub struct HttpState {
    /// Whether this process holds the writer lease and serves; `/readyz` reports it.
    pub readiness: Readiness,
    /// The process's metrics; `/metrics` renders them.
    pub metrics: std::sync::Arc<Metrics>,
}

/// Every route.
pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

/// Serves `router` on `listener` until `shutdown` completes, then stops accepting and finishes
/// the requests in flight.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(state): State<HttpState>) -> impl IntoResponse {
    let phase = state.readiness.phase();
    let status = if phase == Phase::Serving {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, format!("{}\n", phase.as_str()))
}

async fn metrics(State(state): State<HttpState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(),
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    use super::*;

    async fn get(state: &HttpState, uri: &str) -> (StatusCode, String) {
        let response = router(state.clone())
            .oneshot(Request::get(uri).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    fn state() -> HttpState {
        HttpState {
            readiness: Readiness::default(),
            metrics: Arc::new(Metrics::new("1.2.3")),
        }
    }

    #[tokio::test]
    async fn healthz_is_always_ok() {
        assert_eq!(
            get(&state(), "/healthz").await,
            (StatusCode::OK, "ok\n".to_owned())
        );
    }

    #[tokio::test]
    async fn readyz_follows_the_phase() {
        let state = state();
        let expect = [
            (
                Phase::Starting,
                StatusCode::SERVICE_UNAVAILABLE,
                "starting\n",
            ),
            (
                Phase::WaitingForLease,
                StatusCode::SERVICE_UNAVAILABLE,
                "waiting for the writer lease\n",
            ),
            (Phase::Serving, StatusCode::OK, "serving\n"),
            (
                Phase::Draining,
                StatusCode::SERVICE_UNAVAILABLE,
                "draining\n",
            ),
        ];
        for (phase, status, body) in expect {
            state.readiness.set(phase);
            assert_eq!(get(&state, "/readyz").await, (status, body.to_owned()));
        }
    }

    #[tokio::test]
    async fn metrics_render_prometheus_text() {
        let state = state();
        state.metrics.lease_granted(7, 1_700_000_000_000);
        state.metrics.renewal(RenewalOutcome::Renewed);
        let (status, body) = get(&state, "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        for line in [
            "fermata_build_info{version=\"1.2.3\"} 1",
            "fermata_writer_lease_held 1",
            "fermata_writer_lease_token 7",
            "fermata_writer_lease_renewals_total{outcome=\"renewed\"} 1",
            "# EOF",
        ] {
            assert!(
                body.lines().any(|l| l == line),
                "missing {line:?} in:\n{body}"
            );
        }
    }
}
