//! The chat store: the Chat rows a document keeps outside its sidecar, so an earlier release
//! reads the sidecar unchanged. Threads (`chat_threads`, keyed by document and root message),
//! the document's top-level Chat session (`chat_session_state`, one row per document), and the
//! stages of the workflow runs its Chat shows (`workflow_run_stages`). Every write is fenced by
//! the writer lease; every row goes with its document.
//!
//! The JSON the Chat keeps (messages, entries, compactions, context usage, provenance) is stored
//! as text, checked here only for being well-formed and within its size. The checks are methods
//! of the values, so every adapter applies the same ones.
//!
//! Stage bounds are per stage, never per run: each field of a stage row is bounded and a stage
//! names at most [`MAX_STAGE_PARENTS`] parents, while a run may have any number of stages.

use async_trait::async_trait;

use crate::channel::ChannelId;
use crate::error::{StoreError, StoreResult, StoreResultExt};
use crate::lease::{Fence, FencingToken};
use crate::time::UnixMillis;
use crate::user::UserId;

/// The largest JSON text one Chat field holds.
pub const MAX_CHAT_JSON_BYTES: usize = 8 << 20;
/// The most parents one stage names.
pub const MAX_STAGE_PARENTS: usize = 64;
/// The longest stage name, in characters.
pub const MAX_STAGE_NAME_CHARS: usize = 200;
/// The longest stage kind or status.
pub const MAX_STAGE_WORD_BYTES: usize = 64;

/// An ID the Chat chooses (a message, entry, run or stage ID): 1 to 128 printable ASCII
/// characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChatKey(String);

impl ChatKey {
    pub fn new(text: impl Into<String>) -> StoreResult<Self> {
        let text = text.into();
        if text.is_empty() || text.len() > 128 || !text.chars().all(|c| c.is_ascii_graphic()) {
            return Err(StoreError::invalid(
                "a Chat ID is 1 to 128 printable ASCII characters",
            ));
        }
        Ok(ChatKey(text))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ChatKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Checks that `text` is well-formed JSON within [`MAX_CHAT_JSON_BYTES`].
fn check_json(field: &str, text: &str) -> StoreResult<()> {
    if text.len() > MAX_CHAT_JSON_BYTES {
        return Err(StoreError::invalid(format!(
            "the Chat {field} is larger than this server keeps"
        )));
    }
    serde_json::from_str::<serde::de::IgnoredAny>(text)
        .map(|_| ())
        .or_invalid(format!("the Chat {field} is not well-formed JSON"))
}

fn check_optional_json(field: &str, text: Option<&str>) -> StoreResult<()> {
    text.map_or(Ok(()), |text| check_json(field, text))
}

/// A Chat thread as written: everything but the update time and fencing token the store adds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadDraft {
    pub channel: ChannelId,
    pub root_id: ChatKey,
    /// The root message as it was when the thread forked (JSON).
    pub root_message_json: String,
    pub forked_at: UnixMillis,
    pub creator: Option<UserId>,
    /// The thread's reply entries (JSON).
    pub replies_json: String,
    /// The thread's compaction records (JSON).
    pub compactions_json: String,
    /// The latest context usage (JSON), once known.
    pub context_usage_json: Option<String>,
    /// Where the thread forked from: bootstrap entries, branched session entries and leaf, or
    /// the remote it came from (JSON).
    pub provenance_json: Option<String>,
}

impl ThreadDraft {
    /// The checks every adapter makes before it writes a thread.
    pub fn check(&self) -> StoreResult<()> {
        check_json("root message", &self.root_message_json)?;
        check_json("replies", &self.replies_json)?;
        check_json("compactions", &self.compactions_json)?;
        check_optional_json("context usage", self.context_usage_json.as_deref())?;
        check_optional_json("fork provenance", self.provenance_json.as_deref())
    }
}

/// A stored Chat thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatThread {
    pub thread: ThreadDraft,
    pub updated_at: UnixMillis,
    /// The writer lease's token the row was last written under.
    pub fencing_token: FencingToken,
}

