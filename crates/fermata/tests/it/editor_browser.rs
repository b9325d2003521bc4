//! The live document editor in a real browser: Chromium driven through WebDriver against the
//! real `fermata serve`, on the document page `/d/{id}`. Two people typing at once converge and
//! see each other's names and cursors; a viewer's read-only editor changes nothing; a server
//! killed with `kill -9` while someone types is taken over by a successor started with
//! `--handover wait`, the page reconnects by itself, and everything typed before the page showed
//! *saved* is stored; what is typed while the server is down is kept in the browser, through a
//! closed tab and a restart, and sent when the page is opened again; logging out clears what the
//! browser kept, and another user of the same browser never sends it; a member made a viewer
//! while typing is told the edits cannot be saved, and what was kept for them is dropped; a pasted and a dropped image are uploaded and shown in the preview; the
//! preview renders Markdown and shows MDX as code; the page and its assets are served under
//! a strict Content-Security-Policy; a document is created, renamed, archived, restored and
//! deleted from the pages; a history session is restored from the document page; a repository is
//! created from the home page, a taken or invalid name said beside its form; every page, at a
//! phone's 375 px, is no wider than the screen; and on the home, repository and document pages
//! Tab reaches every control in page order with its focus shown, and the editor lets the focus
//! go on. Each test waits for what it expects with a bound, never a fixed sleep. Screenshots of the main states
//! go to `editor-screenshots/` in the cargo target folder (the path is printed); they are kept
//! to look at, not compared.
//!
//! `scripts/test` installs Chromium and its driver and starts `chromedriver`, exporting
//! `FERMATA_TEST_WEBDRIVER_URL`; without it the browser tests fail, they never skip.

use crate::support;

use std::net::SocketAddr;

use fantoccini::Locator;
use fantoccini::key::Key;
use serde_json::{Value, json};
use support::browser::{
    self, add_member, eventually, new_document, page_by_place, serve_with_users, stored_document,
    write_text,
};
use support::{Fermata, PATIENCE, Target, add_user, request};
use tokio::time::Instant;

/// The page a viewer opens: the document's own page, opened by `carol`, whom [`Served::start`]
/// makes a viewer member of the document's repository.
fn viewer_path(id: &str) -> String {
    format!("/d/{id}")
}

/// The editor tests, whose helpers [`Browser`] carries.
enum Editor {}

/// A browser session with what these tests do in it.
type Browser = browser::Browser<Editor>;

impl Browser {
    /// Clicks the button or link `css`, as a person does.
    async fn click(&self, css: &str) {
        self.wait(css).await.click().await.unwrap();
    }

    /// Replaces what the field `css` holds with `text`.
    async fn fill(&self, css: &str, text: &str) {
        let field = self.wait(css).await;
        field.clear().await.unwrap();
        field.send_keys(text).await.unwrap();
    }

    /// Waits until the preview (rendered a moment after each change) shows `text`.
    async fn wait_preview(&self, text: &str) {
        eventually(&format!("{text:?} in the preview"), || async move {
            let shown = self
                .script(
                    "return document.querySelector('.editor-preview-body').textContent;",
                    Vec::new(),
                )
                .await;
            let shown = shown.as_str().unwrap_or_default();
            if shown.contains(text) {
                Ok(())
            } else {
                Err(shown.to_owned())
            }
        })
        .await;
    }

    /// The names in the list of who else is here.
    async fn people(&self) -> Vec<String> {
        let value = self
            .script(
                "return Array.from(document.querySelectorAll('.editor-person-name')) \
                   .map(n => n.textContent);",
                Vec::new(),
            )
            .await;
        serde_json::from_value(value).unwrap_or_default()
    }

    /// A computed style property of the first element matching `css`.
    async fn style(&self, css: &str, property: &str) -> String {
        self.wait(css).await.css_value(property).await.unwrap()
    }

    /// Types `text` into whatever has the focus.
    async fn type_here(&self, text: &str) {
        let focused = self.client.active_element().await.unwrap();
        focused.send_keys(text).await.unwrap();
    }

    /// Sends the form of the field `css` by keyboard alone: Tab to the field, type `text`,
    /// press Enter.
    async fn submit_by_keyboard(&self, css: &str, text: &str) {
        self.wait(css).await;
        self.tab_to(css).await;
        self.type_here(&format!("{text}{}", Key::Enter)).await;
    }

    /// What the connection indicator says, in words.
    async fn state_text(&self) -> String {
        let value = self
            .script(
                "return document.querySelector('.editor-status').textContent;",
                Vec::new(),
            )
            .await;
        value.as_str().unwrap_or_default().to_owned()
    }

    /// The names of the IndexedDB databases where the editor keeps documents, on the page open.
    async fn kept_databases(&self) -> Vec<String> {
        let names = self
            .client
            .execute_async(
                "const done = arguments[arguments.length - 1]; \
                 indexedDB.databases().then( \
                   list => done(list.map(d => d.name).filter(n => n.startsWith('fermata:')).sort()), \
                   error => done(String(error)));",
                Vec::new(),
            )
            .await
            .unwrap();
        serde_json::from_value(names.clone()).unwrap_or_else(|_| panic!("no list: {names}"))
    }

    /// Waits until IndexedDB committed every write the editor asked for: a transaction of this
    /// page's own on each kept database starts only after the writes asked for before it.
    async fn wait_kept_written(&self) {
        let done = self
            .client
            .execute_async(
                "const done = arguments[arguments.length - 1]; \
                 indexedDB.databases().then(list => Promise.all(list \
                   .filter(d => d.name.startsWith('fermata:')) \
                   .map(d => new Promise((resolve, reject) => { \
                     const open = indexedDB.open(d.name); \
                     open.onerror = () => reject(open.error); \
                     open.onsuccess = () => { \
                       const db = open.result; \
                       const tx = db.transaction(['updates'], 'readonly'); \
                       tx.oncomplete = () => { db.close(); resolve(d.name); }; \
                       tx.onabort = () => reject(tx.error); \
                     }; \
                   })))).then(names => done(names.length), error => done(String(error)));",
                Vec::new(),
            )
            .await
            .unwrap();
        assert!(done.as_u64().is_some_and(|n| n > 0), "nothing kept: {done}");
    }

