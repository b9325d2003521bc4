//! `fermata serve` sweeps, at start under the writer lease, the Chat files nobody sent within a
//! day and the MCP sessions idle for longer than a day, with the real binary on SQLite and on
//! PostgreSQL. The day is made to have passed by moving the stored times back, never by waiting.

use crate::support;

use std::time::Duration;

use std::collections::BTreeSet;

use fermata_store::{
    Acquisition, AttachmentId, AttachmentType, ChannelId, LeaseName, McpClient, McpSessionId,
    MessageRequestId, NewAttachment, NewChannel, NewUser, Repository, Storage, UserId, UserName,
};
use support::Target;

async fn start_sweeps_what_nobody_needs_any_more(target: Target) {
    let (status, output) = target.run("migrate");
    assert!(status.success(), "{output}");
    let store = target.store().await;
    // Setup writes under a lease of their own, so the server's writer lease stays free.
    let Acquisition::Granted(setup) = store
        .leases()
        .acquire(
            &LeaseName::new("test:setup").unwrap(),
            "setup",
            Duration::from_secs(300),
        )
        .await
        .unwrap()
    else {
        panic!("the setup lease is free");
    };
    let fence = setup.fence();
    let channel = ChannelId::random();
    store
        .collaboration()
        .create_channel(
            &fence,
            &NewChannel {
                id: channel.clone(),
                repository: Repository::new("acme/app").unwrap(),
                title: "Plan".to_owned(),
                parent: None,
            },
        )
        .await
        .unwrap();
    let ada = UserId("ada".to_owned());
    store
        .users()
        .create_user(&NewUser {
            id: ada.clone(),
            name: UserName::new("ada").unwrap(),
            password_hash: "unused".to_owned(),
            roles: BTreeSet::new(),
        })
        .await
        .unwrap();
    let client = McpClient::new("editor", "1.0").unwrap();
    let mcp = async |id: &str| -> McpSessionId {
        let id = McpSessionId::new(id).unwrap();
        store
            .mcp_sessions()
            .create_mcp_session(&fence, &id, &ada, &client)
            .await
            .unwrap();
        id
    };
    let idle = mcp("idle").await;
    let active = mcp("active").await;
    let upload = async |name: &str| -> AttachmentId {
        let file = NewAttachment::new(
            channel.clone(),
            AttachmentType::Text,
            name,
            name.as_bytes().to_vec(),
            ada.clone(),
            None,
        )
        .unwrap();
        store.attachments().upload(&fence, &file).await.unwrap();
        file.id().clone()
    };
    let stale = upload("stale.txt").await;
    let fresh = upload("fresh.txt").await;
    let sent = upload("sent.txt").await;
    store
        .attachments()
        .send(
            &fence,
            &channel,
            &ada,
            &MessageRequestId::new("req-1").unwrap(),
            std::slice::from_ref(&sent),
        )
        .await
        .unwrap();
    // A day and a minute ago, for the unsent one and the sent one alike.
    for id in [&stale, &sent] {
        sqlx::query(
            "UPDATE chat_attachments SET uploaded_at = uploaded_at - 86460000 WHERE id = $1",
        )
        .bind(id.0.clone())
        .execute(store.pool())
        .await
        .unwrap();
    }
    sqlx::query("UPDATE mcp_sessions SET last_seen_at = last_seen_at - 86460000 WHERE id = $1")
        .bind(idle.as_str().to_owned())
        .execute(store.pool())
        .await
        .unwrap();

    let mut server = target.serve(&[]);
    server.wait_ready().await;
    server
        .wait_for_output("unsent_attachments=1 expired_planner_credentials=0 idle_mcp_sessions=1")
        .await;
    let readable = async |id: &AttachmentId| {
        store
            .attachments()
            .attachment(id, &ada)
            .await
            .unwrap()
            .is_some()
    };
    assert!(
        !readable(&stale).await,
        "the day-old unsent file is forgotten"
    );
    assert!(
        readable(&fresh).await,
        "a file uploaded today waits for its message"
    );
    assert!(readable(&sent).await, "a sent file is never swept");
    let seen = async |id: &McpSessionId| store.mcp_sessions().mcp_session(id).await.unwrap();
    assert!(seen(&idle).await.is_none(), "the idle MCP session is swept");
    assert!(
        seen(&active).await.is_some(),
        "an MCP session seen today stays"
    );
    server.terminate();
    assert_eq!(server.wait_exit().await.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_start_sweeps_what_nobody_needs_any_more() {
    start_sweeps_what_nobody_needs_any_more(Target::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_start_sweeps_what_nobody_needs_any_more() {
    start_sweeps_what_nobody_needs_any_more(Target::postgres().await).await;
}
