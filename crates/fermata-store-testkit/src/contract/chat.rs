//! Contract cases for the Chat rows: threads replaced whole and read back, the one top-level
//! session per document, run stages bounded per stage and removed by run, fencing with the
//! token recorded, and values checked at the boundary.

use super::Harness;
use super::history::Fixture;
use fermata_store::channel::ChannelId;
use fermata_store::chat::{ChatKey, MAX_STAGE_PARENTS, RunStage, SessionStateDraft, ThreadDraft};
use fermata_store::error::ErrorKind;
use fermata_store::time::UnixMillis;
use fermata_store::user::UserId;

fn key(text: &str) -> ChatKey {
    ChatKey::new(text).unwrap()
}

fn thread(channel: &ChannelId, root: &str, replies: &str) -> ThreadDraft {
    ThreadDraft {
        channel: channel.clone(),
        root_id: key(root),
        root_message_json: format!("{{\"id\":\"{root}\",\"text\":\"Why \\u0000?\"}}"),
        forked_at: UnixMillis(1_800_000_000_000),
        creator: Some(UserId("ann".to_owned())),
        replies_json: replies.to_owned(),
        compactions_json: "[]".to_owned(),
        context_usage_json: Some("{\"tokens\":1200}".to_owned()),
        provenance_json: Some("{\"bootstrapEntries\":[]}".to_owned()),
    }
}

fn session(channel: &ChannelId, entries: &str) -> SessionStateDraft {
    SessionStateDraft {
        channel: channel.clone(),
        compactions_json: "[{\"upTo\":\"e1\"}]".to_owned(),
        context_usage_json: None,
        entries_json: entries.to_owned(),
        leaf_id: Some(key("e2")),
        entry_forks_json: "{\"e1\":[\"m1\"]}".to_owned(),
    }
}

fn stage(channel: &ChannelId, run: &str, id: &str, order: i64, parents: &[&str]) -> RunStage {
    RunStage {
        channel: channel.clone(),
        run_id: key(run),
        stage_id: key(id),
        order,
        status: "completed".to_owned(),
        name: format!("Stage {id}"),
        kind: "step".to_owned(),
        parents: parents.iter().map(|p| key(p)).collect(),
        started_at: Some(100),
        ended_at: Some(160),
    }
}

pub async fn chat_threads_are_replaced_whole_read_and_listed(harness: &dyn Harness) {
    let f = Fixture::open(harness).await;
    let chat = f.store.chat();
    let doc = &f.document.id;
    let first = chat
        .put_thread(&f.fence, &thread(doc, "m2", "[]"))
        .await
        .unwrap();
    assert_eq!(first.fencing_token, f.fence.token);
    chat.put_thread(&f.fence, &thread(doc, "m1", "[]"))
        .await
        .unwrap();
    let replaced = ThreadDraft {
        context_usage_json: None,
        provenance_json: None,
        creator: None,
        ..thread(doc, "m2", "[{\"id\":\"r1\"}]")
    };
    let stored = chat.put_thread(&f.fence, &replaced).await.unwrap();
    assert!(stored.updated_at >= first.updated_at);
    let read = chat.thread(doc, &key("m2")).await.unwrap().unwrap();
    assert_eq!(read, stored);
    assert_eq!(read.thread, replaced);
    assert_eq!(chat.thread(doc, &key("m3")).await.unwrap(), None);
    let listed = chat.threads(doc).await.unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|t| t.thread.root_id.as_str())
            .collect::<Vec<_>>(),
        ["m1", "m2"]
    );
    assert!(chat.remove_thread(&f.fence, doc, &key("m1")).await.unwrap());
    assert!(!chat.remove_thread(&f.fence, doc, &key("m1")).await.unwrap());
    assert_eq!(chat.threads(doc).await.unwrap(), [read]);
}

