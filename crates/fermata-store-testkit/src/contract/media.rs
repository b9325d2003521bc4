//! Contract cases for a document's images (`plan_images`) and Chat attachments
//! (`chat_attachments`). Bytes are opaque here: what may be stored is decided by
//! `fermata-media` before a store is called, and its own tests cover that.

use std::sync::Arc;
use std::time::Duration;

use super::Harness;
use super::lease::{grant, plain};
use fermata_store::attachments::{
    AttachmentId, AttachmentInfo, AttachmentType, MessagePlace, MessageRequestId, NewAttachment,
    OriginalFile, UNSENT_ATTACHMENT_LIFETIME,
};
use fermata_store::channel::ChannelId;
use fermata_store::error::ErrorKind;
use fermata_store::images::{ImageHash, ImageType, NewImage};
use fermata_store::lease::{Fence, FencingToken};
use fermata_store::user::UserId;
use fermata_store::{Channel, Storage};

const LONG: Duration = Duration::from_secs(3600);

struct Media {
    store: Arc<dyn Storage>,
    fence: Fence,
}

fn user(name: &str) -> UserId {
    UserId(name.to_owned())
}

fn message(id: &str) -> MessageRequestId {
    MessageRequestId::new(id).unwrap()
}

impl Media {
    async fn open(harness: &dyn Harness) -> Self {
        let store = plain(harness).await;
        let fence = grant(&*store, "writer", LONG).await.fence();
        Media { store, fence }
    }

    async fn document(&self, title: &str) -> Channel {
        super::create_document(self.store.collaboration(), &self.fence, title).await
    }

    fn image(channel: &Channel, image_type: ImageType, bytes: &[u8]) -> NewImage {
        NewImage::new(channel.id.clone(), image_type, bytes.to_vec(), "user:alice").unwrap()
    }

    async fn upload(&self, channel: &Channel, uploader: &str, bytes: &[u8]) -> AttachmentInfo {
        let file = NewAttachment::new(
            channel.id.clone(),
            AttachmentType::Text,
            "notes.txt",
            bytes.to_vec(),
            user(uploader),
            None,
        )
        .unwrap();
        self.store
            .attachments()
            .upload(&self.fence, &file)
            .await
            .unwrap()
    }

    async fn readable(&self, id: &AttachmentId, reader: &str) -> bool {
        self.store
            .attachments()
            .attachment(id, &user(reader))
            .await
            .unwrap()
            .is_some()
    }

    async fn send(
        &self,
        channel: &Channel,
        sender: &str,
        request: &str,
        files: &[&AttachmentInfo],
    ) -> fermata_store::StoreResult<Vec<AttachmentInfo>> {
        let ids: Vec<AttachmentId> = files.iter().map(|f| f.id.clone()).collect();
        self.store
            .attachments()
            .send(
                &self.fence,
                &channel.id,
                &user(sender),
                &message(request),
                &ids,
            )
            .await
    }
}

pub async fn images_are_stored_once_per_document_and_hash(harness: &dyn Harness) {
    let media = Media::open(harness).await;
    let images = media.store.images();
    let plan = media.document("Plan").await;
    let other = media.document("Other").await;
    let bytes = b"\x89PNG pretend bytes".as_slice();

    let first = images
        .store(&media.fence, &Media::image(&plan, ImageType::Png, bytes))
        .await
        .unwrap();
    assert!(first.created);
    assert_eq!(first.info.sha256, ImageHash::of(bytes));
    assert_eq!(first.info.size, bytes.len() as i64);
    assert_eq!(first.info.stored_by, "user:alice");

    let again =
        NewImage::new(plan.id.clone(), ImageType::Png, bytes.to_vec(), "tool:draw").unwrap();
    let repeated = images.store(&media.fence, &again).await.unwrap();
    assert!(!repeated.created, "the same bytes again are not a new row");
    assert_eq!(repeated.info, first.info, "the first row is kept unchanged");

    let elsewhere = images
        .store(&media.fence, &Media::image(&other, ImageType::Png, bytes))
        .await
        .unwrap();
    assert!(elsewhere.created, "another document holds its own copy");

    let different = images
        .store(
            &media.fence,
            &Media::image(&plan, ImageType::Gif, b"GIF89a other"),
        )
        .await
        .unwrap();
    assert!(different.created);

    let listed = images.images_of(&plan.id).await.unwrap();
    assert_eq!(listed.len(), 2);
    let read = images
        .image(&plan.id, &ImageHash::of(bytes))
        .await
        .unwrap()
        .expect("the stored image");
    assert_eq!(read.bytes, bytes);
    assert_eq!(read.info, first.info);
    assert!(
        images
            .image(&plan.id, &ImageHash::of(b"never stored"))
            .await
            .unwrap()
            .is_none()
    );
}

