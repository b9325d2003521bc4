//! Server-rendered pages for people (the signed-in home is [`crate::home_page`]): log in,
//! re-authenticate, log out, and the account page (connected credentials, API tokens, paired
//! machines). Every form carries the CSRF token and answers with a redirect, so a reload repeats
//! nothing; what the page after it shows once (an error, or a new secret sealed for the session)
//! travels in a flash cookie.

use axum::Form;
use axum::extract::{FromRequest, Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum_extra::extract::CookieJar;
use fermata_accounts::{AccountError, Credentials, FRESH_FOR, LoginClient, Principal};
use fermata_crypto::{SecretToken, csrf_token};
use fermata_store::{ApiTokenId, MachineId};
use maud::{DOCTYPE, Markup, html};
use serde::Deserialize;

use crate::HttpState;
use crate::auth::{Authenticated, client_address};
use crate::cookies::{self, LOGIN_CSRF_COOKIE};
use crate::error::{RequestFailure, attach};
use crate::policy::{Access, Routes};

pub(crate) fn routes() -> Routes {
    use Access::{Public, SignedIn};
    Routes::new()
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

/// The look every page shares; also served as `/assets/page.css` for pages under a strict
/// Content-Security-Policy, which refuses inline styles. Every page fits a phone's width: long
/// words break, and below 48rem a table scrolls sideways inside itself rather than the page.
pub(crate) const STYLE: &str = "
body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#1d232a;line-height:1.45}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem}
form.inline{display:inline}label{display:block;margin:.5rem 0 .2rem}
input[type=text],input[type=password]{width:100%;max-width:24rem;padding:.45rem;font:inherit;box-sizing:border-box}
button{font:inherit;padding:.35rem .9rem;margin-top:.6rem;cursor:pointer}
button:focus-visible,input:focus-visible,a:focus-visible{outline:3px solid #2f6fdb;outline-offset:2px}
table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:.35rem;border-bottom:1px solid #d9dee4;vertical-align:top}
.error{background:#fdecea;border:1px solid #e0a4a0;padding:.6rem}.note{color:#56606b}
.secret{background:#eef6ee;border:1px solid #9fc79f;padding:.6rem;margin-top:1rem;word-break:break-all}
code{font-size:.95em}
select{font:inherit}
select:focus-visible,textarea:focus-visible,summary:focus-visible,[tabindex]:focus-visible{outline:3px solid #2f6fdb;outline-offset:2px}
h1,h2,h3,p,li,dt,dd,label,caption{overflow-wrap:anywhere}
pre{overflow-x:auto}pre.text{white-space:pre-wrap;overflow-wrap:anywhere}
@media (max-width:48rem){body{margin:1rem auto}table{display:block;overflow-x:auto}}
";

/// Every inline style a page of this server carries (the shared style, and the shared style with
/// the administrator page's after it), for the pages' Content-Security-Policy.
pub(crate) fn inline_styles() -> Vec<String> {
    vec![
        STYLE.to_owned(),
        format!("{STYLE}{}", crate::admin_render::ADMIN_STYLE),
    ]
}

/// Every inline script a page of this server carries.
pub(crate) fn inline_scripts() -> Vec<&'static str> {
    vec![crate::admin_render::ADMIN_SCRIPT]
}

fn page(title: &str, body: &Markup) -> Markup {
    styled_page(title, "", None, body)
}

/// A page with the shared style, `extra_style` after it, and `script` (progressive: the page
/// works without it) at the end of the body.
pub(crate) fn styled_page(
    title: &str,
    extra_style: &str,
    script: Option<&str>,
    body: &Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Fermata" }
                style { (maud::PreEscaped(STYLE)) (maud::PreEscaped(extra_style)) }
            }
            body {
                main { (*body) }
                @if let Some(script) = script { script { (maud::PreEscaped(script)) } }
            }
        }
    }
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

fn login_page(csrf: &str, next: &str, error: Option<&str>) -> Markup {
    page(
        "Log in",
        &html! {
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

async fn logout(State(state): State<HttpState>, caller: Authenticated, jar: CookieJar) -> Response {
    let ended = match caller.0.session() {
        Some(session) => state.accounts.logout(&session.session.id).await,
        None => Ok(()),
    };
    let page = (
        jar.remove(cookies::cleared_session()),
        Redirect::to("/login"),
    )
        .into_response();
    // The cookie is cleared whatever happened; a session row that could not be ended expires.
    match ended {
        Ok(()) => page,
        Err(error) => attach(page, RequestFailure::new(error)),
    }
}

fn reauth_page(caller: &Principal, next: &str, error: Option<&str>) -> Markup {
    let csrf = caller
        .session()
        .map(|c| csrf_token(&c.secret))
        .unwrap_or_default();
    page(
        "Confirm your password",
        &html! {
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

async fn account_page(state: &HttpState, caller: &Principal, flash: Option<Flash>) -> Response {
    let accounts = &state.accounts;
    let (tokens, machines, credentials) = match (
        accounts.api_tokens(&caller.user.id).await,
        accounts.machines(&caller.user.id).await,
        match caller.session() {
            Some(context) => accounts.session_credentials(&context.session.id).await,
            None => Ok(Credentials::default()),
        },
    ) {
        (Ok(t), Ok(m), Ok(c)) => (t, m, c),
        (Err(error), _, _) | (_, Err(error), _) | (_, _, Err(error)) => {
            return crate::error::ApiError::from(error).into_response();
        }
    };
    let csrf = caller
        .session()
        .map(|c| csrf_token(&c.secret))
        .unwrap_or_default();
    let fresh_until = caller
        .session()
        .map(|c| c.session.authenticated_at.plus(FRESH_FOR).to_string());
    let roles: Vec<&str> = caller.user.roles.iter().map(|r| r.as_str()).collect();
    let body = html! {
        h1 { "Your account" }
        p { "Signed in as " strong { (caller.user.name) }
            @if !roles.is_empty() { " (" (roles.join(", ")) ")" } "." }
        @if caller.is_fresh() {
            p.note { "Your session is fresh until " (fresh_until.unwrap_or_default()) "." }
        } @else {
            p.note { "Some actions will ask for your password again. " a href="/reauth?next=/account" { "Confirm your password now" } }
        }
        form.inline method="post" action="/logout" {
            input type="hidden" name="csrf" value=(csrf);
            button type="submit" { "Log out" }
        }
        @match &flash {
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
        @if credentials.is_empty() { p.note { "None connected." } }
        @else {
            ul { @for name in credentials.names() { li { code { (name) } } } }
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
        @if tokens.is_empty() { p.note { "No tokens yet." } }
        @else {
            table {
                thead { tr { th { "Label" } th { "Created" } th { "Last used" } th { "" } } }
                tbody {
                    @for token in &tokens {
                        tr {
                            td { (token.label) }
                            td { (token.created_at) }
                            td { (token.last_used_at.map(|t| t.to_string()).unwrap_or_else(|| "never".to_owned())) }
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
        @if machines.is_empty() { p.note { "No machines paired." } }
        @else {
            table {
                thead { tr { th { "Name" } th { "Token issued" } th { "" } } }
                tbody {
                    @for machine in &machines {
                        tr {
                            td { (machine.name) }
                            td { (machine.authorized_at) }
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
    page("Account", &body).into_response()
}

async fn account(
    State(state): State<HttpState>,
    caller: Authenticated,
    jar: CookieJar,
) -> Response {
    let (flash, jar) = take_flash(&state, jar, Some(&caller.0));
    (jar, account_page(&state, &caller.0, flash).await).into_response()
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
        Err(error) => return crate::error::ApiError::from(error).into_response(),
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
    use super::safe_next;

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
