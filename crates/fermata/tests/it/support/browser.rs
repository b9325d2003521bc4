//! Chromium driven through WebDriver for the browser tests: a session with its own profile
//! folder, the DevTools commands the tests send (the reader's colour scheme, a watch for
//! Content-Security-Policy violations), waits with a bound, the keyboard, the editor's controls,
//! contrast checks and screenshots; and a served Fermata with users, a token and documents.
//!
//! `scripts/test` installs Chromium and its driver and starts `chromedriver`, exporting
//! `FERMATA_TEST_WEBDRIVER_URL`; without it the browser tests fail, they never skip.

use std::marker::PhantomData;
use std::net::SocketAddr;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::http::Method;
use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::elements::Element;
use fantoccini::key::Key;
use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::time::Instant;

use super::{Fermata, PATIENCE, Target, add_user, request};

/// The Chromium flags the test servers need (run as root, no network beyond the page).
const CHROMIUM_FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1280,900",
];

/// Page script the DevTools protocol runs in every page before the page's own: it records each
/// Content-Security-Policy violation the page reports.
const VIOLATION_WATCH: &str = "window.__violations = []; \
    document.addEventListener('securitypolicyviolation', e => \
      window.__violations.push(e.violatedDirective + ' ' + (e.blockedURI || 'inline')));";

/// Where chromedriver listens; a clear failure, never a skip, when nothing says so.
pub fn webdriver_url() -> String {
    std::env::var("FERMATA_TEST_WEBDRIVER_URL").unwrap_or_else(|_| {
        panic!(
            "FERMATA_TEST_WEBDRIVER_URL is not set: run the browser tests with scripts/test, \
             which installs Chromium and starts chromedriver"
        )
    })
}

/// The folder `name` in the cargo target folder (the binary is in `target/debug/`), where the
/// browser tests leave their screenshots.
pub fn screenshot_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_fermata"))
        .parent()
        .and_then(Path::parent)
        .expect("the binary sits in the target folder")
        .join(name)
}

/// Saves a PNG of `client`'s window as `name.png` in the screenshot folder `folder`, and prints
/// its path.
pub async fn write_screenshot(client: &Client, folder: &str, name: &str) {
    let png = client.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    let folder = screenshot_dir(folder);
    std::fs::create_dir_all(&folder).unwrap();
    let path = folder.join(format!("{name}.png"));
    std::fs::write(&path, png).unwrap();
    println!("screenshot: {}", path.display());
}

/// Polls `check` until it gives a value, failing with `what` and the last answer after
/// [`PATIENCE`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + PATIENCE;
    loop {
        match check().await {
            Ok(value) => return value,
            Err(last) => assert!(
                Instant::now() < deadline,
                "gave up waiting for {what}; last: {last}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A command of the DevTools protocol, sent through chromedriver's `goog/cdp/execute`.
#[derive(Debug)]
struct DevTools {
    command: &'static str,
    params: Value,
}

impl WebDriverCompatibleCommand for DevTools {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/goog/cdp/execute",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _: &url::Url) -> (Method, Option<String>) {
        let body = json!({ "cmd": self.command, "params": self.params });
        (Method::POST, Some(body.to_string()))
    }
}

/// The colour scheme a browser asks pages for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Light,
    Dark,
}

impl Scheme {
    /// The scheme's name in `prefers-color-scheme`.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Light => "light",
            Scheme::Dark => "dark",
        }
    }
}

