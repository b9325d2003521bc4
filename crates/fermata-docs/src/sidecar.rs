//! The versioned sidecar: the domain records stored beside a document's source (counters,
//! questions, comments, drafts, transcript, relationships, creation metadata, MCP results, the
//! implementation graph, the active execution and lifecycle history), as typed Rust, with the
//! checks and the one compatibility conversion a stored sidecar gets before a room opens.
//!
//! # JSON (version 2, the current one)
//!
//! ```json
//! {
//!   "version": 2,
//!   "documentSequence": 0,          // non-negative integer
//!   "planRevision": 0,              // non-negative integer
//!   "questions": [{ "id": "q1", "text": "...", "decision": true,
//!                   "status": "open" | "answered" | "dismissed", "answer": null }],
//!   "comments": [{ "id": "c1", "author": null, "body": "...",
//!                  "anchor": { "start": "<base64>", "end": "<base64>", "quote": "..." },
//!                  "detached": false }],
//!   "drafts": [], "transcript": [], "relationships": [], "mcpResults": [], "lifecycle": [],
//!   "creation": null,
//!   "implementationGraph": { "nodes": [{ "id": "n1" }], "edges": [{ "from": "n1", "to": "n1" }] },
//!   "activeExecution": null
//! }
//! ```
//!
//! Restoration checks the version and these shapes only: the counters, that every list field is
//! an array, and the fields of questions and comments named above. Entries of drafts,
//! transcript, relationships, MCP results and lifecycle, creation metadata and the active
//! execution are kept as they are, unchecked. Any field this release does not know (on the
//! sidecar, a question, a comment, a graph node or edge) is carried through unchanged, so a
//! rewrite never loses what a newer or older writer stored. A list field that is absent reads
//! as empty. An implementation graph that does not parse, or has an edge naming a node it lacks,
//! is dropped with a warning; it never makes the sidecar unusable.
//!
//! # Version 1
//!
//! The one former version differs from version 2 only in this:
//!
//! - the counters were `docSeq` and `planRev` (now `documentSequence` and `planRevision`);
//! - a comment's anchor was a pair of character offsets into the source, `{"from": n, "to": m}`
//!   (counted in UTF-16 code units like every position here), optionally with the `quote` it
//!   covered. Conversion turns the offsets into sticky anchors on the document as it is now. When
//!   they no longer fit the text (past its end, an empty range, or a quote that no longer matches)
//!   the comment is kept, marked detached, with no anchor; the old offsets stay in its
//!   `legacyAnchor` field;
//! - there were no `mcpResults` and no `lifecycle`; both start empty.
//!
//! # Delivery marks of an earlier release
//!
//! An earlier release marked a transcript entry that waited for a Planner with `deliveryState`
//! and `deliveryFailure`. Nothing waits now: restoration drops both fields from every transcript
//! entry (of either version), so the message shows as an ordinary posted one and the sidecar
//! written back no longer carries them.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use fermata_store::SidecarState;

use crate::source::{Anchor, SourceDoc};

/// The version this release writes.
pub const SIDECAR_VERSION: u32 = 2;

/// The sidecar of one document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sidecar {
    /// Always [`SIDECAR_VERSION`] once restored; kept in the JSON so a dump explains itself.
    pub version: u32,
    /// The WebSocket document sequence, not the storage sequence.
    pub document_sequence: u64,
    /// The plan revision used by document block operations, not the storage revision.
    pub plan_revision: u64,
    #[serde(default)]
    pub questions: Vec<Question>,
    #[serde(default)]
    pub comments: Vec<Comment>,
    #[serde(default)]
    pub drafts: Vec<Value>,
    #[serde(default)]
    pub transcript: Vec<Value>,
    #[serde(default)]
    pub relationships: Vec<Value>,
    #[serde(default)]
    pub creation: Option<Value>,
    #[serde(default)]
    pub mcp_results: Vec<Value>,
    #[serde(default)]
    pub implementation_graph: Option<ImplementationGraph>,
    #[serde(default)]
    pub active_execution: Option<Value>,
    #[serde(default)]
    pub lifecycle: Vec<Value>,
    /// Fields this release does not know, kept so that writing the sidecar back loses nothing.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl Default for Sidecar {
    fn default() -> Self {
        Sidecar {
            version: SIDECAR_VERSION,
            document_sequence: 0,
            plan_revision: 0,
            questions: Vec::new(),
            comments: Vec::new(),
            drafts: Vec::new(),
            transcript: Vec::new(),
            relationships: Vec::new(),
            creation: None,
            mcp_results: Vec::new(),
            implementation_graph: None,
            active_execution: None,
            lifecycle: Vec::new(),
            other: Map::new(),
        }
    }
}

