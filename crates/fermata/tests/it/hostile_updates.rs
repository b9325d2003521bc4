//! One set of rules for every way an edit arrives, on the real binary and both engines: a table
//! of hostile updates (NUL, a new root type, an embed, a nested type, formatting, formatted
//! text) is sent over a live `/sync` connection and as a program's `POST .../updates`, a text
//! with NUL as a program's `PUT .../text` and in a folder to `fermata import`; each is refused
//! (close 1008 live, 422 with the rule's code for a program, exit 2 for the import) and the
//! stored document is read back unchanged. A restored version is a rewrite of a text, checked by
//! the same function as `PUT .../text`.

use std::net::SocketAddr;

use fermata_collab::protocol;
use futures::{SinkExt as _, StreamExt as _};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use yrs::updates::decoder::Decode as _;
use yrs::updates::encoder::Encode as _;
use yrs::{Any, Doc, Map as _, ReadTxn as _, StateVector, Text as _, Transact as _, Update};

use crate::support::{self, Answer, PATIENCE, Target, add_user, get_bytes, request};

on_both!(every_path_refuses_the_same_hostile_updates);

/// An update made on a copy of the stored `state` by `edit` (given the root text `source` and
/// a root map `evil`, taken before the transaction opens: taking one opens a transaction of its
/// own): what a hostile client would send.
fn hostile(
    state: &[u8],
    edit: impl FnOnce(&yrs::TextRef, &yrs::MapRef, &mut yrs::TransactionMut),
) -> Vec<u8> {
    let doc = Doc::new();
    doc.transact_mut()
        .apply_update(Update::decode_v1(state).unwrap())
        .unwrap();
    let (text, evil) = (
        doc.get_or_insert_text("source"),
        doc.get_or_insert_map("evil"),
    );
    let before = doc.transact().state_vector();
    {
        let mut txn = doc.transact_mut();
        edit(&text, &evil, &mut txn);
    }
    doc.transact().encode_state_as_update_v1(&before)
}

/// The table: what each update does, the update, and the code a program is refused with.
fn table(state: &[u8]) -> Vec<(&'static str, Vec<u8>, &'static str)> {
    let bold = || yrs::types::Attrs::from([("bold".into(), Any::Bool(true))]);
    vec![
        (
            "NUL in the text",
            hostile(state, |text, _, txn| text.insert(txn, 0, "a\0b")),
            "text_nul",
        ),
        (
            "a new root map",
            hostile(state, |_, evil, txn| {
                evil.insert(txn, "key", "value");
            }),
            "update_new_root_type",
        ),
        (
            "an embed",
            hostile(state, |text, _, txn| {
                text.insert_embed(txn, 0, Any::from(7.0));
            }),
            "update_not_text",
        ),
        (
            "a map nested in the text",
            hostile(state, |text, _, txn| {
                text.insert_embed(txn, 0, yrs::MapPrelim::default());
            }),
            "update_not_text",
        ),
        (
            "formatting",
            hostile(state, |text, _, txn| text.format(txn, 0, 3, bold())),
            "text_formatting",
        ),
        (
            "formatted text",
            hostile(state, |text, _, txn| {
                text.insert_with_attributes(txn, 0, "loud", bold());
            }),
            "text_formatting",
        ),
    ]
}

/// The stored document: its text, revision and state (the Yjs update of everything).
fn stored(address: SocketAddr, token: &str, document: &str) -> (String, i64, Vec<u8>) {
    let bearer = format!("Bearer {token}");
    let view = request(
        address,
        "GET",
        &format!("/api/v1/documents/{document}"),
        &[("Authorization", &bearer)],
        None,
    );
    assert_eq!(view.status, 200, "{}", view.body);
    let json = view.json();
    let state = get_bytes(
        address,
        &format!("/api/v1/documents/{document}/state"),
        token,
    );
    (
        json["text"].as_str().unwrap().to_owned(),
        json["revision"].as_i64().unwrap(),
        state,
    )
}