/// Page script: `controls()`, the controls a keyboard reaches, in page order; `name(element)`, a
/// name to tell them apart by; `ringed(element)`, whether its focus is drawn (the editor's
/// ring is on its frame).
pub const FOCUSABLE: &str = "
    const controls = () => Array.from(document.querySelectorAll(
        'a[href], button:not([disabled]), input:not([type=hidden]):not([disabled]), ' +
        'select:not([disabled]), textarea:not([disabled]), [contenteditable=true], ' +
        '[tabindex]:not([tabindex=\"-1\"])'))
      .filter(e => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden');
    const name = e => !e || e === document.body ? 'body' : e.tagName.toLowerCase() +
      (e.id ? '#' + e.id : '') +
      (e.getAttribute('href') ? '[href=' + e.getAttribute('href') + ']' : '') +
      (e.getAttribute('aria-label') ? '[' + e.getAttribute('aria-label') + ']' : '') +
      (e.closest('form') ? ' in ' + e.closest('form').getAttribute('action') : '') +
      (e.tagName === 'BUTTON' ? ' ' + e.textContent.trim() : '');
    const ringed = e => {
      const frame = e.closest('.cm-editor') || e;
      const style = getComputedStyle(frame);
      return e.matches(':focus-visible') && style.outlineStyle !== 'none' &&
        parseFloat(style.outlineWidth) >= 2;
    };";

/// Page script that a contrast scan follows: `parse(colour)`, a CSS colour as `[r, g, b, a]`;
/// `over(top, under)`, one colour laid over another; `ground(element)`, the element's and its
/// ancestors' backgrounds laid over one another; `ratio(a, b)`, the WCAG contrast ratio of two
/// colours. The scan returns its failures, `[]` when there are none.
const CONTRAST_MEASURES: &str = "
    const parse = c => {
      const m = c.match(/rgba?\\(([^)]+)\\)/);
      if (!m) return null;
      const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
      return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
    };
    const over = (top, under) => [0, 1, 2].map(i => top[i] * top[3] + under[i] * (1 - top[3]))
      .concat([1]);
    const ground = element => {
      const layers = [];
      for (let e = element; e; e = e.parentElement) {
        const colour = parse(getComputedStyle(e).backgroundColor);
        if (colour && colour[3] > 0) {
          layers.push(colour);
          if (colour[3] >= 1) break;
        }
      }
      return layers.reverse().reduce((under, top) => over(top, under), [255, 255, 255, 1]);
    };
    const luminance = rgb => rgb.slice(0, 3).map(v => {
      v /= 255;
      return v <= 0.04045 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    }).reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
    const ratio = (a, b) => {
      const [high, low] = [luminance(a), luminance(b)].sort((x, y) => y - x);
      return (high + 0.05) / (low + 0.05);
    };
    const failures = [];";

/// The editor's connection indicator: `saved`, `saving`, `kept` (on this device, not yet on the
/// server), `offline` or `refused`.
const EDITOR_STATE: &str = "const s = document.querySelector('.editor-status'); \
     return s ? (s.dataset.state || '') : '';";

/// A browser session with its own profile folder, removed with it; `base` is the address the
/// paths it opens are on.
pub struct Session {
    pub client: Client,
    pub base: String,
    _profile: TempDir,
}

