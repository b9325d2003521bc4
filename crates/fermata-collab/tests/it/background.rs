//! Generated description reconciliation and the research service on every adapter: memory,
//! SQLite and PostgreSQL (the throwaway server the test command provisions).

use std::sync::Arc;
use std::time::Duration;

use fermata_collab::descriptions::SUMMARY_KIND;
use fermata_collab::research::{ANSWER_KIND, EVIDENCE_KIND};
use fermata_collab::{Descriptions, Research, WriterFence};
use fermata_store::{
    Acquisition, Channel, Fence, JobFailure, JobId, JobKind, LeaseName, NewJob, RequestKey,
    Settlement, Storage, StoreOptions,
};
use fermata_store_sql::testing::ScratchDatabase;
use fermata_store_testkit::contract::create_document;
use fermata_store_testkit::memory::MemoryStorage;

const LONG: Duration = Duration::from_secs(3600);
const HASH: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

struct Rig {
    store: Arc<dyn Storage>,
    fence: Fence,
    writer: WriterFence,
    doc: Channel,
}

impl Rig {
    async fn open(store: Arc<dyn Storage>) -> Self {
        let fence = match store
            .leases()
            .acquire(&LeaseName::WRITER, "background", LONG)
            .await
            .unwrap()
        {
            Acquisition::Granted(lease) => lease.fence(),
            Acquisition::Held(record) => panic!("held by {record:?}"),
        };
        let writer = WriterFence::default();
        writer.set(Some(fence.clone()));
        let doc = create_document(store.collaboration(), &fence, "Plan").await;
        Rig {
            store,
            fence,
            writer,
            doc,
        }
    }

    fn descriptions(&self) -> Descriptions {
        Descriptions::new(Arc::clone(&self.store), self.writer.clone())
    }

    fn research(&self) -> Research {
        Research::new(Arc::clone(&self.store), self.writer.clone(), 1 << 20)
    }

    async fn enqueue(&self, kind: &str) -> JobId {
        self.store
            .jobs()
            .enqueue(
                &self.fence,
                &NewJob {
                    id: JobId::random(),
                    channel: self.doc.id.clone(),
                    kind: JobKind::new(kind).unwrap(),
                    input: "{}".to_owned(),
                },
            )
            .await
            .unwrap()
            .id
    }

    /// Claims the next job of `kind` and settles it.
    async fn settle(&self, kind: &str, settlement: Settlement) -> JobId {
        let claimed = self
            .store
            .jobs()
            .claim(&self.fence, "worker", &[JobKind::new(kind).unwrap()], LONG)
            .await
            .unwrap()
            .expect("a ready job");
        self.store
            .jobs()
            .settle(&self.fence, &claimed.claim, &settlement)
            .await
            .unwrap();
        claimed.claim.job
    }

    async fn channel(&self) -> Channel {
        self.store
            .collaboration()
            .channel(&self.doc.id)
            .await
            .unwrap()
            .unwrap()
    }
}

fn complete(artifact: String) -> Settlement {
    Settlement::Complete { artifact }
}

fn description(text: &str) -> String {
    serde_json::json!({
        "artifact": SUMMARY_KIND,
        "version": 1,
        "output": "description",
        "text": text,
        "sourcePlanRevision": 3,
        "sourceHash": HASH,
        "generatorVersion": "summary-1",
    })
    .to_string()
}

async fn a_marked_description_projects_once_and_moves_no_counter(store: Arc<dyn Storage>) {
    let rig = Rig::open(store).await;
    let descriptions = rig.descriptions();
    assert!(!descriptions.reconcile(&rig.doc.id).await.unwrap());
    rig.enqueue(SUMMARY_KIND).await;
    let job = rig
        .settle(SUMMARY_KIND, complete(description("A release plan.")))
        .await;
    assert!(descriptions.reconcile(&rig.doc.id).await.unwrap());
    assert!(
        !descriptions.reconcile(&rig.doc.id).await.unwrap(),
        "reconciling again changes nothing"
    );
    let channel = rig.channel().await;
    let projected = channel.description.clone().expect("a description");
    assert_eq!(projected.text, "A release plan.");
    assert_eq!(projected.revision, 1);
    assert_eq!(projected.source_plan_revision, 3);
    assert_eq!(projected.source_hash, HASH);
    assert_eq!(projected.generator_version, "summary-1");
    assert_eq!(projected.job_id, job.0);
    assert_eq!(
        (
            channel.revision,
            channel.sequence,
            channel.epoch,
            channel.updated_at
        ),
        (
            rig.doc.revision,
            rig.doc.sequence,
            rig.doc.epoch,
            rig.doc.updated_at
        ),
        "projection moves no collaboration counter and not updated_at"
    );
}

async fn legacy_summaries_and_other_outputs_never_project(store: Arc<dyn Storage>) {
    let rig = Rig::open(store).await;
    let descriptions = rig.descriptions();
    for artifact in [
        r#"{"summary":"A legacy summary"}"#.to_owned(),
        description("A title").replace("\"description\"", "\"title\""),
    ] {
        rig.enqueue(SUMMARY_KIND).await;
        rig.settle(SUMMARY_KIND, complete(artifact)).await;
        assert!(!descriptions.reconcile(&rig.doc.id).await.unwrap());
    }
    // A marked artifact of a failed or another kind of job does not project either.
    rig.enqueue("document-title@1").await;
    rig.settle("document-title@1", complete(description("Elsewhere")))
        .await;
    assert!(!descriptions.reconcile(&rig.doc.id).await.unwrap());
    assert!(rig.channel().await.description.is_none());
}

