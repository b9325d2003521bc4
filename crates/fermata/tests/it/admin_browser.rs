//! The schema administrator page in a real browser: Chromium driven through WebDriver against the
//! real `fermata serve`, with a snapshot account on the throwaway MariaDB and a local package
//! repository. One scenario per test: a refresh approved to its pull request, an empty selection
//! refused, a refresh rejected, a drifted database's diff shown after a verification with the
//! inventory table's filter and selection buttons and a pull request closed from the page, a
//! non-administrator refused, an expired lease cleared, the next scheduled check and a delivered
//! notification, and the main controls at phone width. Each waits for what it expects with a bound, never a fixed
//! sleep. Screenshots of the main states go to `admin-screenshots/` in the cargo target folder;
//! they are kept to look at, not compared.
//!
//! `scripts/test` installs Chromium and its driver and starts `chromedriver`, exporting
//! `FERMATA_TEST_WEBDRIVER_URL`; without it these tests fail, they never skip.

use crate::support;

use crate::mysql;

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use fantoccini::Locator;
use fermata_schema::{Administrator, OperationRequest, Operations, StartFailure, Workflows};
use fermata_store::schema::{
    DatabaseName, NewInventory, Operation, OperationKind, RequestKey, SafeError,
};
use fermata_store::{Storage, UserName};
use serde_json::Value;
use sqlx::Executor;
use support::browser::{self, webdriver_url, write_screenshot};
use support::{Fermata, PATIENCE, Target, add_user, configure, empty_package};
use tokio::time::Instant;

const PASSWORD: &str = support::USER_PASSWORD;

/// The administrator page tests, whose helpers [`Browser`] carries.
enum Admin {}

/// A browser session with what these tests do in it.
type Browser = browser::Browser<Admin>;

impl Browser {
    async fn goto(&self, base: &str, path: &str) {
        self.client.goto(&format!("{base}{path}")).await.unwrap();
    }

