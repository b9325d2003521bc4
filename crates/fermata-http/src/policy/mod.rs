//! The one authorization policy: the table of every route the router serves, each with the
//! access it needs, and the layer that applies it to every request before a handler runs.
//!
//! The table is the only way routes are added ([`Routes`]): a route is declared with its method,
//! path template and [`Access`] together, so the router and the table cannot disagree, and a page
//! route in a group of pages ([`Routes::pages`]), whose refusals are then shown as pages (see
//! `crate::view`) rather than JSON. The layer looks the request up by its matched path template
//! and method; a route with no entry is refused (fail closed), and so is a handler that needs a
//! grant the layer did not give it.
//!
//! For a document or a repository the layer resolves what is named (a document by `{id}`, by
//! `?repository=&slug=`, or by the `/sync` room name; a repository by `{owner}/{name}`, or by the
//! `repository` of a creation's body or a list's query; a document page by `{*document}`, its ID
//! or `OWNER/NAME/SLUG`), computes the caller's role there, and
//! hands the handler a grant. An outsider learns nothing: what a caller cannot read answers 404,
//! exactly as what does not exist; only a caller who can read it is told 403 for a write it may
//! not make. A `system_admin` acting where they are not a member acts as an admin, and each such
//! request is recorded in the repository's audit before it runs. A document-scoped client token
//! (`?token=fmtc_...`) is accepted only on `/sync` and on the routes whose entry says so (its
//! document's read routes); anywhere else it is refused. The `token` query parameter is taken
//! out of the request before a handler sees it, so no handler, log or error repeats it.

mod grants;

use axum::Router;
use axum::extract::{FromRequestParts, MatchedPath, Request, State};
use axum::handler::Handler;
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use fermata_store::RepositoryRole;

use crate::HttpState;
use crate::auth::{Authenticated, FreshSystemAdmin, MachineCaller, SystemAdmin};
use crate::error::ApiError;
use crate::view;

pub(crate) use grants::{
    Caller, CreationGrant, DocumentGrant, ListGrant, PageAdmin, Registration, RepositoryGrant,
    SyncGrant, role_on_document,
};

/// What a route needs of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone, signed in or not.
    Public,
    /// Anyone signed in, by session or API token.
    SignedIn,
    /// A signed-in `system_admin`.
    SystemAdmin,
    /// A `system_admin` whose browser session entered its password within ten minutes.
    FreshSystemAdmin,
    /// The administrator pages: a `system_admin`; anyone else signed in gets the 403 page, a
    /// visitor the login form.
    AdminPage,
    /// A paired machine, by its own token.
    Machine,
    /// The document named by `{id}`, where the caller's role is at least `need`.
    /// `client_tokens` says whether a client token for that document may call the route.
    Document {
        need: RepositoryRole,
        client_tokens: bool,
    },
    /// The document `?repository=&slug=` names, read (client tokens for it accepted).
    DocumentBySlug,
    /// A document page: the document `{*document}` names (its ID, or `OWNER/NAME/SLUG` with a
    /// canonical or former slug), read by a signed-in member; what it refuses is shown as a page.
    DocumentPage,
    /// The live connection to the document the room names: read to connect, write to edit.
    Sync,
    /// The repository named by `{owner}/{name}`, where the caller's role is at least `need`.
    Repository { need: RepositoryRole },
    /// Creating a document in the body's `repository`: an editor there, or its would-be
    /// creator when it does not exist yet (see `fermata_collab::may_create`).
    CreateDocument,
    /// Listing documents: those of the caller's repositories, or of `?repository=` when they
    /// may read it.
    ListDocuments,
}

impl Access {
    /// Whether a client token may call a route with this access.
    pub fn takes_client_tokens(self) -> bool {
        match self {
            Access::Document { client_tokens, .. } => client_tokens,
            Access::DocumentBySlug | Access::Sync => true,
            _ => false,
        }
    }
}

/// One route of the router: its method, path template and access, and whether it is a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteEntry {
    pub method: Method,
    pub path: &'static str,
    pub access: Access,
    /// A page for people (or a form of one): what the layer refuses is shown as a page.
    pub page: bool,
}

