//! The integration tests of `fermata-collab`, as one test binary: one module per subject, the
//! shared helpers beside them. One binary links once, where a binary per file linked each.

mod background;
mod history;
mod rooms;
mod startup;

use fermata_store::{Channel, ChannelId, CollaborationStore, Fence, NewChannel, Repository};

/// A new top-level document titled `title` in the tests' repository, created under `fence`.
async fn create_document(store: &dyn CollaborationStore, fence: &Fence, title: &str) -> Channel {
    store
        .create_channel(
            fence,
            &NewChannel {
                id: ChannelId::random(),
                repository: Repository::new("acme/app").unwrap(),
                title: title.to_owned(),
                parent: None,
            },
        )
        .await
        .unwrap()
}
