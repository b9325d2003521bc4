//! A document's images and Chat attachments over HTTP, through the router without a socket, on
//! a real SQLite database: uploads sniffed from their bytes (whatever name or type they claim),
//! the headers files are served with, thumbnails at `?w=`, the smaller copy, uploader-only
//! reads until sent, sending once, removal with the message, and authentication.

use std::io::Cursor;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode, header};
use fermata_collab::WriterFence;
use fermata_http::HttpState;
use fermata_store::{Acquisition, LeaseName, Storage, StoreOptions};
use fermata_store_sql::testing::{ScratchDatabase, ScratchStorage};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tower::ServiceExt;

use crate::support;

struct App {
    state: HttpState,
    /// API tokens of `ada` and `bob`.
    ada: String,
    bob: String,
    /// What the state was made with, to make a media service with other settings.
    shared: Arc<dyn Storage>,
    fence: WriterFence,
    _storage: ScratchStorage,
}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    bytes: Vec<u8>,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.bytes)
            .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&self.bytes)))
    }

    fn code(&self) -> String {
        self.json()["error"]["code"].as_str().unwrap().to_owned()
    }

    fn header(&self, name: &header::HeaderName) -> &str {
        self.headers
            .get(name)
            .unwrap_or_else(|| panic!("no {name} header"))
            .to_str()
            .unwrap()
    }
}

impl App {
    async fn new() -> Self {
        let storage = ScratchDatabase::sqlite()
            .open(StoreOptions::default())
            .await;
        let fence = WriterFence::default();
        let state = support::state(&storage, fence.clone());
        let shared: Arc<dyn Storage> = Arc::new(storage.clone());
        let mut tokens = Vec::new();
        for name in ["ada", "bob"] {
            let (user, _) = state
                .accounts
                .add_user(name, None, Default::default())
                .await
                .unwrap();
            let (_, token) = state
                .accounts
                .create_api_token(&user, "tests")
                .await
                .unwrap();
            tokens.push(token.expose().to_owned());
        }
        let Acquisition::Granted(lease) = shared
            .leases()
            .acquire(&LeaseName::WRITER, "images-test", Duration::from_secs(3600))
            .await
            .unwrap()
        else {
            panic!("the writer lease is held");
        };
        fence.set(Some(lease.fence()));
        let bob = tokens.pop().unwrap();
        let ada = tokens.pop().unwrap();
        App {
            state,
            ada,
            bob,
            shared,
            fence,
            _storage: storage,
        }
    }

    async fn send(&self, request: Request<Body>) -> Reply {
        let response = fermata_http::router(self.state.clone())
            .oneshot(request)
            .await
            .unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), 64 << 20)
            .await
            .unwrap()
            .to_vec();
        Reply {
            status,
            headers,
            bytes,
        }
    }

    async fn as_user(
        &self,
        token: &str,
        method: &str,
        uri: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> Reply {
        let mut request = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::AUTHORIZATION, format!("Bearer {token}"));
        if let Some(content_type) = content_type {
            request = request.header(header::CONTENT_TYPE, content_type);
        }
        self.send(request.body(Body::from(body)).unwrap()).await
    }

    async fn get(&self, token: &str, uri: &str) -> Reply {
        self.as_user(token, "GET", uri, None, Vec::new()).await
    }

    /// Uploads `bytes` claiming to be a PNG, as every hostile upload would.
    async fn upload(&self, token: &str, uri: &str, bytes: Vec<u8>) -> Reply {
        self.as_user(token, "POST", uri, Some("image/png"), bytes)
            .await
    }

    async fn json(&self, token: &str, method: &str, uri: &str, body: Value) -> Reply {
        self.as_user(
            token,
            method,
            uri,
            Some("application/json"),
            body.to_string().into_bytes(),
        )
        .await
    }

    /// A document of ada's, in a repository where bob is an editor.
    async fn document(&self) -> String {
        let reply = self
            .json(
                &self.ada,
                "POST",
                "/api/v1/documents",
                json!({"repository": "ada/app", "title": "Plan"}),
            )
            .await;
        assert_eq!(reply.status, StatusCode::CREATED);
        let joined = self
            .json(
                &self.ada,
                "PUT",
                "/api/v1/repositories/ada/app/members/bob",
                json!({"role": "editor"}),
            )
            .await;
        assert_eq!(joined.status, StatusCode::OK);
        reply.json()["id"].as_str().unwrap().to_owned()
    }
}