impl Session {
    /// Opens a session on the server at `base`.
    pub async fn open(base: &str) -> Self {
        let url = webdriver_url();
        let profile = tempfile::tempdir().unwrap();
        let mut args: Vec<String> = CHROMIUM_FLAGS.iter().map(|f| (*f).to_owned()).collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".to_owned(),
            json!({ "binary": "/usr/bin/chromium", "args": args }),
        );
        // WebDriver on the loopback interface: plain HTTP, no TLS.
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&url)
            .await
            .unwrap_or_else(|error| panic!("no WebDriver session at {url}: {error}"));
        Session {
            client,
            base: base.to_owned(),
            _profile: profile,
        }
    }

    /// Opens a session on the server at `base` that watches every page for policy violations
    /// (see [`Session::assert_no_violations`]).
    pub async fn open_watched(base: &str) -> Self {
        let session = Session::open(base).await;
        session
            .devtools(
                "Page.addScriptToEvaluateOnNewDocument",
                json!({ "source": VIOLATION_WATCH }),
            )
            .await;
        session
    }

    /// Sends `command` of the DevTools protocol with `params`; its answer.
    pub async fn devtools(&self, command: &'static str, params: Value) -> Value {
        self.client
            .issue_cmd(DevTools { command, params })
            .await
            .unwrap_or_else(|error| panic!("{command}: {error}"))
    }

    /// Makes every page from now on see `scheme` as the reader's preference.
    pub async fn prefer(&self, scheme: Scheme) {
        self.devtools(
            "Emulation.setEmulatedMedia",
            json!({ "features": [{ "name": "prefers-color-scheme", "value": scheme.name() }] }),
        )
        .await;
    }

    /// Opens the page at `path` on the server. A navigation that fails says whether the server
    /// still accepts connections from here, which tells a server gone from a browser's fault.
    pub async fn goto(&self, path: &str) {
        let url = format!("{}{path}", self.base);
        if let Err(error) = self.client.goto(&url).await {
            let address = self.base.trim_start_matches("http://");
            let accepts = tokio::net::TcpStream::connect(address).await.is_ok();
            panic!(
                "opening {url} failed (the server accepts connections from here: {accepts}): {error}"
            );
        }
    }

    /// The first element matching `css`, waited for (present and displayed).
    pub async fn wait(&self, css: &str) -> Element {
        let client = &self.client;
        eventually(&format!("{css:?}"), || async move {
            let element = client
                .find(Locator::Css(css))
                .await
                .map_err(|e| e.to_string())?;
            if element.is_displayed().await.unwrap_or(false) {
                Ok(element)
            } else {
                Err("not displayed".to_owned())
            }
        })
        .await
    }

    /// Runs `script` in the page with `args`; what it returns.
    pub async fn script(&self, script: &str, args: Vec<Value>) -> Value {
        self.client.execute(script, args).await.unwrap()
    }

    /// Logs in at `/login` as `name` and lands on `next`.
    pub async fn login(&self, name: &str, next: &str) {
        self.goto(&format!("/login?next={next}")).await;
        self.wait("#name").await.send_keys(name).await.unwrap();
        self.wait("#password")
            .await
            .send_keys(super::USER_PASSWORD)
            .await
            .unwrap();
        self.wait("form[action='/login'] button[type=submit]")
            .await
            .click()
            .await
            .unwrap();
        let client = &self.client;
        eventually("the login to go through", || async move {
            let url = client.current_url().await.map_err(|e| e.to_string())?;
            if url.path() == "/login" {
                Err(url.to_string())
            } else {
                Ok(())
            }
        })
        .await;
    }

    /// Waits until the browser shows the page at `path`; its query.
    pub async fn wait_path(&self, path: &str) -> String {
        let client = &self.client;
        eventually(&format!("the page at {path}"), || async move {
            let url = client.current_url().await.map_err(|e| e.to_string())?;
            if url.path() == path {
                Ok(url.query().unwrap_or_default().to_owned())
            } else {
                Err(url.to_string())
            }
        })
        .await
    }

    /// Opens the page at `path` signed in as `name`, and waits for the editor to be saved.
    pub async fn open_editor(&self, name: &str, path: &str) {
        self.login(name, path).await;
        self.wait(".cm-content").await;
        self.wait_state("saved").await;
    }

    /// The editor's connection indicator: `saved`, `saving`, `kept` (on this device, not yet on
    /// the server), `offline` or `refused`.
    pub async fn state(&self) -> String {
        let value = self.script(EDITOR_STATE, Vec::new()).await;
        value.as_str().unwrap_or_default().to_owned()
    }

    /// Waits until the editor's connection indicator shows `wanted`.
    pub async fn wait_state(&self, wanted: &str) {
        eventually(&format!("the editor to show {wanted}"), || async move {
            let state = self.state().await;
            if state == wanted { Ok(()) } else { Err(state) }
        })
        .await;
    }

    /// The editor's text, without the other people's cursors drawn in it.
    pub async fn text(&self) -> String {
        let value = self
            .script(
                "return Array.from(document.querySelectorAll('.cm-content .cm-line')).map(line => { \
                   const copy = line.cloneNode(true); \
                   copy.querySelectorAll('.editor-remote-caret').forEach(c => c.remove()); \
                   return copy.textContent; \
                 }).join('\\n');",
                Vec::new(),
            )
            .await;
        value.as_str().unwrap_or_default().to_owned()
    }

    /// Waits until the editor's text satisfies `done` (`what` names the wait); that text.
    pub async fn wait_text(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let done = &done;
        eventually(what, || async move {
            let text = self.text().await;
            if done(&text) { Ok(text) } else { Err(text) }
        })
        .await
    }

    /// Focuses the editor (when it is not already) the way a person does, by clicking it, and
    /// waits until it has the focus, so the keys that follow go where they are sent.
    pub async fn focus(&self) -> Element {
        let content = self.wait(".cm-content").await;
        let client = &self.client;
        if client
            .find(Locator::Css(".cm-editor.cm-focused"))
            .await
            .is_err()
        {
            content.click().await.unwrap();
            eventually("the editor to take the focus", || async move {
                client
                    .find(Locator::Css(".cm-editor.cm-focused"))
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string())
            })
            .await;
        }
        content
    }

    /// Types `keys` in the editor from its start (`Key` values for moves and modifiers).
    pub async fn type_at_start(&self, keys: &str) {
        let content = self.focus().await;
        let keys = format!("{}{}{}{keys}", Key::Control, Key::Home, Key::Null);
        content.send_keys(&keys).await.unwrap();
    }

    /// Types `text` at the end of the document (`Enter` for a new line).
    pub async fn type_at_end(&self, text: &str) {
        let content = self.focus().await;
        let keys = format!("{}{}{}{text}", Key::Control, Key::End, Key::Null);
        content.send_keys(&keys).await.unwrap();
    }

    /// Presses and releases `key` on the keyboard, wherever the focus is.
    pub async fn press(&self, key: Key) {
        let value = char::from(key);
        let keys = KeyActions::new("keyboard".to_owned())
            .then(KeyAction::Down { value })
            .then(KeyAction::Up { value });
        self.client.perform_actions(keys).await.unwrap();
    }

    /// The element with the focus, as [`FOCUSABLE`] names it, and whether its focus is shown.
    pub async fn focused(&self) -> (String, bool) {
        let script = format!(
            "{FOCUSABLE} return [name(document.activeElement), ringed(document.activeElement)];"
        );
        let value = self.script(&script, Vec::new()).await;
        (
            value[0].as_str().unwrap_or_default().to_owned(),
            value[1] == json!(true),
        )
    }

    /// Presses Tab until `css` has the focus.
    pub async fn tab_to(&self, css: &str) {
        let wanted = self
            .script(
                &format!("{FOCUSABLE} return name(document.querySelector(arguments[0]));"),
                vec![json!(css)],
            )
            .await;
        let wanted = wanted.as_str().unwrap().to_owned();
        for _ in 0..100 {
            self.press(Key::Tab).await;
            if self.focused().await.0 == wanted {
                return;
            }
        }
        panic!("Tab never reached {css}");
    }

    /// Presses Tab from the top of a page just loaded through every control, and asserts that
    /// the focus goes to each control of the page in page order, each showing it has the focus;
    /// and that `among` are among them. The controls, as [`FOCUSABLE`] names them.
    pub async fn assert_tab_order_among(&self, what: &str, among: &[&str]) -> Vec<String> {
        let script = format!(
            "{FOCUSABLE} return [name(document.activeElement), controls().map(name), \
               arguments[0].map(css => name(document.querySelector(css)))];"
        );
        let found = self.script(&script, vec![json!(among)]).await;
        assert_eq!(
            found[0], "body",
            "something on {what} has the focus before any key"
        );
        let controls: Vec<String> = serde_json::from_value(found[1].clone()).unwrap();
        let wanted: Vec<String> = serde_json::from_value(found[2].clone()).unwrap();
        for control in &wanted {
            assert!(
                controls.contains(control),
                "{control} is not reached on {what}: {controls:?}"
            );
        }
        let mut reached = Vec::new();
        for _ in &controls {
            self.press(Key::Tab).await;
            // The editor draws its ring a moment after it takes the focus.
            let name = eventually(&format!("the focus shown on {what}"), || async {
                match self.focused().await {
                    (name, true) => Ok(name),
                    (name, false) => Err(format!("{name} has the focus without showing it")),
                }
            })
            .await;
            reached.push(name);
        }
        assert_eq!(reached, controls, "the Tab order of {what}");
        controls
    }

    /// Asserts that no page since the last load reported a policy violation (and that the
    /// watch of [`Session::open_watched`] ran at all).
    pub async fn assert_no_violations(&self, what: &str) {
        let violations = self
            .script("return window.__violations || null;", Vec::new())
            .await;
        assert_eq!(
            violations,
            json!([]),
            "{what} reported policy violations (or was not watched)"
        );
    }

    /// Asserts that the page script `scan`, run after [`CONTRAST_MEASURES`], finds no text below
    /// WCAG AA contrast on its ground.
    pub async fn assert_contrast(&self, what: &str, scan: &str) {
        let failures = self
            .script(&format!("{CONTRAST_MEASURES}{scan}"), Vec::new())
            .await;
        assert_eq!(failures, json!([]), "{what}: text below AA contrast");
    }

    /// Saves a PNG of the window as `name.png` in `editor-screenshots/`.
    pub async fn screenshot(&self, name: &str) {
        write_screenshot(&self.client, "editor-screenshots", name).await;
    }

    /// Ends the session.
    pub async fn close(self) {
        self.client.close().await.unwrap();
    }
}

