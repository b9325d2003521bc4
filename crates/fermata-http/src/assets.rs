//! The static files pages load from `/assets/`: the editor's script and style sheet (with the
//! licences of the packages bundled in it), built from `web/` by esbuild into
//! `crates/fermata-http/assets/` and embedded in the binary, so `cargo build` needs no Node.js;
//! the pages' style sheets, `page.css` for every page, `admin.css` for the administrator pages
//! and `history.css` for the history pages' diffs (kept beside `crate::view`, which draws the
//! pages); and the administrator page's script,
//! `admin.js`. No page carries a style or a script inline: everything it runs or applies is one
//! of these files.
//!
//! Each file is served under its plain name (`/assets/editor.js`, revalidated every time by its
//! ETag) and under a name carrying a hash of its bytes (`/assets/editor.0123456789abcdef.js`,
//! cached for a year as immutable). Pages link the hashed name through [`url`]: a new build
//! changes the address, so a browser fetches it at once and never revalidates the old one. Every
//! answer says `nosniff`, so a browser runs or applies a file only as the type it is sent as.

use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use sha2::{Digest, Sha256};

/// One embedded file.
#[derive(Debug)]
struct Asset {
    name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

/// Every file under `/assets/`.
const ASSETS: &[Asset] = &[
    Asset {
        name: "editor.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../assets/editor.js"),
    },
    Asset {
        name: "editor.js.LEGAL.txt",
        content_type: "text/plain; charset=utf-8",
        bytes: include_bytes!("../assets/editor.js.LEGAL.txt"),
    },
    Asset {
        name: "editor.css",
        content_type: "text/css; charset=utf-8",
        bytes: include_bytes!("../assets/editor.css"),
    },
    Asset {
        name: "page.css",
        content_type: "text/css; charset=utf-8",
        bytes: include_bytes!("view/page.css"),
    },
    Asset {
        name: "admin.css",
        content_type: "text/css; charset=utf-8",
        bytes: include_bytes!("view/admin.css"),
    },
    Asset {
        name: "history.css",
        content_type: "text/css; charset=utf-8",
        bytes: include_bytes!("view/history.css"),
    },
    Asset {
        name: "admin.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("admin_page/admin_page.js"),
    },
];

/// A hashed address is never reused for other bytes.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// A plain address is checked with the server each time (a 304 when unchanged).
const REVALIDATE: &str = "no-cache";

/// An asset with what is worked out from its bytes once.
#[derive(Debug)]
struct Served {
    asset: &'static Asset,
    /// The name with the content hash before the first extension: `editor.HASH.js`.
    hashed_name: String,
    etag: HeaderValue,
}

impl Served {
    fn new(asset: &'static Asset) -> Self {
        let hash = Sha256::digest(asset.bytes);
        let short: String = hash[..8].iter().map(|byte| format!("{byte:02x}")).collect();
        let hashed_name = match asset.name.split_once('.') {
            Some((stem, extensions)) => format!("{stem}.{short}.{extensions}"),
            None => format!("{}.{short}", asset.name),
        };
        let etag = HeaderValue::from_str(&format!("\"{short}\""))
            .expect("a quoted hexadecimal hash is a header value");
        Served {
            asset,
            hashed_name,
            etag,
        }
    }
}

/// Every asset, hashed on first use.
static SERVED: LazyLock<Vec<Served>> = LazyLock::new(|| ASSETS.iter().map(Served::new).collect());

/// The asset answering to `name`, and whether `name` is its hashed one.
fn find(name: &str) -> Option<(&'static Served, bool)> {
    SERVED.iter().find_map(|served| {
        if served.asset.name == name {
            Some((served, false))
        } else if served.hashed_name == name {
            Some((served, true))
        } else {
            None
        }
    })
}

/// The address a page links `name` at: the one carrying its content hash.
///
/// # Panics
///
/// When `name` is not an embedded asset: pages name their assets in code, and a test renders
/// each page.
pub(crate) fn url(name: &str) -> String {
    match find(name) {
        Some((served, _)) => format!("/assets/{}", served.hashed_name),
        None => panic!("{name} is not an embedded asset"),
    }
}