fn encode(image: &image::DynamicImage, format: image::ImageFormat) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    image.write_to(&mut out, format).unwrap();
    out.into_inner()
}

fn png(width: u32, height: u32) -> Vec<u8> {
    encode(
        &image::DynamicImage::ImageRgb8(image::RgbImage::from_fn(width, height, |x, y| {
            image::Rgb([(x % 256) as u8, (y % 256) as u8, 7])
        })),
        image::ImageFormat::Png,
    )
}

/// A PNG of pixels that do not compress, a little over 1 MiB.
fn large_png() -> Vec<u8> {
    let mut state: u32 = 7;
    let image = image::RgbImage::from_fn(640, 640, |_, _| {
        let mut next = || {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 24) as u8
        };
        image::Rgb([next(), next(), next()])
    });
    let bytes = encode(
        &image::DynamicImage::ImageRgb8(image),
        image::ImageFormat::Png,
    );
    assert!(bytes.len() > 1 << 20);
    bytes
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn dimensions(bytes: &[u8]) -> (u32, u32) {
    let image = image::load_from_memory(bytes).unwrap();
    (image.width(), image.height())
}

fn assert_served_safely(reply: &Reply, content_type: &str) {
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.header(&header::CONTENT_TYPE), content_type);
    assert_eq!(reply.header(&header::X_CONTENT_TYPE_OPTIONS), "nosniff");
    let policy = reply.header(&header::CONTENT_SECURITY_POLICY);
    assert!(
        policy.contains("default-src 'none'") && policy.contains("sandbox"),
        "{policy}"
    );
}