    /// Closes the tab the page is in, as a person does, and goes on in a new empty one.
    async fn close_tab(&self) {
        let old = self.client.window().await.unwrap();
        let new = self.client.new_window(true).await.unwrap();
        self.client.switch_to_window(old).await.unwrap();
        self.client.close_window().await.unwrap();
        self.client.switch_to_window(new.handle).await.unwrap();
    }

    /// Logs out from the account page, as a person does.
    async fn logout(&self) {
        self.goto("/account").await;
        self.click("form[action='/logout'] button[type=submit]")
            .await;
        self.wait_path("/login").await;
    }

    /// Presses Tab from the top of a page just loaded through every control, and asserts that the focus
    /// goes to each control of the page in the order they are on it, and that each shows it has
    /// the focus.
    async fn assert_tab_order(&self, what: &str) {
        let controls = self.assert_tab_order_among(what, &[]).await;
        assert!(
            controls.len() > 2,
            "{what} has hardly a control: {controls:?}"
        );
    }
}

/// A served Fermata with the users `ada`, `bob` and `carol`, an API token of `ada`'s, and one
/// document in `ada/app`, where ada is an admin, bob an editor and carol a viewer.
struct Served {
    target: Target,
    fermata: Fermata,
    address: SocketAddr,
    base: String,
    token: String,
    document: String,
}

impl Served {
    async fn start(title: &str) -> Self {
        let (target, fermata, address, token) = serve_with_users(&["ada", "bob", "carol"]).await;
        let document = new_document(address, &token, "ada/app", title);
        for (name, role) in [("bob", "editor"), ("carol", "viewer")] {
            add_member(address, &token, "ada/app", name, role);
        }
        Served {
            document,
            base: format!("http://{address}"),
            target,
            fermata,
            address,
            token,
        }
    }

    fn page(&self) -> String {
        format!("/d/{}", self.document)
    }

    /// The document's page by its place, where its pages' forms lead back to.
    fn page_by_place(&self) -> String {
        page_by_place(&self.stored())
    }

    fn bearer(&self) -> String {
        format!("Bearer {}", self.token)
    }

    /// The document as the server stores it.
    fn stored(&self) -> Value {
        stored_document(self.address, &self.token, &self.document)
    }

    fn stored_text(&self) -> String {
        self.stored()["text"].as_str().unwrap().to_owned()
    }

    /// Replaces the document's text through the API, as a program would.
    fn write(&self, text: &str) {
        write_text(self.address, &self.token, &self.document, text);
    }
}

#[tokio::test]
async fn two_people_typing_at_once_converge_and_see_each_other() {
    let served = Served::start("Together").await;
    served.write("The middle line.");
    let (ada, bob) = tokio::join!(Browser::open(&served.base), Browser::open(&served.base));
    let page = served.page();
    tokio::join!(ada.open_editor("ada", &page), bob.open_editor("bob", &page));
    // Each lists the other as here.
    for (browser, other) in [(&ada, "bob"), (&bob, "ada")] {
        eventually(
            &format!("{other} in the list of who is here"),
            || async move {
                let people = browser.people().await;
                if people.iter().any(|name| name == other) {
                    Ok(())
                } else {
                    Err(format!("{people:?}"))
                }
            },
        )
        .await;
    }

    // Both type at the same time, a line at a time: ada after the middle line, bob before it.
    let lines = 6;
    let enter = Key::Enter.to_string();
    tokio::join!(
        async {
            for n in 0..lines {
                ada.type_at_end(&format!("{enter}ada line {n}")).await;
            }
        },
        async {
            for n in 0..lines {
                bob.type_at_start(&format!("bob line {n}{enter}")).await;
            }
        }
    );
    let expected: String = (0..lines)
        .rev()
        .map(|n| format!("bob line {n}\n"))
        .chain(std::iter::once("The middle line.".to_owned()))
        .chain((0..lines).map(|n| format!("\nada line {n}")))
        .collect();
    let seen_by_ada = ada
        .wait_text("every line at ada's", |text| text == expected)
        .await;
    let seen_by_bob = bob
        .wait_text("every line at bob's", |text| text == expected)
        .await;
    assert_eq!(seen_by_ada, seen_by_bob);
    ada.wait_state("saved").await;
    bob.wait_state("saved").await;
    assert_eq!(served.stored_text(), expected, "the stored text differs");

    // Each sees the other's cursor, named and coloured as the other is in the list.
    for (browser, other) in [(&ada, "bob"), (&bob, "ada")] {
        let caret = ".cm-content .editor-remote-caret .editor-remote-name";
        eventually(&format!("{other}'s cursor"), || async move {
            let names = browser
                .script(
                    &format!(
                        "return Array.from(document.querySelectorAll('{caret}')) \
                           .map(n => n.textContent);"
                    ),
                    Vec::new(),
                )
                .await;
            if names
                .as_array()
                .is_some_and(|names| names.contains(&json!(other)))
            {
                Ok(())
            } else {
                Err(names.to_string())
            }
        })
        .await;
        let caret_colour = browser
            .style(".cm-content .editor-remote-caret", "border-left-color")
            .await;
        let listed_colour = browser
            .style(".editor-person .editor-swatch", "background-color")
            .await;
        assert_eq!(caret_colour, listed_colour);
        // The colour reached the page despite its policy: not the stylesheet's default.
        assert_ne!(caret_colour, "rgb(48, 188, 237)");
        // CodeMirror's own styles, written under the page's style nonce, apply.
        assert_eq!(browser.style(".cm-editor", "display").await, "flex");
    }
    // A selection is shown to the other too: bob selects his first line, ada sees it marked.
    let content = bob.focus().await;
    let keys = format!(
        "{}{}{}{}{}",
        Key::Control,
        Key::Home,
        Key::Null,
        Key::Shift,
        Key::End
    );
    content.send_keys(&keys).await.unwrap();
    let seen_by = &ada;
    eventually("bob's selection at ada's", || async move {
        let marked = seen_by
            .script(
                "return Array.from(document.querySelectorAll('.cm-content .editor-remote-selection')) \
                   .map(mark => { const copy = mark.cloneNode(true); \
                     copy.querySelectorAll('.editor-remote-caret').forEach(c => c.remove()); \
                     return copy.textContent; }).join('');",
                Vec::new(),
            )
            .await;
        if marked == json!("bob line 5") { Ok(()) } else { Err(marked.to_string()) }
    })
    .await;
    // bob's name, at his caret on the first line, is inside the editor's frame, not cut off.
    let inside = ada
        .script(
            "const frame = document.querySelector('.cm-scroller').getBoundingClientRect(); \
             return Array.from(document.querySelectorAll('.editor-remote-name')).map(name => { \
               const box = name.getBoundingClientRect(); \
               return box.top >= frame.top && box.bottom <= frame.bottom; });",
            Vec::new(),
        )
        .await;
    assert_eq!(
        inside,
        json!([true]),
        "a name is cut off by the editor's frame"
    );
    ada.wait_preview("ada line 5").await;
    bob.wait_preview("ada line 5").await;
    ada.screenshot("01-two-people-ada").await;
    bob.screenshot("02-two-people-bob").await;
    ada.close().await;
    bob.close().await;
}