/// Whether an `If-None-Match` header names `etag` (or is `*`).
fn matches(headers: &HeaderMap, etag: &HeaderValue) -> bool {
    let Some(wanted) = etag.to_str().ok() else {
        return false;
    };
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|tag| tag.trim().trim_start_matches("W/"))
        .any(|tag| tag == "*" || tag == wanted)
}

/// `GET /assets/{name}`: the file, by its plain or its hashed name.
pub(crate) async fn asset(Path(name): Path<String>, headers: HeaderMap) -> Response {
    let nosniff = (
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    let Some((served, hashed)) = find(&name) else {
        return (StatusCode::NOT_FOUND, [nosniff], "no such asset\n").into_response();
    };
    let cache = HeaderValue::from_static(if hashed { IMMUTABLE } else { REVALIDATE });
    let common = [
        nosniff,
        (header::CACHE_CONTROL, cache),
        (header::ETAG, served.etag.clone()),
        // Only this origin's pages load these files.
        (
            header::HeaderName::from_static("cross-origin-resource-policy"),
            HeaderValue::from_static("same-origin"),
        ),
    ];
    if matches(&headers, &served.etag) {
        return (StatusCode::NOT_MODIFIED, common).into_response();
    }
    (
        StatusCode::OK,
        common,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(served.asset.content_type),
        )],
        served.asset.bytes,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    //! Every asset answers under both names with its type, caching and `nosniff`; an unchanged
    //! one answers 304 to its ETag; an unknown name is a 404.

    use axum::body::{Body, to_bytes};
    use axum::http::Request;
    use tower::ServiceExt;

    use super::*;

    async fn get(path: &str, etag: Option<&str>) -> Response {
        let mut request = Request::get(path);
        if let Some(etag) = etag {
            request = request.header(header::IF_NONE_MATCH, etag);
        }
        axum::Router::new()
            .route("/assets/{name}", axum::routing::get(asset))
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap()
    }

    fn header_of<'a>(response: &'a Response, name: &header::HeaderName) -> &'a str {
        response.headers()[name].to_str().unwrap()
    }

    #[tokio::test]
    async fn every_asset_is_served_under_its_plain_and_its_hashed_name() {
        for asset in ASSETS {
            let hashed = url(asset.name);
            assert!(hashed.starts_with("/assets/"), "{hashed}");
            assert_ne!(hashed, format!("/assets/{}", asset.name));
            for (path, cache) in [
                (format!("/assets/{}", asset.name), REVALIDATE),
                (hashed.clone(), IMMUTABLE),
            ] {
                let response = get(&path, None).await;
                assert_eq!(response.status(), StatusCode::OK, "{path}");
                assert_eq!(
                    header_of(&response, &header::CONTENT_TYPE),
                    asset.content_type
                );
                assert_eq!(
                    header_of(&response, &header::X_CONTENT_TYPE_OPTIONS),
                    "nosniff"
                );
                assert_eq!(header_of(&response, &header::CACHE_CONTROL), cache);
                let etag = header_of(&response, &header::ETAG).to_owned();
                let body = to_bytes(response.into_body(), usize::MAX).await.unwrap();
                assert_eq!(body, asset.bytes, "{path}");

                let again = get(&path, Some(&format!("W/{etag}, \"other\""))).await;
                assert_eq!(again.status(), StatusCode::NOT_MODIFIED, "{path}");
                assert_eq!(header_of(&again, &header::ETAG), etag);
            }
        }
    }

    #[tokio::test]
    async fn the_hash_follows_the_bytes_and_unknown_names_are_not_found() {
        let editor = url("editor.js");
        let hash = editor
            .strip_prefix("/assets/editor.")
            .and_then(|rest| rest.strip_suffix(".js"))
            .unwrap();
        let expected: String = Sha256::digest(include_bytes!("../assets/editor.js"))[..8]
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        assert_eq!(hash, expected);
        for path in [
            "/assets/editor.0000000000000000.js",
            "/assets/missing.js",
            "/assets/..%2Fsrc%2Flib.rs",
        ] {
            let response = get(path, None).await;
            assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
            assert_eq!(
                header_of(&response, &header::X_CONTENT_TYPE_OPTIONS),
                "nosniff"
            );
        }
        let stale = get("/assets/editor.js", Some("\"0000000000000000\"")).await;
        assert_eq!(stale.status(), StatusCode::OK);
    }
}