pub async fn chat_session_state_is_one_row_per_document(harness: &dyn Harness) {
    let f = Fixture::open(harness).await;
    let chat = f.store.chat();
    let doc = &f.document.id;
    assert_eq!(chat.session_state(doc).await.unwrap(), None);
    chat.put_session_state(&f.fence, &session(doc, "[{\"id\":\"e1\"}]"))
        .await
        .unwrap();
    let second = session(doc, "[{\"id\":\"e1\"},{\"id\":\"e2\"}]");
    let stored = chat.put_session_state(&f.fence, &second).await.unwrap();
    let read = chat.session_state(doc).await.unwrap().unwrap();
    assert_eq!(read, stored);
    assert_eq!(read.state, second);
    assert_eq!(read.fencing_token, f.fence.token);
}

pub async fn chat_writes_under_a_lost_lease_are_fenced_and_record_their_token(
    harness: &dyn Harness,
) {
    let f = Fixture::open(harness).await;
    let chat = f.store.chat();
    let doc = &f.document.id;
    chat.put_stage(&f.fence, &stage(doc, "r1", "s1", 0, &[]))
        .await
        .unwrap();
    let successor = f.hand_over().await;
    let stale = &f.fence;
    let kinds = [
        chat.put_thread(stale, &thread(doc, "m1", "[]"))
            .await
            .map(|_| ()),
        chat.remove_thread(stale, doc, &key("m1")).await.map(|_| ()),
        chat.put_session_state(stale, &session(doc, "[]"))
            .await
            .map(|_| ()),
        chat.put_stage(stale, &stage(doc, "r1", "s2", 1, &[])).await,
        chat.remove_run(stale, doc, &key("r1")).await.map(|_| ()),
    ]
    .map(|result| result.unwrap_err().kind());
    assert_eq!(kinds, [ErrorKind::Fenced; 5]);
    assert_eq!(chat.threads(doc).await.unwrap(), []);
    assert_eq!(chat.session_state(doc).await.unwrap(), None);
    assert_eq!(chat.stages(doc).await.unwrap().len(), 1);
    let thread = chat
        .put_thread(&successor, &thread(doc, "m1", "[]"))
        .await
        .unwrap();
    assert_eq!(thread.fencing_token, successor.token);
    let read = chat.thread(doc, &key("m1")).await.unwrap().unwrap();
    assert_eq!(read.fencing_token, successor.token);
    let state = chat
        .put_session_state(&successor, &session(doc, "[]"))
        .await
        .unwrap();
    assert_eq!(chat.session_state(doc).await.unwrap().unwrap(), state);
    assert_eq!(state.fencing_token, successor.token);
}

pub async fn chat_values_are_checked_at_the_boundary(harness: &dyn Harness) {
    let f = Fixture::open(harness).await;
    let chat = f.store.chat();
    let doc = &f.document.id;
    let malformed = [
        ThreadDraft {
            root_message_json: "{\"id\":".to_owned(),
            ..thread(doc, "m1", "[]")
        },
        thread(doc, "m1", "not json"),
        ThreadDraft {
            provenance_json: Some("{".to_owned()),
            ..thread(doc, "m1", "[]")
        },
    ];
    for draft in &malformed {
        let err = chat.put_thread(&f.fence, draft).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Invalid);
    }
    let bad_session = SessionStateDraft {
        entry_forks_json: "{]".to_owned(),
        ..session(doc, "[]")
    };
    assert_eq!(
        chat.put_session_state(&f.fence, &bad_session)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Invalid
    );
    let nowhere = ChannelId::random();
    let missing = [
        chat.put_thread(&f.fence, &thread(&nowhere, "m1", "[]"))
            .await
            .map(|_| ()),
        chat.put_session_state(&f.fence, &session(&nowhere, "[]"))
            .await
            .map(|_| ()),
        chat.put_stage(&f.fence, &stage(&nowhere, "r1", "s1", 0, &[]))
            .await,
    ]
    .map(|result| result.unwrap_err().kind());
    assert_eq!(missing, [ErrorKind::Missing; 3]);
    assert_eq!(chat.threads(doc).await.unwrap(), []);
    assert_eq!(chat.session_state(doc).await.unwrap(), None);
}