/// A document's top-level Chat session as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionStateDraft {
    pub channel: ChannelId,
    /// Top-level compaction records (JSON).
    pub compactions_json: String,
    /// The latest context usage (JSON), once known.
    pub context_usage_json: Option<String>,
    /// The session's entries (JSON).
    pub entries_json: String,
    /// The entry the session continues from.
    pub leaf_id: Option<ChatKey>,
    /// Per-entry fork points (JSON).
    pub entry_forks_json: String,
}

impl SessionStateDraft {
    pub fn check(&self) -> StoreResult<()> {
        check_json("compactions", &self.compactions_json)?;
        check_optional_json("context usage", self.context_usage_json.as_deref())?;
        check_json("session entries", &self.entries_json)?;
        check_json("entry forks", &self.entry_forks_json)
    }
}

/// A stored top-level Chat session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionState {
    pub state: SessionStateDraft,
    pub updated_at: UnixMillis,
    pub fencing_token: FencingToken,
}

/// One stage of a workflow run a document's Chat shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunStage {
    pub channel: ChannelId,
    pub run_id: ChatKey,
    pub stage_id: ChatKey,
    /// The stage's place in its run's card.
    pub order: i64,
    /// A short word, such as `running` or `completed`.
    pub status: String,
    pub name: String,
    /// A short word naming what the stage does.
    pub kind: String,
    /// The stages it follows, in order; never itself, never twice.
    pub parents: Vec<ChatKey>,
    /// Seconds since the Unix epoch.
    pub started_at: Option<i64>,
    pub ended_at: Option<i64>,
}

fn check_word(field: &str, word: &str) -> StoreResult<()> {
    let fits = !word.is_empty()
        && word.len() <= MAX_STAGE_WORD_BYTES
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'));
    if !fits {
        return Err(StoreError::invalid(format!(
            "a stage {field} is 1 to {MAX_STAGE_WORD_BYTES} letters, digits, `_`, `-`, `.` or `:`"
        )));
    }
    Ok(())
}

impl RunStage {
    /// The bounds of one stage row, which every adapter checks before it writes one.
    pub fn check(&self) -> StoreResult<()> {
        if self.order < 0 {
            return Err(StoreError::invalid("a stage's order is never negative"));
        }
        check_word("status", &self.status)?;
        check_word("kind", &self.kind)?;
        if self.name.chars().count() > MAX_STAGE_NAME_CHARS || self.name.contains('\0') {
            return Err(StoreError::invalid(format!(
                "a stage name has at most {MAX_STAGE_NAME_CHARS} characters and no NUL"
            )));
        }
        if self.parents.len() > MAX_STAGE_PARENTS {
            return Err(StoreError::invalid(format!(
                "a stage names at most {MAX_STAGE_PARENTS} parents"
            )));
        }
        let mut seen = std::collections::HashSet::new();
        if self
            .parents
            .iter()
            .any(|p| p == &self.stage_id || !seen.insert(p))
        {
            return Err(StoreError::invalid(
                "a stage's parents never include itself or repeat",
            ));
        }
        for seconds in [self.started_at, self.ended_at].into_iter().flatten() {
            if seconds < 0 {
                return Err(StoreError::invalid("a stage time is never negative"));
            }
        }
        if let (Some(start), Some(end)) = (self.started_at, self.ended_at)
            && end < start
        {
            return Err(StoreError::invalid("a stage never ends before it starts"));
        }
        Ok(())
    }

    /// The parents as stored: a JSON array of strings.
    pub fn parents_json(&self) -> String {
        let ids: Vec<&str> = self.parents.iter().map(ChatKey::as_str).collect();
        serde_json::to_string(&ids).unwrap_or_else(|_| "[]".to_owned())
    }