/// A question raised about the plan. JSON: `id`, `text`, `decision`, `status`, `answer`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Question {
    pub id: String,
    pub text: String,
    /// A decision blocks the plan until answered; other questions do not.
    pub decision: bool,
    pub status: QuestionStatus,
    #[serde(default)]
    pub answer: Option<String>,
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// JSON: `"open"`, `"answered"` or `"dismissed"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum QuestionStatus {
    Open,
    Answered,
    Dismissed,
}

/// A comment on the document. JSON: `id`, `author`, `body`, `anchor`, `detached`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Comment {
    pub id: String,
    #[serde(default)]
    pub author: Option<String>,
    pub body: String,
    /// The passage commented on; `None` for a comment on the whole document.
    #[serde(default)]
    pub anchor: Option<Anchor>,
    /// The passage is gone. The comment is kept and shown apart, never dropped.
    #[serde(default)]
    pub detached: bool,
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// The plan's implementation graph. JSON: `nodes`, `edges`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImplementationGraph {
    pub nodes: Vec<GraphNode>,
    pub edges: Vec<GraphEdge>,
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// JSON: `id` and any other fields, kept as they are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphNode {
    pub id: String,
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// JSON: `from`, `to` (node IDs) and any other fields, kept as they are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphEdge {
    pub from: String,
    pub to: String,
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl ImplementationGraph {
    /// Why the graph is unusable, if it is: an edge naming a node the graph lacks.
    pub fn problem(&self) -> Option<String> {
        let known = |id: &str| self.nodes.iter().any(|node| node.id == id);
        self.edges.iter().enumerate().find_map(|(index, edge)| {
            (!known(&edge.from) || !known(&edge.to))
                .then(|| format!("edge {index} names a node the graph does not have"))
        })
    }
}