#[tokio::test]
async fn a_viewer_gets_a_read_only_editor_that_changes_nothing() {
    let served = Served::start("Read only").await;
    served.write("# Read only\n\nWritten by ada.\n");
    let before = served.stored();
    let viewer = Browser::open(&served.base).await;
    viewer
        .open_editor("carol", &viewer_path(&served.document))
        .await;
    viewer
        .wait_text("the document at the viewer's", |text| {
            text.contains("Written by ada.")
        })
        .await;
    let content = viewer.wait(".cm-content").await;
    assert_eq!(
        content.attr("contenteditable").await.unwrap().as_deref(),
        Some("false")
    );

    // Typing, deleting and pasting: the viewer's editor takes none of it.
    content.click().await.unwrap();
    let _refused = content.send_keys("intruder").await;
    let keys = format!(
        "{}{}{}{}",
        Key::Control,
        Key::End,
        Key::Null,
        Key::Backspace
    );
    let _refused = content.send_keys(&keys).await;
    viewer
        .script(
            "const data = new DataTransfer(); data.setData('text/plain', 'pasted intruder'); \
             document.querySelector('.cm-content').dispatchEvent(new ClipboardEvent('paste', \
               { clipboardData: data, bubbles: true, cancelable: true }));",
            Vec::new(),
        )
        .await;
    assert_eq!(viewer.text().await, "# Read only\n\nWritten by ada.\n");
    assert_eq!(viewer.state().await, "saved");

    // A change from the server reaches the viewer: the viewer is live, and anything it had sent
    // would have been before this.
    served.write("# Read only\n\nWritten by ada.\n\nAnd more.\n");
    let shown = viewer
        .wait_text("the later change at the viewer's", |text| {
            text.contains("And more.")
        })
        .await;
    assert!(!shown.contains("intruder"), "{shown}");
    viewer.wait_state("saved").await;
    let after = served.stored();
    assert_eq!(
        after["text"],
        "# Read only\n\nWritten by ada.\n\nAnd more.\n"
    );
    assert_eq!(
        after["revision"].as_i64().unwrap(),
        before["revision"].as_i64().unwrap() + 1,
        "something besides the server's change was stored: {after}"
    );
    viewer.wait_preview("And more.").await;
    viewer.screenshot("03-viewer").await;

    // Tab reaches the viewer's text too, with its focus shown, to read and copy it from the
    // keyboard, among the page's other controls in order.
    viewer.goto(&viewer_path(&served.document)).await;
    viewer.wait(".cm-content").await;
    // The outline links the text's heading once the text has arrived.
    viewer.wait(".editor-outline a").await;
    viewer.assert_tab_order("the viewer's document page").await;
    viewer.goto(&viewer_path(&served.document)).await;
    viewer.wait(".cm-content").await;
    viewer.tab_to(".cm-content").await;
    viewer.close().await;
}

#[tokio::test]
async fn a_killed_server_is_taken_over_and_everything_shown_saved_survives() {
    let mut served = Served::start("Durable").await;
    let browser = Browser::open(&served.base).await;
    browser.open_editor("ada", &served.page()).await;

    // Types one line at a time; after each, when the page shows saved, every line so far is
    // claimed stored.
    let mut typed: Vec<String> = Vec::new();
    let mut claimed = 0;
    let enter = Key::Enter.to_string();
    let type_line = |n: usize| format!("line {n} typed{enter}");
    for n in 0..6 {
        browser.type_at_end(&type_line(n)).await;
        typed.push(format!("line {n} typed"));
        let line = typed.last().unwrap().clone();
        browser
            .wait_text("the line in the editor", |text| text.contains(&line))
            .await;
        if browser.state().await == "saved" {
            claimed = typed.len();
        }
    }
    browser.wait_state("saved").await;
    claimed = claimed.max(typed.len());
    browser.screenshot("04-saved-before-kill").await;

    // The server dies while the typing goes on.
    browser.type_at_end(&type_line(6)).await;
    typed.push("line 6 typed".to_owned());
    browser
        .wait_text("line 6 in the editor", |text| text.contains("line 6 typed"))
        .await;
    if browser.state().await == "saved" {
        claimed = typed.len();
    }
    served.fermata.kill();
    let mut saw_kept = false;
    for n in 7..10 {
        browser.type_at_end(&type_line(n)).await;
        let line = format!("line {n} typed");
        typed.push(line.clone());
        browser
            .wait_text("the line in the editor", |text| text.contains(&line))
            .await;
        let state = browser.state().await;
        saw_kept |= state == "kept";
        // Nothing typed after the kill can be shown saved before a server takes over.
        assert_ne!(state, "saved", "saved shown with no server");
    }
    // What was typed is kept on this device meanwhile.
    if !saw_kept {
        browser.wait_state("kept").await;
    }
    browser.screenshot("05-kept-after-kill").await;

    // A successor takes over on the same address once the dead server's lease expires.
    let address = served.address.to_string();
    let mut command = served.target.command("serve");
    command.args(["--listen", &address, "--handover", "wait"]);
    served.fermata = Fermata::spawn(command);
    served.fermata.wait_ready().await;

    // Everything shown saved before the kill was stored.
    let stored = served.stored_text();
    for line in &typed[..claimed] {
        assert!(
            stored.contains(line.as_str()),
            "{line:?} is lost: {stored:?}"
        );
    }
    // The page reconnects by itself and sends what it kept; then everything is stored.
    browser.wait_state("saved").await;
    browser.wait_preview("line 9 typed").await;
    browser.screenshot("06-saved-after-takeover").await;
    let stored = served.stored_text();
    for line in &typed {
        assert!(
            stored.contains(line.as_str()),
            "{line:?} is lost: {stored:?}"
        );
    }
    assert_eq!(browser.text().await, stored);
    browser.close().await;
}

