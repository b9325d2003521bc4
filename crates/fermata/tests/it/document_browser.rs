//! A document's collaborators, outline and history in a real browser: Chromium driven through
//! WebDriver against the real `fermata serve`. Two collaborators in one document each see the
//! other's cursor and dot in a colour that is not their own, the same colour the other sees for
//! themselves, kept over a reload, in the light and in the dark (`prefers-color-scheme` emulated
//! through the DevTools protocol); of two people whose user IDs pick the same colour, the later
//! to join takes the next one, and has their own back once the first leaves. The outline lists
//! the headings typed a moment before (not a `#` line inside a code block), and following one, by
//! mouse or keyboard, moves the editor's cursor to that heading and scrolls it into view. After
//! two sessions, a session's page shows the lines it added and removed, told apart by sign and
//! element as well as colour, and the comparison page, reached from it and driven from the
//! keyboard, compares any two. Every page is answered under the strict Content-Security-Policy
//! and reports no violation of it (a listener the DevTools protocol adds to every page before its
//! own code runs); Tab reaches the outline's links and the comparison form in page order, each
//! showing its focus. Each test waits for what it expects with a bound, never a fixed sleep.
//! Screenshots of two collaborators and of a history diff, in the light and in the dark, go to
//! `editor-screenshots/` in the cargo target folder (the path is printed); they are kept to look
//! at, not compared.
//!
//! `scripts/test` installs Chromium and its driver and starts `chromedriver`, exporting
//! `FERMATA_TEST_WEBDRIVER_URL`; without it the browser tests fail, they never skip.

use crate::support;

use std::collections::BTreeMap;
use std::net::SocketAddr;

use fantoccini::Locator;
use fantoccini::key::Key;
use serde_json::{Value, json};
use support::browser::{
    self, Scheme, Session, add_member, eventually, new_document, serve_with_users, write_text,
};
use support::{Fermata, Target, add_user, request};

/// The colour the editor prefers for the user `id` among `palette` colours: the 32-bit FNV-1a
/// hash of the ID's bytes, as `colourKey` in `web/src/lib/presence.js` works it out.
fn preferred_colour(id: &str, palette: usize) -> usize {
    let hash = id.bytes().fold(0x811c_9dc5_u32, |hash, byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    });
    usize::try_from(hash).unwrap() % palette
}

/// Page script: the presence colours the page shows, as computed styles and classes. `me` is
/// this person's dot, `person` the first other person's dot in the list of who is here, `caret`
/// and `label` the first other person's cursor and name in the text.
const COLOURS: &str = "
    const style = (css, property) => {
      const element = document.querySelector(css);
      return element ? getComputedStyle(element)[property] : null;
    };
    const classes = css => {
      const element = document.querySelector(css);
      return element ? Array.from(element.classList).filter(c => /^presence-\\d+$/.test(c)) : null;
    };
    return {
      me: style('.editor-me .editor-swatch', 'backgroundColor'),
      me_class: classes('.editor-me'),
      person: style('.editor-person .editor-swatch', 'backgroundColor'),
      person_class: classes('.editor-person'),
      caret: style('.cm-content .editor-remote-caret', 'borderLeftColor'),
      label: style('.cm-content .editor-remote-name', 'backgroundColor'),
      label_text: style('.cm-content .editor-remote-name', 'color'),
    };";

/// Page script, after the shared contrast measures: every visible text (an element's own text)
/// whose contrast with the colour under it is below WCAG AA, as `[element, ratio, colour,
/// ground]`.
const CONTRAST_SCAN: &str = "
    for (const element of document.body.querySelectorAll('*')) {
      const own = Array.from(element.childNodes)
        .some(n => n.nodeType === Node.TEXT_NODE && n.textContent.trim());
      if (!own || element.getClientRects().length === 0) continue;
      const style = getComputedStyle(element);
      if (style.visibility === 'hidden' || element.closest('.visually-hidden')) continue;
      const colour = parse(style.color);
      const under = ground(element);
      const r = ratio(over(colour, under), under);
      if (r < 4.5) failures.push([element.tagName + '.' + element.className, r.toFixed(2),
        style.color, 'rgb(' + under.slice(0, 3).map(Math.round).join(', ') + ')']);
    }
    return failures;";