async fn newer_jobs_never_clear_the_projection(store: Arc<dyn Storage>) {
    let rig = Rig::open(store).await;
    let descriptions = rig.descriptions();
    rig.enqueue(SUMMARY_KIND).await;
    let first = rig
        .settle(SUMMARY_KIND, complete(description("First.")))
        .await;
    assert!(descriptions.reconcile(&rig.doc.id).await.unwrap());
    // A newer job enqueued, then failing, leaves the projection.
    rig.enqueue(SUMMARY_KIND).await;
    assert!(!descriptions.reconcile(&rig.doc.id).await.unwrap());
    rig.settle(
        SUMMARY_KIND,
        Settlement::Fail {
            failure: JobFailure::GeneratorFailed,
            retry_after: None,
        },
    )
    .await;
    assert!(!descriptions.reconcile(&rig.doc.id).await.unwrap());
    let kept = rig.channel().await.description.unwrap();
    assert_eq!(
        (kept.text.as_str(), kept.job_id.as_str()),
        ("First.", first.0.as_str())
    );
    // An older job that completes after a newer one was enqueued does not win.
    rig.enqueue(SUMMARY_KIND).await;
    let claimed = rig
        .store
        .jobs()
        .claim(
            &rig.fence,
            "slow",
            &[JobKind::new(SUMMARY_KIND).unwrap()],
            LONG,
        )
        .await
        .unwrap()
        .unwrap();
    rig.enqueue(SUMMARY_KIND).await;
    rig.store
        .jobs()
        .settle(&rig.fence, &claimed.claim, &complete(description("Stale.")))
        .await
        .unwrap();
    assert!(!descriptions.reconcile(&rig.doc.id).await.unwrap());
    // The newest completes and replaces it under the next description revision.
    rig.settle(SUMMARY_KIND, complete(description("Second.")))
        .await;
    assert!(descriptions.reconcile(&rig.doc.id).await.unwrap());
    let replaced = rig.channel().await.description.unwrap();
    assert_eq!((replaced.text.as_str(), replaced.revision), ("Second.", 2));
}

async fn research_is_staged_answered_and_published_once(store: Arc<dyn Storage>) {
    let rig = Rig::open(store).await;
    let research = rig.research();
    let key = RequestKey::new("offer-1").unwrap();
    let staged = research
        .stage(&rig.doc.id, &key, r#"{"question":"Why?"}"#)
        .await
        .unwrap();
    assert!(staged.evidence_job.is_some());
    assert_eq!(
        research
            .stage(&rig.doc.id, &key, r#"{"question":"Why?"}"#)
            .await
            .unwrap(),
        staged
    );
    let unanswered = research.publish(&rig.doc.id, &key).await.unwrap_err();
    assert_eq!(unanswered.kind(), fermata_store::ErrorKind::Conflict);
    rig.settle(EVIDENCE_KIND, complete(r#"{"sources":["a"]}"#.to_owned()))
        .await;
    let read = research.read(&rig.doc.id, &key).await.unwrap().unwrap();
    let answer_job = read.answer_job.clone().expect("reconciled at the read");
    assert_eq!(
        research.read(&rig.doc.id, &key).await.unwrap().unwrap(),
        read
    );
    let artifact = serde_json::json!({
        "artifact": ANSWER_KIND,
        "title": "Why it works",
        "mdx": "# Why it works\n\nBecause.\n",
    });
    assert_eq!(
        rig.settle(ANSWER_KIND, complete(artifact.to_string()))
            .await,
        answer_job
    );
    let child = research.publish(&rig.doc.id, &key).await.unwrap();
    assert_eq!(child.parent.as_ref(), Some(&rig.doc.id));
    assert_eq!(child.title, "Why it works");
    let snapshot = rig
        .store
        .collaboration()
        .recovery_snapshot(&child.id)
        .await
        .unwrap();
    let checkpoint = snapshot.checkpoint.clone().unwrap();
    assert_eq!(checkpoint.canonical_text, "# Why it works\n\nBecause.\n");
    assert_eq!(
        checkpoint.source_hash,
        fermata_docs::source_hash("# Why it works\n\nBecause.\n")
    );
    let recovered = fermata_docs::recover(&snapshot).unwrap();
    assert_eq!(recovered.doc.text(), "# Why it works\n\nBecause.\n");
    assert_eq!(research.publish(&rig.doc.id, &key).await.unwrap(), child);
}

macro_rules! on_every_adapter {
    ($($case:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(std::sync::Arc::new(super::MemoryStorage::new(
                        super::StoreOptions::default(),
                    )))
                    .await;
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let store = super::ScratchDatabase::sqlite()
                        .open(super::StoreOptions::default())
                        .await;
                    super::$case(std::sync::Arc::new(store)).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let store = super::ScratchDatabase::postgres()
                        .await
                        .open(super::StoreOptions::default())
                        .await;
                    super::$case(std::sync::Arc::new(store)).await;
                }
            )*
        }
    };
}

on_every_adapter!(
    a_marked_description_projects_once_and_moves_no_counter,
    legacy_summaries_and_other_outputs_never_project,
    newer_jobs_never_clear_the_projection,
    research_is_staged_answered_and_published_once,
);
