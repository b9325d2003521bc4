//! The repositories JSON API under `/api/v1/repositories`: the caller's repositories (every
//! repository for a `system_admin` who asks), creating one under the caller's own name, a
//! repository's members and their roles, and the audit of `system_admin` overrides in it.
//! Changing or removing a member re-checks that member's live connections before answering.

use axum::Json;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use fermata_collab::{NamedMember, may_create};
use fermata_store::{Override, Repository, RepositoryRecord, RepositoryRole, Role, UserName};
use serde::{Deserialize, Serialize};

use crate::HttpState;
use crate::auth::Authenticated;
use crate::documents_api::{ApiQuery, json_body};
use crate::error::ApiError;
use crate::policy::{Access, RepositoryGrant, Routes};

pub(crate) fn routes() -> Routes {
    use RepositoryRole::{Admin, Viewer};
    let one = "/api/v1/repositories/{owner}/{name}";
    let member = "/api/v1/repositories/{owner}/{name}/members/{user}";
    Routes::new()
        .get("/api/v1/repositories", Access::SignedIn, list)
        .post("/api/v1/repositories", Access::SignedIn, create)
        .get(one, Access::Repository { need: Viewer }, read)
        .get(
            "/api/v1/repositories/{owner}/{name}/members",
            Access::Repository { need: Viewer },
            members,
        )
        .put(member, Access::Repository { need: Admin }, set_member)
        .delete(member, Access::Repository { need: Admin }, remove_member)
        .get(
            "/api/v1/repositories/{owner}/{name}/audit",
            Access::Repository { need: Admin },
            audit,
        )
}

/// A repository as the API shows it, with the caller's role there.
#[derive(Serialize)]
struct RepositoryView {
    name: String,
    created_at: String,
    /// Absent for a `system_admin` listing repositories they are not a member of.
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
}