#[tokio::test]
async fn a_document_image_is_stored_once_and_served_by_its_hash() {
    let app = App::new().await;
    let id = app.document().await;
    let bytes = png(400, 200);
    let uri = format!("/api/v1/documents/{id}/images");

    let first = app.upload(&app.ada, &uri, bytes.clone()).await;
    assert_eq!(first.status, StatusCode::CREATED);
    let body = first.json();
    let hash = sha256(&bytes);
    assert_eq!(body["sha256"], hash.as_str());
    assert_eq!(body["type"], "png");
    assert_eq!(body["size"], bytes.len());
    let address = format!("/api/v1/documents/{id}/images/{hash}");
    assert_eq!(body["address"], address.as_str());
    assert!(body.get("original").is_none());

    let again = app.upload(&app.bob, &uri, bytes.clone()).await;
    assert_eq!(
        again.status,
        StatusCode::OK,
        "the same bytes are stored once"
    );
    assert_eq!(again.json()["stored_by"], body["stored_by"]);
    assert_eq!(
        app.get(&app.ada, &uri)
            .await
            .json()
            .as_array()
            .unwrap()
            .len(),
        1
    );

    let whole = app.get(&app.bob, &address).await;
    assert_served_safely(&whole, "image/png");
    assert_eq!(whole.bytes, bytes);
    assert_eq!(whole.header(&header::CACHE_CONTROL), "no-store");

    let thumbnail = app.get(&app.bob, &format!("{address}?w=160")).await;
    assert_served_safely(&thumbnail, "image/png");
    assert_eq!(dimensions(&thumbnail.bytes), (160, 80));
    // Wider than the image: the image itself.
    let wide = app.get(&app.bob, &format!("{address}?w=1024")).await;
    assert_eq!(wide.bytes, bytes);
    // A width not in the list is refused, not rounded.
    let odd = app.get(&app.bob, &format!("{address}?w=400")).await;
    assert_eq!(
        (odd.status, odd.code()),
        (StatusCode::BAD_REQUEST, "invalid_width".to_owned())
    );

    let unknown = app
        .get(
            &app.bob,
            &format!("/api/v1/documents/{id}/images/{}", sha256(b"x")),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    let malformed = app
        .get(
            &app.bob,
            &format!("/api/v1/documents/{id}/images/not-a-hash"),
        )
        .await;
    assert_eq!(malformed.status, StatusCode::NOT_FOUND);

    // A cached thumbnail is served again without the stored bytes, but only while its
    // document exists.
    let hits = app.state.media.thumbnails().stats().hits;
    let again = app.get(&app.bob, &format!("{address}?w=160")).await;
    assert_eq!(again.bytes, thumbnail.bytes);
    assert_eq!(app.state.media.thumbnails().stats().hits, hits + 1);
    let channel = fermata_store::ChannelId::parse(&id).unwrap();
    app.state.documents.archive(&channel).await.unwrap();
    app.state.documents.delete(&channel).await.unwrap();
    let gone = app.get(&app.bob, &format!("{address}?w=160")).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn an_image_over_a_mebibyte_is_stored_as_a_smaller_copy() {
    let app = App::new().await;
    let id = app.document().await;
    let bytes = large_png();
    let reply = app
        .upload(
            &app.ada,
            &format!("/api/v1/documents/{id}/images"),
            bytes.clone(),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED);
    let body = reply.json();
    assert!(body["size"].as_u64().unwrap() <= 1 << 20, "{body}");
    assert_eq!(body["type"], "png");
    assert_eq!(
        body["original"],
        json!({"size": bytes.len(), "width": 640, "height": 640})
    );
    let stored = app.get(&app.ada, body["address"].as_str().unwrap()).await;
    assert_eq!(sha256(&stored.bytes), body["sha256"].as_str().unwrap());
    let (width, height) = dimensions(&stored.bytes);
    assert!(width < 640 && width == height);
}

#[tokio::test]
async fn hostile_uploads_are_refused_whatever_they_claim() {
    let app = App::new().await;
    let id = app.document().await;
    let images = format!("/api/v1/documents/{id}/images");
    let attachments = format!("/api/v1/documents/{id}/attachments?name=cat.png");
    let mut truncated = png(64, 64);
    truncated.truncate(truncated.len() / 2);
    let mut trailing = png(16, 16);
    trailing.extend_from_slice(b"<html><script>alert(1)</script></html>");
    let cases: [(Vec<u8>, StatusCode, &str); 5] = [
        (
            b"<!DOCTYPE html><script>alert(1)</script>".to_vec(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_type",
        ),
        (
            b"<svg xmlns=\"http://www.w3.org/2000/svg\" onload=\"alert(1)\"/>".to_vec(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_type",
        ),
        (
            truncated,
            StatusCode::UNPROCESSABLE_ENTITY,
            "malformed_image",
        ),
        (
            trailing,
            StatusCode::UNPROCESSABLE_ENTITY,
            "malformed_image",
        ),
        (
            b"\xff\xfeu\0t\0f\0-\x001\x006\0".to_vec(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_type",
        ),
    ];
    for (bytes, status, code) in cases {
        for uri in [&images, &attachments] {
            let reply = app.upload(&app.ada, uri, bytes.clone()).await;
            assert_eq!(
                (reply.status, reply.code()),
                (status, code.to_owned()),
                "{uri}"
            );
        }
    }
    // Over the input bound: refused from the declared length, before the body is read.
    let request = Request::builder()
        .method("POST")
        .uri(&images)
        .header(header::AUTHORIZATION, format!("Bearer {}", app.ada))
        .header(header::CONTENT_LENGTH, (64u64 << 20).to_string())
        .body(Body::empty())
        .unwrap();
    let reply = app.send(request).await;
    assert_eq!(
        (reply.status, reply.code()),
        (StatusCode::PAYLOAD_TOO_LARGE, "too_large".to_owned())
    );
    assert!(
        app.get(&app.ada, &images)
            .await
            .json()
            .as_array()
            .unwrap()
            .is_empty(),
        "nothing was stored"
    );
}

#[tokio::test]
async fn attachments_are_the_uploaders_until_sent_and_sent_once() {
    let app = App::new().await;
    let id = app.document().await;
    let uploaded = app
        .as_user(
            &app.ada,
            "POST",
            &format!("/api/v1/documents/{id}/attachments?name=notes%20%C3%A9.txt"),
            Some("text/html"),
            b"meeting notes\n".to_vec(),
        )
        .await;
    assert_eq!(uploaded.status, StatusCode::CREATED);
    let file = uploaded.json();
    assert_eq!(file["type"], "text", "sniffed, not the claimed text/html");
    assert_eq!(file["name"], "notes é.txt");
    assert!(file.get("message").is_none());
    let address = file["address"].as_str().unwrap().to_owned();
    let file_id = file["id"].as_str().unwrap().to_owned();

    let by_ada = app.get(&app.ada, &address).await;
    assert_served_safely(&by_ada, "text/plain; charset=utf-8");
    assert_eq!(by_ada.bytes, b"meeting notes\n");
    assert_eq!(
        by_ada.header(&header::CONTENT_DISPOSITION),
        "inline; filename*=UTF-8''notes%20%C3%A9.txt"
    );
    assert_eq!(
        app.get(&app.bob, &address).await.status,
        StatusCode::NOT_FOUND
    );

    let message = format!("/api/v1/documents/{id}/messages/req-1/attachments");
    let by_bob = app
        .json(
            &app.bob,
            "POST",
            &message,
            json!({"attachments": [file_id]}),
        )
        .await;
    assert_eq!(
        by_bob.status,
        StatusCode::NOT_FOUND,
        "only the uploader sends it"
    );
    let sent = app
        .json(
            &app.ada,
            "POST",
            &message,
            json!({"attachments": [file_id]}),
        )
        .await;
    assert_eq!(sent.status, StatusCode::OK);
    assert_eq!(
        sent.json()[0]["message"],
        json!({"request_id": "req-1", "place": 0})
    );
    assert_eq!(app.get(&app.bob, &address).await.status, StatusCode::OK);
    let other = app
        .json(
            &app.ada,
            "POST",
            &format!("/api/v1/documents/{id}/messages/req-2/attachments"),
            json!({"attachments": [file_id]}),
        )
        .await;
    assert_eq!(
        (other.status, other.code()),
        (StatusCode::CONFLICT, "conflict".to_owned())
    );
    assert_eq!(
        app.get(&app.bob, &message)
            .await
            .json()
            .as_array()
            .unwrap()
            .len(),
        1
    );

    let removed = app
        .as_user(&app.ada, "DELETE", &message, None, Vec::new())
        .await;
    assert_eq!(removed.json(), json!({"removed": 1}));
    assert_eq!(
        app.get(&app.ada, &address).await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn an_image_attachment_has_thumbnails_and_a_gif_stays_whole() {
    let app = App::new().await;
    let id = app.document().await;
    let uri = format!("/api/v1/documents/{id}/attachments?name=chart.png");
    let reply = app.upload(&app.ada, &uri, png(800, 400)).await;
    assert_eq!(reply.status, StatusCode::CREATED);
    let address = reply.json()["address"].as_str().unwrap().to_owned();
    let thumbnail = app.get(&app.ada, &format!("{address}?w=480")).await;
    assert_served_safely(&thumbnail, "image/png");
    assert_eq!(dimensions(&thumbnail.bytes), (480, 240));
    assert_eq!(app.state.media.thumbnails().stats().misses, 1);
    app.get(&app.ada, &format!("{address}?w=480")).await;
    assert_eq!(
        app.state.media.thumbnails().stats().hits,
        1,
        "the second read is cached"
    );

    let mut gif = Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(image::RgbImage::new(300, 300))
        .write_to(&mut gif, image::ImageFormat::Gif)
        .unwrap();
    let gif = gif.into_inner();
    let reply = app
        .upload(
            &app.ada,
            &format!("/api/v1/documents/{id}/attachments?name=a.gif"),
            gif.clone(),
        )
        .await;
    assert_eq!(reply.json()["type"], "gif");
    let whole = app
        .get(
            &app.ada,
            &format!("{}?w=64", reply.json()["address"].as_str().unwrap()),
        )
        .await;
    assert_served_safely(&whole, "image/gif");
    assert_eq!(whole.bytes, gif);
}

#[tokio::test]
async fn every_route_needs_a_login_and_an_existing_document() {
    let app = App::new().await;
    let id = app.document().await;
    let hash = sha256(b"x");
    let file = "0b6f3c1e-52a4-4d8e-9c61-7a2f0e9d4b13";
    let routes = [
        ("POST", format!("/api/v1/documents/{id}/images")),
        ("GET", format!("/api/v1/documents/{id}/images")),
        ("GET", format!("/api/v1/documents/{id}/images/{hash}")),
        (
            "POST",
            format!("/api/v1/documents/{id}/attachments?name=a.txt"),
        ),
        ("GET", format!("/api/v1/documents/{id}/attachments/{file}")),
        (
            "POST",
            format!("/api/v1/documents/{id}/messages/r/attachments"),
        ),
        (
            "GET",
            format!("/api/v1/documents/{id}/messages/r/attachments"),
        ),
        (
            "DELETE",
            format!("/api/v1/documents/{id}/messages/r/attachments"),
        ),
    ];
    for (method, uri) in &routes {
        let request = Request::builder()
            .method(*method)
            .uri(uri)
            .body(Body::from("plain"))
            .unwrap();
        assert_eq!(
            app.send(request).await.status,
            StatusCode::UNAUTHORIZED,
            "{method} {uri}"
        );
    }
    let missing = "/api/v1/documents/9c3a1d4e-0000-4000-8000-000000000000";
    for uri in [
        format!("{missing}/images"),
        format!("{missing}/attachments?name=a.txt"),
    ] {
        let reply = app.upload(&app.ada, &uri, b"text".to_vec()).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{uri}");
    }
}

#[tokio::test]
async fn an_attachment_keeps_what_the_original_was() {
    let mut app = App::new().await;
    let id = app.document().await;
    // The browser made the copy: it says what the sender's file was.
    let reply = app
        .upload(
            &app.ada,
            &format!(
                "/api/v1/documents/{id}/attachments?name=p.png&original_size=9000000&original_width=4000&original_height=3000"
            ),
            png(40, 30),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED);
    assert_eq!(
        reply.json()["original"],
        json!({"size": 9_000_000, "width": 4000, "height": 3000})
    );
    let partial = app
        .upload(
            &app.ada,
            &format!("/api/v1/documents/{id}/attachments?name=p.png&original_size=9"),
            png(40, 30),
        )
        .await;
    assert_eq!(partial.status, StatusCode::BAD_REQUEST);

    // The server made the copy: an attachment limit below the file's size.
    app.state.media = fermata_collab::Media::new(
        Arc::clone(&app.shared),
        app.fence.clone(),
        fermata_collab::MediaSettings {
            attachment_bytes: 200_000,
            ..fermata_collab::MediaSettings::default()
        },
    );
    let bytes = large_png();
    let reply = app
        .upload(
            &app.ada,
            &format!("/api/v1/documents/{id}/attachments?name=big.png"),
            bytes.clone(),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED);
    let body = reply.json();
    assert!(body["size"].as_u64().unwrap() <= 200_000, "{body}");
    assert_eq!(
        body["original"],
        json!({"size": bytes.len(), "width": 640, "height": 640})
    );
}

/// A PNG that claims `width` × `height` pixels of RGB: well formed to its last byte, its pixel
/// data a few bytes. Its header alone says what decoding it would cost.
fn png_claiming(width: u32, height: u32) -> Vec<u8> {
    // An empty zlib stream: the decoder never gets this far.
    png_of(
        width,
        height,
        &[(b"IDAT", &[0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01])],
    )
}

/// A PNG of `width` × `height` pixels of RGB made of `chunks` after its header, well formed to
/// its last byte whatever the chunks hold.
fn png_of(width: u32, height: u32, chunks: &[(&[u8; 4], &[u8])]) -> Vec<u8> {
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = u32::MAX;
        for byte in bytes {
            crc ^= u32::from(*byte);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
    fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        out.extend_from_slice(&u32::try_from(data.len()).unwrap().to_be_bytes());
        let start = out.len();
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        let crc = crc32(&out[start..]);
        out.extend_from_slice(&crc.to_be_bytes());
    }
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = Vec::new();
    header.extend_from_slice(&width.to_be_bytes());
    header.extend_from_slice(&height.to_be_bytes());
    header.extend_from_slice(&[8, 2, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &header);
    for (kind, data) in chunks {
        chunk(&mut out, kind, data);
    }
    chunk(&mut out, b"IEND", &[]);
    out
}

/// `len` zero bytes as a zlib stream: a few KiB for each MiB.
fn zlib_zeros(len: usize) -> Vec<u8> {
    use std::io::Write as _;
    let mut deflate = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    deflate.write_all(&vec![0; len]).unwrap();
    deflate.finish().unwrap()
}

#[tokio::test]
async fn a_png_bomb_behind_honest_dimensions_is_refused_and_nothing_is_stored() {
    let app = App::new().await;
    let id = app.document().await;
    let images = format!("/api/v1/documents/{id}/images");
    let attachments = format!("/api/v1/documents/{id}/attachments?name=cat.png");
    // 100 × 100 pixels of RGB are 30,100 bytes of rows: this pixel data inflates to 4 MiB,
    // and this colour profile to 8 MiB, twice what a profile may.
    let pixels = zlib_zeros(30_100);
    let profile = [b"icc\0\0".as_slice(), &zlib_zeros(8 << 20)].concat();
    let bombs = [
        png_of(100, 100, &[(b"IDAT", &zlib_zeros(4 << 20))]),
        png_of(100, 100, &[(b"iCCP", &profile), (b"IDAT", &pixels)]),
    ];
    for bomb in bombs {
        for uri in [&images, &attachments] {
            let reply = app.upload(&app.ada, uri, bomb.clone()).await;
            assert_eq!(
                (reply.status, reply.code()),
                (
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "image_too_large_to_decode".to_owned()
                ),
                "{uri}"
            );
            assert!(
                reply.json()["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("inflates to more than its bound"),
                "{uri}: {}",
                reply.json()
            );
        }
    }
    assert!(
        app.get(&app.ada, &images)
            .await
            .json()
            .as_array()
            .unwrap()
            .is_empty(),
        "nothing was stored"
    );
    // The same image with honest pixel data is stored.
    let honest = app
        .upload(&app.ada, &images, png_of(100, 100, &[(b"IDAT", &pixels)]))
        .await;
    assert_eq!(honest.status, StatusCode::CREATED, "{}", honest.json());
}

#[tokio::test]
async fn an_image_over_the_pixel_budget_is_refused_from_its_header() {
    let app = App::new().await;
    let id = app.document().await;
    // 8000 × 8000 RGB would take 192 MB to decode; the budget is 128 MiB.
    let reply = app
        .upload(
            &app.ada,
            &format!("/api/v1/documents/{id}/images"),
            png_claiming(8000, 8000),
        )
        .await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(reply.code(), "image_too_large_to_decode");
}

#[tokio::test]
async fn an_upload_waits_its_bounded_turn_and_is_then_turned_away() {
    let mut app = App::new().await;
    let id = app.document().await;
    let settings = fermata_collab::MediaSettings {
        decode_concurrency: 1,
        decode_queue_wait: Duration::from_millis(50),
        upload_buffer_bytes: fermata_collab::MediaSettings::default().max_input_bytes,
        ..fermata_collab::MediaSettings::default()
    };
    app.state.media =
        fermata_collab::Media::new(Arc::clone(&app.shared), app.fence.clone(), settings);
    let uri = format!("/api/v1/documents/{id}/images");
    // Every byte of the upload buffer is taken.
    let held = app.state.media.reserve_upload(None).await.unwrap();
    let reply = app.upload(&app.ada, &uri, png(40, 30)).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.code(), "busy");
    assert_eq!(reply.header(&header::RETRY_AFTER), "1");
    drop(held);
    let reply = app.upload(&app.ada, &uri, png(40, 30)).await;
    assert_eq!(reply.status, StatusCode::CREATED);
}
