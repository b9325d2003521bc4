//! What a process that does not serve answers: only `/healthz`, `/readyz` and `/metrics`.
//!
//! Before it holds the writer lease (starting, or waiting for it with `--handover wait`) and once
//! it drains, every other route answers 503 with the code `not_serving` and a `Retry-After`, and
//! reaches no handler, so nothing is read for a client or written on its behalf. A refusal rather
//! than a wait for the lease: a standby may wait for hours while its holder serves, and a request
//! held open meanwhile ties up a connection, a client and a proxy for nothing, while a 503 with
//! `Retry-After` is what load balancers and clients already retry on, `/readyz` already tells a
//! balancer to send the request elsewhere, and a planned hand-over is over within about one
//! `Retry-After`. The store refuses the writes of a process without the lease in any case (see
//! `fermata_store::writer_fence`); this layer is what makes the refusal clean and early.

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::readiness::{Phase, Readiness};

/// The routes a process answers in every phase: liveness, readiness and metrics.
const ALWAYS_ANSWERED: &[&str] = &["/healthz", "/readyz", "/metrics"];

/// The layer around every route: passes a request on only while this process serves.
pub(crate) async fn refuse_unless_serving(
    State(readiness): State<Readiness>,
    request: Request,
    next: Next,
) -> Response {
    let phase = readiness.phase();
    if phase == Phase::Serving || ALWAYS_ANSWERED.contains(&request.uri().path()) {
        return next.run(request).await;
    }
    let mut refusal = ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "not_serving",
        format!(
            "this server is not serving ({}); try again shortly",
            phase.as_str()
        ),
    );
    refusal.retry_after = Some(readiness.retry_after_seconds());
    refusal.into_response()
}