impl RepositoryView {
    fn new(record: &RepositoryRecord, role: Option<RepositoryRole>) -> Self {
        RepositoryView {
            name: record.name.to_string(),
            created_at: record.created_at.to_string(),
            role: role.map(RepositoryRole::as_str),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    /// Every repository, for a `system_admin`.
    #[serde(default)]
    all: bool,
    after: Option<String>,
    limit: Option<usize>,
}

#[derive(Serialize)]
struct ListBody {
    repositories: Vec<RepositoryView>,
    /// Pass as `after` for the next page; absent on the last.
    next_cursor: Option<String>,
}

async fn list(
    State(state): State<HttpState>,
    Authenticated(caller): Authenticated,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<ListBody>, ApiError> {
    let limit = query.limit.unwrap_or(50).clamp(1, 500);
    let after = query.after.map(Repository::new).transpose()?;
    let repositories = state.documents.repositories();
    // One more than asked for tells whether another page follows.
    let mut views: Vec<RepositoryView> = if query.all {
        if !caller.user.has_role(Role::SystemAdmin) {
            return Err(ApiError::forbidden(
                "listing every repository needs system_admin",
            ));
        }
        repositories
            .all(after.as_ref(), limit + 1)
            .await?
            .iter()
            .map(|record| RepositoryView::new(record, None))
            .collect()
    } else {
        repositories
            .of_member(&caller.user.id, after.as_ref(), limit + 1)
            .await?
            .iter()
            .map(|(record, role)| RepositoryView::new(record, Some(*role)))
            .collect()
    };
    let more = views.len() > limit;
    views.truncate(limit);
    let next_cursor = more
        .then(|| views.last().map(|view| view.name.clone()))
        .flatten();
    Ok(Json(ListBody {
        repositories: views,
        next_cursor,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    name: String,
}

async fn create(
    State(state): State<HttpState>,
    Authenticated(caller): Authenticated,
    request: Request,
) -> Result<Response, ApiError> {
    let body: CreateBody = json_body(request).await?;
    let name = Repository::new(body.name)?;
    let Some((owner, repository)) = name.owner_and_name() else {
        return Err(ApiError::bad_request("a repository is named OWNER/NAME"));
    };
    // A path segment of dots is one a browser resolves away: its pages could not be reached.
    if [owner, repository]
        .iter()
        .any(|part| part.chars().all(|c| c == '.'))
    {
        return Err(ApiError::bad_request(
            "neither the owner nor the name of a repository is only dots",
        ));
    }
    if !may_create(&caller.user, &name) {
        return Err(ApiError::forbidden(
            "a repository is created under your own user name (OWNER/NAME, OWNER being you)",
        ));
    }
    let repositories = state.documents.repositories();
    let (record, created) = repositories.create(&caller.user, &name).await?;
    let standing = repositories.standing(&caller.user, &name).await?;
    if !created && standing.is_none_or(|s| s.overriding) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            "that repository exists already",
        ));
    }
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let view = RepositoryView::new(&record, standing.map(|s| s.role));
    Ok((status, Json(view)).into_response())
}

async fn read(
    State(state): State<HttpState>,
    grant: RepositoryGrant,
) -> Result<Json<RepositoryView>, ApiError> {
    let record = state
        .documents
        .repositories()
        .repository(&grant.repository)
        .await?
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such repository"))?;
    Ok(Json(RepositoryView::new(
        &record,
        Some(grant.standing.role),
    )))
}

#[derive(Serialize)]
struct MemberView {
    user: String,
    role: &'static str,
    added_at: String,
}

impl From<&NamedMember> for MemberView {
    fn from(named: &NamedMember) -> Self {
        MemberView {
            user: named
                .name
                .as_ref()
                .map_or_else(|| named.member.user.to_string(), ToString::to_string),
            role: named.member.role.as_str(),
            added_at: named.member.added_at.to_string(),
        }
    }
}

#[derive(Serialize)]
struct MembersBody {
    members: Vec<MemberView>,
}

async fn members(
    State(state): State<HttpState>,
    grant: RepositoryGrant,
) -> Result<Json<MembersBody>, ApiError> {
    let members = state
        .documents
        .repositories()
        .members(&grant.repository)
        .await?;
    Ok(Json(MembersBody {
        members: members.iter().map(MemberView::from).collect(),
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RoleBody {
    role: String,
}

fn user_name(text: &str) -> Result<UserName, ApiError> {
    UserName::new(text)
        .map_err(|_| ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such user"))
}

async fn set_member(
    State(state): State<HttpState>,
    grant: RepositoryGrant,
    Path((_, _, user)): Path<(String, String, String)>,
    request: Request,
) -> Result<Json<MemberView>, ApiError> {
    let body: RoleBody = json_body(request).await?;
    let role = RepositoryRole::parse(&body.role)
        .ok_or_else(|| ApiError::bad_request("a role is \"viewer\", \"editor\" or \"admin\""))?;
    let name = user_name(&user)?;
    let member = state
        .documents
        .repositories()
        .set_member(&grant.repository, &name, role)
        .await?;
    state
        .accounts
        .access_watch()
        .recheck_user(&member.user)
        .await;
    tracing::info!(by = %grant.principal.user.name, repository = %grant.repository, user = %name, role = %role, "set a member's role");
    Ok(Json(MemberView::from(&NamedMember {
        member,
        name: Some(name),
    })))
}

async fn remove_member(
    State(state): State<HttpState>,
    grant: RepositoryGrant,
    Path((_, _, user)): Path<(String, String, String)>,
) -> Result<StatusCode, ApiError> {
    let name = user_name(&user)?;
    let repositories = state.documents.repositories();
    let removed = repositories.remove_member(&grant.repository, &name).await?;
    if !removed {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "no such member",
        ));
    }
    if let Ok(user) = state.accounts.user_named(name.as_str()).await {
        state.accounts.access_watch().recheck_user(&user.id).await;
    }
    tracing::info!(by = %grant.principal.user.name, repository = %grant.repository, user = %name, "removed a member");
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Serialize)]
struct OverrideView {
    user: String,
    action: String,
    document: Option<String>,
    at: String,
}

impl OverrideView {
    fn new(entry: &Override, name: Option<String>) -> Self {
        OverrideView {
            user: name.unwrap_or_else(|| entry.user.to_string()),
            action: entry.action.clone(),
            document: entry.document.as_ref().map(ToString::to_string),
            at: entry.at.to_string(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditQuery {
    limit: Option<usize>,
}

#[derive(Serialize)]
struct AuditBody {
    overrides: Vec<OverrideView>,
}

async fn audit(
    State(state): State<HttpState>,
    grant: RepositoryGrant,
    ApiQuery(query): ApiQuery<AuditQuery>,
) -> Result<Json<AuditBody>, ApiError> {
    let limit = query.limit.unwrap_or(100).clamp(1, 500);
    let entries = state
        .documents
        .repositories()
        .overrides(&grant.repository, limit)
        .await?;
    let mut overrides = Vec::with_capacity(entries.len());
    for entry in &entries {
        let name = state
            .accounts
            .user_by_id(&entry.user)
            .await?
            .map(|user| user.name.to_string());
        overrides.push(OverrideView::new(entry, name));
    }
    Ok(Json(AuditBody { overrides }))
}
