//! Generated description reconciliation: after a `document-summary@1` job settles, its artifact
//! becomes the document's generated description when, and only when, it is a marked version-1
//! description artifact of a completed job that won (the newest target of its document).
//!
//! The artifact is untrusted model output. The one shape accepted, as JSON text of at most
//! [`MAX_ARTIFACT_BYTES`]:
//!
//! ```json
//! {"artifact": "document-summary@1", "version": 1, "output": "description",
//!  "text": "…", "sourcePlanRevision": 12, "sourceHash": "<64 lowercase hex>",
//!  "generatorVersion": "…"}
//! ```
//!
//! `text` is 1 to [`MAX_TEXT_CHARS`] characters once trimmed, with no control character but a
//! line feed; `sourcePlanRevision` is a non-negative integer; `generatorVersion` is 1 to 100
//! printable ASCII characters. Other members are ignored. Anything else (a markerless legacy
//! summary such as `{"summary": "…"}`, another `output`, another version, a member out of bounds)
//! is not eligible and changes nothing. Projection goes through
//! `CollaborationStore::publish_description`, once per job, under the writer fence; it moves no
//! collaboration counter and not `updated_at`. A newer job being enqueued or failing leaves the
//! current projection in place, since only a won job is ever projected.

use std::sync::Arc;

use fermata_store::{ChannelId, DescriptionDraft, JobKind, Storage, StoreError};
use serde_json::Value;

use crate::fence::WriterFence;

/// The job kind whose artifacts may become descriptions.
pub const SUMMARY_KIND: &str = "document-summary@1";
/// The largest artifact read at all.
pub const MAX_ARTIFACT_BYTES: usize = 16 * 1024;
/// The longest description text, in characters.
pub const MAX_TEXT_CHARS: usize = 1_000;

/// What an eligible artifact projects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescriptionArtifact {
    pub text: String,
    pub source_plan_revision: i64,
    pub source_hash: String,
    pub generator_version: String,
}

/// The projection an artifact makes, or `None` when it is not an eligible description artifact.
pub fn eligible(artifact: &str) -> Option<DescriptionArtifact> {
    if artifact.len() > MAX_ARTIFACT_BYTES {
        return None;
    }
    let value: Value = serde_json::from_str(artifact).ok()?;
    let marked = value.get("artifact")?.as_str()? == SUMMARY_KIND
        && value.get("version")?.as_i64()? == 1
        && value.get("output")?.as_str()? == "description";
    if !marked {
        return None;
    }
    let text = value.get("text")?.as_str()?.trim();
    let text_ok = !text.is_empty()
        && text.chars().count() <= MAX_TEXT_CHARS
        && text.chars().all(|c| c == '\n' || !c.is_control());
    let source_plan_revision = value.get("sourcePlanRevision")?.as_i64()?;
    let source_hash = value.get("sourceHash")?.as_str()?;
    let hash_ok = source_hash.len() == 64
        && source_hash
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c));
    let generator_version = value.get("generatorVersion")?.as_str()?;
    let version_ok = !generator_version.is_empty()
        && generator_version.len() <= 100
        && generator_version.chars().all(|c| c.is_ascii_graphic());
    (text_ok && source_plan_revision >= 0 && hash_ok && version_ok).then(|| DescriptionArtifact {
        text: text.to_owned(),
        source_plan_revision,
        source_hash: source_hash.to_owned(),
        generator_version: generator_version.to_owned(),
    })
}

/// Reconciles documents' generated descriptions with their settled summary jobs.
#[derive(Debug, Clone)]
pub struct Descriptions {
    storage: Arc<dyn Storage>,
    fence: WriterFence,
}

impl Descriptions {
    pub fn new(storage: Arc<dyn Storage>, fence: WriterFence) -> Self {
        Descriptions { storage, fence }
    }

    /// Projects the document's current summary job, if it is eligible and not projected yet.
    /// Returns whether the description changed. Idempotent: run it after every settlement of a
    /// summary job, and again after an interruption.
    pub async fn reconcile(&self, channel: &ChannelId) -> Result<bool, StoreError> {
        let kind = JobKind::new(SUMMARY_KIND)?;
        let Some(job) = self.storage.jobs().latest_won(channel, &kind).await? else {
            return Ok(false);
        };
        let Some(artifact) = job.output.as_deref().and_then(eligible) else {
            return Ok(false);
        };
        let fence = self.fence.current()?;
        self.storage
            .collaboration()
            .publish_description(
                &fence,
                channel,
                &DescriptionDraft {
                    text: artifact.text,
                    source_plan_revision: artifact.source_plan_revision,
                    source_hash: artifact.source_hash,
                    generator_version: artifact.generator_version,
                    job_id: job.id.0,
                },
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marked(text: &str) -> String {
        serde_json::json!({
            "artifact": SUMMARY_KIND,
            "version": 1,
            "output": "description",
            "text": text,
            "sourcePlanRevision": 7,
            "sourceHash": "a".repeat(64),
            "generatorVersion": "summary-2",
        })
        .to_string()
    }

    fn with(member: &str, value: Value) -> String {
        let mut artifact: Value = serde_json::from_str(&marked("A plan")).unwrap();
        artifact[member] = value;
        artifact.to_string()
    }

    #[test]
    fn only_marked_version_one_description_artifacts_are_eligible() {
        let artifact = eligible(&marked("  A release plan.\nTwo lines.  ")).unwrap();
        assert_eq!(artifact.text, "A release plan.\nTwo lines.");
        assert_eq!(artifact.source_plan_revision, 7);
        assert_eq!(artifact.generator_version, "summary-2");
        for refused in [
            r#"{"summary":"A legacy summary"}"#.to_owned(),
            r#"{"text":"A markerless description","output":"description"}"#.to_owned(),
            with("output", Value::from("title")),
            with("version", Value::from(2)),
            with("artifact", Value::from("document-summary@2")),
            with("text", Value::from("   ")),
            with("text", Value::from("x".repeat(MAX_TEXT_CHARS + 1))),
            with("text", Value::from("bell\u{7}")),
            with("sourcePlanRevision", Value::from(-1)),
            with("sourceHash", Value::from("not-a-hash")),
            with("generatorVersion", Value::from("")),
            format!(
                "{{\"pad\":\"{}\",{}",
                "x".repeat(MAX_ARTIFACT_BYTES),
                &marked("A")[1..]
            ),
            "not json".to_owned(),
        ] {
            assert!(eligible(&refused).is_none(), "{refused:.80}");
        }
    }
}
