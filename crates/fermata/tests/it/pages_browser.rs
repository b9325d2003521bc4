//! The search box, the results page, the light and dark looks and the phone's width, in a real
//! browser: Chromium driven through WebDriver against the real `fermata serve`. A word typed
//! into a document through the editor, once the page shows it *saved*, is found from the home
//! page's search box, reached with Tab and sent with Enter, and from a repository page's box in
//! that repository; a user who is no member of the repository searches the same word and is
//! shown nothing, not even a count, and "not found" when naming the repository. The home,
//! repository, results, document and account pages are no wider than a 375 px phone screen, in
//! the light and in the dark (`prefers-color-scheme` emulated through the DevTools protocol),
//! with every text meeting WCAG AA contrast on its ground; and no page reports a violation of its
//! Content-Security-Policy (a listener the DevTools protocol adds to every page before its own
//! code runs, checked against a violation made on purpose). Each test waits for what it expects
//! with a bound, never a fixed sleep. Screenshots of the home and results pages in both looks go
//! to `editor-screenshots/` in the cargo target folder (the path is printed); they are kept to
//! look at, not compared.
//!
//! `scripts/test` installs Chromium and its driver and starts `chromedriver`, exporting
//! `FERMATA_TEST_WEBDRIVER_URL`; without it the browser tests fail, they never skip.

use crate::support;

use std::net::SocketAddr;

use fantoccini::key::Key;
use serde_json::json;
use support::Target;
use support::browser::{
    self, Scheme, Session, eventually, new_document, page_by_place, serve_with_users,
    stored_document, write_text,
};

/// The search and page tests, whose helpers [`Browser`] carries.
enum Pages {}

/// A browser session with what these tests do in it.
type Browser = browser::Browser<Pages>;

impl Browser {
    /// Types `text` at the end of the document in the editor, clicked into as a person does.
    async fn type_in_editor(&self, text: &str) {
        let content = self.wait(".cm-content").await;
        content.click().await.unwrap();
        let client = &self.client;
        eventually("the editor to take the focus", || async move {
            client
                .find(fantoccini::Locator::Css(".cm-editor.cm-focused"))
                .await
                .map(drop)
                .map_err(|e| e.to_string())
        })
        .await;
        let keys = format!("{}{}{}{text}", Key::Control, Key::End, Key::Null);
        content.send_keys(&keys).await.unwrap();
    }

    /// Presses Tab from the top of the page until `css` has the focus, and says how many times.
    async fn tab_to(&self, css: &str) -> usize {
        for presses in 1..=50 {
            self.press(Key::Tab).await;
            let reached = self
                .script(
                    "return document.activeElement === document.querySelector(arguments[0]);",
                    vec![json!(css)],
                )
                .await;
            if reached == json!(true) {
                return presses;
            }
        }
        panic!("Tab never reached {css}");
    }

    /// Searches for `words` with the keyboard alone, from the top of the page: Tab to the
    /// search box, type, Enter. Waits for the results page and returns its query.
    async fn search_by_keyboard(&self, words: &str) -> String {
        self.wait("#search").await;
        self.tab_to("#search").await;
        let focused = self.client.active_element().await.unwrap();
        focused
            .send_keys(&format!("{words}{}", Key::Enter))
            .await
            .unwrap();
        let query = self.wait_path("/search").await;
        self.wait("#no-results, #results").await;
        query
    }

    /// The visible text of the first element matching `css`.
    async fn text_of(&self, css: &str) -> String {
        self.wait(css).await.text().await.unwrap()
    }

    /// Asserts that every text on the page (and every text field's value) meets WCAG AA
    /// contrast on its ground: 4.5:1, or 3:1 for large text.
    async fn assert_contrast(&self, what: &str) {
        Session::assert_contrast(self, what, CONTRAST_SCAN).await;
    }

    /// Asserts that the page is no wider than the viewport.
    async fn assert_fits(&self, what: &str) {
        support::assert_fits_the_viewport(&self.client, what).await;
        let widths = self
            .script(
                "return [document.documentElement.scrollWidth, window.innerWidth];",
                Vec::new(),
            )
            .await;
        assert!(
            widths[0].as_u64() <= widths[1].as_u64(),
            "{what} scrolls sideways: {widths}"
        );
    }
}