#[tokio::test]
async fn edits_typed_while_the_server_is_down_are_kept_and_sent_when_the_page_is_opened_again() {
    let mut served = Served::start("Kept").await;
    let browser = Browser::open(&served.base).await;
    browser.open_editor("ada", &served.page()).await;
    let enter = Key::Enter.to_string();
    browser.type_at_end(&format!("saved line{enter}")).await;
    browser
        .wait_text("the first line", |text| text.contains("saved line"))
        .await;
    browser.wait_state("saved").await;
    assert!(served.stored_text().contains("saved line"));

    // The server dies; what is typed now is kept on this device.
    served.fermata.kill();
    browser.wait_state("offline").await;
    let kept = ["kept line 1", "kept line 2", "kept line 3"];
    for line in kept {
        browser.type_at_end(&format!("{line}{enter}")).await;
        browser
            .wait_text("the line in the editor", |text| text.contains(line))
            .await;
        assert_ne!(browser.state().await, "saved", "saved shown with no server");
    }
    browser.wait_state("kept").await;
    assert_eq!(
        browser.state_text().await,
        "Kept on this device, not yet on the server"
    );
    browser.wait_kept_written().await;
    browser.screenshot("06a-kept-on-this-device").await;

    // The tab is closed, and the server started again on the same data and address.
    browser.close_tab().await;
    served.fermata = served
        .target
        .serve_at(served.address, &["--handover", "wait"], &[]);
    served.fermata.wait_ready().await;
    let stored = served.stored_text();
    for line in kept {
        assert!(!stored.contains(line), "{line:?} stored before it was sent");
    }

    // The page opened again sends what the browser kept; every line is there, and saved.
    browser.goto(&served.page()).await;
    browser.wait(".cm-content").await;
    let shown = browser
        .wait_text("every line in the editor", |text| {
            text.contains("saved line") && kept.iter().all(|line| text.contains(line))
        })
        .await;
    browser.wait_state("saved").await;
    assert_eq!(browser.state_text().await, "Saved");
    let stored = served.stored_text();
    for line in std::iter::once("saved line").chain(kept) {
        assert!(stored.contains(line), "{line:?} is lost: {stored:?}");
    }
    assert_eq!(shown, stored);
    browser.screenshot("06b-kept-then-saved").await;
    browser.close().await;
}

#[tokio::test]
async fn logging_out_clears_what_the_browser_kept_and_another_user_never_sends_it() {
    let mut served = Served::start("Shared browser").await;
    let browser = Browser::open(&served.base).await;
    browser.open_editor("ada", &served.page()).await;
    let enter = Key::Enter.to_string();
    browser
        .type_at_end(&format!("ada's saved line{enter}"))
        .await;
    browser
        .wait_text("ada's line", |text| text.contains("ada's saved line"))
        .await;
    browser.wait_state("saved").await;

    // ada types while the server is down, and leaves the page: her line is kept in the browser.
    served.fermata.kill();
    browser.type_at_end("ada's kept line").await;
    browser.wait_state("kept").await;
    browser.wait_kept_written().await;
    let ada_kept = browser.kept_databases().await;
    assert_eq!(ada_kept.len(), 1, "{ada_kept:?}");
    browser.close_tab().await;
    served.fermata = served
        .target
        .serve_at(served.address, &["--handover", "wait"], &[]);
    served.fermata.wait_ready().await;

    // Her session ends without a logout (its cookie gone, as when it expires), and bob signs in
    // on the same browser: his page keeps its own, and never sends what ada kept.
    browser.goto("/login").await;
    browser.client.delete_all_cookies().await.unwrap();
    browser.open_editor("bob", &served.page()).await;
    let shown = browser
        .wait_text("the stored text at bob's", |text| {
            text.contains("ada's saved line")
        })
        .await;
    assert!(!shown.contains("ada's kept line"), "{shown}");
    assert!(!served.stored_text().contains("ada's kept line"));
    let both = browser.kept_databases().await;
    assert_eq!(both.len(), 2, "{both:?}");
    assert!(both.contains(&ada_kept[0]), "{both:?}");

    // bob logs out: the browser keeps nothing more, of anyone.
    browser.logout().await;
    eventually("the kept databases cleared", || async {
        let kept = browser.kept_databases().await;
        if kept.is_empty() {
            Ok(())
        } else {
            Err(format!("{kept:?}"))
        }
    })
    .await;

    // The login still works after it, and ada's kept line is gone for good.
    browser.open_editor("ada", &served.page()).await;
    let shown = browser
        .wait_text("the stored text at ada's", |text| {
            text.contains("ada's saved line")
        })
        .await;
    assert!(!shown.contains("ada's kept line"), "{shown}");
    browser.wait_state("saved").await;
    assert!(!served.stored_text().contains("ada's kept line"));
    browser.close().await;
}