/// The root types a state holds besides `source`, and whether its text carries formatting.
fn outside_text(state: &[u8]) -> (Vec<String>, bool) {
    let doc = Doc::new();
    doc.transact_mut()
        .apply_update(Update::decode_v1(state).unwrap())
        .unwrap();
    // Taken before the read: taking a root opens a transaction of its own.
    let text = doc.get_or_insert_text("source");
    let txn = doc.transact();
    let roots = txn
        .root_refs()
        .map(|(name, _)| name.to_owned())
        .filter(|name| name != "source")
        .collect();
    let formatted = text
        .diff(&txn, yrs::types::text::YChange::identity)
        .iter()
        .any(|chunk| chunk.attributes.is_some());
    (roots, formatted)
}

/// Sends `update` over a live connection; returns the close code the room answered with.
async fn send_live(address: SocketAddr, document: &str, token: &str, update: Vec<u8>) -> u16 {
    let url = format!("ws://{address}/sync/{document}?token={token}");
    let (mut socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let vector = StateVector::default().encode_v1();
    socket
        .send(Message::binary(protocol::sync_step1(&vector)))
        .await
        .unwrap();
    socket
        .send(Message::binary(protocol::update(update)))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        match tokio::time::timeout_at(deadline, socket.next()).await {
            Ok(Some(Ok(Message::Close(Some(frame))))) => return u16::from(frame.code),
            Ok(Some(Ok(_))) => {}
            other => panic!("the room never closed the connection: {other:?}"),
        }
    }
}

fn post_update(address: SocketAddr, document: &str, token: &str, update: &[u8]) -> Answer {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "POST /api/v1/documents/{document}/updates HTTP/1.0\r\nHost: {address}\r\n\
         Authorization: Bearer {token}\r\nContent-Type: application/octet-stream\r\n\
         Content-Length: {}\r\n\r\n",
        update.len()
    )
    .unwrap();
    stream.write_all(update).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    Answer {
        status: head[9..12].parse().unwrap(),
        headers: head.to_owned(),
        body: body.to_owned(),
    }
}

async fn every_path_refuses_the_same_hostile_updates(target: Target) {
    add_user(&target, "ada", false);
    let (status, token, err) = target.run_with_input(&["token", "create", "--user", "ada"], "");
    assert!(status.success(), "{err}");
    let token = token.trim().to_owned();
    let bearer = format!("Bearer {token}");
    let mut server = target.serve(&[]);
    server.wait_ready().await;
    let address = server.address().await;
    let created =
        support::create_document(address, &[("Authorization", &bearer)], "ada/app", "Target");
    assert_eq!(created.status, 201, "{}", created.body);
    let document = created.json()["id"].as_str().unwrap().to_owned();
    let put = |text: &str| {
        request(
            address,
            "PUT",
            &format!("/api/v1/documents/{document}/text"),
            &[("Authorization", &bearer)],
            Some(&json!({"text": text})),
        )
    };
    assert_eq!(put("plain text\n").status, 200);
    let before = stored(address, &token, &document);

    for (what, update, code) in table(&before.2) {
        let live = send_live(address, &document, &token, update.clone()).await;
        assert_eq!(live, u16::from(CloseCode::Policy), "{what} over /sync");
        let answer = post_update(address, &document, &token, &update);
        assert_eq!(
            answer.status, 422,
            "{what} as a program's update: {answer:?}"
        );
        assert!(
            answer.body.contains(&format!("\"code\":\"{code}\"")),
            "{what}: {}",
            answer.body
        );
        let after = stored(address, &token, &document);
        assert_eq!(
            (&after.0, after.1),
            (&before.0, before.1),
            "{what} changed the document"
        );
        assert_eq!(outside_text(&after.2), (Vec::new(), false), "{what}");
    }
    let nul = put("a\0b\n");
    assert_eq!(nul.status, 422, "{}", nul.body);
    assert!(nul.body.contains("\"code\":\"text_nul\""), "{}", nul.body);
    let after = stored(address, &token, &document);
    assert_eq!((&after.0, after.1), (&before.0, before.1));

    // A live client can still use the document: nothing hostile reached it.
    assert_eq!(put("plain text, still\n").status, 200);
    server.terminate();
    server.wait_exit().await;

    // An import carrying the same text is refused before it writes anything.
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("hostile.md"), "a\0b\n").unwrap();
    let (status, out, err) = target.run_with_input(
        &["import", folder.path().to_str().unwrap(), "ada/imported"],
        "",
    );
    assert_eq!(status.code(), Some(2), "{out}{err}");
    assert!(err.contains("NUL"), "{err}");
}