/// Page script, after the shared contrast measures: every visible text (an element's own text,
/// and a text field's value) whose contrast with the colour under it is below WCAG AA, as
/// `[element, ratio, colour, ground]`.
const CONTRAST_SCAN: &str = "
    const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
      (typeof e.className === 'string' && e.className ? '.' + e.className.trim().split(/\\s+/).join('.') : '');
    const visible = e => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden';
    const owns = e => Array.from(e.childNodes).some(n => n.nodeType === 3 && n.textContent.trim());
    const field = e => e.matches('input[type=text], input[type=search], input[type=password], textarea') &&
      e.value.trim();
    for (const e of document.body.querySelectorAll('*')) {
      if (!visible(e) || e.matches(':disabled') || !(owns(e) || field(e))) continue;
      const style = getComputedStyle(e);
      const under = ground(e);
      const colour = over(parse(style.color), under);
      const size = parseFloat(style.fontSize);
      const large = size >= 24 || (size >= 18.66 && parseInt(style.fontWeight, 10) >= 700);
      const found = ratio(colour, under);
      if (found < (large ? 3 : 4.5)) {
        failures.push([name(e), Math.round(found * 100) / 100, style.color, 'rgb(' + under.slice(0, 3).join(',') + ')']);
      }
    }
    return failures.slice(0, 12);";

/// A served Fermata with the users `ada`, who administers `ada/app`, and `out`, who is no
/// member of it; an API token of ada's; and one document in `ada/app`.
struct Served {
    _target: Target,
    _fermata: support::Fermata,
    address: SocketAddr,
    base: String,
    token: String,
    document: String,
}

impl Served {
    async fn start(title: &str) -> Self {
        let (target, fermata, address, token) = serve_with_users(&["ada", "out"]).await;
        let document = new_document(address, &token, "ada/app", title);
        Served {
            base: format!("http://{address}"),
            _target: target,
            _fermata: fermata,
            address,
            token,
            document,
        }
    }

    /// The document's page by its place.
    fn place(&self) -> String {
        page_by_place(&stored_document(self.address, &self.token, &self.document))
    }

    /// Replaces the document's text through the API, as a program would.
    fn write(&self, text: &str) {
        write_text(self.address, &self.token, &self.document, text);
    }
}

/// The word typed, found by its reader and not by the outsider.
const WORD: &str = "kingfisher";

#[tokio::test]
async fn a_word_typed_in_the_editor_is_found_by_its_readers_and_by_no_one_else() {
    let served = Served::start("Field notes").await;
    let place = served.place();
    let (ada, out) = tokio::join!(
        Browser::open_watched(&served.base),
        Browser::open_watched(&served.base)
    );

    // The watch sees a violation made on purpose, so its silence below means something.
    ada.login("ada", &place).await;
    ada.wait(".cm-content").await;
    ada.wait_state("saved").await;
    ada.script(
        "document.body.setAttribute('style', 'color: red'); return null;",
        Vec::new(),
    )
    .await;
    eventually("the policy to refuse an inline style", || async {
        let seen = ada.script("return window.__violations;", Vec::new()).await;
        if seen.to_string().contains("style-src") {
            Ok(())
        } else {
            Err(seen.to_string())
        }
    })
    .await;

    // Typed through the editor; searched for once the page shows it saved.
    ada.goto(&place).await;
    ada.wait_state("saved").await;
    ada.type_in_editor(&format!("A {WORD} on the old jetty."))
        .await;
    ada.wait_state("saved").await;
    ada.assert_no_violations("the document page").await;

    ada.goto("/").await;
    ada.assert_no_violations("the home page").await;
    let query = ada.search_by_keyboard(WORD).await;
    assert_eq!(query, format!("q={WORD}"));
    ada.assert_no_violations("the results page").await;
    let link = ada.wait("#results h3 a").await;
    assert_eq!(
        link.attr("href").await.unwrap().as_deref(),
        Some(place.as_str())
    );
    assert_eq!(link.text().await.unwrap(), "Field notes");
    assert_eq!(ada.text_of("#results mark").await, WORD);
    let snippet = ada.text_of("#results .snippet").await;
    assert!(snippet.contains("on the old jetty"), "{snippet}");
    let changed = ada.wait("#results time").await;
    assert!(changed.attr("datetime").await.unwrap().is_some());
    let exact = changed.attr("title").await.unwrap().unwrap_or_default();
    assert!(exact.ends_with(" UTC"), "{exact}");
    let results = ada
        .script(
            "return document.querySelectorAll('#results li').length;",
            Vec::new(),
        )
        .await;
    assert_eq!(results, json!(1));

    // The same from the repository's page, in that repository; the result leads to the page.
    ada.goto("/r/ada/app").await;
    let query = ada.search_by_keyboard(WORD).await;
    assert_eq!(query, format!("q={WORD}&repository=ada%2Fapp"));
    ada.wait("#results").await;
    ada.assert_no_violations("the results page of the repository")
        .await;
    ada.wait("#results h3 a").await.click().await.unwrap();
    ada.wait_path(&place).await;
    ada.wait(".cm-content").await;

    // Someone who is no member: nothing, no count, and "not found" for the repository.
    out.login("out", "/").await;
    out.search_by_keyboard(WORD).await;
    let shown = out.text_of("main").await;
    assert!(shown.contains("No documents match."), "{shown}");
    for absent in ["Field notes", "ada/app", WORD] {
        assert!(!shown.contains(absent), "{absent} is shown: {shown}");
    }
    assert!(
        !shown.chars().any(|c| c.is_ascii_digit()),
        "a number is shown: {shown}"
    );
    let listed = out
        .script(
            "return document.querySelectorAll('#results').length;",
            Vec::new(),
        )
        .await;
    assert_eq!(listed, json!(0));
    out.assert_no_violations("the outsider's results page")
        .await;
    out.goto(&format!("/search?q={WORD}&repository=ada%2Fapp"))
        .await;
    assert_eq!(out.text_of("h1").await, "Not found");
    tokio::join!(ada.close(), out.close());
}

