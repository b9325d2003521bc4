//! The accounts JSON API under `/api/v1`: sessions, the caller's credentials, API tokens, paired
//! machines, a machine's own view, and user administration.

use std::collections::{BTreeMap, BTreeSet};

use axum::Json;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum_extra::extract::CookieJar;
use fermata_accounts::{Credentials, LoginClient, Principal, TokenScope, Via};
use fermata_crypto::{SecretToken, csrf_token};
use fermata_store::{ApiToken, ApiTokenId, Machine, MachineId, Role, User};
use serde::{Deserialize, Serialize};

use crate::HttpState;
use crate::auth::{Authenticated, FreshSystemAdmin, MachineCaller, SystemAdmin, client_address};
use crate::cookies;
use crate::error::ApiError;
use crate::policy::{Access, Routes};

pub(crate) fn routes() -> Routes {
    use Access::{FreshSystemAdmin, Machine, Public, SignedIn, SystemAdmin};
    let credentials = "/api/v1/session/credentials";
    Routes::new()
        .post("/api/v1/session", Public, login)
        .delete("/api/v1/session", SignedIn, logout)
        .post("/api/v1/session/reauth", SignedIn, reauthenticate)
        .get(credentials, SignedIn, session_credentials)
        .put(credentials, SignedIn, set_session_credentials)
        .delete(credentials, SignedIn, clear_session_credentials)
        .get("/api/v1/me", SignedIn, me)
        .get("/api/v1/tokens", SignedIn, list_tokens)
        .post("/api/v1/tokens", SignedIn, create_token)
        .delete("/api/v1/tokens/{id}", SignedIn, revoke_token)
        .get("/api/v1/machines", SignedIn, list_machines)
        .post("/api/v1/machines", SignedIn, pair_machine)
        .delete("/api/v1/machines/{id}", SignedIn, revoke_machine)
        .post(
            "/api/v1/machines/{id}/reauthorize",
            SignedIn,
            reauthorize_machine,
        )
        .get("/api/v1/machine", Machine, machine_self)
        .put(
            "/api/v1/machine/credentials",
            Machine,
            set_machine_credentials,
        )
        .delete(
            "/api/v1/machine/credentials",
            Machine,
            clear_machine_credentials,
        )
        .get("/api/v1/users", SystemAdmin, list_users)
        .post("/api/v1/users", FreshSystemAdmin, create_user)
        .put("/api/v1/users/{name}/roles", FreshSystemAdmin, set_roles)
}

/// A user as the API shows one.
#[derive(Debug, Serialize)]
pub(crate) struct UserView {
    name: String,
    roles: Vec<&'static str>,
}

impl From<&User> for UserView {
    fn from(user: &User) -> Self {
        UserView {
            name: user.name.to_string(),
            roles: user.roles.iter().map(|r| r.as_str()).collect(),
        }
    }
}

#[derive(Debug, Serialize)]
struct MeView {
    user: UserView,
    via: &'static str,
    fresh: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    csrf_token: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<String>,
}

fn me_view(principal: &Principal) -> MeView {
    let session = principal.session();
    MeView {
        user: UserView::from(&principal.user),
        via: match principal.via {
            Via::Session(_) => "session",
            Via::ApiToken(_) => "token",
        },
        fresh: principal.is_fresh(),
        csrf_token: session.map(|context| csrf_token(&context.secret)),
        expires_at: session.map(|context| context.session.expires_at.to_string()),
    }
}

/// Reads a JSON body, answering a malformed one with a safe 400.
async fn json_body<T: serde::de::DeserializeOwned>(request: Request) -> Result<T, ApiError> {
    // Dropped on purpose: reading stops only at the limit, which the answer names.
    let bytes = axum::body::to_bytes(request.into_body(), 1 << 20)
        .await
        .map_err(|_| ApiError::bad_request("the body is too large"))?;
    serde_json::from_slice(&bytes).map_err(|error| {
        ApiError::bad_request(format!(
            "the body is not the expected JSON (line {}, column {})",
            error.line(),
            error.column()
        ))
    })
}

fn require_json(parts: &Parts) -> Result<(), ApiError> {
    let json = parts
        .headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if json {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "json_required",
            "send application/json",
        ))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoginBody {
    name: String,
    password: String,
}

async fn login(
    State(state): State<HttpState>,
    jar: CookieJar,
    request: Request,
) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    // A cross-site form cannot send JSON, so requiring it keeps logins from being forged.
    require_json(&parts)?;
    let address = client_address(&parts);
    let body: LoginBody = json_body(Request::from_parts(parts, body)).await?;
    let password = SecretToken::from_given(body.password);
    let client = LoginClient {
        address,
        device_mark: cookies::device_mark(&jar),
    };
    let logged_in = state.accounts.login(&body.name, &password, client).await?;
    let jar = jar
        .clone()
        .add(cookies::session(&state, &logged_in.secret))
        .add(cookies::device(&state, &logged_in.device_mark));
    Ok((jar, Json(me_view(&logged_in.principal))).into_response())
}