#[tokio::test]
async fn a_member_made_a_viewer_while_typing_is_told_and_nothing_is_kept_for_them() {
    let served = Served::start("Demoted").await;
    let browser = Browser::open(&served.base).await;
    browser.open_editor("bob", &served.page()).await;
    let enter = Key::Enter.to_string();
    browser
        .type_at_end(&format!("bob's saved line{enter}"))
        .await;
    browser
        .wait_text("bob's line", |text| text.contains("bob's saved line"))
        .await;
    browser.wait_state("saved").await;
    assert_eq!(browser.kept_databases().await.len(), 1);

    // ada makes bob a viewer; his open connection becomes read-only, and his next edit is
    // refused: the page says so, stops taking edits, and drops what it kept for him.
    let member = request(
        served.address,
        "PUT",
        "/api/v1/repositories/ada/app/members/bob",
        &[("Authorization", &served.bearer())],
        Some(&json!({ "role": "viewer" })),
    );
    assert_eq!(member.status, 200, "{}", member.body);
    // Until the server has made the connection read-only, a line is saved as before; the first
    // line after it is refused.
    let deadline = Instant::now() + PATIENCE;
    let mut attempt = 0;
    let refused = loop {
        attempt += 1;
        let line = format!("line {attempt} after the change");
        browser.type_at_end(&format!("{line}{enter}")).await;
        browser
            .wait_text("the line in the editor", |text| text.contains(&line))
            .await;
        let state = eventually("the server's answer", || async {
            match browser.state().await.as_str() {
                state @ ("saved" | "refused") => Ok(state.to_owned()),
                other => Err(other.to_owned()),
            }
        })
        .await;
        if state == "refused" {
            break line;
        }
        assert!(
            Instant::now() < deadline,
            "the connection never became read-only"
        );
    };
    let message = browser.wait(".editor-message").await.text().await.unwrap();
    assert!(
        message.contains("Your edits here cannot be saved: you can only read this document"),
        "{message}"
    );
    let content = browser.wait(".cm-content").await;
    assert_eq!(
        content.attr("contenteditable").await.unwrap().as_deref(),
        Some("false")
    );
    eventually("the kept state dropped", || async {
        let kept = browser.kept_databases().await;
        if kept.is_empty() {
            Ok(())
        } else {
            Err(format!("{kept:?}"))
        }
    })
    .await;
    assert_eq!(browser.state_text().await, "Not saved");
    assert!(!served.stored_text().contains(&refused));
    browser.screenshot("06c-refused").await;

    // Opened again, the page is a viewer's, and nothing bob typed is sent.
    browser.goto(&served.page()).await;
    browser.wait(".cm-content").await;
    browser.wait_state("saved").await;
    let shown = browser.text().await;
    assert!(!shown.contains(&refused), "{shown}");
    assert!(!served.stored_text().contains(&refused));
    assert_eq!(browser.kept_databases().await, Vec::<String>::new());
    browser.close().await;
}

/// Makes a PNG in the page and hands it to the editor as a paste or a drop of `name`.
const IMAGE_EVENT: &str = "
    const [kind, name, colour, done] = arguments;
    const canvas = document.createElement('canvas');
    canvas.width = 160; canvas.height = 90;
    const context = canvas.getContext('2d');
    context.fillStyle = colour; context.fillRect(0, 0, 160, 90);
    canvas.toBlob(blob => {
      const data = new DataTransfer();
      data.items.add(new File([blob], name, { type: 'image/png' }));
      const content = document.querySelector('.cm-content');
      const box = content.getBoundingClientRect();
      const event = kind === 'paste'
        ? new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true })
        : new DragEvent('drop', { dataTransfer: data, bubbles: true, cancelable: true,
            clientX: box.left + 10, clientY: box.top + 10 });
      content.dispatchEvent(event);
      done(event.defaultPrevented);
    }, 'image/png');";

#[tokio::test]
async fn a_pasted_or_dropped_image_is_uploaded_and_shown() {
    let served = Served::start("Pictures").await;
    let browser = Browser::open(&served.base).await;
    browser.open_editor("ada", &served.page()).await;
    browser
        .type_at_end(&format!("Pictures below.{}", Key::Enter))
        .await;

    for (kind, name, colour) in [
        ("paste", "red square.png", "#c0392b"),
        ("drop", "blue square.png", "#1f6fb4"),
    ] {
        let handled = browser
            .client
            .execute_async(IMAGE_EVENT, vec![json!(kind), json!(name), json!(colour)])
            .await
            .unwrap();
        assert_eq!(handled, json!(true), "the editor did not take the {kind}");
        let alt = name.trim_end_matches(".png");
        let text = browser
            .wait_text(&format!("the {kind}d image in the text"), |text| {
                text.contains(&format!(
                    "![{alt}](/api/v1/documents/{}/images/",
                    served.document
                ))
            })
            .await;
        assert!(text.contains("?w=720)"), "{text}");
        // The preview shows it, loaded from the thumbnail address.
        let selector = &format!(".editor-preview-body img[alt='{alt}']");
        let browser = &browser;
        eventually(
            &format!("the {kind}d image in the preview"),
            || async move {
                let loaded = browser
                    .script(
                        "const image = document.querySelector(arguments[0]); \
                     return image ? [image.complete && image.naturalWidth > 0, image.src] : null;",
                        vec![json!(selector)],
                    )
                    .await;
                match loaded.as_array() {
                    Some(pair) if pair[0] == json!(true) => Ok(()),
                    _ => Err(loaded.to_string()),
                }
            },
        )
        .await;
    }
    browser.wait_state("saved").await;
    let stored = served.stored_text();
    assert!(
        stored.contains("![red square](/api/v1/documents/"),
        "{stored}"
    );
    assert!(
        stored.contains("![blue square](/api/v1/documents/"),
        "{stored}"
    );
    browser.screenshot("07-images").await;
    browser.close().await;
}