    /// Parents read back from their stored JSON; anything else is `Corrupt`.
    pub fn parents_from_json(text: &str) -> StoreResult<Vec<ChatKey>> {
        const CORRUPT: &str = "a stored stage's parents are not a list of IDs";
        let ids: Vec<String> = serde_json::from_str(text).or_corrupt(CORRUPT)?;
        ids.into_iter()
            .map(|id| ChatKey::new(id).or_corrupt(CORRUPT))
            .collect()
    }
}

/// The chat store. Every write is fenced by the writer lease; a missing document is `Missing`.
#[async_trait]
pub trait ChatStore: Send + Sync {
    /// Writes a thread whole, replacing the one with the same root, and returns it as stored.
    async fn put_thread(&self, fence: &Fence, thread: &ThreadDraft) -> StoreResult<ChatThread>;

    async fn thread(&self, channel: &ChannelId, root: &ChatKey) -> StoreResult<Option<ChatThread>>;

    /// A document's threads, by root ID.
    async fn threads(&self, channel: &ChannelId) -> StoreResult<Vec<ChatThread>>;

    /// Removes a thread; whether there was one.
    async fn remove_thread(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        root: &ChatKey,
    ) -> StoreResult<bool>;

    /// Writes the document's top-level session whole and returns it as stored.
    async fn put_session_state(
        &self,
        fence: &Fence,
        state: &SessionStateDraft,
    ) -> StoreResult<SessionState>;

    async fn session_state(&self, channel: &ChannelId) -> StoreResult<Option<SessionState>>;

    /// Writes one stage whole, replacing the stored one with the same IDs.
    async fn put_stage(&self, fence: &Fence, stage: &RunStage) -> StoreResult<()>;

    /// A document's stages, by run ID, then order, then stage ID.
    async fn stages(&self, channel: &ChannelId) -> StoreResult<Vec<RunStage>>;

    /// Removes a run's stages, when Chat stops showing its card; how many went.
    async fn remove_run(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        run: &ChatKey,
    ) -> StoreResult<u64>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(text: &str) -> ChatKey {
        ChatKey::new(text).unwrap()
    }

    fn stage() -> RunStage {
        RunStage {
            channel: ChannelId("c".to_owned()),
            run_id: key("run"),
            stage_id: key("s2"),
            order: 1,
            status: "running".to_owned(),
            name: "Build".to_owned(),
            kind: "step".to_owned(),
            parents: vec![key("s1")],
            started_at: Some(10),
            ended_at: None,
        }
    }

    #[test]
    fn stage_bounds_are_per_stage() {
        assert!(stage().check().is_ok());
        let many = RunStage {
            parents: (0..=MAX_STAGE_PARENTS)
                .map(|i| key(&format!("p{i}")))
                .collect(),
            ..stage()
        };
        assert!(many.check().is_err());
        for bad in [
            RunStage {
                parents: vec![key("s2")],
                ..stage()
            },
            RunStage {
                parents: vec![key("s1"), key("s1")],
                ..stage()
            },
            RunStage {
                name: "x".repeat(MAX_STAGE_NAME_CHARS + 1),
                ..stage()
            },
            RunStage {
                status: "has space".to_owned(),
                ..stage()
            },
            RunStage {
                ended_at: Some(9),
                ..stage()
            },
            RunStage {
                order: -1,
                ..stage()
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn parents_round_trip_through_json() {
        let s = stage();
        assert_eq!(
            RunStage::parents_from_json(&s.parents_json()).unwrap(),
            s.parents
        );
        assert!(RunStage::parents_from_json("{\"a\":1}").is_err());
    }

    #[test]
    fn json_must_be_well_formed() {
        assert!(check_json("x", "{\"a\":[1,2]}").is_ok());
        assert!(check_json("x", "{\"a\":").is_err());
        assert!(ChatKey::new("").is_err());
        assert!(ChatKey::new("has space").is_err());
    }
}
