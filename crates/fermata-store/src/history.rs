//! The history store: a document's activity history (`document_versions`), one row per editing
//! session, each with the complete canonical MDX it left. It is derived from commits and never
//! read back into a document except by a restore, which goes through the ordinary fenced rewrite.
//!
//! The session rule is written once here ([`session_to_extend`]) and applied by every adapter
//! inside its fenced write: a change by the same author less than [`SESSION_GAP`] after that
//! author's session ended extends the document's latest session when it is that author's;
//! another author, an authorless (server or Planner) change, or a longer pause starts a new one.
//! Authorless changes never extend a session, not even an authorless one: nobody is credited with
//! them, so there is no one whose session they continue.

use std::time::Duration;

use async_trait::async_trait;

use crate::channel::ChannelId;
use crate::error::{StoreError, StoreResult};
use crate::lease::Fence;
use crate::time::UnixMillis;
use crate::user::UserId;

/// How long an author may pause and still be in the same session.
pub const SESSION_GAP: Duration = Duration::from_secs(10 * 60);

/// The largest canonical text a session keeps: far above any document a server keeps.
pub const MAX_VERSION_TEXT_BYTES: usize = 64 << 20;

/// The most sessions one list returns.
pub const MAX_VERSIONS_LISTED: usize = 500;

/// A change to record: the canonical text a commit left, who made it and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub channel: ChannelId,
    /// The member credited; `None` for server and Planner edits.
    pub author: Option<UserId>,
    /// The complete canonical MDX after the commit.
    pub text: String,
    /// The storage revision of the commit.
    pub revision: i64,
    /// SHA-256 of `text`, lowercase hex.
    pub source_hash: String,
    /// When the change was acknowledged, on the recording process's clock. Sessions are only
    /// compared with each other, never with the database's lease clock.
    pub at: UnixMillis,
}

impl Change {
    /// The checks every adapter makes before it records a change.
    pub fn check(&self) -> StoreResult<()> {
        if self.text.len() > MAX_VERSION_TEXT_BYTES {
            return Err(StoreError::invalid(
                "a session's text is larger than history keeps",
            ));
        }
        if self.revision < 0 {
            return Err(StoreError::invalid("a revision is never negative"));
        }
        check_hash(&self.source_hash)
    }
}

fn check_hash(hash: &str) -> StoreResult<()> {
    if hash.len() != 64 || !hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(StoreError::invalid(
            "a source hash is 64 lowercase hexadecimal digits",
        ));
    }
    Ok(())
}

/// A one-line summary of a session, with the source hash it describes: shown only while the
/// session still has that source. Nothing writes summaries yet; the columns are kept for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionSummary {
    pub text: String,
    pub source_hash: String,
}

/// One editing session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub channel: ChannelId,
    /// The session's number within its document, from 1, in the order sessions started.
    pub number: i64,
    pub author: Option<UserId>,
    /// The complete canonical MDX the session left.
    pub text: String,
    pub revision: i64,
    pub source_hash: String,
    pub started_at: UnixMillis,
    pub ended_at: UnixMillis,
    pub summary: Option<VersionSummary>,
}

impl Version {
    /// The summary, only while it still describes this session's source.
    pub fn current_summary(&self) -> Option<&str> {
        self.summary
            .as_ref()
            .filter(|s| s.source_hash == self.source_hash)
            .map(|s| s.text.as_str())
    }
}

/// What recording a change did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    pub version: Version,
    /// True when the change extended the latest session rather than starting one.
    pub extended: bool,
}

/// Whether `change` extends `latest` (the document's latest session), by the session rule. A
/// change that is not newer than the latest session is refused as `Conflict`: history only moves
/// forward.
pub fn session_to_extend(latest: Option<&Version>, change: &Change) -> StoreResult<bool> {
    let Some(latest) = latest else {
        return Ok(false);
    };
    if change.revision <= latest.revision {
        return Err(StoreError::conflict(format!(
            "history of document {} already holds revision {}",
            change.channel, latest.revision
        )));
    }
    let same_author = change.author.is_some() && change.author == latest.author;
    Ok(same_author && change.at.since(latest.ended_at) < SESSION_GAP)
}