/// The collaboration, outline and history tests, whose helpers [`Browser`] carries.
enum Collaboration {}

/// A browser session with what these tests do in it.
type Browser = browser::Browser<Collaboration>;

impl Browser {
    /// Opens the page at `path` again (signed in), and waits for the editor to be saved.
    async fn reopen_editor(&self, path: &str) {
        self.goto(path).await;
        self.wait(".cm-content").await;
        self.wait_state("saved").await;
    }

    /// The presence colours the page shows (see [`COLOURS`]), once it shows another person's
    /// dot and cursor.
    async fn colours(&self) -> Value {
        eventually("the other person's dot and cursor", || async {
            let colours = self.script(COLOURS, Vec::new()).await;
            if colours["person"].is_string() && colours["caret"].is_string() {
                Ok(colours)
            } else {
                Err(colours.to_string())
            }
        })
        .await
    }

    /// Waits until the page lists `other` as here.
    async fn wait_for_person(&self, other: &str) {
        eventually(&format!("{other} in the list of who is here"), || async {
            let people = self
                .script(
                    "return Array.from(document.querySelectorAll('.editor-person-name')) \
                       .map(n => n.textContent);",
                    Vec::new(),
                )
                .await;
            if people
                .as_array()
                .is_some_and(|names| names.contains(&json!(other)))
            {
                Ok(())
            } else {
                Err(people.to_string())
            }
        })
        .await;
    }

    /// The `presence-N` class of the first element matching `css`, waited for until it is
    /// `wanted` when given.
    async fn colour_class(&self, css: &str, wanted: Option<&str>) -> String {
        eventually(&format!("the colour of {css}"), || async {
            let class = self
                .script(
                    "const e = document.querySelector(arguments[0]); \
                     return e ? (Array.from(e.classList).find(c => /^presence-\\d+$/.test(c)) || '') : '';",
                    vec![json!(css)],
                )
                .await;
            let class = class.as_str().unwrap_or_default().to_owned();
            match wanted {
                _ if class.is_empty() => Err("no colour yet".to_owned()),
                Some(wanted) if class != wanted => Err(class),
                _ => Ok(class),
            }
        })
        .await
    }

    /// The outline's headings, as its links show them.
    async fn outline(&self) -> Vec<String> {
        let value = self
            .script(
                "return Array.from(document.querySelectorAll('.editor-outline a')) \
                   .map(a => a.textContent);",
                Vec::new(),
            )
            .await;
        serde_json::from_value(value).unwrap_or_default()
    }

    async fn wait_outline(&self, wanted: &[&str]) {
        eventually(&format!("the outline {wanted:?}"), || async {
            let shown = self.outline().await;
            if shown == wanted {
                Ok(())
            } else {
                Err(format!("{shown:?}"))
            }
        })
        .await;
    }

    /// The line of the editor's cursor, whether the editor has the focus, and whether that line
    /// is inside the window.
    async fn cursor_line(&self) -> (String, bool, bool) {
        let value = self
            .script(
                "const line = document.querySelector('.cm-activeLine'); \
                 const focused = !!document.querySelector('.cm-editor.cm-focused'); \
                 if (!line) return ['', focused, false]; \
                 const box = line.getBoundingClientRect(); \
                 return [line.textContent, focused, box.top >= 0 && box.bottom <= window.innerHeight];",
                Vec::new(),
            )
            .await;
        (
            value[0].as_str().unwrap_or_default().to_owned(),
            value[1] == json!(true),
            value[2] == json!(true),
        )
    }