pub async fn every_listed_type_is_stored_and_read_back(harness: &dyn Harness) {
    let media = Media::open(harness).await;
    let plan = media.document("Plan").await;
    for (n, image_type) in ImageType::ALL.into_iter().enumerate() {
        let bytes = format!("image {n}").into_bytes();
        media
            .store
            .images()
            .store(&media.fence, &Media::image(&plan, image_type, &bytes))
            .await
            .unwrap();
        let read = media
            .store
            .images()
            .image(&plan.id, &ImageHash::of(&bytes))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(read.info.image_type, image_type);
    }
    for attachment_type in AttachmentType::ALL {
        let file = NewAttachment::new(
            plan.id.clone(),
            attachment_type,
            format!("file.{attachment_type}"),
            b"bytes".to_vec(),
            user("alice"),
            None,
        )
        .unwrap();
        media
            .store
            .attachments()
            .upload(&media.fence, &file)
            .await
            .unwrap();
        let read = media
            .store
            .attachments()
            .attachment(file.id(), &user("alice"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(read.info.attachment_type, attachment_type);
        assert_eq!(read.bytes, b"bytes");
    }
}

pub async fn images_and_attachments_need_their_document(harness: &dyn Harness) {
    let media = Media::open(harness).await;
    let plan = media.document("Plan").await;
    let absent = Channel {
        id: ChannelId::random(),
        ..plan.clone()
    };
    let error = media
        .store
        .images()
        .store(&media.fence, &Media::image(&absent, ImageType::Png, b"x"))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Missing);
    let file = NewAttachment::new(
        absent.id.clone(),
        AttachmentType::Text,
        "a.txt",
        b"x".to_vec(),
        user("alice"),
        None,
    )
    .unwrap();
    let error = media
        .store
        .attachments()
        .upload(&media.fence, &file)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Missing);
}

pub async fn attachments_keep_the_original_of_a_smaller_copy(harness: &dyn Harness) {
    let media = Media::open(harness).await;
    let plan = media.document("Plan").await;
    let original = OriginalFile {
        size: 9_000_000,
        width: 6000,
        height: 4000,
    };
    let file = NewAttachment::new(
        plan.id.clone(),
        AttachmentType::Jpeg,
        "photo.jpg",
        b"smaller copy".to_vec(),
        user("alice"),
        Some(original),
    )
    .unwrap();
    let uploaded = media
        .store
        .attachments()
        .upload(&media.fence, &file)
        .await
        .unwrap();
    assert_eq!(uploaded.original, Some(original));
    assert_eq!(uploaded.size, 12);
    assert_eq!(uploaded.message, None);
    let read = media
        .store
        .attachments()
        .attachment(file.id(), &user("alice"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.info, uploaded);

    // A text file is never a copy, and an original's numbers are positive.
    for (attachment_type, original) in [
        (AttachmentType::Text, original),
        (
            AttachmentType::Png,
            OriginalFile {
                width: 0,
                ..original
            },
        ),
    ] {
        let refused = NewAttachment::new(
            plan.id.clone(),
            attachment_type,
            "f",
            b"x".to_vec(),
            user("alice"),
            Some(original),
        )
        .unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::Invalid);
    }
}

pub async fn unsent_attachments_are_read_only_by_their_uploader(harness: &dyn Harness) {
    let media = Media::open(harness).await;
    let plan = media.document("Plan").await;
    let file = media.upload(&plan, "alice", b"draft").await;
    assert!(media.readable(&file.id, "alice").await);
    assert!(
        !media.readable(&file.id, "bob").await,
        "nobody but the uploader reads an unsent file"
    );
    media.send(&plan, "alice", "req-1", &[&file]).await.unwrap();
    assert!(
        media.readable(&file.id, "bob").await,
        "a sent file is the message's"
    );
    assert!(media.readable(&file.id, "alice").await);
    assert!(
        !media.readable(&AttachmentId::random(), "alice").await,
        "an unknown ID reads as absent"
    );
}

