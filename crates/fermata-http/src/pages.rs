//! Server-rendered pages for people (the signed-in home is `home_page.rs`): log in,
//! re-authenticate, log out, and the account page (connected credentials, API tokens, paired
//! machines). Every form carries the CSRF token and answers with a redirect, so a reload repeats
//! nothing; what the page after it shows once (an error, or a new secret sealed for the session)
//! travels in a flash cookie.
//!
//! Each page is a pure function of what it shows, drawn in the one skeleton of [`crate::view`];
//! the account page's handler reads what it shows into an [`AccountPage`] first.

use axum::Form;
use axum::extract::{FromRequest, Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum_extra::extract::CookieJar;
use fermata_accounts::{AccountError, Credentials, FRESH_FOR, LoginClient, Principal};
use fermata_crypto::{SecretToken, csrf_token};
use fermata_store::{ApiToken, ApiTokenId, Machine, MachineId, UnixMillis};
use maud::html;
use serde::Deserialize;

use crate::HttpState;
use crate::auth::{Authenticated, client_address};
use crate::cookies::{self, LOGIN_CSRF_COOKIE};
use crate::error::{ApiError, RequestFailure, attach};
use crate::policy::{Access, Routes};
use crate::view::{Page, time};

pub(crate) fn routes() -> Routes {
    use Access::{Public, SignedIn};
    Routes::pages()
        .get("/login", Public, login_form)
        .post("/login", Public, login)
        .post("/logout", SignedIn, logout)
        .get("/reauth", SignedIn, reauth_form)
        .post("/reauth", SignedIn, reauth)
        .get("/account", SignedIn, account)
        .post("/account/credentials", SignedIn, add_credential)
        .post("/account/credentials/clear", SignedIn, clear_credentials)
        .post("/account/tokens", SignedIn, create_token)
        .post("/account/tokens/{id}/revoke", SignedIn, revoke_token)
        .post("/account/machines", SignedIn, pair_machine)
        .post(
            "/account/machines/{id}/reauthorize",
            SignedIn,
            reauthorize_machine,
        )
        .post("/account/machines/{id}/revoke", SignedIn, revoke_machine)
}

/// Only a local path is followed after a login, never another site; without one, the home
/// page. Only a path of this server: it starts with one `/`, and holds only the characters of a plain
/// path and query (no whitespace or control characters, which browsers drop to reach another
/// host, and no backslash, which some read as a slash).
fn safe_next(next: Option<&str>) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/-._~?=&%+".contains(c);
    match next {
        Some(next)
            if next.starts_with('/')
                && !next.starts_with("//")
                && next.len() <= 512
                && next.chars().all(plain) =>
        {
            next.to_owned()
        }
        // The signed-in home: a person lands among their repositories and documents.
        _ => "/".to_owned(),
    }
}

#[derive(Deserialize)]
struct NextQuery {
    next: Option<String>,
}

fn login_page(csrf: &str, next: &str, error: Option<&str>) -> Page {
    Page::new(
        "Log in",
        html! {
            h1 { "Log in to Fermata" }
            @if let Some(error) = error { p.error role="alert" { (error) } }
            form method="post" action="/login" {
                input type="hidden" name="csrf" value=(csrf);
                input type="hidden" name="next" value=(next);
                label for="name" { "Name" }
                input #name type="text" name="name" autocomplete="username" required autofocus;
                label for="password" { "Password" }
                input #password type="password" name="password" autocomplete="current-password" required;
                div { button type="submit" { "Log in" } }
            }
        },
    )
}

async fn login_form(
    State(state): State<HttpState>,
    jar: CookieJar,
    Query(query): Query<NextQuery>,
) -> Response {
    let (flash, jar) = take_flash(&state, jar, None);
    let token = SecretToken::generate("");
    let jar = jar.add(cookies::login_csrf(&state, token.expose()));
    let next = safe_next(query.next.as_deref());
    let error = flash.and_then(Flash::into_error);
    (jar, login_page(token.expose(), &next, error.as_deref())).into_response()
}