/// A [`Session`] carrying the helpers of one test file: `Tests` is a type of that file's own,
/// and the file adds its methods to `Browser<Tests>`; the session's own are reached through it.
pub struct Browser<Tests> {
    session: Session,
    tests: PhantomData<Tests>,
}

impl<Tests> Deref for Browser<Tests> {
    type Target = Session;

    fn deref(&self) -> &Session {
        &self.session
    }
}

impl<Tests> Browser<Tests> {
    /// Opens a session on the server at `base` (see [`Session::open`]).
    pub async fn open(base: &str) -> Self {
        Browser {
            session: Session::open(base).await,
            tests: PhantomData,
        }
    }

    /// Opens a session on the server at `base` that watches every page for policy violations
    /// (see [`Session::open_watched`]).
    pub async fn open_watched(base: &str) -> Self {
        Browser {
            session: Session::open_watched(base).await,
            tests: PhantomData,
        }
    }

    /// Ends the session.
    pub async fn close(self) {
        self.session.close().await;
    }
}

/// A Fermata served on SQLite with the users `names` (none an administrator) and an API token of
/// the first's: the target, the server, its address and the token.
pub async fn serve_with_users(names: &[&str]) -> (Target, Fermata, SocketAddr, String) {
    webdriver_url();
    let target = Target::sqlite();
    for name in names {
        add_user(&target, name, false);
    }
    let (status, out, err) = target.run_with_input(&["token", "create", "--user", names[0]], "");
    assert!(status.success(), "{out}{err}");
    let token = out.trim().to_owned();
    let fermata = target.serve(&[]);
    fermata.wait_ready().await;
    let address = fermata.address().await;
    (target, fermata, address, token)
}