/// Routes declared with their access: the table and the router they make, built together.
pub(crate) struct Routes {
    entries: Vec<RouteEntry>,
    router: Router<HttpState>,
    /// Whether the routes added to this group are pages.
    pages: bool,
}

impl Routes {
    /// A group of routes that answer programs: JSON, files, the WebSocket.
    pub(crate) fn new() -> Self {
        Routes {
            entries: Vec::new(),
            router: Router::new(),
            pages: false,
        }
    }

    /// A group of pages for people and the forms they post.
    pub(crate) fn pages() -> Self {
        Routes {
            pages: true,
            ..Routes::new()
        }
    }

    fn add(
        mut self,
        method: Method,
        path: &'static str,
        access: Access,
        route: MethodRouter<HttpState>,
    ) -> Self {
        self.entries.push(RouteEntry {
            method,
            path,
            access,
            page: self.pages,
        });
        self.router = self.router.route(path, route);
        self
    }

    pub(crate) fn get<H, T>(self, path: &'static str, access: Access, handler: H) -> Self
    where
        H: Handler<T, HttpState>,
        T: 'static,
    {
        self.add(Method::GET, path, access, axum::routing::get(handler))
    }

    pub(crate) fn post<H, T>(self, path: &'static str, access: Access, handler: H) -> Self
    where
        H: Handler<T, HttpState>,
        T: 'static,
    {
        self.add(Method::POST, path, access, axum::routing::post(handler))
    }

    pub(crate) fn put<H, T>(self, path: &'static str, access: Access, handler: H) -> Self
    where
        H: Handler<T, HttpState>,
        T: 'static,
    {
        self.add(Method::PUT, path, access, axum::routing::put(handler))
    }

    pub(crate) fn patch<H, T>(self, path: &'static str, access: Access, handler: H) -> Self
    where
        H: Handler<T, HttpState>,
        T: 'static,
    {
        self.add(Method::PATCH, path, access, axum::routing::patch(handler))
    }

    pub(crate) fn delete<H, T>(self, path: &'static str, access: Access, handler: H) -> Self
    where
        H: Handler<T, HttpState>,
        T: 'static,
    {
        self.add(Method::DELETE, path, access, axum::routing::delete(handler))
    }

    /// Wraps this group's routes in `layer`, inside the authorization layer. Only a layer: a
    /// route is added through the table or not at all.
    pub(crate) fn layer<L>(mut self, layer: L) -> Self
    where
        L: tower::Layer<axum::routing::Route> + Clone + Send + Sync + 'static,
        L::Service: tower::Service<Request> + Clone + Send + Sync + 'static,
        <L::Service as tower::Service<Request>>::Response: IntoResponse + 'static,
        <L::Service as tower::Service<Request>>::Error: Into<std::convert::Infallible> + 'static,
        <L::Service as tower::Service<Request>>::Future: Send + 'static,
    {
        self.router = self.router.layer(layer);
        self
    }

    /// Marks every answer of this group's routes, refusals included, never to be cached: for
    /// routes that show live state or carry secrets.
    pub(crate) fn never_cached(self) -> Self {
        self.layer(axum::middleware::map_response(
            |response: Response| async move { never_cached(response) },
        ))
    }

    pub(crate) fn merge(mut self, other: Routes) -> Self {
        self.entries.extend(other.entries);
        self.router = self.router.merge(other.router);
        self
    }

    pub(crate) fn into_parts(self) -> (Vec<RouteEntry>, Router<HttpState>) {
        (self.entries, self.router)
    }
}

/// What the table says of a request that matched a route.
#[derive(Debug, PartialEq, Eq)]
enum Lookup<'a> {
    /// Its entry.
    Entry(&'a RouteEntry),
    /// The path is listed, not with this method: these are its methods.
    OtherMethods(Vec<&'a str>),
    /// The path is not listed at all: refused.
    Unlisted,
}

/// Looks up `method` on the route template `path`, HEAD being served as GET.
fn lookup<'a>(table: &'a [RouteEntry], path: &str, method: &Method) -> Lookup<'a> {
    let method = if method == Method::HEAD {
        &Method::GET
    } else {
        method
    };
    if let Some(entry) = table
        .iter()
        .find(|entry| entry.path == path && entry.method == method)
    {
        return Lookup::Entry(entry);
    }
    let others: Vec<&str> = table
        .iter()
        .filter(|entry| entry.path == path)
        .map(|entry| entry.method.as_str())
        .collect();
    if others.is_empty() {
        Lookup::Unlisted
    } else {
        Lookup::OtherMethods(others)
    }
}

/// `response` marked never to be cached: an authorization refusal, whatever route it answers, and
/// every answer of a group declared [`Routes::never_cached`].
pub(crate) fn never_cached(response: impl IntoResponse) -> Response {
    let mut response = response.into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The `token` query parameter, taken out of the URI so nothing downstream sees it.
#[derive(Clone)]
pub(crate) struct QueryToken(pub(crate) fermata_crypto::SecretToken);

fn take_query_token(parts: &mut Parts) {
    let Some(query) = parts.uri.query() else {
        return;
    };
    let mut token = None;
    let kept: Vec<(String, String)> = form_pairs(query)
        .into_iter()
        .filter(|(name, value)| {
            if name == "token" {
                token = Some(value.clone());
                false
            } else {
                true
            }
        })
        .collect();
    let Some(token) = token else { return };
    let query = serde_urlencoded::to_string(&kept).unwrap_or_default();
    let path = parts.uri.path();
    let rebuilt = if query.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{query}")
    };
    let mut uri = Uri::builder().path_and_query(rebuilt);
    if let Some(scheme) = parts.uri.scheme() {
        uri = uri.scheme(scheme.clone());
    }
    if let Some(authority) = parts.uri.authority() {
        uri = uri.authority(authority.clone());
    }
    if let Ok(uri) = uri.build() {
        parts.uri = uri;
    }
    if !token.is_empty() {
        parts
            .extensions
            .insert(QueryToken(fermata_crypto::SecretToken::from_given(token)));
    }
}

fn form_pairs(query: &str) -> Vec<(String, String)> {
    serde_urlencoded::from_str(query).unwrap_or_default()
}

/// What the layer needs: the application state and the route table.
#[derive(Clone)]
pub(crate) struct Policy {
    pub(crate) state: HttpState,
    pub(crate) table: std::sync::Arc<[RouteEntry]>,
}

/// The layer: applies the table to every request that matched a route.
pub(crate) async fn authorize(
    State(policy): State<Policy>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let Some(matched) = parts.extensions.get::<MatchedPath>().cloned() else {
        // No route matched: the router answers 404 itself.
        return next.run(Request::from_parts(parts, body)).await;
    };
    let route = match lookup(&policy.table, matched.as_str(), &parts.method) {
        Lookup::Entry(route) => route.clone(),
        Lookup::OtherMethods(allowed) => {
            return never_cached((
                StatusCode::METHOD_NOT_ALLOWED,
                [(header::ALLOW, allowed.join(","))],
            ));
        }
        Lookup::Unlisted => {
            tracing::error!(route = %matched.as_str(), "a route without an access policy was refused");
            return never_cached(ApiError::forbidden("no access policy covers this route"));
        }
    };
    take_query_token(&mut parts);
    let client_token = parts
        .extensions
        .get::<QueryToken>()
        .is_some_and(|token| fermata_accounts::Accounts::is_client_token(&token.0));
    if client_token && !route.access.takes_client_tokens() {
        return never_cached(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthenticated",
            "a client token is accepted only on /sync and on its document's read routes",
        ));
    }
    match grant(&policy.state, &route, parts, body).await {
        Ok(request) => next.run(request).await,
        Err(refusal) if route.page => never_cached(view::as_page(refusal)),
        Err(refusal) => never_cached(refusal),
    }
}

/// Checks the caller against the route's access and hands the handler its grant.
async fn grant(
    state: &HttpState,
    route: &RouteEntry,
    mut parts: Parts,
    body: axum::body::Body,
) -> Result<Request, Response> {
    let action = format!("{} {}", route.method, route.path);
    let rejected = IntoResponse::into_response;
    let body = match route.access {
        Access::Public => body,
        Access::SignedIn => {
            Authenticated::from_request_parts(&mut parts, state)
                .await
                .map_err(rejected)?;
            body
        }
        Access::SystemAdmin => {
            SystemAdmin::from_request_parts(&mut parts, state)
                .await
                .map_err(rejected)?;
            body
        }
        Access::FreshSystemAdmin => {
            FreshSystemAdmin::from_request_parts(&mut parts, state)
                .await
                .map_err(rejected)?;
            body
        }
        Access::AdminPage => {
            let grant = grants::admin_page(state, &mut parts).await?;
            parts.extensions.insert(grant);
            body
        }
        Access::Machine => {
            MachineCaller::from_request_parts(&mut parts, state)
                .await
                .map_err(rejected)?;
            body
        }
        Access::Document { need, .. } => {
            let grant = grants::document(state, &mut parts, need, &action).await?;
            parts.extensions.insert(grant);
            body
        }
        Access::DocumentBySlug => {
            let grant = grants::document_by_slug(state, &mut parts, &action).await?;
            parts.extensions.insert(grant);
            body
        }
        Access::DocumentPage => {
            let grant = grants::document_page(state, &mut parts, &action).await?;
            parts.extensions.insert(grant);
            body
        }
        Access::Sync => {
            let grant = grants::sync(state, &mut parts, &action).await?;
            parts.extensions.insert(grant);
            body
        }
        Access::Repository { need } => {
            let grant = grants::repository(state, &mut parts, need, &action).await?;
            parts.extensions.insert(grant);
            body
        }
        Access::ListDocuments => {
            let grant = grants::list(state, &mut parts, &action).await?;
            parts.extensions.insert(grant);
            body
        }
        Access::CreateDocument => {
            let (grant, body) = grants::creation(state, &mut parts, body, &action).await?;
            parts.extensions.insert(grant);
            body
        }
    };
    Ok(Request::from_parts(parts, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(method: Method, path: &'static str) -> RouteEntry {
        RouteEntry {
            method,
            path,
            access: Access::SignedIn,
            page: false,
        }
    }

    #[test]
    fn a_route_is_found_by_template_and_method_and_an_unlisted_one_is_refused() {
        let table = [
            route(Method::GET, "/a/{id}"),
            route(Method::POST, "/a/{id}"),
        ];
        assert_eq!(
            lookup(&table, "/a/{id}", &Method::GET),
            Lookup::Entry(&table[0])
        );
        assert_eq!(
            lookup(&table, "/a/{id}", &Method::HEAD),
            Lookup::Entry(&table[0])
        );
        assert_eq!(
            lookup(&table, "/a/{id}", &Method::DELETE),
            Lookup::OtherMethods(vec!["GET", "POST"])
        );
        assert_eq!(lookup(&table, "/b", &Method::GET), Lookup::Unlisted);
    }

    #[test]
    fn a_group_of_pages_marks_its_routes_and_a_merge_keeps_the_marks() {
        async fn answer() -> &'static str {
            "ok"
        }
        let (table, _) = Routes::new()
            .get("/api/a", Access::Public, answer)
            .merge(Routes::pages().post("/a", Access::SignedIn, answer))
            .into_parts();
        let marks: Vec<(&str, bool)> = table.iter().map(|e| (e.path, e.page)).collect();
        assert_eq!(marks, [("/api/a", false), ("/a", true)]);
    }

    #[test]
    fn every_route_for_people_is_a_page_and_no_other_is() {
        let programs = [
            "/api/", "/sync/", "/assets/", "/healthz", "/readyz", "/metrics",
        ];
        for entry in crate::route_table() {
            let for_programs = programs.iter().any(|p| entry.path.starts_with(p));
            assert_eq!(entry.page, !for_programs, "{} {}", entry.method, entry.path);
        }
    }

    #[test]
    fn the_token_parameter_is_taken_out_of_the_request() {
        let (mut parts, ()) = Request::builder()
            .uri("/x?w=160&token=fmtc_secret&b=2")
            .body(())
            .unwrap()
            .into_parts();
        take_query_token(&mut parts);
        assert_eq!(parts.uri, "/x?w=160&b=2");
        let token = parts.extensions.get::<QueryToken>().unwrap();
        assert_eq!(token.0.expose(), "fmtc_secret");
        let (mut only, ()) = Request::builder()
            .uri("/x?token=t")
            .body(())
            .unwrap()
            .into_parts();
        take_query_token(&mut only);
        assert_eq!(only.uri, "/x");
    }
}