/// Back to the login form, with `message` shown once.
fn back_to_login(state: &HttpState, jar: CookieJar, next: &str, message: &str) -> Response {
    (
        jar.add(cookies::flash(
            state,
            &Flash::Error(message.to_owned()).encode(),
        )),
        Redirect::to(&format!("/login?next={}", crate::auth::encode_next(next))),
    )
        .into_response()
}

#[derive(Deserialize)]
struct LoginForm {
    name: String,
    password: String,
    csrf: String,
    next: Option<String>,
}

async fn login(
    State(state): State<HttpState>,
    jar: CookieJar,
    request: axum::extract::Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let address = client_address(&parts);
    let Ok(Form(form)) =
        Form::<LoginForm>::from_request(axum::extract::Request::from_parts(parts, body), &state)
            .await
    else {
        return back_to_login(&state, jar, "/", "The login form was incomplete.");
    };
    let next = safe_next(form.next.as_deref());
    // Double submit: the form's token must equal the cookie set with the form.
    let expected = jar
        .get(LOGIN_CSRF_COOKIE)
        .map(|c| SecretToken::from_given(c.value()).hash());
    if expected != Some(SecretToken::from_given(form.csrf.clone()).hash()) {
        return back_to_login(&state, jar, &next, "The form expired. Please try again.");
    }
    let password = SecretToken::from_given(form.password);
    let client = LoginClient {
        address,
        device_mark: cookies::device_mark(&jar),
    };
    match state.accounts.login(&form.name, &password, client).await {
        Ok(logged_in) => {
            let jar = jar
                .clone()
                .add(cookies::session(&state, &logged_in.secret))
                .add(cookies::device(&state, &logged_in.device_mark))
                .remove(
                    axum_extra::extract::cookie::Cookie::build(LOGIN_CSRF_COOKIE).path("/login"),
                );
            (jar, Redirect::to(&next)).into_response()
        }
        Err(error) => {
            let message = match error {
                AccountError::Throttled { .. }
                | AccountError::Busy { .. }
                | AccountError::WrongCredentials => error.to_string(),
                _ => "The server could not log you in just now. Try again shortly.".to_owned(),
            };
            let page = back_to_login(&state, jar, &next, &message);
            if matches!(
                error,
                AccountError::Throttled { .. }
                    | AccountError::Busy { .. }
                    | AccountError::WrongCredentials
            ) {
                page
            } else {
                attach(page, RequestFailure::new(error))
            }
        }
    }
}

/// What a logout tells the browser to clear besides the session cookie: all this origin stored
/// in it (`Clear-Site-Data: "storage"`), above all the IndexedDB databases where the editor keeps
/// edits not yet on the server, for every user of this browser. A header rather than a script on
/// the page after: the browser clears the storage before it follows the redirect, with no script
/// that must load and run, and in every open tab of the origin (their databases are closed under
/// them, and they keep nothing more). Not `"cookies"`: the login form's double-submit cookie and
/// the known-device mark stay, so the next login works as before. Browsers honour it on secure
/// origins only (HTTPS, or a loopback address).
const CLEAR_SITE_STORAGE: [(&str, &str); 1] = [("clear-site-data", "\"storage\"")];

async fn logout(State(state): State<HttpState>, caller: Authenticated, jar: CookieJar) -> Response {
    let ended = match caller.0.session() {
        Some(session) => state.accounts.logout(&session.session.id).await,
        None => Ok(()),
    };
    let page = (
        jar.remove(cookies::cleared_session()),
        CLEAR_SITE_STORAGE,
        Redirect::to("/login"),
    )
        .into_response();
    // The cookie is cleared whatever happened; a session row that could not be ended expires.
    match ended {
        Ok(()) => page,
        Err(error) => attach(page, RequestFailure::new(error)),
    }
}

