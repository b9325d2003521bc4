//! The attachment store (`chat_attachments`): the images and text files sent with Chat
//! messages, one row per file, kept with the document and never in the sidecar.
//!
//! A file is uploaded first and has no message; until one is sent with it only its uploader
//! reads it, and one nobody sent within a day is forgotten by the sweep. Sending attaches it to
//! the message (its request ID and the file's place in it), by its uploader, once. Deleting the
//! message or the document removes it. The rules both adapters apply before they write are the
//! functions here ([`plan_send`], [`visible_to`]), written once.

use std::collections::HashSet;
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

use crate::channel::ChannelId;
use crate::error::{StoreError, StoreResult, StoreResultExt};
use crate::images::check_actor;
use crate::lease::Fence;
use crate::time::UnixMillis;
use crate::user::UserId;

/// How long an uploaded file waits for a message before the sweep forgets it.
pub const UNSENT_ATTACHMENT_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);

/// The most files one message carries.
pub const MAX_FILES_PER_MESSAGE: usize = 20;

/// The types an attachment may have (the table's check holds these and no others).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttachmentType {
    Png,
    Jpeg,
    Webp,
    Gif,
    Text,
}

impl AttachmentType {
    pub const ALL: [AttachmentType; 5] = [
        AttachmentType::Png,
        AttachmentType::Jpeg,
        AttachmentType::Webp,
        AttachmentType::Gif,
        AttachmentType::Text,
    ];

    /// The name stored in `chat_attachments.attachment_type`.
    pub fn as_str(self) -> &'static str {
        match self {
            AttachmentType::Png => "png",
            AttachmentType::Jpeg => "jpeg",
            AttachmentType::Webp => "webp",
            AttachmentType::Gif => "gif",
            AttachmentType::Text => "text",
        }
    }

    pub fn from_stored(text: &str) -> StoreResult<Self> {
        AttachmentType::ALL
            .into_iter()
            .find(|kind| kind.as_str() == text)
            .ok_or_else(|| StoreError::corrupt("a stored attachment has an unknown type"))
    }

    pub fn is_image(self) -> bool {
        self != AttachmentType::Text
    }
}

impl fmt::Display for AttachmentType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An attachment's ID (a UUID).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AttachmentId(pub String);

impl AttachmentId {
    pub fn random() -> Self {
        AttachmentId(uuid::Uuid::new_v4().to_string())
    }

    pub fn parse(text: &str) -> StoreResult<Self> {
        uuid::Uuid::parse_str(text)
            .map(|id| AttachmentId(id.to_string()))
            .or_invalid("an attachment ID is a UUID")
    }
}

impl fmt::Display for AttachmentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A Chat message's request ID: 1 to 128 printable ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageRequestId(String);

impl MessageRequestId {
    pub fn new(text: impl Into<String>) -> StoreResult<Self> {
        let text = text.into();
        if text.is_empty() || text.len() > 128 || !text.chars().all(|c| c.is_ascii_graphic()) {
            return Err(StoreError::invalid(
                "a message request ID is 1 to 128 printable ASCII characters",
            ));
        }
        Ok(MessageRequestId(text))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for MessageRequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What the sender's file was, where what is stored is a smaller copy of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OriginalFile {
    pub size: i64,
    pub width: i64,
    pub height: i64,
}

/// Where a sent file is: its message and its place among the message's files (from 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessagePlace {
    pub request_id: MessageRequestId,
    pub place: i64,
}

/// A file to upload, checked when made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAttachment {
    id: AttachmentId,
    channel: ChannelId,
    attachment_type: AttachmentType,
    name: String,
    bytes: Vec<u8>,
    uploaded_by: UserId,
    original: Option<OriginalFile>,
}

impl NewAttachment {
    /// A new file with a fresh ID. `name` is the sender's file name (1 to 255 characters, no
    /// control characters); `original` only for an image that is a smaller copy, and then
    /// every number positive.
    pub fn new(
        channel: ChannelId,
        attachment_type: AttachmentType,
        name: impl Into<String>,
        bytes: Vec<u8>,
        uploaded_by: UserId,
        original: Option<OriginalFile>,
    ) -> StoreResult<Self> {
        let name = name.into();
        if name.trim().is_empty()
            || name.chars().count() > 255
            || name.chars().any(char::is_control)
        {
            return Err(StoreError::invalid(
                "a file name is 1 to 255 characters without control characters",
            ));
        }
        check_actor(&uploaded_by.0, "an uploader is a user ID")?;
        if bytes.is_empty() {
            return Err(StoreError::invalid("a file has at least one byte"));
        }
        if let Some(original) = original {
            if !attachment_type.is_image() {
                return Err(StoreError::invalid(
                    "only an image is stored as a smaller copy of the original",
                ));
            }
            if original.size <= 0 || original.width <= 0 || original.height <= 0 {
                return Err(StoreError::invalid(
                    "the original's size, width and height are positive",
                ));
            }
        }
        Ok(NewAttachment {
            id: AttachmentId::random(),
            channel,
            attachment_type,
            name,
            bytes,
            uploaded_by,
            original,
        })
    }

    pub fn id(&self) -> &AttachmentId {
        &self.id
    }

    pub fn channel(&self) -> &ChannelId {
        &self.channel
    }

