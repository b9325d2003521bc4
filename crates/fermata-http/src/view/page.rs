//! The one skeleton of every HTML page, and the one Content-Security-Policy every page is
//! answered under.
//!
//! A page is a title, a body, and the files it loads from `/assets/` by their hashed addresses
//! (see `crate::assets`): the shared style sheet first, then its own style sheets and scripts.
//! Nothing a page carries is inline (no `<style>` element, no `style` attribute, no inline
//! script), so one policy fits every page: nothing by default; scripts and style sheets from this
//! origin; style elements that carry the answer's nonce, because the document editor's
//! CodeMirror writes its base theme into one at run time and reads the nonce from its mount
//! element; images from this origin, `data:` and `blob:` (the editor's preview of a pasted image);
//! requests, the editor's WebSocket included, to this origin; forms posted here; no `<base>`;
//! never in a frame.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};

use crate::assets;

/// The style sheet every page loads before its own.
const SHARED_STYLE: &str = "page.css";

/// The nonce of one answer: 122 random bits, in characters a CSP nonce allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Nonce(String);

impl Nonce {
    pub(crate) fn new() -> Self {
        Nonce(uuid::Uuid::new_v4().simple().to_string())
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// The policy of every page, answered under `nonce`.
pub(crate) fn content_security_policy(nonce: &Nonce) -> String {
    format!(
        "default-src 'none'; script-src 'self'; style-src 'self' 'nonce-{}'; \
         img-src 'self' data: blob:; connect-src 'self'; form-action 'self'; base-uri 'none'; \
         frame-ancestors 'none'",
        nonce.as_str()
    )
}

/// An HTML page: drawn in the one skeleton, answered never cached (pages carry CSRF tokens and
/// live state) under the one policy.
#[derive(Debug)]
pub(crate) struct Page {
    title: String,
    body: Markup,
    /// Embedded style sheets loaded after the shared one.
    styles: Vec<&'static str>,
    /// Embedded scripts, run once the page is parsed.
    scripts: Vec<&'static str>,
    /// A class of the body element, for a style sheet that lays the page out on its own.
    body_class: Option<&'static str>,
    /// The nonce the body handed its script; a page without one is answered under a fresh
    /// nonce that no element carries.
    nonce: Option<Nonce>,
}

impl Page {
    pub(crate) fn new(title: impl Into<String>, body: Markup) -> Self {
        Page {
            title: title.into(),
            body,
            styles: Vec::new(),
            scripts: Vec::new(),
            body_class: None,
            nonce: None,
        }
    }

    /// Loads the embedded style sheet `name` after the shared one.
    pub(crate) fn style(mut self, name: &'static str) -> Self {
        self.styles.push(name);
        self
    }

    /// Runs the embedded script `name` once the page is parsed.
    pub(crate) fn script(mut self, name: &'static str) -> Self {
        self.scripts.push(name);
        self
    }

    pub(crate) fn body_class(mut self, class: &'static str) -> Self {
        self.body_class = Some(class);
        self
    }

    /// Answers under `nonce`, which the body gave its script.
    pub(crate) fn with_nonce(mut self, nonce: Nonce) -> Self {
        self.nonce = Some(nonce);
        self
    }

    /// The page as a whole document: the one skeleton.
    pub(crate) fn markup(&self) -> Markup {
        html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    title { (self.title) " · Fermata" }
                    link rel="stylesheet" href=(assets::url(SHARED_STYLE));
                    @for name in &self.styles { link rel="stylesheet" href=(assets::url(name)); }
                    @for name in &self.scripts { script defer src=(assets::url(name)) {} }
                }
                body class=[self.body_class] {
                    main { (self.body) }
                }
            }
        }
    }

    /// The page's markup with every asset at its plain address, so a snapshot does not change
    /// with the bytes of a style sheet or a script.
    #[cfg(test)]
    pub(crate) fn snapshot(&self) -> String {
        let mut html = self.markup().into_string();
        for name in [SHARED_STYLE]
            .iter()
            .chain(&self.styles)
            .chain(&self.scripts)
        {
            html = html.replace(&assets::url(name), &format!("/assets/{name}"));
        }
        html
    }
}

impl IntoResponse for Page {
    fn into_response(self) -> Response {
        let nonce = self.nonce.clone().unwrap_or_else(Nonce::new);
        let mut response = self.markup().into_response();
        let headers = response.headers_mut();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if let Ok(policy) = HeaderValue::from_str(&content_security_policy(&nonce)) {
            headers.insert(header::CONTENT_SECURITY_POLICY, policy);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    //! The skeleton and its policy: every file by its hashed address, nothing inline, and a
    //! policy that allows this origin and the answer's nonce only.

    use axum::http::StatusCode;

    use super::*;

    #[test]
    fn a_page_loads_its_files_by_address_and_carries_nothing_inline() {
        let page = Page::new("Plan <&>", html! { p { "Text" } })
            .style("editor.css")
            .script("editor.js")
            .body_class("document-page");
        let html = page.markup().into_string();
        for expected in [
            "<title>Plan &lt;&amp;&gt; · Fermata</title>".to_owned(),
            format!(
                "<link rel=\"stylesheet\" href=\"{}\">",
                assets::url("page.css")
            ),
            format!(
                "<link rel=\"stylesheet\" href=\"{}\">",
                assets::url("editor.css")
            ),
            format!(
                "<script defer src=\"{}\"></script>",
                assets::url("editor.js")
            ),
            "<body class=\"document-page\"><main><p>Text</p></main></body>".to_owned(),
        ] {
            assert!(html.contains(&expected), "{expected} is not in {html}");
        }
        assert!(
            html.find("page.").unwrap() < html.find("editor.").unwrap(),
            "the shared style sheet comes first: {html}"
        );
        assert!(!html.contains("<style"), "{html}");
        assert!(!html.contains("style=\""), "{html}");
        assert_eq!(html.matches("<script").count(), 1, "{html}");

        let plain = Page::new("Home", html! {}).markup().into_string();
        assert!(plain.contains("<body><main></main></body>"), "{plain}");
        assert!(!plain.contains("<script"), "{plain}");
    }

    #[test]
    fn the_policy_allows_this_origin_and_the_nonce_only() {
        let nonce = Nonce("n0nce".to_owned());
        let policy = content_security_policy(&nonce);
        for directive in [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self' 'nonce-n0nce'",
            "img-src 'self' data: blob:",
            "connect-src 'self'",
            "form-action 'self'",
            "base-uri 'none'",
            "frame-ancestors 'none'",
        ] {
            assert!(policy.contains(directive), "{directive} is not in {policy}");
        }
        assert!(!policy.contains("unsafe"), "{policy}");
        assert_ne!(Nonce::new(), Nonce::new());
    }

    #[test]
    fn a_page_is_answered_under_its_nonce_and_never_stored() {
        let nonce = Nonce::new();
        let response = (
            StatusCode::NOT_FOUND,
            Page::new("Gone", html! {}).with_nonce(nonce.clone()),
        )
            .into_response();
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        let headers = response.headers();
        assert_eq!(headers[header::CACHE_CONTROL], "no-store");
        assert_eq!(
            headers[header::CONTENT_SECURITY_POLICY],
            content_security_policy(&nonce).as_str()
        );
        assert!(
            headers[header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with("text/html")
        );
    }
}