    /// The first element matching `css`, waited for (present and displayed) with a bound.
    async fn wait(&self, css: &str) -> fantoccini::elements::Element {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Ok(element) = self.client.find(Locator::Css(css)).await
                && element.is_displayed().await.unwrap_or(false)
            {
                return element;
            }
            assert!(
                Instant::now() < deadline,
                "gave up waiting for {css:?} on {}:\n{}",
                self.client.current_url().await.unwrap(),
                self.client.source().await.unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Whether an element matching `css` is on the page now.
    async fn has(&self, css: &str) -> bool {
        self.client.find(Locator::Css(css)).await.is_ok()
    }

    /// Waits until the text of the first element matching `css` satisfies `done`; returns every
    /// distinct text seen on the way.
    async fn watch_text(&self, css: &str, done: impl Fn(&str) -> bool) -> Vec<String> {
        let deadline = Instant::now() + PATIENCE;
        let mut seen: Vec<String> = Vec::new();
        loop {
            if let Ok(element) = self.client.find(Locator::Css(css)).await
                && let Ok(text) = element.text().await
            {
                if seen.last() != Some(&text) {
                    seen.push(text.clone());
                }
                if done(&text) {
                    return seen;
                }
            }
            assert!(
                Instant::now() < deadline,
                "gave up waiting on {css:?}; saw {seen:?}:\n{}",
                self.client.source().await.unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn click(&self, css: &str) {
        self.wait(css).await.click().await.unwrap();
    }

    async fn type_into(&self, css: &str, text: &str) {
        self.wait(css).await.send_keys(text).await.unwrap();
    }

    /// Saves a PNG of the window as `name.png` in `admin-screenshots/`.
    async fn screenshot(&self, name: &str) {
        write_screenshot(&self.client, "admin-screenshots", name).await;
    }

    /// Scrolls the element matching `css` to the top of the window, then saves a screenshot.
    async fn screenshot_at(&self, css: &str, name: &str) {
        let element = self.wait(css).await;
        self.client
            .execute(
                "arguments[0].scrollIntoView({block: 'start'});",
                vec![serde_json::to_value(&element).unwrap()],
            )
            .await
            .unwrap();
        self.screenshot(name).await;
    }

    /// Logs in at `/login` and lands on `next`.
    async fn login(&self, base: &str, name: &str, next: &str) {
        self.goto(base, &format!("/login?next={next}")).await;
        self.type_into("#name", name).await;
        self.type_into("#password", PASSWORD).await;
        self.click("form[action='/login'] button[type=submit]")
            .await;
        let deadline = Instant::now() + PATIENCE;
        while self.client.current_url().await.unwrap().path() == "/login" {
            assert!(Instant::now() < deadline, "the login never went through");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Confirms the password at `/reauth` when the page sent us there.
    async fn reauth_if_asked(&self) {
        if self.client.current_url().await.unwrap().path() == "/reauth" {
            self.type_into("#password", PASSWORD).await;
            self.click("form[action='/reauth'] button[type=submit]")
                .await;
        }
    }
}

/// A served Fermata with a snapshot source seeing two test databases and an empty package.
struct Served {
    target: Target,
    fermata: Fermata,
    base: String,
    databases: Vec<String>,
    user: String,
    mariadb: sqlx::mysql::MySqlConnection,
}

impl Served {
    /// `prepare` runs on the stored data before the server starts.
    async fn start(tag: &str) -> Self {
        Served::launch(tag, "", |_| async {}).await
    }

    async fn start_with<F, Fut>(tag: &str, prepare: F) -> Self
    where
        F: FnOnce(Arc<dyn Storage>) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        Served::launch(tag, "", prepare).await
    }

    /// `extra` is appended to the configuration file after the schema tables.
    async fn launch<F, Fut>(tag: &str, extra: &str, prepare: F) -> Self
    where
        F: FnOnce(Arc<dyn Storage>) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        webdriver_url();
        let mut mariadb = mysql::admin().await;
        let prefix = mysql::unique(tag);
        let databases = vec![format!("{prefix}app"), format!("{prefix}crm")];
        for database in &databases {
            let quoted = mysql::quoted(database);
            for statement in [
                format!("CREATE DATABASE {quoted} CHARACTER SET utf8mb4"),
                format!(
                    "CREATE TABLE {quoted}.orders (id int NOT NULL, note varchar(20) DEFAULT \
                     NULL, PRIMARY KEY (id)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
                ),
            ] {
                mariadb.execute(statement.as_str()).await.unwrap();
            }
        }
        let (user, password) = mysql::snapshot_account(&mut mariadb, &databases).await;

        let target = Target::sqlite();
        crate::schema::configure_source(&target, &user, &password);
        let repository = empty_package(&target.config().with_file_name("package"));
        configure(
            &target,
            &format!(
                "\n[schema.package]\nrepository = {}\n{extra}",
                Value::String(repository.display().to_string())
            ),
        );
        add_user(&target, "ada", true);
        add_user(&target, "bob", false);
        {
            let storage: Arc<dyn Storage> = Arc::new(target.store().await);
            prepare(storage).await;
        }

        let fermata = target.serve(&[]);
        fermata.wait_ready().await;
        let base = format!("http://{}", fermata.address().await);
        Served {
            target,
            fermata,
            base,
            databases,
            user,
            mariadb,
        }
    }

    async fn finish(mut self) {
        for database in &self.databases {
            self.mariadb
                .execute(format!("DROP DATABASE {}", mysql::quoted(database)).as_str())
                .await
                .unwrap();
        }
        self.mariadb
            .execute(format!("DROP USER '{}'@'127.0.0.1'", self.user).as_str())
            .await
            .unwrap();
        drop(self.fermata);
        drop(self.target);
    }
}

/// Discovers the databases from the page and waits for the inventory's checkboxes.
async fn discover(browser: &Browser, served: &Served) {
    browser
        .click("form[action='/admin/schema/inventory'] button[type=submit]")
        .await;
    browser.wait("#select-all").await;
    for database in &served.databases {
        browser
            .wait(&format!("input[name=databases][value='{database}']"))
            .await;
    }
}

/// Selects this test's databases, and only them: the server is shared with other tests'.
async fn select_own(browser: &Browser, served: &Served) {
    browser.click("#select-all").await;
    let boxes = browser
        .client
        .find_all(Locator::Css("input[name=databases]"))
        .await
        .unwrap();
    for checkbox in boxes {
        let value = checkbox.attr("value").await.unwrap().unwrap_or_default();
        if !served.databases.contains(&value) {
            checkbox.click().await.unwrap();
        }
    }
}

/// Selects every database, starts a refresh and watches the live panel until the page shows
/// the review; returns the states the panel showed.
async fn refresh_to_review(browser: &Browser, served: &Served) -> Vec<String> {
    select_own(browser, served).await;
    browser.click("button[name=action][value=refresh]").await;
    browser.wait("#operation[data-live=true]").await;
    let states = browser
        .watch_text("#operation [data-field=state]", |state| {
            state == "awaiting_review" || state == "failed"
        })
        .await;
    assert_eq!(
        states.last().map(String::as_str),
        Some("awaiting_review"),
        "{states:?}"
    );
    // The script reloads the page into its review.
    browser.wait("#review-operation").await;
    states
}

#[tokio::test]
async fn an_administrator_refreshes_and_approves_in_the_browser() {
    let served = Served::start("br").await;
    let browser = Browser::open("").await;
    browser.login(&served.base, "ada", "/admin/schema").await;
    browser.wait("#discover-title").await;
    browser.screenshot("01-empty").await;
    discover(&browser, &served).await;
    browser.screenshot("02-inventory").await;

    let states = refresh_to_review(&browser, &served).await;
    assert!(states.len() >= 2, "the live panel showed only {states:?}");
    browser.screenshot_at("#review", "03-review").await;
    let review = browser.wait("#review").await.text().await.unwrap();
    for database in &served.databases {
        assert!(review.contains(database.as_str()), "{review}");
    }
    assert!(review.contains("tables/orders.sql"), "{review}");
    assert!(review.contains("+CREATE TABLE `orders` ("), "{review}");
    assert!(browser.has("pre.diff .add").await);

    // Approve, confirming the password first when the session is not fresh.
    if browser.has("#reauth-review").await {
        browser.click("#reauth-review").await;
        browser.reauth_if_asked().await;
    }
    browser.click("#approve").await;
    browser.reauth_if_asked().await;
    let link = browser.wait("#operation a.pull").await;
    assert_eq!(link.text().await.unwrap(), "#1");
    let state = browser
        .wait("#operation [data-field=state]")
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(state, "succeeded");
    browser.wait("#pull-request").await;
    browser.screenshot_at("#current", "04-approved").await;

    // A second refresh with nothing selected is refused next to the buttons.
    browser.click("#select-none").await;
    browser.click("button[name=action][value=refresh]").await;
    let message = browser.wait("#selection-message").await;
    assert_eq!(
        message.text().await.unwrap(),
        "select at least one database"
    );

    // At a phone's width the page and an operation's report, tables and all, are no wider
    // than the screen.
    support::narrow_to_phone(&browser.client).await;
    browser.goto(&served.base, "/admin/schema").await;
    browser.wait("#recent table").await;
    support::assert_fits_the_viewport(&browser.client, "the administrator page").await;
    browser.screenshot_at("#recent", "05-phone").await;
    browser
        .click("#recent a[href^='/admin/schema/operations/']")
        .await;
    browser.wait("table").await;
    support::assert_fits_the_viewport(&browser.client, "an operation's report").await;
    browser.screenshot("06-phone-report").await;
    browser.close().await;
    served.finish().await;
}

/// Fast-forwards the package's `main` to the head of `branch`: the pull request is merged.
fn merge(served: &Served, branch: &str) {
    let repository =
        git2::Repository::open(served.target.config().with_file_name("package")).unwrap();
    let head = repository
        .find_reference(&format!("refs/heads/{branch}"))
        .unwrap()
        .target()
        .unwrap();
    repository
        .reference("refs/heads/main", head, true, "merge the pull request")
        .unwrap();
}

/// The values of the checked inventory boxes.
async fn checked(browser: &Browser) -> Vec<String> {
    let mut values = Vec::new();
    for checkbox in browser
        .client
        .find_all(Locator::Css("input[name=databases]:checked"))
        .await
        .unwrap()
    {
        values.push(checkbox.attr("value").await.unwrap().unwrap_or_default());
    }
    values
}

/// Approves the refresh the page shows for review, confirming the password first when asked,
/// and waits for its pull request.
async fn approve(browser: &Browser) {
    if browser.has("#reauth-review").await {
        browser.click("#reauth-review").await;
        browser.reauth_if_asked().await;
    }
    browser.click("#approve").await;
    browser.reauth_if_asked().await;
    browser.wait("#operation a.pull").await;
}

#[tokio::test]
async fn drift_is_shown_and_the_inventory_filters_and_selects_in_the_browser() {
    let mut served = Served::start("bd").await;
    let [app, crm] = [served.databases[0].clone(), served.databases[1].clone()];
    let browser = Browser::open("").await;
    browser.login(&served.base, "ada", "/admin/schema").await;
    discover(&browser, &served).await;
    refresh_to_review(&browser, &served).await;
    approve(&browser).await;
    let head = browser.wait("#pull-request").await.text().await.unwrap();
    let branch = head
        .split_whitespace()
        .find(|word| word.starts_with("(fermata/refresh-"))
        .map(|word| word.trim_start_matches('('))
        .expect("the pull request's branch")
        .to_owned();
    merge(&served, &branch);

    // One database drifts; a verification of both finds it.
    served
        .mariadb
        .execute(
            format!(
                "ALTER TABLE {}.orders ADD COLUMN extra int NULL",
                mysql::quoted(&app)
            )
            .as_str(),
        )
        .await
        .unwrap();
    browser.goto(&served.base, "/admin/schema").await;
    // Only this test's databases: the server is shared with other tests' databases.
    browser
        .type_into("#inventory-filter", app.trim_end_matches("app"))
        .await;
    browser.click("#select-all").await;
    let mine = checked(&browser).await;
    assert_eq!(
        mine,
        [app.clone(), crm.clone()],
        "the filter keeps this test's rows"
    );
    browser
        .click("button[name=action][value=verification]")
        .await;
    browser.wait("#operation[data-live=true]").await;
    browser
        .watch_text("#operation [data-field=state]", |state| {
            state == "succeeded" || state == "failed"
        })
        .await;
    browser.click("#show-drift").await;
    let drift = browser.wait("#drift-operation").await;
    assert!(!drift.text().await.unwrap().is_empty());
    let page = browser.wait("body").await.text().await.unwrap();
    assert!(page.contains(&format!("{app}: 2 file(s) differ")), "{page}");
    assert!(!page.contains(&format!("{crm}:")), "{page}");
    let added = browser.wait("pre.diff .add").await.text().await.unwrap();
    assert!(added.starts_with('+'), "{added}");
    assert!(page.contains("+  `extra` int(11) DEFAULT NULL"), "{page}");
    browser.screenshot("11-drift").await;

    // The inventory table says so; the selection buttons pick by freshness and drift, among the
    // rows the filter shows.
    browser.goto(&served.base, "/admin/schema").await;
    let row = browser
        .wait(&format!("#inventory-rows tr[data-name='{app}']"))
        .await;
    assert_eq!(
        row.attr("data-freshness").await.unwrap().as_deref(),
        Some("stale")
    );
    assert_eq!(
        row.attr("data-drifted").await.unwrap().as_deref(),
        Some("true")
    );
    let cells = row.text().await.unwrap();
    assert!(
        cells.contains("yes") && cells.contains("changed"),
        "{cells}"
    );
    browser.click("#select-drifted").await;
    assert_eq!(checked(&browser).await, std::slice::from_ref(&app));
    browser.click("#select-none").await;
    browser.click("#select-stale").await;
    assert_eq!(checked(&browser).await, std::slice::from_ref(&app));
    browser.type_into("#inventory-filter", &crm).await;
    assert!(
        !browser
            .has(&format!("#inventory-rows tr[data-name='{crm}'][hidden]"))
            .await
    );
    assert!(
        browser
            .has(&format!("#inventory-rows tr[data-name='{app}'][hidden]"))
            .await
    );
    assert!(
        checked(&browser).await.is_empty(),
        "a hidden row stays selected"
    );
    browser
        .screenshot_at("#inventory", "12-inventory-filtered")
        .await;

    // A refresh of the drifted database opens a pull request, closed from the page.
    let filter = browser.wait("#inventory-filter").await;
    filter.clear().await.unwrap();
    browser.type_into("#inventory-filter", &app).await;
    browser.click("#select-all").await;
    browser.click("button[name=action][value=refresh]").await;
    browser
        .watch_text("#operation [data-field=state]", |state| {
            state == "awaiting_review" || state == "failed"
        })
        .await;
    browser.wait("#review-operation").await;
    approve(&browser).await;
    browser.wait("#pull-request").await;
    if browser.has("#reauth-close-pull-request").await {
        browser.click("#reauth-close-pull-request").await;
        browser.reauth_if_asked().await;
    }
    browser.click("#close-pull-request").await;
    browser.reauth_if_asked().await;
    let page = browser.wait("body").await.text().await.unwrap();
    assert!(
        page.contains("The pull request was closed without merging."),
        "{page}"
    );
    assert!(!browser.has("#pull-request").await);
    browser.close().await;
    served.finish().await;
}

#[tokio::test]
async fn an_empty_selection_is_refused_next_to_the_buttons() {
    let served = Served::start("bn").await;
    let browser = Browser::open("").await;
    browser.login(&served.base, "ada", "/admin/schema").await;
    discover(&browser, &served).await;
    browser.click("#select-all").await;
    browser.click("#select-none").await;
    browser.click("button[name=action][value=refresh]").await;
    let message = browser.wait("#selection-message").await;
    assert_eq!(
        message.text().await.unwrap(),
        "select at least one database"
    );
    // Refused in the page: no refresh started.
    assert_eq!(
        browser.client.current_url().await.unwrap().path(),
        "/admin/schema"
    );
    assert!(!browser.has("#operation[data-state=reserved]").await);
    browser
        .screenshot_at("#inventory", "05-empty-selection")
        .await;
    browser.close().await;
    served.finish().await;
}

#[tokio::test]
async fn a_rejected_refresh_ends_rejected() {
    let served = Served::start("bj").await;
    let browser = Browser::open("").await;
    browser.login(&served.base, "ada", "/admin/schema").await;
    discover(&browser, &served).await;
    refresh_to_review(&browser, &served).await;
    if browser.has("#reauth-review").await {
        browser.click("#reauth-review").await;
        browser.reauth_if_asked().await;
    }
    browser.click("#reject").await;
    browser.reauth_if_asked().await;
    // The notice shows once after the redirect; the live panel then reloads into the end state.
    browser.wait("#operation[data-state=rejected]").await;
    let error = browser
        .wait("#operation [data-field=error]")
        .await
        .text()
        .await
        .unwrap();
    assert!(error.starts_with("REVIEW_REJECTED"), "{error}");
    assert!(browser.has("#no-review").await);
    assert!(!browser.has("#pull-request").await);
    browser.screenshot_at("#current", "06-rejected").await;
    browser.close().await;
    served.finish().await;
}

#[tokio::test]
async fn a_user_without_the_role_sees_the_403_page() {
    let served = Served::start("bf").await;
    let browser = Browser::open("").await;
    browser.login(&served.base, "bob", "/admin/schema").await;
    let alert = browser.wait("p[role=alert]").await.text().await.unwrap();
    assert!(alert.contains("system_admin"), "{alert}");
    assert_eq!(
        browser.wait("h1").await.text().await.unwrap(),
        "Not allowed"
    );
    assert!(!browser.has("#discover").await);
    browser.screenshot("07-forbidden").await;
    browser.close().await;
    served.finish().await;
}

/// A workflow service whose runs are never created: the operation's lease stays until it
/// expires, and the server, which finds no such run, lets an administrator clear it.
struct NoRuns;

#[async_trait]
impl Workflows for NoRuns {
    async fn start(&self, operation: &Operation) -> Result<String, StartFailure> {
        Ok(format!("never-created-{}", operation.id))
    }

    async fn run_is_over(&self, _run_id: &str) -> Result<bool, SafeError> {
        Ok(true)
    }

    async fn resume(
        &self,
        _run_id: &str,
        _hook: &str,
        _idempotency_key: &str,
        _payload: &Value,
    ) -> Result<(), SafeError> {
        Ok(())
    }
}

#[tokio::test]
async fn an_expired_lease_is_cleared_with_its_exact_id() {
    let held = Arc::new(std::sync::Mutex::new(String::new()));
    let holder = Arc::clone(&held);
    let served = Served::start_with("bl", |storage| async move {
        let user = storage
            .users()
            .user_by_name(&UserName::new("ada").unwrap())
            .await
            .unwrap()
            .unwrap();
        let admin = Administrator::from_user(&user, false).unwrap();
        let operations = Operations::new(Arc::clone(&storage), Arc::new(NoRuns))
            .with_lease_ttl(Duration::from_millis(500));
        let discovery = operations
            .request(
                &admin,
                &OperationRequest {
                    kind: OperationKind::Inventory,
                    request_key: RequestKey::new("browser-discover").unwrap(),
                    inventory: None,
                    databases: Vec::new(),
                    remove_missing: false,
                },
            )
            .await
            .unwrap();
        let inventory = storage
            .schema()
            .record_inventory(&NewInventory {
                id: fermata_store::schema::InventoryId::generate(),
                operation: discovery.id,
                actor: user.id.clone(),
                server_version: "11.4.2-MariaDB".to_owned(),
                databases: vec![DatabaseName::new("held").unwrap()],
                ignored: Vec::new(),
                lifetime: Duration::from_secs(3600),
            })
            .await
            .unwrap();
        let refresh = operations
            .request(
                &admin,
                &OperationRequest {
                    kind: OperationKind::Refresh,
                    request_key: RequestKey::new("browser-held").unwrap(),
                    inventory: Some(inventory.id),
                    databases: vec!["held".to_owned()],
                    remove_missing: false,
                },
            )
            .await
            .unwrap();
        *holder.lock().unwrap() = refresh.id.to_string();
    })
    .await;
    let id = held.lock().unwrap().clone();
    let browser = Browser::open("").await;
    browser.login(&served.base, "ada", "/admin/schema").await;
    // The lease expires by the database's clock: reload until the page offers to clear it.
    let deadline = Instant::now() + PATIENCE;
    while !browser.has("#clear-lease").await && !browser.has("#reauth-lease").await {
        assert!(
            Instant::now() < deadline,
            "the lease never showed as expired"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        browser.client.refresh().await.unwrap();
    }
    let holder = browser.wait("#lease-holder").await.text().await.unwrap();
    assert!(
        holder.contains(&id) && holder.contains("), expired "),
        "{holder}"
    );
    if browser.has("#reauth-lease").await {
        browser.click("#reauth-lease").await;
        browser.reauth_if_asked().await;
    }

    // A wrong ID is refused next to the form; the lease stays.
    browser.type_into("#clear-id", &id.to_uppercase()).await;
    browser.click("#clear-lease button[type=submit]").await;
    let error = browser.wait("#error-lease").await.text().await.unwrap();
    assert!(!error.is_empty());
    assert!(browser.has("#lease-holder").await);
    browser.screenshot_at("#lease", "08-lease-wrong-id").await;

    browser.type_into("#clear-id", &id).await;
    browser.click("#clear-lease button[type=submit]").await;
    browser.wait("#lease-free").await;
    let page = browser.wait("body").await.text().await.unwrap();
    assert!(page.contains("The expired lease was cleared."), "{page}");
    browser.screenshot_at("#lease", "09-lease-cleared").await;
    browser.close().await;
    served.finish().await;
}

#[tokio::test]
async fn the_main_controls_fit_a_phone() {
    let served = Served::start("bp").await;
    let browser = Browser::open("").await;
    browser.client.set_window_size(390, 844).await.unwrap();
    browser.login(&served.base, "ada", "/admin/schema").await;
    discover(&browser, &served).await;
    let width: f64 = browser
        .client
        .execute("return document.documentElement.clientWidth;", Vec::new())
        .await
        .unwrap()
        .as_f64()
        .unwrap();
    for css in [
        "form[action='/admin/schema/inventory'] button[type=submit]",
        "#inventory-filter",
        "#select-all",
        "#select-none",
        "#select-stale",
        "#select-drifted",
        "button[name=action][value=refresh]",
        "button[name=action][value=verification]",
    ] {
        let element = browser.wait(css).await;
        let (x, _, w, _) = element.rectangle().await.unwrap();
        assert!(
            x >= 0.0 && x + w <= width + 0.5,
            "{css} is outside the {width}px wide page: x={x}, width={w}"
        );
        // Clickable: the element itself is what is under its centre.
        let on_top = browser
            .client
            .execute(
                "const e = arguments[0]; e.scrollIntoView({block: 'center'}); \
                 const r = e.getBoundingClientRect(); \
                 const top = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2); \
                 return top === e || e.contains(top);",
                vec![serde_json::to_value(&element).unwrap()],
            )
            .await
            .unwrap();
        assert_eq!(on_top, Value::Bool(true), "{css} is covered");
    }
    let scroll_width = browser
        .client
        .execute("return document.documentElement.scrollWidth;", Vec::new())
        .await
        .unwrap()
        .as_f64()
        .unwrap();
    browser.screenshot("10-phone").await;
    assert!(
        scroll_width <= width + 0.5,
        "the page scrolls sideways at phone width: {scroll_width}px for {width}px"
    );
    browser.client.set_window_size(1280, 900).await.unwrap();
    browser.close().await;
    served.finish().await;
}

/// A webhook that answers 200 to every post and counts them.
async fn counting_webhook() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    let posts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = Arc::clone(&posts);
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async { "ok" }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.ok() });
    (url, posts)
}

#[tokio::test]
async fn the_next_scheduled_check_and_the_latest_notifications_are_shown() {
    let (webhook, posts) = counting_webhook().await;
    let secret = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(secret.path(), "a-webhook-secret-of-some-length\n").unwrap();
    std::fs::set_permissions(secret.path(), std::fs::Permissions::from_mode(0o600)).unwrap();
    let extra = format!(
        "\n[schema.schedule]\nevery_hours = 6\n\n[schema.notify]\nwebhooks = [{}]\nsecret_file = {}\n",
        Value::String(webhook),
        Value::String(secret.path().display().to_string()),
    );
    let served = Served::launch("bs", &extra, |_| async {}).await;
    let browser = Browser::open("").await;
    browser.login(&served.base, "ada", "/admin/schema").await;
    let next = browser.wait("#next-check").await.text().await.unwrap();
    assert!(next.starts_with("Next scheduled check: "), "{next}");
    assert!(next.contains("every 6 hours"), "{next}");
    assert!(browser.has("#no-notifications").await);

    // A verification of databases the empty package does not register fails: its event is
    // posted, and the page lists the delivery.
    discover(&browser, &served).await;
    select_own(&browser, &served).await;
    browser
        .click("button[name=action][value=verification]")
        .await;
    let states = browser
        .watch_text("#operation [data-field=state]", |state| state == "failed")
        .await;
    assert_eq!(states.last().map(String::as_str), Some("failed"));
    let deadline = Instant::now() + PATIENCE;
    while !browser.has("#notifications").await {
        assert!(Instant::now() < deadline, "no notification listed");
        tokio::time::sleep(Duration::from_millis(200)).await;
        browser.goto(&served.base, "/admin/schema").await;
    }
    let row = browser
        .wait("#notifications tbody tr")
        .await
        .text()
        .await
        .unwrap();
    assert!(row.contains("operation.failed"), "{row}");
    assert!(row.contains("succeeded"), "{row}");
    assert_eq!(posts.load(std::sync::atomic::Ordering::SeqCst), 1);
    browser.screenshot_at("#schedule", "11-schedule").await;
    browser.close().await;
    served.finish().await;
}