fn reauth_page(caller: &Principal, next: &str, error: Option<&str>) -> Page {
    let csrf = caller
        .session()
        .map(|c| csrf_token(&c.secret))
        .unwrap_or_default();
    Page::new(
        "Confirm your password",
        html! {
            h1 { "Confirm your password" }
            p.note { "Signed in as " strong { (caller.user.name) } ". This action needs a password entered in the last "
                (FRESH_FOR.as_secs() / 60) " minutes." }
            @if let Some(error) = error { p.error role="alert" { (error) } }
            form method="post" action="/reauth" {
                input type="hidden" name="csrf" value=(csrf);
                input type="hidden" name="next" value=(next);
                label for="password" { "Password" }
                input #password type="password" name="password" autocomplete="current-password" required autofocus;
                div { button type="submit" { "Confirm" } }
            }
        },
    )
}

async fn reauth_form(
    State(state): State<HttpState>,
    caller: Authenticated,
    jar: CookieJar,
    Query(query): Query<NextQuery>,
) -> Response {
    let (flash, jar) = take_flash(&state, jar, None);
    let error = flash.and_then(Flash::into_error);
    let page = reauth_page(
        &caller.0,
        &safe_next(query.next.as_deref()),
        error.as_deref(),
    );
    (jar, page).into_response()
}

#[derive(Deserialize)]
struct ReauthForm {
    password: String,
    next: Option<String>,
}

async fn reauth(
    State(state): State<HttpState>,
    caller: Authenticated,
    jar: CookieJar,
    request: axum::extract::Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let address = client_address(&parts);
    let back = |jar: CookieJar, next: &str, message: &str| {
        (
            jar.add(cookies::flash(
                &state,
                &Flash::Error(message.to_owned()).encode(),
            )),
            Redirect::to(&format!("/reauth?next={}", crate::auth::encode_next(next))),
        )
            .into_response()
    };
    let Ok(Form(form)) =
        Form::<ReauthForm>::from_request(axum::extract::Request::from_parts(parts, body), &state)
            .await
    else {
        return back(jar, "/account", "The form was incomplete.");
    };
    let next = safe_next(form.next.as_deref());
    let password = SecretToken::from_given(form.password);
    match state
        .accounts
        .reauthenticate(&caller.0, &password, address)
        .await
    {
        Ok(fresh) => (
            jar.add(cookies::session(&state, &fresh.secret)),
            Redirect::to(&next),
        )
            .into_response(),
        Err(error) => back(jar, &next, &error.to_string()),
    }
}

/// Something a form's answer leaves for the page it redirects to, shown once: an error, or a
/// new secret (sealed for the session, so the cookie that carries it is no copy of it).
enum Flash {
    Secret {
        what: &'static str,
        value: String,
    },
    /// A secret as the cookie carries it: what it is, sealed.
    Sealed {
        what: &'static str,
        sealed: String,
    },
    Error(String),
}

/// What the secrets shown once are, as the flash cookie names them.
const SECRET_KINDS: [(&str, &str); 2] = [("token", "API token"), ("machine", "machine token")];

impl Flash {
    /// The cookie's value: `e.BASE64` for an error, `s.KIND.SEALED` for a sealed secret.
    fn encode(&self) -> String {
        use base64::Engine as _;
        let base64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        match self {
            Flash::Error(message) => format!("e.{}", base64.encode(message)),
            Flash::Sealed { what, sealed } => {
                let kind = SECRET_KINDS
                    .iter()
                    .find(|(_, shown)| shown == what)
                    .map_or("token", |(kind, _)| kind);
                format!("s.{kind}.{sealed}")
            }
            // A secret is sealed before it leaves: see `shown_once`.
            Flash::Secret { .. } => String::new(),
        }
    }