    /// Waits until the editor has the focus, its cursor on `line`, shown in the window.
    async fn wait_cursor_on(&self, line: &str) {
        eventually(&format!("the cursor on {line:?}, in view"), || async {
            match self.cursor_line().await {
                (shown, true, true) if shown == line => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    }

    /// Clicks the outline's link to the heading `text`.
    async fn click_outline(&self, text: &str) {
        let link = self
            .client
            .find(Locator::LinkText(text))
            .await
            .unwrap_or_else(|error| panic!("no outline link {text:?}: {error}"));
        link.click().await.unwrap();
    }

    /// Scrolls the window to the top and puts the editor's cursor at the start of the text.
    async fn back_to_the_top(&self) {
        self.type_at_start("").await;
        self.script("window.scrollTo(0, 0);", Vec::new()).await;
        let (line, _, _) = self.cursor_line().await;
        assert!(!line.is_empty(), "the cursor is on no line");
    }

    /// The rows of the diff `css`: each row's class, its sign, the marked text (the `ins` or
    /// `del`, or the line), and the words a screen reader says for its change.
    async fn diff_rows(&self, css: &str) -> Vec<(String, String, String, String)> {
        let value = self
            .script(
                "return Array.from(document.querySelectorAll(arguments[0] + ' tbody tr')).map(row => { \
                   const text = row.querySelector('.diff-text'); \
                   return [row.className, \
                     (row.querySelector('.diff-sign [aria-hidden]') || {}).textContent || '', \
                     text ? text.firstElementChild.textContent : row.textContent, \
                     (row.querySelector('.diff-sign .visually-hidden') || {}).textContent || '']; });",
                vec![json!(css)],
            )
            .await;
        serde_json::from_value(value).unwrap()
    }

    /// Presses Tab from the top of a page just loaded through every control, and asserts that
    /// the focus goes to each control of the page in page order, each showing it has the focus;
    /// and that `among` are among them.
    async fn assert_tab_order(&self, what: &str, among: &[&str]) {
        self.assert_tab_order_among(what, among).await;
    }

    /// Asserts that every text on the page meets WCAG AA contrast on its ground.
    async fn assert_contrast(&self, what: &str) {
        Session::assert_contrast(self, what, CONTRAST_SCAN).await;
    }
}

/// A served Fermata with the users `ada` and `bob`, an API token of `ada`'s, and one document
/// in `ada/app`, where ada is an admin and bob an editor.
struct Served {
    target: Target,
    _fermata: Fermata,
    address: SocketAddr,
    base: String,
    token: String,
    document: String,
}

impl Served {
    async fn start(title: &str) -> Self {
        let (target, fermata, address, token) = serve_with_users(&["ada", "bob"]).await;
        let served = Served {
            document: new_document(address, &token, "ada/app", title),
            base: format!("http://{address}"),
            target,
            _fermata: fermata,
            address,
            token,
        };
        served.add_editor("bob");
        served
    }

    /// Makes the user `name` an editor in `ada/app`.
    fn add_editor(&self, name: &str) {
        add_member(self.address, &self.token, "ada/app", name, "editor");
    }

    fn page(&self) -> String {
        format!("/d/{}", self.document)
    }

    /// Replaces the document's text through the API, as a program would (credited to ada).
    fn write(&self, text: &str) {
        write_text(self.address, &self.token, &self.document, text);
    }

    fn stored_text(&self) -> String {
        support::text_of(self.address, &self.token, &self.document)
    }

    /// A session cookie of `name`'s, as the login API sets it.
    fn cookie(&self, name: &str) -> String {
        let login = request(
            self.address,
            "POST",
            "/api/v1/session",
            &[],
            Some(&json!({"name": name, "password": support::USER_PASSWORD})),
        );
        assert_eq!(login.status, 200, "{}", login.body);
        format!(
            "fermata_session={}",
            login.cookie("fermata_session").unwrap()
        )
    }

    /// The user ID of `name`, as their document page gives it to the editor.
    fn user_id(&self, name: &str) -> String {
        let page = request(
            self.address,
            "GET",
            &self.page(),
            &[("Cookie", &self.cookie(name))],
            None,
        );
        assert_eq!(page.status, 200, "{}", page.body);
        page.body
            .split("data-user-id=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_else(|| panic!("no user ID on the page: {}", page.body))
            .to_owned()
    }

    /// A member whose user ID prefers another of `palette` colours than `taken`: bob, or failing
    /// that the first of bob-2, bob-3, ... that does (each made an editor); with their colour.
    fn partner(&self, taken: usize, palette: usize) -> (String, usize) {
        for n in 1..=20 {
            let name = if n == 1 {
                "bob".to_owned()
            } else {
                let name = format!("bob-{n}");
                add_user(&self.target, &name, false);
                self.add_editor(&name);
                name
            };
            let colour = preferred_colour(&self.user_id(&name), palette);
            if colour != taken {
                return (name, colour);
            }
        }
        panic!("twenty members all prefer colour {taken}");
    }

    /// The number of collaborator colours: the `presence-N` classes of the editor's style sheet.
    fn palette(&self) -> usize {
        let css = request(self.address, "GET", "/assets/editor.css", &[], None);
        assert_eq!(css.status, 200, "{}", css.body);
        let palette = (0..)
            .take_while(|n| css.body.contains(&format!(".presence-{n}{{")))
            .count();
        assert!(palette >= 8, "{palette} colours in {}", css.body);
        palette
    }

    /// Asserts that the page at `path`, as `name` gets it, is answered under the strict policy
    /// and carries nothing inline.
    fn assert_strict_page(&self, name: &str, path: &str) {
        let answer = request(
            self.address,
            "GET",
            path,
            &[("Cookie", &self.cookie(name))],
            None,
        );
        assert_eq!(answer.status, 200, "{path}: {}", answer.body);
        let policy = answer
            .headers
            .lines()
            .find_map(|line| {
                let (key, value) = line.split_once(": ")?;
                key.eq_ignore_ascii_case("content-security-policy")
                    .then(|| value.to_owned())
            })
            .unwrap_or_else(|| panic!("{path} has no policy: {}", answer.headers));
        for directive in [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self' 'nonce-",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(policy.contains(directive), "{path}: {policy}");
        }
        assert!(!policy.contains("unsafe"), "{path}: {policy}");
        for inline in ["<style", "style=\"", "<script>"] {
            assert!(
                !answer.body.contains(inline),
                "{path} carries {inline:?} inline: {}",
                answer.body
            );
        }
    }
}

#[tokio::test]
async fn collaborators_see_each_other_in_colours_of_their_own() {
    let served = Served::start("Together").await;
    served.write("# Together\n\nThe middle line.\n");
    // Two people whose IDs pick two colours (two who pick one are the next test's).
    let palette = served.palette();
    let ada_colour = preferred_colour(&served.user_id("ada"), palette);
    let (partner, partner_colour) = served.partner(ada_colour, palette);
    let (ada, bob) = tokio::join!(
        Browser::open_watched(&served.base),
        Browser::open_watched(&served.base)
    );
    let page = served.page();
    tokio::join!(
        ada.open_editor("ada", &page),
        bob.open_editor(&partner, &page)
    );
    // Each types, which publishes their cursor, and sees the other.
    ada.type_at_end("Ada was here.").await;
    bob.type_at_start(&format!("{}{}Bob was here.", Key::End, Key::Enter))
        .await;
    for (browser, other) in [(&ada, partner.as_str()), (&bob, "ada")] {
        browser.wait_for_person(other).await;
        browser
            .wait_text("both people's typing", |text| {
                text.contains("Ada was here.") && text.contains("# Together\nBob was here.")
            })
            .await;
    }

    // Each sees the other's dot and cursor in one colour, not their own; the name on the cursor
    // is drawn in the ink of that colour.
    let (seen_by_ada, seen_by_bob) = (ada.colours().await, bob.colours().await);
    for (colours, who) in [(&seen_by_ada, "ada"), (&seen_by_bob, "bob")] {
        assert_ne!(colours["me"], colours["person"], "{who}: {colours}");
        assert_eq!(colours["person"], colours["caret"], "{who}: {colours}");
        assert_eq!(colours["person"], colours["label"], "{who}: {colours}");
        assert_eq!(
            colours["label_text"], "rgb(255, 255, 255)",
            "{who}: {colours}"
        );
        // Not the style sheet's default: the class reached the page despite its policy.
        assert_ne!(colours["person"], "rgb(48, 188, 237)", "{who}: {colours}");
    }
    // Each has the colour their ID picks, and everyone agrees: the colour ada sees for her
    // partner is the one the partner sees for themself.
    assert_eq!(
        seen_by_ada["me_class"],
        json!([format!("presence-{ada_colour}")])
    );
    assert_eq!(
        seen_by_bob["me_class"],
        json!([format!("presence-{partner_colour}")])
    );
    assert_eq!(seen_by_ada["person"], seen_by_bob["me"]);
    assert_eq!(seen_by_bob["person"], seen_by_ada["me"]);
    assert_eq!(seen_by_ada["person_class"], seen_by_bob["me_class"]);
    ada.assert_contrast("two collaborators in the light").await;
    ada.screenshot("50-two-collaborators-light").await;
    bob.screenshot("51-two-collaborators-light-bob").await;

    // The same colour after a reload.
    bob.reopen_editor(&page).await;
    bob.type_at_end(" Back.").await;
    let again = bob.colours().await;
    assert_eq!(again["me_class"], seen_by_bob["me_class"], "{again}");
    assert_eq!(
        again["person_class"], seen_by_bob["person_class"],
        "{again}"
    );

    // In the dark: the dots on the dark page and the cursors and names on the dark source take
    // the palette's dark values, still two apart, the names drawn in the dark ink.
    // The source turns dark as the preference changes, without a reload.
    ada.prefer(Scheme::Dark).await;
    eventually("the source's dark ground, live", || async {
        let ground = ada
            .script(
                "return getComputedStyle(document.querySelector('.cm-editor')).backgroundColor;",
                Vec::new(),
            )
            .await;
        if ground == json!("rgb(26, 31, 38)") {
            Ok(())
        } else {
            Err(ground.to_string())
        }
    })
    .await;
    for browser in [&ada, &bob] {
        browser.prefer(Scheme::Dark).await;
        browser.reopen_editor(&page).await;
    }
    ada.type_at_end(" In the dark.").await;
    bob.type_at_start(&format!("{}{} Dark too.", Key::Down, Key::End))
        .await;
    for browser in [&ada, &bob] {
        browser
            .wait_text("both people's typing in the dark", |text| {
                text.contains("In the dark.") && text.contains("Bob was here. Dark too.")
            })
            .await;
    }
    let (dark_ada, dark_bob) = (ada.colours().await, bob.colours().await);
    for (dark, light, who) in [
        (&dark_ada, &seen_by_ada, "ada"),
        (&dark_bob, &seen_by_bob, "bob"),
    ] {
        assert_ne!(dark["me"], dark["person"], "{who}: {dark}");
        assert_ne!(
            dark["me"], light["me"],
            "{who}: the dot has no dark value: {dark}"
        );
        assert_eq!(dark["me_class"], light["me_class"], "{who}: {dark}");
        assert_eq!(dark["person"], dark["caret"], "{who}: {dark}");
        assert_eq!(dark["person"], dark["label"], "{who}: {dark}");
        assert_ne!(
            dark["caret"], light["caret"],
            "{who}: the cursor has no dark value: {dark}"
        );
        assert_eq!(dark["label_text"], "rgb(20, 24, 29)", "{who}: {dark}");
    }
    assert_eq!(dark_ada["person"], dark_bob["me"]);
    ada.assert_contrast("two collaborators in the dark").await;
    ada.screenshot("52-two-collaborators-dark").await;
    for browser in [&ada, &bob] {
        browser.assert_no_violations("the document page").await;
    }
    ada.close().await;
    bob.close().await;
}

#[tokio::test]
async fn of_two_whose_ids_pick_one_colour_the_later_to_join_takes_the_next() {
    let served = Served::start("Clash").await;
    let palette = served.palette();
    // People join until two of them prefer the same colour: at most one more than there are
    // colours.
    let mut preferred: BTreeMap<usize, String> = BTreeMap::new();
    let mut clash = None;
    for n in 0..=palette {
        let name = format!("member-{n}");
        add_user(&served.target, &name, false);
        served.add_editor(&name);
        let colour = preferred_colour(&served.user_id(&name), palette);
        if let Some(first) = preferred.get(&colour) {
            clash = Some((first.clone(), name, colour));
            break;
        }
        preferred.insert(colour, name);
    }
    let (first, later, colour) = clash.expect("more people than colours share one");
    let (own, next) = (
        format!("presence-{colour}"),
        format!("presence-{}", (colour + 1) % palette),
    );

    let early = Browser::open_watched(&served.base).await;
    early.open_editor(&first, &served.page()).await;
    assert_eq!(early.colour_class(".editor-me", None).await, own);
    let late = Browser::open_watched(&served.base).await;
    late.open_editor(&later, &served.page()).await;
    late.wait_for_person(&first).await;
    early.wait_for_person(&later).await;
    // The later one moves on; the first keeps theirs; both pages agree.
    late.colour_class(".editor-me", Some(&next)).await;
    late.colour_class(".editor-person", Some(&own)).await;
    early.colour_class(".editor-me", Some(&own)).await;
    early.colour_class(".editor-person", Some(&next)).await;
    early.assert_no_violations("the first one's page").await;
    late.assert_no_violations("the later one's page").await;

    // Once the first leaves, the colour is free again.
    early.close().await;
    late.colour_class(".editor-me", Some(&own)).await;
    late.close().await;
}

#[tokio::test]
async fn the_outline_lists_the_headings_and_moves_the_editor_to_one() {
    let served = Served::start("Outlined").await;
    let filler = |what: &str| -> String {
        (1..=40)
            .map(|n| format!("Line {n} about {what}.\n"))
            .collect()
    };
    served.write(&format!(
        "# Plan\n\n{}\n```sh\n# not a heading: a shell comment\n```\n\n## Risks\n\n{}",
        filler("the plan"),
        filler("the risks")
    ));
    let ada = Browser::open_watched(&served.base).await;
    ada.open_editor("ada", &served.page()).await;
    ada.wait_outline(&["Plan", "Risks"]).await;

    // A heading typed a moment ago is listed; following it moves the editor there.
    let enter = Key::Enter.to_string();
    ada.type_at_end(&format!("{enter}### Typed just now{enter}More text."))
        .await;
    ada.wait_outline(&["Plan", "Risks", "Typed just now"]).await;
    ada.back_to_the_top().await;
    let (top, _, _) = ada.cursor_line().await;
    assert_eq!(top, "# Plan");
    ada.click_outline("Typed just now").await;
    ada.wait_cursor_on("### Typed just now").await;
    ada.screenshot("53-outline").await;

    // Removing a heading removes it from the outline.
    ada.type_at_end(&format!("{enter}#### Gone soon")).await;
    ada.wait_outline(&["Plan", "Risks", "Typed just now", "Gone soon"])
        .await;
    let content = ada.focus().await;
    let keys = format!("{}{}", Key::Shift, Key::Home);
    content
        .send_keys(&format!("{keys}{}{}", Key::Null, Key::Backspace))
        .await
        .unwrap();
    ada.wait_outline(&["Plan", "Risks", "Typed just now"]).await;
    ada.assert_no_violations("the document page").await;

    // From the keyboard: Tab reaches every link of the outline in page order, and Enter on one
    // moves the editor to its heading.
    ada.reopen_editor(&served.page()).await;
    ada.wait_outline(&["Plan", "Risks", "Typed just now"]).await;
    ada.assert_tab_order(
        "the document page",
        &[
            ".editor-outline a[data-heading='0']",
            ".editor-outline a[data-heading='2']",
            ".cm-content",
        ],
    )
    .await;
    ada.reopen_editor(&served.page()).await;
    ada.wait_outline(&["Plan", "Risks", "Typed just now"]).await;
    ada.tab_to(".editor-outline a[data-heading='1']").await;
    // A change from elsewhere redraws the outline, and the focus stays on its link.
    let (before, _) = ada.focused().await;
    served.write(&format!("{}## From elsewhere\n", served.stored_text()));
    ada.wait_outline(&["Plan", "Risks", "Typed just now", "From elsewhere"])
        .await;
    assert_eq!(ada.focused().await.0, before);
    ada.press(Key::Enter).await;
    ada.wait_cursor_on("## Risks").await;
    ada.close().await;
}

#[tokio::test]
async fn a_session_shows_what_it_changed_and_any_two_sessions_are_compared() {
    let served = Served::start("Versions").await;
    // Session 1, ada's, through the API; session 2, bob's, typed: one line replaced.
    served.write("# Plan\nThe old line.\nA kept line.\n");
    let bob = Browser::open_watched(&served.base).await;
    bob.open_editor("bob", &served.page()).await;
    bob.type_at_start(&format!(
        "{}{}{}{}The new line.",
        Key::Down,
        Key::Shift,
        Key::End,
        Key::Null
    ))
    .await;
    bob.wait_text("the replaced line", |text| {
        text == "# Plan\nThe new line.\nA kept line.\n"
    })
    .await;
    bob.wait_state("saved").await;
    assert_eq!(
        served.stored_text(),
        "# Plan\nThe new line.\nA kept line.\n"
    );

    // The history lists both; the second one's page shows what bob changed.
    let second = format!(
        "#history a[href='/documents/{}/history/2']",
        served.document
    );
    let client = &bob.client;
    let second_link = &second;
    eventually("both sessions in the history", || async move {
        client.refresh().await.map_err(|e| e.to_string())?;
        client
            .find(Locator::Css(second_link))
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    })
    .await;
    bob.wait("#compare-sessions").await;
    bob.wait(&second).await.click().await.unwrap();
    bob.wait("#session-diff").await;
    let rows = bob.diff_rows("#session-diff").await;
    let row = |class: &str, sign: &str, text: &str, said: &str| {
        (
            class.to_owned(),
            sign.to_owned(),
            text.to_owned(),
            said.to_owned(),
        )
    };
    assert_eq!(
        rows,
        [
            row("diff-unchanged", "", "# Plan", ""),
            row("diff-removed", "−", "The old line.", "removed"),
            row("diff-added", "+", "The new line.", "added"),
            row("diff-unchanged", "", "A kept line.", ""),
        ]
    );
    // Told apart by their elements too, and by their grounds.
    let marked = bob
        .script(
            "return [document.querySelector('#session-diff del').textContent, \
                     document.querySelector('#session-diff ins').textContent, \
                     getComputedStyle(document.querySelector('.diff-added')).backgroundColor, \
                     getComputedStyle(document.querySelector('.diff-removed')).backgroundColor];",
            Vec::new(),
        )
        .await;
    assert_eq!(marked[0], "The old line.");
    assert_eq!(marked[1], "The new line.");
    assert_ne!(marked[2], marked[3], "{marked}");
    assert_eq!(
        bob.wait("#session-text")
            .await
            .text()
            .await
            .unwrap()
            .trim_end(),
        "# Plan\nThe new line.\nA kept line."
    );
    bob.assert_no_violations("the session's page").await;
    bob.assert_contrast("the session's page in the light").await;
    bob.screenshot("54-history-diff-light").await;
    let session = format!("/documents/{}/history/2", served.document);
    bob.prefer(Scheme::Dark).await;
    bob.goto(&session).await;
    bob.wait("#session-diff").await;
    bob.assert_contrast("the session's page in the dark").await;
    bob.screenshot("55-history-diff-dark").await;
    bob.prefer(Scheme::Light).await;
    bob.goto(&session).await;

    // The comparison, from the session's page: the two sessions picked, their diff below.
    bob.wait("#compare-session").await.click().await.unwrap();
    let compare = format!("/documents/{}/history/compare", served.document);
    let query = bob.wait_path(&compare).await;
    assert_eq!(query, "from=1&to=2");
    let rows = bob.diff_rows("#compare-diff").await;
    assert!(
        rows.contains(&row("diff-added", "+", "The new line.", "added")),
        "{rows:?}"
    );
    bob.screenshot("56-history-compare").await;

    // From the keyboard, on the page without a choice: every control in order, then the two
    // sessions the other way round.
    bob.goto(&compare).await;
    bob.wait("#compare-form").await;
    bob.assert_tab_order(
        "the comparison page",
        &["#compare-from", "#compare-to", "#compare-form button"],
    )
    .await;
    bob.goto(&compare).await;
    bob.wait("#compare-form").await;
    // The sessions are listed newest first: from session 1 up to 2, to session 2 down to 1.
    bob.tab_to("#compare-from").await;
    bob.press(Key::Up).await;
    bob.tab_to("#compare-to").await;
    bob.press(Key::Down).await;
    bob.tab_to("#compare-form button").await;
    bob.press(Key::Enter).await;
    eventually("the comparison the other way round", || async {
        let query = bob.wait_path(&compare).await;
        if query == "from=2&to=1" {
            Ok(())
        } else {
            Err(query)
        }
    })
    .await;
    bob.wait("#compare-diff").await;
    let rows = bob.diff_rows("#compare-diff").await;
    assert!(
        rows.contains(&row("diff-removed", "−", "The new line.", "removed"))
            && rows.contains(&row("diff-added", "+", "The old line.", "added")),
        "{rows:?}"
    );
    bob.assert_no_violations("the comparison page").await;
    bob.close().await;

    // Both pages are answered under the strict policy, with nothing inline.
    served.assert_strict_page("bob", &session);
    served.assert_strict_page("bob", &format!("{compare}?from=1&to=2"));
}
