//! Contract cases for research requests: idempotent staging, channel-local job links, evidence
//! reconciliation, and the atomic, idempotent publication of the answer as one initialized child
//! that cannot be deleted while the request links it.

use super::Harness;
use super::jobs::{Rig, kind};
use fermata_store::channel::ChannelId;
use fermata_store::collaboration::NewCheckpoint;
use fermata_store::error::ErrorKind;
use fermata_store::jobs::{JobId, JobKind, JobState, NewJob};
use fermata_store::research::{JobLink, Publication, RequestKey, ResearchDraft, child_key};
use fermata_store::{Channel, ResearchRequest};

fn key(text: &str) -> RequestKey {
    RequestKey::new(text).unwrap()
}

fn evidence() -> JobKind {
    kind("research-evidence@1")
}

fn answer() -> JobKind {
    kind("research-answer@1")
}

fn draft(parent: &Channel, request: &str, question: &str) -> ResearchDraft {
    ResearchDraft {
        parent: parent.id.clone(),
        key: key(request),
        payload: format!(r#"{{"question":"{question}"}}"#),
    }
}

fn checkpoint(text: &str) -> NewCheckpoint {
    NewCheckpoint {
        epoch: 1,
        through_sequence: 0,
        revision: 0,
        canonical_text: text.to_owned(),
        source_hash: format!("hash-of-{text}"),
        state: text.as_bytes().to_vec(),
        sidecar: None,
    }
}

impl Rig {
    async fn stage(&self, request: &str) -> ResearchRequest {
        self.store
            .research()
            .stage(&self.fence, &draft(&self.doc, request, "why"))
            .await
            .unwrap()
    }

    /// Stages `request` with a completed evidence job and reconciles it into its answer job.
    async fn with_answer_job(&self, request: &str) -> ResearchRequest {
        self.stage(request).await;
        let job = self.enqueue(&self.doc.clone(), &evidence()).await;
        self.store
            .research()
            .link(
                &self.fence,
                &self.doc.id,
                &key(request),
                JobLink::Evidence,
                &job.id,
            )
            .await
            .unwrap();
        let claimed = self.claim("worker", &evidence(), super::jobs::LONG).await;
        self.complete(&claimed, r#"{"sources":[]}"#).await;
        self.store
            .research()
            .reconcile_evidence(
                &self.fence,
                &self.doc.id,
                &key(request),
                &self.answer_of(request),
            )
            .await
            .unwrap()
    }

    fn answer_of(&self, request: &str) -> NewJob {
        NewJob {
            id: JobId::derived(&[&self.doc.id.0, request, "answer"]),
            channel: self.doc.id.clone(),
            kind: answer(),
            input: r#"{"evidence":true}"#.to_owned(),
        }
    }

    /// A request whose answer job completed.
    async fn answered(&self, request: &str) -> ResearchRequest {
        let staged = self.with_answer_job(request).await;
        let claimed = self.claim("worker", &answer(), super::jobs::LONG).await;
        assert_eq!(Some(&claimed.claim.job), staged.answer_job.as_ref());
        self.complete(&claimed, r##"{"mdx":"# Answer"}"##).await;
        staged
    }

    fn publication(&self, request: &ResearchRequest) -> Publication {
        Publication {
            parent: self.doc.id.clone(),
            key: request.key.clone(),
            answer_generation: request.answer_generation,
            answer_job: request.answer_job.clone().unwrap(),
            title: "Answer".to_owned(),
            checkpoint: checkpoint("# Answer"),
        }
    }
}

pub async fn research_staging_is_idempotent_by_request_key(harness: &dyn Harness) {
    let rig = Rig::open(harness).await;
    let research = rig.store.research();
    let staged = rig.stage("req-1").await;
    assert_eq!(staged.parent, rig.doc.id);
    assert_eq!(staged.answer_generation, 0);
    assert!(staged.evidence_job.is_none() && staged.answer_job.is_none());
    assert!(staged.published_channel.is_none());
    assert_eq!(staged.fencing_token, rig.fence.token);
    assert_eq!(rig.stage("req-1").await, staged);
    let other = research
        .stage(&rig.fence, &draft(&rig.doc, "req-1", "how"))
        .await;
    assert_eq!(other.unwrap_err().kind(), ErrorKind::Conflict);
    let elsewhere = rig.another_doc(None).await;
    let same_key_elsewhere = research
        .stage(&rig.fence, &draft(&elsewhere, "req-1", "how"))
        .await
        .unwrap();
    assert_eq!(same_key_elsewhere.parent, elsewhere.id);
    let nowhere = ResearchDraft {
        parent: ChannelId::random(),
        ..draft(&rig.doc, "req-2", "why")
    };
    assert_eq!(
        research
            .stage(&rig.fence, &nowhere)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Missing
    );
    assert_eq!(
        research.request(&rig.doc.id, &key("req-1")).await.unwrap(),
        Some(staged.clone())
    );
    assert_eq!(
        research.requests_of(&rig.doc.id).await.unwrap(),
        vec![staged]
    );
}

pub async fn research_links_refuse_jobs_of_another_document(harness: &dyn Harness) {
    let rig = Rig::open(harness).await;
    let research = rig.store.research();
    rig.stage("req").await;
    let elsewhere = rig.another_doc(None).await;
    let foreign = rig.enqueue(&elsewhere, &evidence()).await;
    for link in [JobLink::Evidence, JobLink::Answer] {
        let refused = research
            .link(&rig.fence, &rig.doc.id, &key("req"), link, &foreign.id)
            .await;
        assert_eq!(refused.unwrap_err().kind(), ErrorKind::Invalid);
    }
    let unknown = research
        .link(
            &rig.fence,
            &rig.doc.id,
            &key("req"),
            JobLink::Evidence,
            &JobId::random(),
        )
        .await;
    assert_eq!(unknown.unwrap_err().kind(), ErrorKind::Missing);
    let foreign_answer = NewJob {
        channel: elsewhere.id.clone(),
        ..rig.answer_of("req")
    };
    let refused = research
        .reconcile_evidence(&rig.fence, &rig.doc.id, &key("req"), &foreign_answer)
        .await;
    assert_eq!(refused.unwrap_err().kind(), ErrorKind::Invalid);
    let own = rig.enqueue(&rig.doc.clone(), &evidence()).await;
    let linked = research
        .link(
            &rig.fence,
            &rig.doc.id,
            &key("req"),
            JobLink::Evidence,
            &own.id,
        )
        .await
        .unwrap();
    assert_eq!(linked.evidence_job, Some(own.id.clone()));
    let again = research
        .link(
            &rig.fence,
            &rig.doc.id,
            &key("req"),
            JobLink::Evidence,
            &own.id,
        )
        .await
        .unwrap();
    assert_eq!(again, linked);
    let second = rig.enqueue(&rig.doc.clone(), &evidence()).await;
    let replaced = research
        .link(
            &rig.fence,
            &rig.doc.id,
            &key("req"),
            JobLink::Evidence,
            &second.id,
        )
        .await;
    assert_eq!(replaced.unwrap_err().kind(), ErrorKind::Conflict);
}

pub async fn completed_evidence_is_reconciled_into_one_answer_job(harness: &dyn Harness) {
    let rig = Rig::open(harness).await;
    let research = rig.store.research();
    rig.stage("req").await;
    let job = rig.enqueue(&rig.doc.clone(), &evidence()).await;
    research
        .link(
            &rig.fence,
            &rig.doc.id,
            &key("req"),
            JobLink::Evidence,
            &job.id,
        )
        .await
        .unwrap();
    let early = research
        .reconcile_evidence(&rig.fence, &rig.doc.id, &key("req"), &rig.answer_of("req"))
        .await
        .unwrap();
    assert!(
        early.answer_job.is_none(),
        "evidence that is not complete waits"
    );
    let claimed = rig.claim("worker", &evidence(), super::jobs::LONG).await;
    rig.complete(&claimed, r#"{"sources":[]}"#).await;
    let reconciled = research
        .reconcile_evidence(&rig.fence, &rig.doc.id, &key("req"), &rig.answer_of("req"))
        .await
        .unwrap();
    let answer_id = rig.answer_of("req").id;
    assert_eq!(reconciled.answer_job, Some(answer_id.clone()));
    assert_eq!(reconciled.answer_generation, 1);
    let again = research
        .reconcile_evidence(&rig.fence, &rig.doc.id, &key("req"), &rig.answer_of("req"))
        .await
        .unwrap();
    assert_eq!(again, reconciled);
    let answers: Vec<_> = rig
        .store
        .jobs()
        .jobs_of(&rig.doc.id)
        .await
        .unwrap()
        .into_iter()
        .filter(|j| j.kind == answer())
        .collect();
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].id, answer_id);
    assert_eq!(answers[0].state, JobState::Queued);
    // A new answer job raises the generation; linking it again changes nothing.
    let reanswer = rig.enqueue(&rig.doc.clone(), &answer()).await;
    let relinked = research
        .link(
            &rig.fence,
            &rig.doc.id,
            &key("req"),
            JobLink::Answer,
            &reanswer.id,
        )
        .await
        .unwrap();
    assert_eq!(relinked.answer_generation, 2);
    let same = research
        .link(
            &rig.fence,
            &rig.doc.id,
            &key("req"),
            JobLink::Answer,
            &reanswer.id,
        )
        .await
        .unwrap();
    assert_eq!(same, relinked);
}

pub async fn publication_creates_one_initialized_child_and_repeats_return_it(
    harness: &dyn Harness,
) {
    let rig = Rig::open(harness).await;
    let research = rig.store.research();
    let request = rig.with_answer_job("req").await;
    let early = research
        .publish(&rig.fence, &rig.publication(&request))
        .await;
    assert_eq!(
        early.unwrap_err().kind(),
        ErrorKind::Conflict,
        "an answer that has not completed is not published"
    );
    let claimed = rig.claim("worker", &answer(), super::jobs::LONG).await;
    rig.complete(&claimed, r##"{"mdx":"# Answer"}"##).await;
    let stale = fermata_store::research::Publication {
        answer_generation: request.answer_generation + 1,
        ..rig.publication(&request)
    };
    assert_eq!(
        research
            .publish(&rig.fence, &stale)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Conflict
    );
    assert!(rig.children().await.is_empty());

    let child = research
        .publish(&rig.fence, &rig.publication(&request))
        .await
        .unwrap();
    let expected = ChannelId::for_creation_key(
        &rig.doc.repository,
        &child_key(&rig.doc.id, &request.key).unwrap(),
    );
    assert_eq!(child.id, expected);
    assert_eq!(child.parent.as_ref(), Some(&rig.doc.id));
    assert_eq!(child.repository, rig.doc.repository);
    assert_eq!((child.revision, child.sequence, child.epoch), (0, 0, 1));
    let snapshot = rig
        .store
        .collaboration()
        .recovery_snapshot(&child.id)
        .await
        .unwrap();
    let stored = snapshot.checkpoint.expect("the child has its checkpoint");
    assert_eq!(
        (stored.epoch, stored.through_sequence, stored.revision),
        (1, 0, 0)
    );
    assert_eq!(stored.canonical_text, "# Answer");
    let linked = research
        .request(&rig.doc.id, &key("req"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(linked.published_channel, Some(child.id.clone()));
    assert!(linked.published_at.is_some());

    let again = research
        .publish(&rig.fence, &rig.publication(&request))
        .await
        .unwrap();
    assert_eq!(again, child);
    assert_eq!(rig.children().await, vec![child]);
}

pub async fn a_failed_publication_leaves_neither_the_child_nor_the_link(harness: &dyn Harness) {
    let rig = Rig::open(harness).await;
    let research = rig.store.research();
    let request = rig.answered("req").await;
    let broken = Publication {
        checkpoint: NewCheckpoint {
            revision: 1,
            ..checkpoint("# Answer")
        },
        ..rig.publication(&request)
    };
    assert_eq!(
        research
            .publish(&rig.fence, &broken)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Invalid
    );
    rig.release_the_lease().await;
    let fenced = research
        .publish(&rig.fence, &rig.publication(&request))
        .await;
    assert_eq!(fenced.unwrap_err().kind(), ErrorKind::Fenced);
    assert!(rig.children().await.is_empty());
    let unlinked = research
        .request(&rig.doc.id, &key("req"))
        .await
        .unwrap()
        .unwrap();
    assert!(unlinked.published_channel.is_none());
    let writes_again = super::lease::grant(&*rig.store, "successor", super::jobs::LONG)
        .await
        .fence();
    let child = research
        .publish(&writes_again, &rig.publication(&request))
        .await
        .unwrap();
    assert_eq!(child.parent.as_ref(), Some(&rig.doc.id));
}

pub async fn a_published_child_cannot_be_deleted(harness: &dyn Harness) {
    let rig = Rig::open(harness).await;
    let request = rig.answered("req").await;
    let child = rig
        .store
        .research()
        .publish(&rig.fence, &rig.publication(&request))
        .await
        .unwrap();
    let collaboration = rig.store.collaboration();
    collaboration.archive(&rig.fence, &child.id).await.unwrap();
    let refused = collaboration
        .delete_archived(&rig.fence, &child.id)
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Conflict);
    assert!(
        refused.message().contains("research request"),
        "{}",
        refused.message()
    );
    assert!(collaboration.channel(&child.id).await.unwrap().is_some());
    // An ordinary archived child still goes.
    let plain = rig.another_doc(Some(&rig.doc)).await;
    collaboration.archive(&rig.fence, &plain.id).await.unwrap();
    collaboration
        .delete_archived(&rig.fence, &plain.id)
        .await
        .unwrap();
}

pub async fn research_writes_under_a_lost_lease_are_fenced(harness: &dyn Harness) {
    let rig = Rig::open(harness).await;
    let research = rig.store.research();
    let staged = rig.stage("req").await;
    let job = rig.enqueue(&rig.doc.clone(), &evidence()).await;
    rig.release_the_lease().await;
    let outcomes = [
        research
            .stage(&rig.fence, &draft(&rig.doc, "other", "why"))
            .await
            .map(|_| ()),
        research
            .link(
                &rig.fence,
                &rig.doc.id,
                &key("req"),
                JobLink::Evidence,
                &job.id,
            )
            .await
            .map(|_| ()),
        research
            .reconcile_evidence(&rig.fence, &rig.doc.id, &key("req"), &rig.answer_of("req"))
            .await
            .map(|_| ()),
    ];
    for outcome in outcomes {
        assert_eq!(outcome.unwrap_err().kind(), ErrorKind::Fenced);
    }
    assert_eq!(
        research.requests_of(&rig.doc.id).await.unwrap(),
        vec![staged]
    );
}

pub async fn the_repository_listing_leaves_out_archived_parents_unless_asked(
    harness: &dyn Harness,
) {
    let rig = Rig::open(harness).await;
    let research = rig.store.research();
    let active = rig.stage("active").await;
    let archived_parent = rig.another_doc(None).await;
    let archived = research
        .stage(&rig.fence, &draft(&archived_parent, "archived", "why"))
        .await
        .unwrap();
    rig.store
        .collaboration()
        .archive(&rig.fence, &archived_parent.id)
        .await
        .unwrap();
    let repository = rig.doc.repository.clone();
    assert_eq!(
        research.requests_in(&repository, false).await.unwrap(),
        vec![active.clone()]
    );
    let all = research.requests_in(&repository, true).await.unwrap();
    assert_eq!(all.len(), 2);
    assert!(all.contains(&active) && all.contains(&archived));
    let elsewhere = fermata_store::channel::Repository::new("acme/other").unwrap();
    assert!(
        research
            .requests_in(&elsewhere, true)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn research_requests_go_with_their_parent(harness: &dyn Harness) {
    let rig = Rig::open(harness).await;
    rig.with_answer_job("req").await;
    rig.delete_the_document().await;
    let research = rig.store.research();
    assert!(
        research
            .request(&rig.doc.id, &key("req"))
            .await
            .unwrap()
            .is_none()
    );
    assert!(research.requests_of(&rig.doc.id).await.unwrap().is_empty());
    assert!(
        rig.store
            .jobs()
            .jobs_of(&rig.doc.id)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn racing_publications_create_one_child(harness: &dyn Harness) {
    let rig = Rig::open(harness).await;
    let request = rig.answered("req").await;
    let start = std::sync::Arc::new(tokio::sync::Barrier::new(4));
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let store = std::sync::Arc::clone(&rig.store);
        let fence = rig.fence.clone();
        let publication = rig.publication(&request);
        let start = std::sync::Arc::clone(&start);
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            store
                .research()
                .publish(&fence, &publication)
                .await
                .unwrap()
        }));
    }
    let mut children = Vec::new();
    for task in tasks {
        children.push(task.await.unwrap());
    }
    assert!(
        children.windows(2).all(|pair| pair[0] == pair[1]),
        "{children:?}"
    );
    assert_eq!(rig.children().await, vec![children[0].clone()]);
}