pub async fn run_stages_are_bounded_per_stage_not_per_run(harness: &dyn Harness) {
    let f = Fixture::open(harness).await;
    let chat = f.store.chat();
    let doc = &f.document.id;
    // Far more stages than any per-stage bound: a run has as many as it needs.
    let count = 3 * MAX_STAGE_PARENTS;
    for i in (0..count).rev() {
        let id = format!("s{i:03}");
        let parent = (i > 0).then(|| format!("s{:03}", i - 1));
        let parents: Vec<&str> = parent.iter().map(String::as_str).collect();
        chat.put_stage(
            &f.fence,
            &stage(doc, "r1", &id, i64::try_from(i).unwrap(), &parents),
        )
        .await
        .unwrap();
    }
    // The widest stage: every earlier one as a parent, up to the bound.
    let wide: Vec<String> = (0..MAX_STAGE_PARENTS).map(|i| format!("s{i:03}")).collect();
    let wide_refs: Vec<&str> = wide.iter().map(String::as_str).collect();
    chat.put_stage(&f.fence, &stage(doc, "r1", "join", 999, &wide_refs))
        .await
        .unwrap();
    let too_wide: Vec<String> = (0..=MAX_STAGE_PARENTS)
        .map(|i| format!("s{i:03}"))
        .collect();
    let too_wide_refs: Vec<&str> = too_wide.iter().map(String::as_str).collect();
    let refused = [
        stage(doc, "r1", "over", 1000, &too_wide_refs),
        stage(doc, "r1", "self", 1000, &["self"]),
        RunStage {
            name: "n".repeat(fermata_store::chat::MAX_STAGE_NAME_CHARS + 1),
            ..stage(doc, "r1", "long", 1000, &[])
        },
        RunStage {
            status: String::new(),
            ..stage(doc, "r1", "blank", 1000, &[])
        },
        RunStage {
            started_at: Some(10),
            ended_at: Some(9),
            ..stage(doc, "r1", "backwards", 1000, &[])
        },
    ];
    for bad in &refused {
        let err = chat.put_stage(&f.fence, bad).await.unwrap_err();
        assert_eq!(
            err.kind(),
            ErrorKind::Invalid,
            "{} was accepted",
            bad.stage_id
        );
    }
    let stored = chat.stages(doc).await.unwrap();
    assert_eq!(stored.len(), count + 1);
    assert_eq!(stored[0], stage(doc, "r1", "s000", 0, &[]));
    assert_eq!(stored[5].parents, [key("s004")]);
    assert_eq!(stored[count].parents.len(), MAX_STAGE_PARENTS);
    assert!(stored.windows(2).all(|w| w[0].order < w[1].order));
    // A stage written again replaces the stored one.
    let finished = RunStage {
        status: "failed".to_owned(),
        started_at: None,
        ended_at: None,
        ..stage(doc, "r1", "s001", 1, &[])
    };
    chat.put_stage(&f.fence, &finished).await.unwrap();
    assert_eq!(chat.stages(doc).await.unwrap()[1], finished);
}

pub async fn removing_a_run_removes_only_its_stages(harness: &dyn Harness) {
    let f = Fixture::open(harness).await;
    let chat = f.store.chat();
    let doc = &f.document.id;
    let other = super::history::create(&f.store, &f.fence, "Other").await.id;
    for (channel, run, id) in [
        (doc, "r1", "a"),
        (doc, "r1", "b"),
        (doc, "r2", "a"),
        (&other, "r1", "a"),
    ] {
        chat.put_stage(&f.fence, &stage(channel, run, id, 0, &[]))
            .await
            .unwrap();
    }
    assert_eq!(chat.remove_run(&f.fence, doc, &key("r1")).await.unwrap(), 2);
    assert_eq!(chat.remove_run(&f.fence, doc, &key("r1")).await.unwrap(), 0);
    let left = chat.stages(doc).await.unwrap();
    assert_eq!(left, [stage(doc, "r2", "a", 0, &[])]);
    assert_eq!(chat.stages(&other).await.unwrap().len(), 1);
}
