//! Counts every answered request by method, route template and status
//! (`fermata_http_requests_total`).
//!
//! The route is the template the router matched (`/api/v1/documents/{id}`), never the path the
//! client sent, and a method outside the route table's is `other`, so the number of series is
//! bounded by the route table whatever clients send. A request no route matched counts as
//! `unmatched`. The layer is the outermost of the router's, so it sees the status every other
//! layer (the standby, the edge guard, the policy) answered with; a WebSocket counts once, as its
//! `101` upgrade.

use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use fermata_metrics::Metrics;

/// The route label of a request that matched no route.
const UNMATCHED: &str = "unmatched";

pub(crate) async fn count(
    State(metrics): State<Arc<Metrics>>,
    request: Request,
    next: Next,
) -> Response {
    let method = method_label(request.method());
    let route = request.extensions().get::<MatchedPath>().cloned();
    let response = next.run(request).await;
    metrics.http_request(
        method,
        route.as_ref().map_or(UNMATCHED, MatchedPath::as_str),
        response.status().as_u16(),
    );
    response
}

fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}