#[tokio::test]
async fn the_preview_renders_markdown_and_shows_mdx_as_code() {
    let served = Served::start("Preview").await;
    served.write(
        "import { Chart } from './chart'\n\n# Quarterly plan\n\nSome **bold** text with \
         <Badge tone=\"new\" /> inline and {1 + 1}.\n\n<Chart data={[1, 2]} />\n\n\
         <script>window.previewRan = true</script>\n\n\
         [click](javascript:window.previewRan=true)\n",
    );
    let browser = Browser::open(&served.base).await;
    browser.open_editor("ada", &served.page()).await;
    let preview = ".editor-preview-body";
    browser.wait(&format!("{preview} h1")).await;
    let shown = browser
        .script(
            "const p = document.querySelector(arguments[0]); return { \
               heading: p.querySelector('h1').textContent, \
               bold: p.querySelector('strong') && p.querySelector('strong').textContent, \
               blocks: Array.from(p.querySelectorAll('pre.preview-mdx')).map(b => b.textContent), \
               inline: Array.from(p.querySelectorAll('p code.preview-mdx')).map(c => c.textContent), \
               scripts: p.querySelectorAll('script').length, \
               links: Array.from(p.querySelectorAll('a')).map(a => a.getAttribute('href')), \
               ran: window.previewRan === true };",
            vec![json!(preview)],
        )
        .await;
    assert_eq!(shown["heading"], "Quarterly plan", "{shown}");
    assert_eq!(shown["bold"], "bold", "{shown}");
    assert_eq!(
        shown["blocks"],
        json!([
            "import { Chart } from './chart'",
            "<Chart data={[1, 2]} />",
            "<script>window.previewRan = true</script>"
        ]),
        "{shown}"
    );
    assert_eq!(
        shown["inline"],
        json!(["<Badge tone=\"new\" />", "{1 + 1}"]),
        "{shown}"
    );
    assert_eq!(shown["scripts"], 0, "{shown}");
    assert_eq!(shown["links"], json!([]), "{shown}");
    assert_eq!(shown["ran"], false, "{shown}");
    browser.screenshot("08-preview").await;

    // At phone width the preview goes under the editor, and nothing scrolls sideways.
    browser.client.set_window_size(390, 844).await.unwrap();
    let layout = browser
        .script(
            "const editor = document.querySelector('.editor-source').getBoundingClientRect(); \
             const preview = document.querySelector('.editor-preview').getBoundingClientRect(); \
             const page = document.documentElement; \
             return { stacked: preview.top >= editor.bottom, \
                      fits: page.scrollWidth <= page.clientWidth };",
            Vec::new(),
        )
        .await;
    assert_eq!(layout, json!({"stacked": true, "fits": true}));
    browser.screenshot("09-phone").await;
    browser.close().await;
}

#[tokio::test]
async fn the_document_page_and_its_assets_are_served_under_a_strict_policy() {
    let served = Served::start("Policy").await;
    let page = served.page();

    // Signed out: to the login form and back.
    let anonymous = request(served.address, "GET", &page, &[], None);
    assert_eq!(anonymous.status, 303, "{}", anonymous.headers);
    assert!(
        anonymous
            .headers
            .to_lowercase()
            .contains(&format!("location: /login?next={page}")),
        "{}",
        anonymous.headers
    );

    let login = request(
        served.address,
        "POST",
        "/api/v1/session",
        &[],
        Some(&json!({"name": "ada", "password": support::USER_PASSWORD})),
    );
    assert_eq!(login.status, 200, "{}", login.body);
    let cookie = format!(
        "fermata_session={}",
        login.cookie("fermata_session").unwrap()
    );
    let answer = request(served.address, "GET", &page, &[("Cookie", &cookie)], None);
    assert_eq!(answer.status, 200, "{}", answer.body);
    let header = |name: &str| -> String {
        answer
            .headers
            .lines()
            .find_map(|line| {
                let (key, value) = line.split_once(": ")?;
                key.eq_ignore_ascii_case(name).then(|| value.to_owned())
            })
            .unwrap_or_else(|| panic!("no {name} header: {}", answer.headers))
    };
    let policy = header("content-security-policy");
    let nonce = answer
        .body
        .split("data-style-nonce=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a style nonce on the editor");
    assert!(
        policy.contains(&format!("style-src 'self' 'nonce-{nonce}'")),
        "{policy}"
    );
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "connect-src 'self'",
        "img-src 'self' data: blob:",
    ] {
        assert!(policy.contains(directive), "{policy}");
    }
    assert_eq!(header("cache-control"), "no-store");
    assert_eq!(header("x-content-type-options"), "nosniff");
    assert!(!answer.body.contains("<style"), "{}", answer.body);
    assert!(
        answer
            .body
            .contains(&format!("data-room=\"{}\"", served.document)),
        "{}",
        answer.body
    );

    // Every file the page loads is one of this server's assets, cached by its hashed name.
    let addresses: Vec<&str> = answer
        .body
        .split(['"', '\''])
        .filter(|part| part.starts_with("/assets/"))
        .collect();
    assert_eq!(addresses.len(), 3, "{}", answer.body);
    assert!(!answer.body.contains("http://") && !answer.body.contains("https://"));
    for address in addresses {
        let asset = request(served.address, "GET", address, &[], None);
        assert_eq!(asset.status, 200, "{address}");
        let headers = asset.headers.to_lowercase();
        assert!(
            headers.contains("x-content-type-options: nosniff"),
            "{headers}"
        );
        assert!(headers.contains("immutable"), "{headers}");
        let expected = if address.ends_with(".js") {
            "content-type: text/javascript"
        } else {
            "content-type: text/css"
        };
        assert!(headers.contains(expected), "{address}: {headers}");
    }

    // An unknown document is a 404 page.
    let missing = request(
        served.address,
        "GET",
        "/d/0b6f3c1e-52a4-4d8e-9c61-7a2f0e9d4b13",
        &[("Cookie", &cookie)],
        None,
    );
    assert_eq!(missing.status, 404, "{}", missing.body);
}