    fn decode(value: &str) -> Option<Flash> {
        use base64::Engine as _;
        let base64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        if let Some(message) = value.strip_prefix("e.") {
            let bytes = base64.decode(message).ok()?;
            return String::from_utf8(bytes).ok().map(Flash::Error);
        }
        let (kind, sealed) = value.strip_prefix("s.")?.split_once('.')?;
        let what = SECRET_KINDS
            .iter()
            .find(|(known, _)| *known == kind)
            .map(|(_, what)| *what)?;
        Some(Flash::Sealed {
            what,
            sealed: sealed.to_owned(),
        })
    }

    fn into_error(self) -> Option<String> {
        match self {
            Flash::Error(message) => Some(message),
            Flash::Secret { .. } | Flash::Sealed { .. } => None,
        }
    }
}

/// What a secret is sealed for: the caller's session, or the user when there is none.
fn seal_row(caller: &Principal) -> fermata_store::SessionId {
    caller.session().map_or_else(
        || fermata_store::SessionId(format!("user:{}", caller.user.id)),
        |context| context.session.id.clone(),
    )
}

/// The flash the browser brought, opened for `caller` when it holds a secret, and the jar that
/// clears it (it is shown once).
fn take_flash(
    state: &HttpState,
    jar: CookieJar,
    caller: Option<&Principal>,
) -> (Option<Flash>, CookieJar) {
    let Some(value) = jar.get(cookies::FLASH_COOKIE).map(|c| c.value().to_owned()) else {
        return (None, jar);
    };
    let jar = jar.remove(cookies::cleared_flash());
    let flash = match Flash::decode(&value) {
        Some(Flash::Sealed { what, sealed }) => caller.and_then(|caller| {
            state
                .accounts
                .open_shown_once(&seal_row(caller), &sealed)
                .map(|value| Flash::Secret {
                    what,
                    value: value.as_str().to_owned(),
                })
        }),
        other => other,
    };
    (flash, jar)
}

/// What the account page shows.
struct AccountPage {
    user: String,
    roles: Vec<&'static str>,
    csrf: String,
    /// Until when the session counts as fresh, when it does.
    fresh_until: Option<UnixMillis>,
    /// What the last form left to show once.
    flash: Option<Flash>,
    /// The names of the credentials connected to the session.
    credentials: Vec<String>,
    tokens: Vec<ApiToken>,
    machines: Vec<Machine>,
    /// The moment the page is drawn for: times are told relative to it.
    now: UnixMillis,
}

async fn account(
    State(state): State<HttpState>,
    caller: Authenticated,
    jar: CookieJar,
) -> Response {
    let (flash, jar) = take_flash(&state, jar, Some(&caller.0));
    match gather_account(&state, &caller.0, flash).await {
        Ok(page) => (jar, render_account(&page)).into_response(),
        Err(error) => (jar, ApiError::from(error)).into_response(),
    }
}

/// Reads what the account page shows `caller`.
async fn gather_account(
    state: &HttpState,
    caller: &Principal,
    flash: Option<Flash>,
) -> Result<AccountPage, AccountError> {
    let accounts = &state.accounts;
    let tokens = accounts.api_tokens(&caller.user.id).await?;
    let machines = accounts.machines(&caller.user.id).await?;
    let credentials = match caller.session() {
        Some(context) => accounts.session_credentials(&context.session.id).await?,
        None => Credentials::default(),
    };
    Ok(AccountPage {
        user: caller.user.name.to_string(),
        roles: caller.user.roles.iter().map(|r| r.as_str()).collect(),
        csrf: caller
            .session()
            .map(|c| csrf_token(&c.secret))
            .unwrap_or_default(),
        fresh_until: caller
            .is_fresh()
            .then(|| caller.session())
            .flatten()
            .map(|c| c.session.authenticated_at.plus(FRESH_FOR)),
        flash,
        credentials: credentials.names().into_iter().map(str::to_owned).collect(),
        tokens,
        machines,
        now: UnixMillis::now(),
    })
}