/// The session `change` leaves: `latest` extended, or a new one numbered after it.
pub fn next_session(latest: Option<&Version>, change: &Change) -> StoreResult<Recorded> {
    let extended = session_to_extend(latest, change)?;
    let version = match latest {
        Some(latest) if extended => Version {
            text: change.text.clone(),
            revision: change.revision,
            source_hash: change.source_hash.clone(),
            ended_at: latest.ended_at.max(change.at),
            ..latest.clone()
        },
        _ => Version {
            channel: change.channel.clone(),
            number: latest.map_or(0, |v| v.number) + 1,
            author: change.author.clone(),
            text: change.text.clone(),
            revision: change.revision,
            source_hash: change.source_hash.clone(),
            started_at: change.at,
            ended_at: change.at,
            summary: None,
        },
    };
    Ok(Recorded { version, extended })
}

/// The history store. Every write is fenced by the writer lease.
#[async_trait]
pub trait HistoryStore: Send + Sync {
    /// Records a change under the session rule, in one fenced write: extends the document's
    /// latest session or starts a new one. A missing document is `Missing`.
    async fn record(&self, fence: &Fence, change: &Change) -> StoreResult<Recorded>;

    /// A document's sessions, newest first, at most `limit` (capped at
    /// [`MAX_VERSIONS_LISTED`]).
    async fn versions(&self, channel: &ChannelId, limit: usize) -> StoreResult<Vec<Version>>;

    /// One session by its number.
    async fn version(&self, channel: &ChannelId, number: i64) -> StoreResult<Option<Version>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(author: Option<&str>, revision: i64, at: i64) -> Change {
        Change {
            channel: ChannelId("c".to_owned()),
            author: author.map(|a| UserId(a.to_owned())),
            text: format!("text {revision}"),
            revision,
            source_hash: "0".repeat(64),
            at: UnixMillis(at),
        }
    }

    fn after(latest: &Version, c: &Change) -> Recorded {
        next_session(Some(latest), c).unwrap()
    }

    #[test]
    fn the_gap_is_strictly_less_than_ten_minutes() {
        let gap = i64::try_from(SESSION_GAP.as_millis()).unwrap();
        let first = next_session(None, &change(Some("ann"), 1, 1_000)).unwrap();
        assert!(!first.extended);
        assert_eq!(first.version.number, 1);
        let within = after(&first.version, &change(Some("ann"), 2, 1_000 + gap - 1));
        assert!(within.extended);
        assert_eq!(within.version.started_at, UnixMillis(1_000));
        assert_eq!(within.version.ended_at, UnixMillis(1_000 + gap - 1));
        let at_gap = after(
            &within.version,
            &change(Some("ann"), 3, 1_000 + 2 * gap - 1),
        );
        assert!(!at_gap.extended);
        assert_eq!(at_gap.version.number, 2);
    }

    #[test]
    fn authorless_changes_never_extend() {
        let first = next_session(None, &change(None, 1, 0)).unwrap();
        assert!(!after(&first.version, &change(None, 2, 1)).extended);
        assert!(!after(&first.version, &change(Some("ann"), 2, 1)).extended);
    }

    #[test]
    fn an_older_revision_is_refused_and_a_skewed_clock_counts_as_no_pause() {
        let first = next_session(None, &change(Some("ann"), 5, 10_000)).unwrap();
        let err = next_session(Some(&first.version), &change(Some("ann"), 5, 10_001));
        assert_eq!(err.unwrap_err().kind(), crate::ErrorKind::Conflict);
        let earlier = after(&first.version, &change(Some("ann"), 6, 9_000));
        assert!(earlier.extended);
        assert_eq!(earlier.version.ended_at, UnixMillis(10_000));
    }

    #[test]
    fn hashes_are_checked() {
        let mut bad = change(None, 1, 0);
        bad.source_hash = "ABC".to_owned();
        assert!(bad.check().is_err());
        assert!(change(None, 1, 0).check().is_ok());
    }
}