pub async fn attachments_are_sent_once_by_their_uploader(harness: &dyn Harness) {
    let media = Media::open(harness).await;
    let plan = media.document("Plan").await;
    let other = media.document("Other").await;
    let first = media.upload(&plan, "alice", b"one").await;
    let second = media.upload(&plan, "alice", b"two").await;
    let bobs = media.upload(&plan, "bob", b"bob's").await;
    let elsewhere = media.upload(&other, "alice", b"other document").await;

    // Another person's unsent file, a file of another document and an unknown one are not
    // there for this sender; nothing of the send happens.
    for files in [vec![&first, &bobs], vec![&first, &elsewhere]] {
        let error = media
            .send(&plan, "alice", "req-1", &files)
            .await
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Missing);
    }
    let error = media.send(&plan, "alice", "req-1", &[]).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Invalid);
    let error = media
        .send(&plan, "alice", "req-1", &[&first, &first])
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Invalid);
    assert!(
        !media.readable(&first.id, "bob").await,
        "a refused send attaches nothing"
    );

    let sent = media
        .send(&plan, "alice", "req-1", &[&second, &first])
        .await
        .unwrap();
    let places: Vec<(AttachmentId, Option<MessagePlace>)> = sent
        .iter()
        .map(|f| (f.id.clone(), f.message.clone()))
        .collect();
    assert_eq!(
        places,
        [
            (
                second.id.clone(),
                Some(MessagePlace {
                    request_id: message("req-1"),
                    place: 0
                })
            ),
            (
                first.id.clone(),
                Some(MessagePlace {
                    request_id: message("req-1"),
                    place: 1
                })
            ),
        ]
    );
    assert_eq!(
        media
            .store
            .attachments()
            .of_message(&plan.id, &message("req-1"))
            .await
            .unwrap(),
        sent
    );

    // The same send again is a repeat and changes nothing.
    let repeated = media
        .send(&plan, "alice", "req-1", &[&second, &first])
        .await
        .unwrap();
    assert_eq!(repeated, sent);

    // Sent once: not with another message, not in another order, not with more files.
    let error = media
        .send(&plan, "alice", "req-2", &[&first])
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Conflict);
    let error = media
        .send(&plan, "alice", "req-1", &[&first, &second])
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Conflict);
    let third = media.upload(&plan, "alice", b"three").await;
    let error = media
        .send(&plan, "alice", "req-1", &[&second, &first, &third])
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Conflict);
    let error = media
        .send(&plan, "alice", "req-1", &[&third])
        .await
        .unwrap_err();
    assert_eq!(
        error.kind(),
        ErrorKind::Conflict,
        "a sent message takes no further files"
    );
    // Only the uploader sends a file, even one that is already visible to everyone.
    let error = media
        .send(&plan, "bob", "req-3", &[&first])
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Conflict);
    let error = media
        .send(&plan, "bob", "req-3", &[&third])
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Missing);
    assert_eq!(
        media
            .store
            .attachments()
            .of_message(&plan.id, &message("req-1"))
            .await
            .unwrap(),
        sent
    );
}

pub async fn the_sweep_forgets_unsent_attachments_a_day_old(harness: &dyn Harness) {
    let media = Media::open(harness).await;
    let plan = media.document("Plan").await;
    let unsent = media.upload(&plan, "alice", b"never sent").await;
    let sent = media.upload(&plan, "alice", b"sent").await;
    media.send(&plan, "alice", "req-1", &[&sent]).await.unwrap();
    let attachments = media.store.attachments();

    // Just uploaded: a day's sweep keeps it.
    assert_eq!(
        attachments
            .sweep_unsent(&media.fence, UNSENT_ATTACHMENT_LIFETIME)
            .await
            .unwrap(),
        0
    );
    assert!(media.readable(&unsent.id, "alice").await);

    // The age is the sweep's parameter, so the case need not wait a day: at age zero every
    // unsent file is old enough, and a sent one is never swept.
    assert_eq!(
        attachments
            .sweep_unsent(&media.fence, Duration::ZERO)
            .await
            .unwrap(),
        1
    );
    assert!(!media.readable(&unsent.id, "alice").await);
    assert!(media.readable(&sent.id, "bob").await);
    assert_eq!(
        attachments
            .sweep_unsent(&media.fence, Duration::ZERO)
            .await
            .unwrap(),
        0,
        "a second sweep finds nothing"
    );
}

pub async fn deleting_a_message_removes_its_attachments(harness: &dyn Harness) {
    let media = Media::open(harness).await;
    let plan = media.document("Plan").await;
    let other = media.document("Other").await;
    let a = media.upload(&plan, "alice", b"a").await;
    let b = media.upload(&plan, "alice", b"b").await;
    let kept = media.upload(&plan, "alice", b"kept").await;
    let same_id_elsewhere = media.upload(&other, "alice", b"elsewhere").await;
    media
        .send(&plan, "alice", "req-1", &[&a, &b])
        .await
        .unwrap();
    media.send(&plan, "alice", "req-2", &[&kept]).await.unwrap();
    media
        .send(&other, "alice", "req-1", &[&same_id_elsewhere])
        .await
        .unwrap();

    let attachments = media.store.attachments();
    assert_eq!(
        attachments
            .delete_message(&media.fence, &plan.id, &message("req-1"))
            .await
            .unwrap(),
        2
    );
    assert!(!media.readable(&a.id, "alice").await);
    assert!(!media.readable(&b.id, "alice").await);
    assert!(media.readable(&kept.id, "alice").await);
    assert!(
        media.readable(&same_id_elsewhere.id, "alice").await,
        "a request ID names a message within its document"
    );
    assert_eq!(
        attachments
            .delete_message(&media.fence, &plan.id, &message("req-1"))
            .await
            .unwrap(),
        0
    );
}