fn render_account(page: &AccountPage) -> Page {
    let csrf = &page.csrf;
    let body = html! {
        h1 { "Your account" }
        p { "Signed in as " strong { (page.user) }
            @if !page.roles.is_empty() { " (" (page.roles.join(", ")) ")" } "." }
        @if let Some(until) = &page.fresh_until {
            p.note { "Your session is fresh; that ends " (time(*until, page.now)) "." }
        } @else {
            p.note { "Some actions will ask for your password again. " a href="/reauth?next=/account" { "Confirm your password now" } }
        }
        form.inline method="post" action="/logout" {
            input type="hidden" name="csrf" value=(csrf);
            button type="submit" { "Log out" }
        }
        @match &page.flash {
            Some(Flash::Secret { what, value }) => {
                div.secret role="status" {
                    p { "Your new " (what) ". Copy it now: it is shown only once." }
                    code { (value) }
                }
            }
            Some(Flash::Error(message)) => { p.error role="alert" { (message) } }
            Some(Flash::Sealed { .. }) | None => {}
        }

        h2 { "Connected credentials" }
        @if page.credentials.is_empty() { p.note { "None connected." } }
        @else {
            ul { @for name in &page.credentials { li { code { (name) } } } }
            form.inline method="post" action="/account/credentials/clear" {
                input type="hidden" name="csrf" value=(csrf);
                button type="submit" { "Remove all" }
            }
        }
        form method="post" action="/account/credentials" {
            input type="hidden" name="csrf" value=(csrf);
            label for="cred-name" { "Name (e.g. github_token)" }
            input #cred-name type="text" name="name" required pattern="[a-z0-9_]{1,64}";
            label for="cred-value" { "Secret" }
            input #cred-value type="password" name="value" required autocomplete="off";
            div { button type="submit" { "Connect" } }
        }

        h2 { "API tokens" }
        @if page.tokens.is_empty() { p.note { "No tokens yet." } }
        @else {
            table {
                thead { tr { th { "Label" } th { "Created" } th { "Last used" } th { "" } } }
                tbody {
                    @for token in &page.tokens {
                        tr {
                            td { (token.label) }
                            td { (time(token.created_at, page.now)) }
                            td { @match token.last_used_at { Some(at) => { (time(at, page.now)) } None => { "never" } } }
                            td {
                                @if token.revoked_at.is_some() { "revoked" } @else {
                                    form.inline method="post" action={ "/account/tokens/" (token.id) "/revoke" } {
                                        input type="hidden" name="csrf" value=(csrf);
                                        button type="submit" aria-label={ "Revoke token " (token.label) } { "Revoke" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        form method="post" action="/account/tokens" {
            input type="hidden" name="csrf" value=(csrf);
            label for="token-label" { "New token for" }
            input #token-label type="text" name="label" required maxlength="100";
            div { button type="submit" { "Create token" } }
        }

        h2 { "Paired machines" }
        @if page.machines.is_empty() { p.note { "No machines paired." } }
        @else {
            table {
                thead { tr { th { "Name" } th { "Token issued" } th { "" } } }
                tbody {
                    @for machine in &page.machines {
                        tr {
                            td { (machine.name) }
                            td { (time(machine.authorized_at, page.now)) }
                            td {
                                form.inline method="post" action={ "/account/machines/" (machine.id) "/reauthorize" } {
                                    input type="hidden" name="csrf" value=(csrf);
                                    button type="submit" aria-label={ "New token for " (machine.name) } { "New token" }
                                }
                                " "
                                form.inline method="post" action={ "/account/machines/" (machine.id) "/revoke" } {
                                    input type="hidden" name="csrf" value=(csrf);
                                    button type="submit" aria-label={ "Revoke " (machine.name) } { "Revoke" }
                                }
                            }
                        }
                    }
                }
            }
        }
        form method="post" action="/account/machines" {
            input type="hidden" name="csrf" value=(csrf);
            label for="machine-name" { "Pair a machine named" }
            input #machine-name type="text" name="name" required maxlength="100";
            div { button type="submit" { "Pair machine" } }
        }
    };
    Page::new("Account", body)
}

fn shown_once(what: &'static str, secret: &SecretToken) -> Option<Flash> {
    Some(Flash::Secret {
        what,
        value: secret.expose().to_owned(),
    })
}

/// Answers an action of the account page with a redirect to it (so a reload repeats nothing),
/// leaving its new secret, sealed for the session, or its error to be shown there once.
async fn after(
    state: &HttpState,
    caller: &Principal,
    jar: CookieJar,
    result: Result<Option<Flash>, AccountError>,
) -> Response {
    let flash = match result {
        Ok(Some(Flash::Secret { what, value })) => Some(Flash::Sealed {
            what,
            sealed: state.accounts.seal_shown_once(&seal_row(caller), &value),
        }),
        Ok(other) => other,
        Err(
            error @ (AccountError::Invalid(_)
            | AccountError::NotFound(_)
            | AccountError::NotAllowed(_)
            | AccountError::TooMany(_)
            | AccountError::Conflict(_)),
        ) => Some(Flash::Error(error.to_string())),
        Err(error) => return ApiError::from(error).into_response(),
    };
    let jar = match flash {
        Some(flash) => jar.add(cookies::flash(state, &flash.encode())),
        None => jar,
    };
    (jar, Redirect::to("/account")).into_response()
}

#[derive(Deserialize)]
struct CredentialForm {
    name: String,
    value: String,
}

async fn add_credential(
    State(state): State<HttpState>,
    caller: Authenticated,
    jar: CookieJar,
    Form(form): Form<CredentialForm>,
) -> Response {
    let result = async {
        let session = caller
            .0
            .session()
            .ok_or_else(|| AccountError::Invalid("this needs a browser session".to_owned()))?;
        state
            .accounts
            .add_session_credential(&session.session.id, form.name, form.value)
            .await?;
        Ok(None)
    }
    .await;
    after(&state, &caller.0, jar, result).await
}

async fn clear_credentials(
    State(state): State<HttpState>,
    caller: Authenticated,
    jar: CookieJar,
) -> Response {
    let result = async {
        if let Some(session) = caller.0.session() {
            state
                .accounts
                .set_session_credentials(&session.session.id, &Credentials::default())
                .await?;
        }
        Ok(None)
    }
    .await;
    after(&state, &caller.0, jar, result).await
}

#[derive(Deserialize)]
struct LabelForm {
    label: String,
}

async fn create_token(
    State(state): State<HttpState>,
    caller: Authenticated,
    jar: CookieJar,
    Form(form): Form<LabelForm>,
) -> Response {
    let result = match caller.0.require_issuing() {
        Ok(()) => state
            .accounts
            .create_api_token(&caller.0.user, &form.label)
            .await
            .map(|(_, secret)| shown_once("API token", &secret)),
        Err(error) => Err(error),
    };
    after(&state, &caller.0, jar, result).await
}

async fn revoke_token(
    State(state): State<HttpState>,
    caller: Authenticated,
    jar: CookieJar,
    Path(id): Path<String>,
) -> Response {
    let result = state
        .accounts
        .revoke_api_token(Some(&caller.0.user), &ApiTokenId(id))
        .await
        .map(|()| None);
    after(&state, &caller.0, jar, result).await
}

#[derive(Deserialize)]
struct NameForm {
    name: String,
}

async fn pair_machine(
    State(state): State<HttpState>,
    caller: Authenticated,
    jar: CookieJar,
    Form(form): Form<NameForm>,
) -> Response {
    let result = match caller.0.require_issuing() {
        Ok(()) => state
            .accounts
            .pair_machine(&caller.0.user, &form.name)
            .await
            .map(|(_, secret)| shown_once("machine token", &secret)),
        Err(error) => Err(error),
    };
    after(&state, &caller.0, jar, result).await
}

async fn reauthorize_machine(
    State(state): State<HttpState>,
    caller: Authenticated,
    jar: CookieJar,
    Path(id): Path<String>,
) -> Response {
    let result = match caller.0.require_issuing() {
        Ok(()) => state
            .accounts
            .reauthorize_machine(&caller.0.user, &MachineId(id))
            .await
            .map(|(_, secret)| shown_once("machine token", &secret)),
        Err(error) => Err(error),
    };
    after(&state, &caller.0, jar, result).await
}

async fn revoke_machine(
    State(state): State<HttpState>,
    caller: Authenticated,
    jar: CookieJar,
    Path(id): Path<String>,
) -> Response {
    let result = state
        .accounts
        .revoke_machine(&caller.0.user, &MachineId(id))
        .await
        .map(|()| None);
    after(&state, &caller.0, jar, result).await
}

#[cfg(test)]
mod tests {
    use fermata_store::{UnixMillis, UserId};

    use super::*;

    fn account_page(flash: Option<Flash>, fresh_until: Option<UnixMillis>) -> AccountPage {
        AccountPage {
            user: "ada".to_owned(),
            roles: vec!["system_admin"],
            csrf: "csrf-token".to_owned(),
            fresh_until,
            flash,
            credentials: vec!["github_token".to_owned()],
            tokens: vec![ApiToken {
                id: ApiTokenId("token-1".to_owned()),
                user: UserId("id-ada".to_owned()),
                label: "laptop <&>".to_owned(),
                created_at: UnixMillis(0),
                last_used_at: None,
                revoked_at: None,
            }],
            machines: Vec::new(),
            now: UnixMillis(600_000),
        }
    }

    #[test]
    fn the_account_shows_a_new_secret_once_and_its_forms_carry_the_csrf_token() {
        let secret = Flash::Secret {
            what: "API token",
            value: "fmt_secret".to_owned(),
        };
        let html =
            render_account(&account_page(Some(secret), Some(UnixMillis(900_000)))).snapshot();
        for expected in [
            "Signed in as <strong>ada</strong> (system_admin).",
            "Your session is fresh; that ends <time datetime=\"1970-01-01T00:15:00.000Z\" \
             title=\"1 January 1970, 00:15:00 UTC\">in 5 minutes</time>.",
            "<td><time datetime=\"1970-01-01T00:00:00.000Z\" \
             title=\"1 January 1970, 00:00:00 UTC\">10 minutes ago</time></td>",
            "Your new API token. Copy it now: it is shown only once.",
            "<code>fmt_secret</code>",
            "<li><code>github_token</code></li>",
            "<td>laptop &lt;&amp;&gt;</td>",
            "<td>never</td>",
            "action=\"/account/tokens/token-1/revoke\"",
            "aria-label=\"Revoke token laptop &lt;&amp;&gt;\"",
            "No machines paired.",
        ] {
            assert!(html.contains(expected), "{expected} is not in {html}");
        }
        assert_eq!(
            html.matches("name=\"csrf\" value=\"csrf-token\"").count(),
            html.matches("<form").count(),
            "{html}"
        );

        let stale = render_account(&account_page(
            Some(Flash::Error("No such token.".to_owned())),
            None,
        ))
        .snapshot();
        assert!(stale.contains("href=\"/reauth?next=/account\""), "{stale}");
        assert!(
            stale.contains("<p class=\"error\" role=\"alert\">No such token.</p>"),
            "{stale}"
        );
        assert!(!stale.contains("shown only once"), "{stale}");
    }

    #[test]
    fn only_local_paths_are_followed() {
        assert_eq!(
            safe_next(Some("/account?tab=tokens")),
            "/account?tab=tokens"
        );
        for hostile in [
            "//evil.example",
            "/\tevil",
            "/\t/evil.example/x",
            "/\\evil",
            "https://evil.example",
            "/\n/x",
            "/ x",
        ] {
            assert_eq!(safe_next(Some(hostile)), "/", "{hostile:?}");
        }
        assert_eq!(safe_next(None), "/");
    }
}