/// Why a stored sidecar was refused.
#[derive(Debug, thiserror::Error)]
pub enum SidecarError {
    #[error("version {0} is unknown")]
    UnknownVersion(i64),
    #[error("is not JSON")]
    NotJson(#[source] serde_json::Error),
    /// A checked field is missing or has the wrong shape. `field` is a path such as
    /// `questions[2].status`, made of fixed names and indexes only.
    #[error("field `{field}` {problem}")]
    Malformed {
        field: String,
        problem: &'static str,
    },
    /// The checks passed but the typed form could not be built; a defect in these checks.
    #[error("does not have the expected shape")]
    Shape(#[source] serde_json::Error),
}

/// A restored sidecar and what was set aside while restoring it.
#[derive(Debug, Clone, PartialEq)]
pub struct Restored {
    pub sidecar: Sidecar,
    /// Each thing dropped or detached, in words, for the operator's log.
    pub warnings: Vec<String>,
}

impl Sidecar {
    /// The questions that still block the plan: open decisions.
    pub fn unanswered_decisions(&self) -> impl Iterator<Item = &Question> {
        self.questions
            .iter()
            .filter(|question| question.decision && question.status == QuestionStatus::Open)
    }

    /// The sidecar as the store keeps it.
    pub fn to_state(&self) -> SidecarState {
        // Serializing these types cannot fail: every map has string keys and no value refuses to
        // serialize. The fallback keeps this infallible and, were it ever reached, would make the
        // next restore fail loudly rather than store something plausible.
        let json = serde_json::to_string(self).unwrap_or_default();
        SidecarState {
            version: i64::from(self.version),
            json,
            unanswered_decisions: i64::try_from(self.unanswered_decisions().count())
                .unwrap_or(i64::MAX),
        }
    }
}

/// Restores a stored sidecar: checks its version and shapes, converts a version 1 sidecar onto
/// `doc` (the document as it is now) and drops an invalid implementation graph with a warning.
pub fn restore(version: i64, json: &str, doc: &SourceDoc) -> Result<Restored, SidecarError> {
    let checked = check(version, json)?;
    let converted = convert(checked, doc)?;
    Ok(Restored {
        sidecar: converted.sidecar,
        warnings: converted.warnings,
    })
}

/// A stored sidecar whose version and shapes passed, not yet converted.
#[derive(Debug)]
pub(crate) struct Checked {
    version: i64,
    fields: Map<String, Value>,
    warnings: Vec<String>,
}

/// A restored sidecar with the comments conversion detached, for recovery to report.
#[derive(Debug)]
pub(crate) struct Converted {
    pub(crate) sidecar: Sidecar,
    pub(crate) warnings: Vec<String>,
    pub(crate) detached: Vec<String>,
}

/// The list fields, each an array when present.
const LIST_FIELDS: [&str; 7] = [
    "questions",
    "comments",
    "drafts",
    "transcript",
    "relationships",
    "mcpResults",
    "lifecycle",
];

/// Checks what can be checked without the document: the version and the selected shapes.
pub(crate) fn check(version: i64, json: &str) -> Result<Checked, SidecarError> {
    if version != 1 && version != 2 {
        return Err(SidecarError::UnknownVersion(version));
    }
    let value: Value = serde_json::from_str(json).map_err(SidecarError::NotJson)?;
    let Value::Object(mut fields) = value else {
        return Err(malformed("sidecar", "is not an object"));
    };
    if let Some(stated) = fields.get("version")
        && stated.as_i64() != Some(version)
    {
        return Err(malformed("version", "does not match the stored version"));
    }
    let (sequence, revision) = if version == 1 {
        ("docSeq", "planRev")
    } else {
        ("documentSequence", "planRevision")
    };
    for counter in [sequence, revision] {
        match fields.get(counter) {
            None => return Err(malformed(counter, "is missing")),
            Some(value) if value.as_u64().is_none() => {
                return Err(malformed(counter, "is not a non-negative integer"));
            }
            Some(_) => {}
        }
    }
    for list in LIST_FIELDS {
        if fields.get(list).is_some_and(|value| !value.is_array()) {
            return Err(malformed(list, "is not an array"));
        }
    }
    for (index, question) in entries(&fields, "questions").enumerate() {
        check_question(index, question)?;
    }
    for (index, comment) in entries(&fields, "comments").enumerate() {
        check_comment(index, comment, version)?;
    }
    let mut warnings = Vec::new();
    if let Some(problem) = graph_problem(fields.get("implementationGraph")) {
        let warning = format!("the implementation graph was dropped: {problem}");
        tracing::warn!(%warning, "restoring a sidecar");
        warnings.push(warning);
        fields.insert("implementationGraph".to_owned(), Value::Null);
    }
    Ok(Checked {
        version,
        fields,
        warnings,
    })
}

/// Builds the typed sidecar, converting a version 1 sidecar onto `doc`.
pub(crate) fn convert(checked: Checked, doc: &SourceDoc) -> Result<Converted, SidecarError> {
    let Checked {
        version,
        mut fields,
        mut warnings,
    } = checked;
    let mut detached = Vec::new();
    if version == 1 {
        for (old, new) in [("docSeq", "documentSequence"), ("planRev", "planRevision")] {
            if let Some(value) = fields.remove(old) {
                fields.insert(new.to_owned(), value);
            }
        }
        if let Some(Value::Array(comments)) = fields.get_mut("comments") {
            for comment in comments.iter_mut().filter_map(Value::as_object_mut) {
                if let Some(warning) = convert_v1_anchor(comment, doc) {
                    detached.push(comment_id(comment));
                    tracing::warn!(%warning, "converting a version 1 sidecar");
                    warnings.push(warning);
                }
            }
        }
    }
    drop_delivery_marks(&mut fields);
    fields.insert("version".to_owned(), Value::from(SIDECAR_VERSION));
    let sidecar = serde_json::from_value(Value::Object(fields)).map_err(SidecarError::Shape)?;
    Ok(Converted {
        sidecar,
        warnings,
        detached,
    })
}

/// The transcript fields an earlier release used to mark an entry waiting for a Planner.
const DELIVERY_MARKS: [&str; 2] = ["deliveryState", "deliveryFailure"];

fn drop_delivery_marks(fields: &mut Map<String, Value>) {
    if let Some(Value::Array(transcript)) = fields.get_mut("transcript") {
        for entry in transcript.iter_mut().filter_map(Value::as_object_mut) {
            for mark in DELIVERY_MARKS {
                entry.remove(mark);
            }
        }
    }
}

/// Replaces a version 1 anchor by a sticky one; returns a warning when the comment had to be
/// detached instead.
fn convert_v1_anchor(comment: &mut Map<String, Value>, doc: &SourceDoc) -> Option<String> {
    let old = match comment.remove("anchor") {
        None | Some(Value::Null) => return None,
        Some(old) => old,
    };
    let placed = v1_offsets(&old)
        .and_then(|(from, to)| doc.anchor(from, to).ok())
        .filter(|anchor| match old.get("quote") {
            Some(Value::String(quote)) => *quote == anchor.quote,
            _ => true,
        });
    if let Some(anchor) = placed {
        comment.insert(
            "anchor".to_owned(),
            json!({ "start": anchor.start, "end": anchor.end, "quote": anchor.quote }),
        );
        return None;
    }
    let id = comment_id(comment);
    comment.insert("detached".to_owned(), Value::Bool(true));
    comment.insert("legacyAnchor".to_owned(), old);
    Some(format!(
        "comment `{id}` was detached: its version 1 offsets no longer fit the text"
    ))
}

fn v1_offsets(anchor: &Value) -> Option<(u32, u32)> {
    let offset = |name: &str| {
        anchor
            .get(name)
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
    };
    Some((offset("from")?, offset("to")?))
}

fn comment_id(comment: &Map<String, Value>) -> String {
    comment
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn entries<'a>(fields: &'a Map<String, Value>, list: &str) -> impl Iterator<Item = &'a Value> {
    fields
        .get(list)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn check_question(index: usize, question: &Value) -> Result<(), SidecarError> {
    let field = |name: &str| format!("questions[{index}].{name}");
    let Some(question) = question.as_object() else {
        return Err(malformed(format!("questions[{index}]"), "is not an object"));
    };
    for name in ["id", "text"] {
        if !question.get(name).is_some_and(Value::is_string) {
            return Err(malformed(field(name), "is not a string"));
        }
    }
    if !question.get("decision").is_some_and(Value::is_boolean) {
        return Err(malformed(field("decision"), "is not a boolean"));
    }
    if !matches!(
        question.get("status").and_then(Value::as_str),
        Some("open" | "answered" | "dismissed")
    ) {
        return Err(malformed(
            field("status"),
            "is not one of open, answered, dismissed",
        ));
    }
    if !question
        .get("answer")
        .is_none_or(|answer| answer.is_null() || answer.is_string())
    {
        return Err(malformed(field("answer"), "is not a string or null"));
    }
    Ok(())
}

fn check_comment(index: usize, comment: &Value, version: i64) -> Result<(), SidecarError> {
    let field = |name: &str| format!("comments[{index}].{name}");
    let Some(comment) = comment.as_object() else {
        return Err(malformed(format!("comments[{index}]"), "is not an object"));
    };
    for name in ["id", "body"] {
        if !comment.get(name).is_some_and(Value::is_string) {
            return Err(malformed(field(name), "is not a string"));
        }
    }
    if !comment
        .get("author")
        .is_none_or(|author| author.is_null() || author.is_string())
    {
        return Err(malformed(field("author"), "is not a string or null"));
    }
    if !comment.get("detached").is_none_or(Value::is_boolean) {
        return Err(malformed(field("detached"), "is not a boolean"));
    }
    // A version 1 anchor is converted later, and one that cannot be placed detaches its comment.
    if version >= 2 {
        match comment.get("anchor") {
            None | Some(Value::Null) => {}
            Some(Value::Object(anchor)) => {
                for name in ["start", "end", "quote"] {
                    if !anchor.get(name).is_some_and(Value::is_string) {
                        return Err(malformed(
                            format!("comments[{index}].anchor.{name}"),
                            "is not a string",
                        ));
                    }
                }
            }
            Some(_) => return Err(malformed(field("anchor"), "is not an object or null")),
        }
    }
    Ok(())
}

fn graph_problem(graph: Option<&Value>) -> Option<String> {
    let graph = match graph {
        None | Some(Value::Null) => return None,
        Some(graph) => graph,
    };
    match ImplementationGraph::deserialize(graph) {
        Ok(graph) => graph.problem(),
        Err(_) => Some("it does not have the graph's shape".to_owned()),
    }
}

fn malformed(field: impl Into<String>, problem: &'static str) -> SidecarError {
    SidecarError::Malformed {
        field: field.into(),
        problem,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restoring_drops_an_earlier_releases_delivery_marks() {
        let doc = SourceDoc::new();
        for version in [1, 2] {
            let (sequence, revision) = if version == 1 {
                ("docSeq", "planRev")
            } else {
                ("documentSequence", "planRevision")
            };
            let stored = json!({
                "version": version, sequence: 1, revision: 1,
                "transcript": [
                    { "id": "m1", "text": "waited", "deliveryState": "waiting",
                      "deliveryFailure": { "reason": "machine away" }, "author": "ana" },
                    { "id": "m2", "text": "plain" },
                    "free-form"
                ]
            });
            let restored = restore(version, &stored.to_string(), &doc).unwrap();
            assert_eq!(
                Value::Array(restored.sidecar.transcript.clone()),
                json!([
                    { "id": "m1", "text": "waited", "author": "ana" },
                    { "id": "m2", "text": "plain" },
                    "free-form"
                ]),
                "version {version}"
            );
            let written = restored.sidecar.to_state().json;
            assert!(!written.contains("deliveryState") && !written.contains("deliveryFailure"));
        }
    }

    fn v2_json() -> Value {
        json!({
            "version": 2,
            "documentSequence": 7,
            "planRevision": 3,
            "questions": [
                { "id": "q1", "text": "Which database?", "decision": true, "status": "open", "answer": null },
                { "id": "q2", "text": "Cache?", "decision": true, "status": "answered", "answer": "no" },
                { "id": "q3", "text": "Name?", "decision": false, "status": "open",
                  "passages": [{ "quote": "kept as is" }] },
                { "id": "q4", "text": "Queue?", "decision": true, "status": "open" },
                { "id": "q5", "text": "Shard?", "decision": true, "status": "dismissed" }
            ],
            "comments": [
                { "id": "c1", "author": "ana", "body": "Nice", "anchor": null, "detached": false },
                { "id": "c2", "body": "Whole document", "reactions": 3 }
            ],
            "drafts": [{ "anything": ["goes", 1, null] }],
            "transcript": [{ "author": { "odd": true } }, "free-form"],
            "relationships": [],
            "creation": { "by": "mcp", "at": 12 },
            "mcpResults": [{ "source": "# old" }],
            "implementationGraph": {
                "version": 4,
                "nodes": [{ "id": "a", "label": "A" }, { "id": "b" }],
                "edges": [{ "from": "a", "to": "b", "kind": "blocks" }]
            },
            "activeExecution": null,
            "lifecycle": [{ "at": 1, "state": "draft" }],
            "conversation": { "version": 2, "queues": { "decision": [], "research": [] } }
        })
    }

    fn restore_value(
        version: i64,
        value: &Value,
        doc: &SourceDoc,
    ) -> Result<Restored, SidecarError> {
        restore(version, &value.to_string(), doc)
    }

    #[test]
    fn version_2_round_trips() {
        let doc = SourceDoc::new();
        let restored = restore_value(2, &v2_json(), &doc).unwrap();
        assert!(restored.warnings.is_empty());
        let sidecar = restored.sidecar;
        assert_eq!(sidecar.document_sequence, 7);
        assert_eq!(sidecar.plan_revision, 3);
        assert_eq!(sidecar.questions[1].answer.as_deref(), Some("no"));
        assert_eq!(sidecar.comments[1].author, None);
        assert!(sidecar.other.contains_key("conversation"));
        assert_eq!(
            sidecar.implementation_graph.as_ref().unwrap().edges.len(),
            1
        );

        let state = sidecar.to_state();
        assert_eq!(state.version, 2);
        assert_eq!(state.unanswered_decisions, 2);
        let again = restore(state.version, &state.json, &doc).unwrap().sidecar;
        assert_eq!(again, sidecar);
        // Nothing stored is lost on the way through, unknown fields included.
        let reread: Value = serde_json::from_str(&state.json).unwrap();
        let mut expected = v2_json();
        expected["comments"][1]["author"] = Value::Null;
        expected["comments"][1]["anchor"] = Value::Null;
        expected["comments"][1]["detached"] = Value::Bool(false);
        expected["questions"][2]["answer"] = Value::Null;
        expected["questions"][3]["answer"] = Value::Null;
        expected["questions"][4]["answer"] = Value::Null;
        assert_eq!(reread, expected);
    }

    #[test]
    fn unanswered_decisions_are_open_decisions() {
        let sidecar = restore_value(2, &v2_json(), &SourceDoc::new())
            .unwrap()
            .sidecar;
        let ids: Vec<&str> = sidecar
            .unanswered_decisions()
            .map(|q| q.id.as_str())
            .collect();
        assert_eq!(ids, ["q1", "q4"]);
        assert_eq!(Sidecar::default().to_state().unanswered_decisions, 0);
    }

    #[test]
    fn minimal_sidecar_defaults_its_lists() {
        let json = r#"{"documentSequence": 0, "planRevision": 0}"#;
        let sidecar = restore(2, json, &SourceDoc::new()).unwrap().sidecar;
        assert_eq!(sidecar, Sidecar::default());
    }

    #[test]
    fn unknown_versions_are_refused() {
        for version in [0, 3, -1, i64::MAX] {
            let error = restore_value(version, &v2_json(), &SourceDoc::new()).unwrap_err();
            assert!(matches!(error, SidecarError::UnknownVersion(v) if v == version));
            assert_eq!(error.to_string(), format!("version {version} is unknown"));
        }
    }

    #[test]
    fn selected_shapes_are_checked() {
        type Change = fn(&mut Value);
        let cases: Vec<(Change, &str)> = vec![
            (
                |v| v["documentSequence"] = json!(-1),
                "field `documentSequence` is not a non-negative integer",
            ),
            (
                |v| v["planRevision"] = json!(1.5),
                "field `planRevision` is not a non-negative integer",
            ),
            (
                |v| {
                    v.as_object_mut().unwrap().remove("planRevision");
                },
                "field `planRevision` is missing",
            ),
            (
                |v| v["version"] = json!(1),
                "field `version` does not match the stored version",
            ),
            (
                |v| v["drafts"] = json!({}),
                "field `drafts` is not an array",
            ),
            (
                |v| v["lifecycle"] = json!(null),
                "field `lifecycle` is not an array",
            ),
            (
                |v| v["questions"][0]["status"] = json!("closed"),
                "field `questions[0].status` is not one of open, answered, dismissed",
            ),
            (
                |v| v["questions"][1]["decision"] = json!("yes"),
                "field `questions[1].decision` is not a boolean",
            ),
            (
                |v| v["questions"][2] = json!(5),
                "field `questions[2]` is not an object",
            ),
            (
                |v| {
                    v["questions"][0].as_object_mut().unwrap().remove("id");
                },
                "field `questions[0].id` is not a string",
            ),
            (
                |v| v["comments"][0]["body"] = json!(1),
                "field `comments[0].body` is not a string",
            ),
            (
                |v| v["comments"][0]["anchor"] = json!({ "start": "x", "end": "y" }),
                "field `comments[0].anchor.quote` is not a string",
            ),
            (
                |v| v["comments"][1]["detached"] = json!("no"),
                "field `comments[1].detached` is not a boolean",
            ),
        ];
        for (change, message) in cases {
            let mut value = v2_json();
            change(&mut value);
            let error = restore_value(2, &value, &SourceDoc::new()).unwrap_err();
            assert_eq!(error.to_string(), message);
        }
        let error = restore(2, "[1, 2]", &SourceDoc::new()).unwrap_err();
        assert_eq!(error.to_string(), "field `sidecar` is not an object");
        let error = restore(2, "{", &SourceDoc::new()).unwrap_err();
        assert!(matches!(error, SidecarError::NotJson(_)));
    }

    #[test]
    fn nested_free_form_values_are_not_checked() {
        let mut value = v2_json();
        value["transcript"] = json!([42, { "author": null }, [[]]]);
        value["creation"] = json!("just a string");
        value["activeExecution"] = json!([1, 2]);
        let sidecar = restore_value(2, &value, &SourceDoc::new()).unwrap().sidecar;
        assert_eq!(sidecar.transcript.len(), 3);
        assert_eq!(sidecar.creation, Some(json!("just a string")));
    }

    #[test]
    fn invalid_graph_is_dropped_with_a_warning() {
        let mut value = v2_json();
        value["implementationGraph"]["edges"] = json!([{ "from": "a", "to": "missing" }]);
        let restored = restore_value(2, &value, &SourceDoc::new()).unwrap();
        assert_eq!(restored.sidecar.implementation_graph, None);
        assert_eq!(
            restored.warnings,
            ["the implementation graph was dropped: edge 0 names a node the graph does not have"]
        );
        assert_eq!(restored.sidecar.questions.len(), 5);

        value["implementationGraph"] = json!({ "nodes": "none" });
        let restored = restore_value(2, &value, &SourceDoc::new()).unwrap();
        assert_eq!(restored.sidecar.implementation_graph, None);
        assert_eq!(restored.warnings.len(), 1);
    }

    #[test]
    fn version_1_is_converted() {
        let mut doc = SourceDoc::new();
        doc.insert(0, "intro body outro").unwrap();
        let v1 = json!({
            "version": 1,
            "docSeq": 11,
            "planRev": 4,
            "questions": [{ "id": "q1", "text": "Go?", "decision": true, "status": "open" }],
            "comments": [
                { "id": "fits", "body": "on body", "anchor": { "from": 6, "to": 10 } },
                { "id": "past-end", "body": "gone", "anchor": { "from": 12, "to": 40 } },
                { "id": "moved", "body": "stale", "anchor": { "from": 0, "to": 5, "quote": "hello" } },
                { "id": "quoted", "body": "ok", "anchor": { "from": 0, "to": 5, "quote": "intro" } },
                { "id": "whole", "body": "no anchor" },
                { "id": "odd", "body": "bad offsets", "anchor": { "from": -1, "to": "x" } }
            ],
            "drafts": [], "transcript": [], "relationships": [],
            "implementationGraph": null, "activeExecution": null
        });
        let restored = restore_value(1, &v1, &doc).unwrap();
        let sidecar = &restored.sidecar;
        assert_eq!(sidecar.version, 2);
        assert_eq!(sidecar.document_sequence, 11);
        assert_eq!(sidecar.plan_revision, 4);
        assert!(sidecar.mcp_results.is_empty() && sidecar.lifecycle.is_empty());
        assert!(sidecar.other.is_empty());

        let comment = |id: &str| sidecar.comments.iter().find(|c| c.id == id).unwrap();
        let fits = comment("fits");
        assert!(!fits.detached);
        let anchor = fits.anchor.as_ref().unwrap();
        assert_eq!(anchor.quote, "body");
        assert_eq!(doc.resolve(anchor), Some((6, 10)));
        assert_eq!(
            doc.resolve(comment("quoted").anchor.as_ref().unwrap()),
            Some((0, 5))
        );
        for id in ["past-end", "moved", "odd"] {
            let detached = comment(id);
            assert!(detached.detached, "{id}");
            assert_eq!(detached.anchor, None);
            assert!(detached.other.contains_key("legacyAnchor"));
        }
        assert!(!comment("whole").detached);
        assert_eq!(restored.warnings.len(), 3);

        // The converted sidecar is written as version 2 and restores as such.
        let state = sidecar.to_state();
        assert_eq!(state.version, 2);
        assert_eq!(state.unanswered_decisions, 1);
        assert_eq!(&restore(2, &state.json, &doc).unwrap().sidecar, sidecar);
    }

    #[test]
    fn version_1_needs_its_own_counter_names() {
        let v1 = json!({ "documentSequence": 1, "planRevision": 1 });
        let error = restore_value(1, &v1, &SourceDoc::new()).unwrap_err();
        assert_eq!(error.to_string(), "field `docSeq` is missing");
    }
}