/// A title and a word with no place to break them.
const UNBROKEN: &str =
    "Quarterly-planning-notes-for-the-whole-engineering-organisation-and-its-friends";

#[tokio::test]
async fn the_pages_fit_a_phone_and_keep_their_contrast_in_light_and_dark() {
    let served = Served::start(UNBROKEN).await;
    served.write(&format!(
        "# {UNBROKEN}\n\nThe heron {UNBROKEN} {WORD}{UNBROKEN} by the river.\n"
    ));
    let place = served.place();
    let browser = Browser::open_watched(&served.base).await;
    browser.login("ada", "/").await;
    let results = format!("/search?q={WORD}%20or%20heron");

    // At a desk: the home and results pages in both looks, for the screenshots.
    for (scheme, number) in [(Scheme::Light, 40), (Scheme::Dark, 42)] {
        browser.prefer(scheme).await;
        browser.goto("/").await;
        browser.wait("#search").await;
        browser
            .screenshot(&format!("{number}-home-{}", scheme.name()))
            .await;
        browser.goto(&results).await;
        browser.wait("#results mark").await;
        browser
            .screenshot(&format!("{}-search-{}", number + 1, scheme.name()))
            .await;
    }

    // On a phone: every page no wider than the screen, each text readable, nothing refused.
    support::narrow_to_phone(&browser.client).await;
    for (scheme, number) in [(Scheme::Light, 44), (Scheme::Dark, 45)] {
        browser.prefer(scheme).await;
        let expected_ground = match scheme {
            Scheme::Light => "rgb(255, 255, 255)",
            Scheme::Dark => "rgb(20, 24, 29)",
        };
        for (path, shown) in [
            ("/", "#search"),
            ("/r/ada/app", "#documents"),
            (results.as_str(), "#results mark"),
            ("/search?q=-heron", "#search-refused"),
            (place.as_str(), ".cm-content"),
            ("/account", "#token-label"),
        ] {
            let what = format!("{path} in the {}", scheme.name());
            browser.goto(path).await;
            browser.wait(shown).await;
            if shown == ".cm-content" {
                browser.wait_state("saved").await;
            }
            let ground = browser
                .script(
                    "return getComputedStyle(document.body).backgroundColor;",
                    Vec::new(),
                )
                .await;
            assert_eq!(ground, json!(expected_ground), "{what}");
            browser.assert_fits(&what).await;
            browser.assert_contrast(&what).await;
            browser.assert_no_violations(&what).await;
            if path == place && scheme == Scheme::Dark {
                browser.screenshot("46-phone-document-dark").await;
            }
            if path == results {
                browser
                    .screenshot(&format!("{number}-phone-search-{}", scheme.name()))
                    .await;
            }
        }
    }
    browser.close().await;
}