    pub fn attachment_type(&self) -> AttachmentType {
        self.attachment_type
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn uploaded_by(&self) -> &UserId {
        &self.uploaded_by
    }

    pub fn original(&self) -> Option<OriginalFile> {
        self.original
    }

    pub fn size(&self) -> i64 {
        i64::try_from(self.bytes.len()).unwrap_or(i64::MAX)
    }

    /// The row this upload becomes, stamped `uploaded_at`.
    pub fn info(&self, uploaded_at: UnixMillis) -> AttachmentInfo {
        AttachmentInfo {
            id: self.id.clone(),
            channel: self.channel.clone(),
            attachment_type: self.attachment_type,
            name: self.name.clone(),
            size: self.size(),
            original: self.original,
            uploaded_by: self.uploaded_by.clone(),
            uploaded_at,
            message: None,
        }
    }
}

/// An attachment's row, without its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentInfo {
    pub id: AttachmentId,
    pub channel: ChannelId,
    pub attachment_type: AttachmentType,
    pub name: String,
    /// Always the length of the bytes.
    pub size: i64,
    pub original: Option<OriginalFile>,
    pub uploaded_by: UserId,
    pub uploaded_at: UnixMillis,
    /// Absent until a message is sent with it.
    pub message: Option<MessagePlace>,
}

/// An attachment with its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAttachment {
    pub info: AttachmentInfo,
    pub bytes: Vec<u8>,
}

/// Whether `reader` may read the file: anyone once it was sent, only its uploader before.
pub fn visible_to(info: &AttachmentInfo, reader: &UserId) -> bool {
    info.message.is_some() || &info.uploaded_by == reader
}

/// The latest upload time the sweep forgets at `now` (the database's clock).
pub fn sweep_cutoff(now: UnixMillis, older_than: Duration) -> UnixMillis {
    let millis = i64::try_from(older_than.as_millis()).unwrap_or(i64::MAX);
    UnixMillis(now.0.saturating_sub(millis))
}

/// What a send must do, decided from the rows as they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendPlan {
    /// Attach the files, in the order given, at places 0, 1, ...
    Attach,
    /// Exactly this send happened before: nothing changes.
    Repeat,
}

/// Checks a send of `requested` (in their order) with message `request_id` in `channel` by
/// `sender`, given each requested file's row as the adapter found it under lock (`None` when
/// absent) and how many files the message already has. A file nobody else may see is
/// `Missing` to the sender, so a send tells nothing about another person's unsent files.
pub fn plan_send(
    channel: &ChannelId,
    sender: &UserId,
    request_id: &MessageRequestId,
    requested: &[AttachmentId],
    found: &[Option<AttachmentInfo>],
    files_of_message: usize,
) -> StoreResult<SendPlan> {
    if requested.is_empty() || requested.len() > MAX_FILES_PER_MESSAGE {
        return Err(StoreError::invalid("a message is sent with 1 to 20 files"));
    }
    if requested.iter().collect::<HashSet<_>>().len() != requested.len() {
        return Err(StoreError::invalid("a file is sent once per message"));
    }
    let mut repeated = 0;
    for (place, (id, row)) in requested.iter().zip(found).enumerate() {
        let row = match row {
            Some(row) if &row.channel == channel && visible_to(row, sender) => row,
            _ => {
                return Err(StoreError::missing(format!(
                    "attachment {id} is unavailable"
                )));
            }
        };
        match &row.message {
            None if &row.uploaded_by != sender => {
                return Err(StoreError::missing(format!(
                    "attachment {id} is unavailable"
                )));
            }
            None => {}
            Some(at)
                if &at.request_id == request_id
                    && usize::try_from(at.place).ok() == Some(place)
                    && &row.uploaded_by == sender =>
            {
                repeated += 1;
            }
            Some(_) => {
                return Err(StoreError::conflict(format!(
                    "attachment {id} was already sent with a message"
                )));
            }
        }
    }
    if repeated == requested.len() && files_of_message == requested.len() {
        return Ok(SendPlan::Repeat);
    }
    if repeated > 0 || files_of_message > 0 {
        return Err(StoreError::conflict(format!(
            "message {request_id} was already sent with other files"
        )));
    }
    Ok(SendPlan::Attach)
}

/// The attachment store. Every write is fenced by the writer lease.
#[async_trait]
pub trait AttachmentStore: Send + Sync {
    /// Stores an uploaded file, with no message yet. A document that does not exist is
    /// `Missing`.
    async fn upload(
        &self,
        fence: &Fence,
        attachment: &NewAttachment,
    ) -> StoreResult<AttachmentInfo>;

    /// A file with its bytes, as `reader` may see it: absent when it does not exist or when it
    /// was not sent yet and `reader` is not its uploader.
    async fn attachment(
        &self,
        id: &AttachmentId,
        reader: &UserId,
    ) -> StoreResult<Option<StoredAttachment>>;

    /// Attaches `attachments` to message `request_id` of `channel`, in that order, atomically;
    /// see [`plan_send`] for what is refused. Repeating the same send changes nothing.
    async fn send(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        sender: &UserId,
        request_id: &MessageRequestId,
        attachments: &[AttachmentId],
    ) -> StoreResult<Vec<AttachmentInfo>>;

    /// The files sent with a message, in their places.
    async fn of_message(
        &self,
        channel: &ChannelId,
        request_id: &MessageRequestId,
    ) -> StoreResult<Vec<AttachmentInfo>>;

    /// Removes the files of a deleted message; returns how many there were.
    async fn delete_message(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        request_id: &MessageRequestId,
    ) -> StoreResult<u64>;

    /// Forgets every file not sent within `older_than` of its upload, on the database's clock
    /// ([`UNSENT_ATTACHMENT_LIFETIME`] when serving); returns how many.
    async fn sweep_unsent(&self, fence: &Fence, older_than: Duration) -> StoreResult<u64>;
}