#[tokio::test]
async fn a_document_is_created_renamed_archived_restored_and_deleted_from_the_pages() {
    let served = Served::start("Already here").await;
    let ada = Browser::open(&served.base).await;
    ada.login("ada", "/").await;
    ada.click("#repositories a[href='/r/ada/app']").await;
    ada.wait_path("/r/ada/app").await;
    ada.screenshot("10-repository").await;

    // Created from the repository page, the new document opens in the editor.
    ada.fill("#new-title", "Launch plan").await;
    ada.click("form[action='/r/ada/app/documents'] button[type=submit]")
        .await;
    ada.wait_path("/d/ada/app/launch-plan").await;
    ada.wait(".cm-content").await;
    ada.wait_state("saved").await;
    ada.type_at_end("Ship it.").await;
    ada.wait_state("saved").await;
    ada.screenshot("11-new-document").await;

    // Renamed: the page moves to the new slug, and the old one leads there.
    ada.fill("#rename-title", "Launch").await;
    ada.click("form[action$='/rename'] button[type=submit]")
        .await;
    ada.wait_path("/d/ada/app/launch").await;
    assert_eq!(
        ada.wait("#document-title").await.text().await.unwrap(),
        "Launch"
    );
    ada.goto("/d/ada/app/launch-plan").await;
    ada.wait_path("/d/ada/app/launch").await;

    // Archived: no editor, a way back; restored: the editor and its text again.
    ada.click("#archive-document").await;
    ada.wait("#archived").await;
    ada.screenshot("12-archived").await;
    ada.click("#restore-document").await;
    ada.wait(".cm-content").await;
    ada.wait_text("the text after the restore", |text| text == "Ship it.")
        .await;

    // Deleted (once archived): back on the repository page, and gone.
    ada.click("#archive-document").await;
    ada.click("#delete-document").await;
    ada.wait_path("/r/ada/app").await;
    let listed = ada.wait("#documents").await.text().await.unwrap();
    assert!(!listed.contains("Launch"), "{listed}");
    assert!(listed.contains("Already here"), "{listed}");
    let gone = request(
        served.address,
        "GET",
        "/api/v1/documents/by-slug?repository=ada/app&slug=launch",
        &[("Authorization", &served.bearer())],
        None,
    );
    assert_eq!(gone.status, 404, "{}", gone.body);
    ada.close().await;
}

#[tokio::test]
async fn a_history_session_is_restored_from_the_page() {
    let served = Served::start("Versions").await;
    served.write("# First\n");
    let bob = Browser::open(&served.base).await;
    bob.open_editor("bob", &served.page()).await;
    bob.type_at_end("Second thoughts.").await;
    bob.wait_state("saved").await;
    assert_eq!(served.stored_text(), "# First\nSecond thoughts.");

    // The history lists ada's session and bob's; the first one's text is shown on its page.
    let first = format!(
        "#history a[href='/documents/{}/history/1']",
        served.document
    );
    let second = format!(
        "#history a[href='/documents/{}/history/2']",
        served.document
    );
    let client = &bob.client;
    let (first, second) = (&first, &second);
    eventually("both sessions in the history", || async move {
        client.refresh().await.map_err(|e| e.to_string())?;
        client
            .find(Locator::Css(second))
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    })
    .await;
    bob.click(first).await;
    let shown = bob.wait("#session-text").await.text().await.unwrap();
    assert_eq!(shown.trim_end(), "# First");
    bob.screenshot("13-history-session").await;

    // Restoring it after the confirmation puts its text back, in the editor and in storage.
    bob.click("#confirm-restore").await;
    bob.wait_path(&served.page_by_place()).await;
    bob.wait(".cm-content").await;
    bob.wait_text("the restored text", |text| text == "# First\n")
        .await;
    bob.wait_state("saved").await;
    assert_eq!(served.stored_text(), "# First\n");
    bob.screenshot("14-history-restored").await;
    bob.close().await;
}