async fn logout(
    State(state): State<HttpState>,
    caller: Authenticated,
    jar: CookieJar,
) -> Result<Response, ApiError> {
    let session = caller.session()?;
    state.accounts.logout(&session.session.id).await?;
    Ok((
        jar.remove(cookies::cleared_session()),
        StatusCode::NO_CONTENT,
    )
        .into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReauthBody {
    password: String,
}

/// Re-authenticates the session and answers with its new cookie and CSRF token.
async fn reauthenticate(
    State(state): State<HttpState>,
    caller: Authenticated,
    jar: CookieJar,
    request: Request,
) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    require_json(&parts)?;
    let address = client_address(&parts);
    let body: ReauthBody = json_body(Request::from_parts(parts, body)).await?;
    let fresh = state
        .accounts
        .reauthenticate(&caller.0, &SecretToken::from_given(body.password), address)
        .await?;
    let jar = jar.add(cookies::session(&state, &fresh.secret));
    let mut principal = caller.0;
    if let Via::Session(context) = &mut principal.via {
        context.now = fresh.session.authenticated_at;
        context.session = fresh.session;
        context.secret = fresh.secret;
    }
    Ok((jar, Json(me_view(&principal))).into_response())
}

async fn me(caller: Authenticated) -> Json<MeView> {
    Json(me_view(&caller.0))
}

#[derive(Serialize)]
struct CredentialNames {
    names: Vec<String>,
}

fn names_of(credentials: &Credentials) -> Json<CredentialNames> {
    Json(CredentialNames {
        names: credentials.names().into_iter().map(str::to_owned).collect(),
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CredentialsBody {
    credentials: BTreeMap<String, String>,
}

async fn session_credentials(
    State(state): State<HttpState>,
    caller: Authenticated,
) -> Result<Json<CredentialNames>, ApiError> {
    let session = caller.session()?;
    Ok(names_of(
        &state
            .accounts
            .session_credentials(&session.session.id)
            .await?,
    ))
}

async fn set_session_credentials(
    State(state): State<HttpState>,
    caller: Authenticated,
    request: Request,
) -> Result<Json<CredentialNames>, ApiError> {
    let session = caller.session()?.session.id.clone();
    let body: CredentialsBody = json_body(request).await?;
    let credentials = Credentials::new(body.credentials)?;
    state
        .accounts
        .set_session_credentials(&session, &credentials)
        .await?;
    Ok(names_of(&credentials))
}

async fn clear_session_credentials(
    State(state): State<HttpState>,
    caller: Authenticated,
) -> Result<StatusCode, ApiError> {
    let session = caller.session()?.session.id.clone();
    state
        .accounts
        .set_session_credentials(&session, &Credentials::default())
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Serialize)]
struct TokenView {
    id: String,
    label: String,
    created_at: String,
    last_used_at: Option<String>,
    revoked_at: Option<String>,
}

impl From<&ApiToken> for TokenView {
    fn from(token: &ApiToken) -> Self {
        TokenView {
            id: token.id.to_string(),
            label: token.label.clone(),
            created_at: token.created_at.to_string(),
            last_used_at: token.last_used_at.map(|t| t.to_string()),
            revoked_at: token.revoked_at.map(|t| t.to_string()),
        }
    }
}

#[derive(Serialize)]
struct NewSecret<T> {
    #[serde(flatten)]
    item: T,
    /// Shown once; only its hash is kept.
    token: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewTokenBody {
    label: String,
    /// `["tokens"]` for a token that may itself create tokens and machines.
    #[serde(default)]
    scopes: Vec<String>,
}

async fn list_tokens(
    State(state): State<HttpState>,
    caller: Authenticated,
) -> Result<Json<Vec<TokenView>>, ApiError> {
    let tokens = state.accounts.api_tokens(&caller.0.user.id).await?;
    Ok(Json(tokens.iter().map(TokenView::from).collect()))
}

async fn create_token(
    State(state): State<HttpState>,
    caller: Authenticated,
    request: Request,
) -> Result<Response, ApiError> {
    caller.0.require_issuing()?;
    let body: NewTokenBody = json_body(request).await?;
    let scope = match body.scopes.as_slice() {
        [] => TokenScope::Standard,
        [scope] if scope == "tokens" => TokenScope::Issuing,
        _ => {
            return Err(ApiError::bad_request(
                "the only scope is `tokens` (the token may create tokens and machines)",
            ));
        }
    };
    let (token, secret) = state
        .accounts
        .create_scoped_api_token(&caller.0.user, &body.label, scope)
        .await?;
    let view = NewSecret {
        item: TokenView::from(&token),
        token: secret.expose().to_owned(),
    };
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

async fn revoke_token(
    State(state): State<HttpState>,
    caller: Authenticated,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state
        .accounts
        .revoke_api_token(Some(&caller.0.user), &ApiTokenId(id))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Serialize)]
struct MachineView {
    id: String,
    name: String,
    created_at: String,
    authorized_at: String,
    has_credentials: bool,
}

impl From<&Machine> for MachineView {
    fn from(machine: &Machine) -> Self {
        MachineView {
            id: machine.id.to_string(),
            name: machine.name.clone(),
            created_at: machine.created_at.to_string(),
            authorized_at: machine.authorized_at.to_string(),
            has_credentials: machine.credentials.is_some(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NameBody {
    name: String,
}

async fn list_machines(
    State(state): State<HttpState>,
    caller: Authenticated,
) -> Result<Json<Vec<MachineView>>, ApiError> {
    let machines = state.accounts.machines(&caller.0.user.id).await?;
    Ok(Json(machines.iter().map(MachineView::from).collect()))
}

async fn pair_machine(
    State(state): State<HttpState>,
    caller: Authenticated,
    request: Request,
) -> Result<Response, ApiError> {
    caller.0.require_issuing()?;
    let body: NameBody = json_body(request).await?;
    let (machine, secret) = state
        .accounts
        .pair_machine(&caller.0.user, &body.name)
        .await?;
    let view = NewSecret {
        item: MachineView::from(&machine),
        token: secret.expose().to_owned(),
    };
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

async fn reauthorize_machine(
    State(state): State<HttpState>,
    caller: Authenticated,
    Path(id): Path<String>,
) -> Result<Json<NewSecret<MachineView>>, ApiError> {
    caller.0.require_issuing()?;
    let (machine, secret) = state
        .accounts
        .reauthorize_machine(&caller.0.user, &MachineId(id))
        .await?;
    Ok(Json(NewSecret {
        item: MachineView::from(&machine),
        token: secret.expose().to_owned(),
    }))
}

async fn revoke_machine(
    State(state): State<HttpState>,
    caller: Authenticated,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state
        .accounts
        .revoke_machine(&caller.0.user, &MachineId(id))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Serialize)]
struct MachineSelfView {
    #[serde(flatten)]
    machine: MachineView,
    credentials: Vec<String>,
}

async fn machine_self(
    State(state): State<HttpState>,
    MachineCaller(machine): MachineCaller,
) -> Result<Json<MachineSelfView>, ApiError> {
    let credentials = state.accounts.machine_credentials(&machine.id).await?;
    Ok(Json(MachineSelfView {
        machine: MachineView::from(&machine),
        credentials: credentials.names().into_iter().map(str::to_owned).collect(),
    }))
}

async fn set_machine_credentials(
    State(state): State<HttpState>,
    MachineCaller(machine): MachineCaller,
    request: Request,
) -> Result<Json<CredentialNames>, ApiError> {
    let body: CredentialsBody = json_body(request).await?;
    let credentials = Credentials::new(body.credentials)?;
    state
        .accounts
        .set_machine_credentials(&machine.id, &credentials)
        .await?;
    Ok(names_of(&credentials))
}

async fn clear_machine_credentials(
    State(state): State<HttpState>,
    MachineCaller(machine): MachineCaller,
) -> Result<StatusCode, ApiError> {
    state
        .accounts
        .set_machine_credentials(&machine.id, &Credentials::default())
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list_users(
    State(state): State<HttpState>,
    _admin: SystemAdmin,
) -> Result<Json<Vec<UserView>>, ApiError> {
    let users = state.accounts.users().await?;
    Ok(Json(users.iter().map(UserView::from).collect()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewUserBody {
    name: String,
    password: Option<String>,
    #[serde(default)]
    roles: Vec<String>,
}

#[derive(Serialize)]
struct CreatedUser {
    #[serde(flatten)]
    user: UserView,
    /// Only when the server generated it; shown once.
    #[serde(skip_serializing_if = "Option::is_none")]
    password: Option<String>,
}

fn parse_roles(names: &[String]) -> Result<BTreeSet<Role>, ApiError> {
    names
        .iter()
        .map(|name| {
            Role::parse(name).ok_or_else(|| ApiError::bad_request(format!("unknown role `{name}`")))
        })
        .collect()
}

async fn create_user(
    State(state): State<HttpState>,
    FreshSystemAdmin(admin): FreshSystemAdmin,
    request: Request,
) -> Result<Response, ApiError> {
    let body: NewUserBody = json_body(request).await?;
    let roles = parse_roles(&body.roles)?;
    let (user, generated) = state
        .accounts
        .add_user(
            &body.name,
            body.password.map(SecretToken::from_given),
            roles,
        )
        .await?;
    tracing::info!(by = %admin.user.name, user = %user.name, "created a user");
    let view = CreatedUser {
        user: UserView::from(&user),
        password: generated.map(|p| p.expose().to_owned()),
    };
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RolesBody {
    roles: Vec<String>,
}

async fn set_roles(
    State(state): State<HttpState>,
    FreshSystemAdmin(admin): FreshSystemAdmin,
    Path(name): Path<String>,
    request: Request,
) -> Result<Json<UserView>, ApiError> {
    let body: RolesBody = json_body(request).await?;
    let wanted = parse_roles(&body.roles)?;
    let user = state.accounts.user_named(&name).await?;
    let remove: Vec<Role> = user.roles.difference(&wanted).copied().collect();
    let add: Vec<Role> = wanted.difference(&user.roles).copied().collect();
    let user = state.accounts.change_roles(&name, &add, &remove).await?;
    tracing::info!(by = %admin.user.name, user = %user.name, "changed roles");
    Ok(Json(UserView::from(&user)))
}
