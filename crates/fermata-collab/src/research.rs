//! The research service: stages a research request under a parent document with its evidence
//! job, reconciles completed evidence into the request's private answer job (at the next read,
//! and so after any interruption), and publishes the completed answer as one initialized child
//! document.
//!
//! Jobs are found again by their derived IDs, so every step repeats safely. The answer artifact
//! is untrusted; the one shape accepted, as JSON text, is
//! `{"artifact": "research-answer@1", "title": "…", "mdx": "…"}`: a title of 1 to 300
//! characters without control characters and MDX no larger than the server keeps for a document.
//! The MDX becomes the child's revision-zero checkpoint through `fermata-docs`, as a program's
//! document creation does.

use std::sync::Arc;

use fermata_store::{
    Channel, ChannelId, JobId, JobKind, JobLink, NewJob, Publication, RequestKey, ResearchDraft,
    ResearchRequest, Storage, StoreError, StoreResultExt,
};
use serde_json::Value;

use crate::documents::initial_checkpoint;
use crate::fence::WriterFence;

/// The kind of a request's evidence job.
pub const EVIDENCE_KIND: &str = "research-evidence@1";
/// The kind of a request's answer job.
pub const ANSWER_KIND: &str = "research-answer@1";

/// What an answer artifact publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub title: String,
    pub mdx: String,
}

/// The answer an artifact holds, or `Invalid` when it does not have the accepted shape.
pub fn answer_of(artifact: &str, max_bytes: usize) -> Result<Answer, StoreError> {
    let refused = || StoreError::invalid("the research answer does not have a publishable shape");
    let value: Value = serde_json::from_str(artifact)
        .or_invalid("the research answer does not have a publishable shape")?;
    if value.get("artifact").and_then(Value::as_str) != Some(ANSWER_KIND) {
        return Err(refused());
    }
    let title = value
        .get("title")
        .and_then(Value::as_str)
        .ok_or_else(refused)?;
    let mdx = value
        .get("mdx")
        .and_then(Value::as_str)
        .ok_or_else(refused)?;
    fermata_store::channel::check_title(title)?;
    if mdx.len() > max_bytes {
        return Err(StoreError::invalid(
            "the research answer is larger than this server keeps",
        ));
    }
    Ok(Answer {
        title: title.to_owned(),
        mdx: mdx.to_owned(),
    })
}

/// The research service.
#[derive(Debug, Clone)]
pub struct Research {
    storage: Arc<dyn Storage>,
    fence: WriterFence,
    max_document_bytes: usize,
}

fn kind(text: &str) -> Result<JobKind, StoreError> {
    JobKind::new(text)
}

impl Research {
    pub fn new(storage: Arc<dyn Storage>, fence: WriterFence, max_document_bytes: usize) -> Self {
        Research {
            storage,
            fence,
            max_document_bytes,
        }
    }

    fn job_id(parent: &ChannelId, key: &RequestKey, role: &str) -> JobId {
        JobId::derived(&[&parent.0, key.as_str(), role])
    }

    /// Stages the request with `payload` (JSON text) and enqueues and links its evidence job.
    /// Repeating it returns the same request; another payload under the key is a `Conflict`.
    pub async fn stage(
        &self,
        parent: &ChannelId,
        key: &RequestKey,
        payload: &str,
    ) -> Result<ResearchRequest, StoreError> {
        let fence = self.fence.current()?;
        let research = self.storage.research();
        research
            .stage(
                &fence,
                &ResearchDraft {
                    parent: parent.clone(),
                    key: key.clone(),
                    payload: payload.to_owned(),
                },
            )
            .await?;
        let evidence = self
            .storage
            .jobs()
            .enqueue(
                &fence,
                &NewJob {
                    id: Self::job_id(parent, key, "evidence"),
                    channel: parent.clone(),
                    kind: kind(EVIDENCE_KIND)?,
                    input: payload.to_owned(),
                },
            )
            .await?;
        research
            .link(&fence, parent, key, JobLink::Evidence, &evidence.id)
            .await
    }

    /// The request, with completed evidence reconciled into its answer job first.
    pub async fn read(
        &self,
        parent: &ChannelId,
        key: &RequestKey,
    ) -> Result<Option<ResearchRequest>, StoreError> {
        let research = self.storage.research();
        let Some(request) = research.request(parent, key).await? else {
            return Ok(None);
        };
        if request.answer_job.is_some() {
            return Ok(Some(request));
        }
        let Some(evidence_id) = &request.evidence_job else {
            return Ok(Some(request));
        };
        let evidence = self.storage.jobs().job(evidence_id).await?;
        let Some(output) = evidence.and_then(|job| job.output) else {
            return Ok(Some(request));
        };
        let input = serde_json::json!({ "request": request.payload, "evidence": output });
        let answer = NewJob {
            id: Self::job_id(parent, key, "answer"),
            channel: parent.clone(),
            kind: kind(ANSWER_KIND)?,
            input: input.to_string(),
        };
        let fence = self.fence.current()?;
        research
            .reconcile_evidence(&fence, parent, key, &answer)
            .await
            .map(Some)
    }

    /// Publishes the request's completed answer as its child document; a repeat returns the same
    /// child. A request without a completed answer is a `Conflict`.
    pub async fn publish(
        &self,
        parent: &ChannelId,
        key: &RequestKey,
    ) -> Result<Channel, StoreError> {
        let missing = || StoreError::missing(format!("research request `{key}` is not staged"));
        let request = self.read(parent, key).await?.ok_or_else(missing)?;
        if let Some(child) = &request.published_channel {
            return self
                .storage
                .collaboration()
                .channel(child)
                .await?
                .ok_or_else(|| StoreError::corrupt("a research request links a missing child"));
        }
        let unanswered = || {
            StoreError::conflict(format!(
                "the answer of research request `{key}` has not completed"
            ))
        };
        let answer_job = request.answer_job.clone().ok_or_else(unanswered)?;
        let job = self
            .storage
            .jobs()
            .job(&answer_job)
            .await?
            .ok_or_else(unanswered)?;
        let artifact = job.output.ok_or_else(unanswered)?;
        let answer = answer_of(&artifact, self.max_document_bytes)?;
        let fence = self.fence.current()?;
        self.storage
            .research()
            .publish(
                &fence,
                &Publication {
                    parent: parent.clone(),
                    key: key.clone(),
                    answer_generation: request.answer_generation,
                    answer_job,
                    title: answer.title,
                    checkpoint: initial_checkpoint(&answer.mdx),
                },
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_marked_answers_with_a_title_and_bounded_mdx_publish() {
        let answer = answer_of(
            r##"{"artifact":"research-answer@1","title":"Why","mdx":"# Why\n"}"##,
            100,
        )
        .unwrap();
        assert_eq!(
            (answer.title.as_str(), answer.mdx.as_str()),
            ("Why", "# Why\n")
        );
        for refused in [
            r##"{"title":"Why","mdx":"# Why\n"}"##,
            r##"{"artifact":"research-answer@2","title":"Why","mdx":"x"}"##,
            r##"{"artifact":"research-answer@1","title":"","mdx":"x"}"##,
            r##"{"artifact":"research-answer@1","title":"a\u0007b","mdx":"x"}"##,
            r##"{"artifact":"research-answer@1","title":"Why"}"##,
            r##"{"artifact":"research-answer@1","title":"Why","mdx":"too long for the limit"}"##,
            "not json",
        ] {
            assert_eq!(
                answer_of(refused, 10).unwrap_err().kind(),
                fermata_store::ErrorKind::Invalid,
                "{refused}"
            );
        }
    }
}