/// A document of `repository` titled `title`, created with the API token `token`; its ID.
pub fn new_document(address: SocketAddr, token: &str, repository: &str, title: &str) -> String {
    let created = request(
        address,
        "POST",
        "/api/v1/documents",
        &[("Authorization", &format!("Bearer {token}"))],
        Some(&json!({"repository": repository, "title": title})),
    );
    assert_eq!(created.status, 201, "{}", created.body);
    created.json()["id"].as_str().unwrap().to_owned()
}

/// Makes the user `name` a member of `repository` in `role`, with the API token `token`.
pub fn add_member(address: SocketAddr, token: &str, repository: &str, name: &str, role: &str) {
    let member = request(
        address,
        "PUT",
        &format!("/api/v1/repositories/{repository}/members/{name}"),
        &[("Authorization", &format!("Bearer {token}"))],
        Some(&json!({ "role": role })),
    );
    assert_eq!(member.status, 200, "{}", member.body);
}

/// The document `document` as the API gives it, read with the API token `token`.
pub fn stored_document(address: SocketAddr, token: &str, document: &str) -> Value {
    let answer = request(
        address,
        "GET",
        &format!("/api/v1/documents/{document}"),
        &[("Authorization", &format!("Bearer {token}"))],
        None,
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.json()
}

/// The page of the document `stored` (as [`stored_document`] gives it) by its place.
pub fn page_by_place(stored: &Value) -> String {
    format!(
        "/d/{}/{}",
        stored["repository"].as_str().unwrap(),
        stored["slug"].as_str().unwrap()
    )
}

/// Replaces the text of `document` through the API with the token `token`, as a program would.
pub fn write_text(address: SocketAddr, token: &str, document: &str, text: &str) {
    let answer = request(
        address,
        "PUT",
        &format!("/api/v1/documents/{document}/text"),
        &[("Authorization", &format!("Bearer {token}"))],
        Some(&json!({ "text": text })),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
}