pub async fn images_and_attachments_go_with_their_document(harness: &dyn Harness) {
    let media = Media::open(harness).await;
    let plan = media.document("Plan").await;
    let other = media.document("Other").await;
    let collaboration = media.store.collaboration();
    for channel in [&plan, &other] {
        media
            .store
            .images()
            .store(
                &media.fence,
                &Media::image(channel, ImageType::Webp, b"RIFF"),
            )
            .await
            .unwrap();
    }
    let sent = media.upload(&plan, "alice", b"sent").await;
    let unsent = media.upload(&plan, "alice", b"unsent").await;
    let survivor = media.upload(&other, "alice", b"other").await;
    media.send(&plan, "alice", "req-1", &[&sent]).await.unwrap();

    collaboration.archive(&media.fence, &plan.id).await.unwrap();
    collaboration
        .delete_archived(&media.fence, &plan.id)
        .await
        .unwrap();
    assert!(
        media
            .store
            .images()
            .images_of(&plan.id)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(!media.readable(&sent.id, "alice").await);
    assert!(!media.readable(&unsent.id, "alice").await);
    assert!(
        media
            .store
            .attachments()
            .of_message(&plan.id, &message("req-1"))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        media
            .store
            .images()
            .images_of(&other.id)
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(media.readable(&survivor.id, "alice").await);
}

pub async fn image_and_attachment_writes_are_fenced(harness: &dyn Harness) {
    let media = Media::open(harness).await;
    let plan = media.document("Plan").await;
    let file = media.upload(&plan, "alice", b"f").await;
    let stale = Fence {
        lease: media.fence.lease.clone(),
        token: FencingToken(media.fence.token.0 + 1),
    };
    let attachments = media.store.attachments();
    let new_file = NewAttachment::new(
        plan.id.clone(),
        AttachmentType::Text,
        "late.txt",
        b"late".to_vec(),
        user("alice"),
        None,
    )
    .unwrap();
    let errors = [
        media
            .store
            .images()
            .store(&stale, &Media::image(&plan, ImageType::Png, b"late"))
            .await
            .unwrap_err(),
        attachments.upload(&stale, &new_file).await.unwrap_err(),
        attachments
            .send(
                &stale,
                &plan.id,
                &user("alice"),
                &message("req"),
                std::slice::from_ref(&file.id),
            )
            .await
            .unwrap_err(),
        attachments
            .delete_message(&stale, &plan.id, &message("req"))
            .await
            .unwrap_err(),
        attachments
            .sweep_unsent(&stale, Duration::ZERO)
            .await
            .unwrap_err(),
    ];
    for error in errors {
        assert_eq!(error.kind(), ErrorKind::Fenced, "{error}");
    }
    assert!(
        media
            .store
            .images()
            .images_of(&plan.id)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(!media.readable(new_file.id(), "alice").await);
    assert!(
        !media.readable(&file.id, "bob").await,
        "the fenced send attached nothing"
    );
}

pub async fn racing_sends_let_exactly_one_win(harness: &dyn Harness) {
    let media = Arc::new(Media::open(harness).await);
    let plan = media.document("Plan").await;
    // One file sent with two messages at once, and two files sent with one new message at once.
    let shared = media.upload(&plan, "alice", b"shared").await;
    let first = media.upload(&plan, "alice", b"first").await;
    let second = media.upload(&plan, "alice", b"second").await;
    for round in [
        [("req-a", shared.clone()), ("req-b", shared.clone())],
        [("req-c", first.clone()), ("req-c", second.clone())],
    ] {
        let sends = round.map(|(request, file)| {
            let media = Arc::clone(&media);
            let plan = plan.clone();
            tokio::spawn(async move { media.send(&plan, "alice", request, &[&file]).await })
        });
        let mut outcomes = Vec::new();
        for send in sends {
            outcomes.push(send.await.unwrap());
        }
        let won = outcomes.iter().filter(|outcome| outcome.is_ok()).count();
        assert_eq!(won, 1, "{outcomes:?}");
        for lost in outcomes.iter().filter_map(|outcome| outcome.as_ref().err()) {
            assert_eq!(lost.kind(), ErrorKind::Conflict, "{lost}");
        }
    }
    let sent_c = media
        .store
        .attachments()
        .of_message(&plan.id, &message("req-c"))
        .await
        .unwrap();
    assert_eq!(sent_c.len(), 1, "the losing file stayed unsent");
}