#[tokio::test]
async fn a_repository_is_created_from_the_home_page() {
    let served = Served::start("Elsewhere").await;
    let ada = Browser::open(&served.base).await;
    ada.login("ada", "/").await;
    ada.wait("#repositories").await;
    ada.screenshot("15-home").await;

    // Created under ada's name, it opens with ada as its admin and room for documents.
    ada.fill("#repository-name", "notes").await;
    ada.click("form[action='/r'] button[type=submit]").await;
    ada.wait_path("/r/ada/notes").await;
    ada.wait("#new-title").await;
    ada.wait("#members").await;
    ada.screenshot("16-new-repository").await;
    let read = request(
        served.address,
        "GET",
        "/api/v1/repositories/ada/notes",
        &[("Authorization", &served.bearer())],
        None,
    );
    assert_eq!(read.status, 200, "{}", read.body);
    assert_eq!(read.json()["role"], "admin", "{}", read.body);

    // A taken name, then one that is no name: said beside the form, what was typed kept.
    ada.goto("/").await;
    ada.wait("#repositories a[href='/r/ada/notes']").await;
    for (typed, why) in [
        ("notes", "ada/notes exists already"),
        ("my notes/2", "letters, digits"),
    ] {
        ada.fill("#repository-name", typed).await;
        ada.click("form[action='/r'] button[type=submit]").await;
        // Read from the page as it is at each look: the refusal of the name before may still
        // be shown while the new answer loads.
        let look = "return [document.querySelector('#repository-refused')?.textContent ?? '', \
                    document.querySelector('#repository-name')?.value ?? ''];";
        let (refused, kept) = eventually(&format!("the refusal of {typed:?}"), || async {
            let shown = ada.script(look, Vec::new()).await;
            let refused = shown[0].as_str().unwrap_or_default().to_owned();
            let kept = shown[1].as_str().unwrap_or_default().to_owned();
            if refused.contains(why) {
                Ok((refused, kept))
            } else {
                Err(refused)
            }
        })
        .await;
        assert!(refused.contains(why), "{typed}: {refused}");
        assert_eq!(kept, typed);
    }
    ada.screenshot("17-home-refused").await;
    let mine = request(
        served.address,
        "GET",
        "/api/v1/repositories",
        &[("Authorization", &served.bearer())],
        None,
    );
    let names: Vec<String> = mine.json()["repositories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["ada/app", "ada/notes"], "{}", mine.body);
    ada.close().await;
}

/// A title, a label and a line of text with no place to break them.
const UNBROKEN: &str =
    "Quarterly-planning-notes-for-the-whole-engineering-organisation-and-its-friends";

#[tokio::test]
async fn every_page_fits_a_phone_screen() {
    let served = Served::start(UNBROKEN).await;
    served.write(&format!("# {UNBROKEN}\n\n{}\n", UNBROKEN.repeat(4)));
    let long_name = "a-member-whose-user-name-is-nearly-as-long-as-names-may-be";
    add_user(&served.target, long_name, false);
    let member = request(
        served.address,
        "PUT",
        &format!("/api/v1/repositories/ada/app/members/{long_name}"),
        &[("Authorization", &served.bearer())],
        Some(&json!({ "role": "editor" })),
    );
    assert_eq!(member.status, 200, "{}", member.body);
    // The write's history session, whose page is among those looked at.
    let versions = format!("/api/v1/documents/{}/versions", served.document);
    eventually("the write's history session", || async {
        let listed = request(
            served.address,
            "GET",
            &versions,
            &[("Authorization", &served.bearer())],
            None,
        );
        if listed.body.contains("\"number\":1") {
            Ok(())
        } else {
            Err(listed.body)
        }
    })
    .await;
    let browser = Browser::open(&served.base).await;
    support::narrow_to_phone(&browser.client).await;

    browser.goto("/login").await;
    browser.wait("#name").await;
    support::assert_fits_the_viewport(&browser.client, "the login page").await;
    browser.login("ada", "/account").await;
    // The account's tables, with a token and a machine of long names.
    browser.fill("#token-label", UNBROKEN).await;
    browser
        .click("form[action='/account/tokens'] button[type=submit]")
        .await;
    browser.wait(".secret").await;
    browser.fill("#machine-name", UNBROKEN).await;
    browser
        .click("form[action='/account/machines'] button[type=submit]")
        .await;
    browser.wait(".secret").await;

    let place = served.page_by_place();
    let pages = [
        ("/account", "table", "20-phone-account"),
        ("/reauth", "#password", "21-phone-reauth"),
        ("/", "#repositories", "22-phone-home"),
        ("/r/ada/app", "#members", "23-phone-repository"),
        (
            "/r/ada/app?archived=1",
            "#no-documents",
            "24-phone-archived",
        ),
        (place.as_str(), ".cm-content", "25-phone-document"),
        (
            &format!("/documents/{}/history/1", served.document),
            "#session-text",
            "26-phone-history-session",
        ),
        (
            "/d/ada/app/no-such-document",
            "p.error",
            "27-phone-not-found",
        ),
    ];
    for (path, shown, screenshot) in &pages {
        browser.goto(path).await;
        browser.wait(shown).await;
        if *shown == ".cm-content" {
            browser.wait_state("saved").await;
            browser.wait_preview("Quarterly").await;
        }
        support::assert_fits_the_viewport(&browser.client, path).await;
        browser
            .script(
                "document.querySelector(arguments[0]).scrollIntoView({block: 'center'});",
                vec![json!(shown)],
            )
            .await;
        browser.screenshot(screenshot).await;
    }

    // The home page again after its form refused a name.
    browser.goto("/").await;
    browser
        .fill("#repository-name", &format!("{UNBROKEN}?"))
        .await;
    browser.click("form[action='/r'] button[type=submit]").await;
    browser.wait("#repository-refused").await;
    support::assert_fits_the_viewport(&browser.client, "the home page with a refused name").await;
    browser.close().await;
}

#[tokio::test]
async fn the_pages_are_usable_from_the_keyboard() {
    let served = Served::start("Keys").await;
    let ada = Browser::open(&served.base).await;
    ada.login("ada", "/").await;

    // A repository and a document made with the keyboard alone; each form's answer is a page
    // loaded afresh, where Tab starts from the top.
    ada.wait("#repository-name").await;
    ada.submit_by_keyboard("#repository-name", "keys").await;
    ada.wait_path("/r/ada/keys").await;
    ada.submit_by_keyboard("#new-title", "By keyboard").await;
    ada.wait_path("/d/ada/keys/by-keyboard").await;
    ada.wait_state("saved").await;

    // Into the editor, typing, and out of it again with Tab: the editor keeps no one in.
    ada.tab_to(".cm-content").await;
    ada.type_here("Typed without a mouse.").await;
    ada.wait_text("the typing", |text| text == "Typed without a mouse.")
        .await;
    ada.wait_state("saved").await;
    ada.press(Key::Tab).await;
    let (after_editor, _) = ada.focused().await;
    assert!(
        after_editor.starts_with("input#rename-title"),
        "Tab from the editor went to {after_editor}"
    );
    ada.screenshot("18-keyboard").await;
    let stored = request(
        served.address,
        "GET",
        "/api/v1/documents/by-slug?repository=ada/keys&slug=by-keyboard",
        &[("Authorization", &served.bearer())],
        None,
    );
    assert_eq!(
        stored.json()["text"],
        "Typed without a mouse.",
        "{}",
        stored.body
    );

    // On each page, Tab goes through every control in page order, each showing its focus.
    for (path, ready, what) in [
        ("/", "#repository-name", "the home page"),
        ("/r/ada/keys", "#members", "the repository page"),
        (
            "/d/ada/keys/by-keyboard",
            ".cm-content",
            "the document page",
        ),
        ("/account", "#token-label", "the account page"),
    ] {
        ada.goto(path).await;
        ada.wait(ready).await;
        ada.assert_tab_order(what).await;
    }
    ada.close().await;
}
