//! A webhook receiver for the notification tests, written as a receiver would write one: it
//! reads each post over plain HTTP/1.1 on a loopback port, recomputes the HMAC-SHA256 of
//! `<X-Fermata-Timestamp>.<body>` with the shared secret, compares it in constant time with
//! `X-Fermata-Signature`, and keeps every post with whether it verified. It answers 503 to the
//! first `failures` posts, then 200.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fermata_schema::NotifySettings;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// The secret the tests sign with.
pub const SECRET: &[u8] = b"webhook-test-secret-0123456789";

/// One post as the receiver saw it.
#[derive(Debug, Clone)]
pub struct Post {
    /// Header names lowercased.
    pub headers: BTreeMap<String, String>,
    pub body: serde_json::Value,
    /// Whether the signature matched the body and timestamp under [`SECRET`].
    pub verified: bool,
}

#[derive(Debug)]
pub struct Receiver {
    pub url: String,
    posts: Arc<Mutex<Vec<Post>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Receiver {
    /// A receiver on a free loopback port that fails its first `failures` posts with 503.
    pub async fn start(failures: usize) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hooks/fermata", listener.local_addr().unwrap());
        let posts = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&posts);
        let task = tokio::spawn(async move {
            let mut answered = 0;
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let mut stream = BufReader::new(stream);
                let Some(post) = read_post(&mut stream).await else {
                    continue;
                };
                seen.lock().unwrap().push(post);
                answered += 1;
                let status = if answered <= failures {
                    "503 Service Unavailable"
                } else {
                    "200 OK"
                };
                let answer =
                    format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                stream.get_mut().write_all(answer.as_bytes()).await.ok();
                stream.get_mut().shutdown().await.ok();
            }
        });
        Receiver { url, posts, task }
    }

    /// Settings that post to this receiver, signed with [`SECRET`].
    pub fn settings(&self) -> NotifySettings {
        NotifySettings {
            urls: vec![self.url.clone()],
            secret: Arc::new(zeroize::Zeroizing::new(SECRET.to_vec())),
        }
    }

    pub fn posts(&self) -> Vec<Post> {
        self.posts.lock().unwrap().clone()
    }

    /// The posts of events of type `kind`.
    pub fn of(&self, kind: &str) -> Vec<Post> {
        self.posts()
            .into_iter()
            .filter(|post| post.body["type"] == kind)
            .collect()
    }

    /// Waits (ten seconds at most) until a post of `kind` has arrived, and returns them all.
    pub async fn wait_for(&self, kind: &str) -> Vec<Post> {
        for _ in 0..100 {
            let posts = self.of(kind);
            if !posts.is_empty() {
                return posts;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no {kind} event arrived: {:?}", self.posts());
    }
}

async fn read_post<S: tokio::io::AsyncRead + Unpin>(stream: &mut BufReader<S>) -> Option<Post> {
    let mut request_line = String::new();
    stream.read_line(&mut request_line).await.ok()?;
    if !request_line.starts_with("POST /hooks/fermata ") {
        return None;
    }
    let mut headers = BTreeMap::new();
    loop {
        let mut line = String::new();
        stream.read_line(&mut line).await.ok()?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':')?;
        headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
    }
    let length: usize = headers.get("content-length")?.parse().ok()?;
    let mut body = vec![0; length];
    stream.read_exact(&mut body).await.ok()?;
    let verified = verify(&headers, &body);
    Some(Post {
        body: serde_json::from_slice(&body).ok()?,
        headers,
        verified,
    })
}

/// The check a receiver makes: the signature is `sha256=` and the hex HMAC of the timestamp,
/// a full stop and the body, compared in constant time.
fn verify(headers: &BTreeMap<String, String>, body: &[u8]) -> bool {
    let (Some(timestamp), Some(signature)) = (
        headers.get("x-fermata-timestamp"),
        headers.get("x-fermata-signature"),
    ) else {
        return false;
    };
    let Some(hex) = signature.strip_prefix("sha256=") else {
        return false;
    };
    let Some(expected) = decode_hex(hex) else {
        return false;
    };
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET).unwrap();
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.verify_slice(&expected).is_ok()
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(hex.get(at..at + 2)?, 16).ok())
        .collect()
}
