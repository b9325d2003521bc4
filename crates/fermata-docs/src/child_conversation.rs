//! Clearing a child document's conversation. A child has no Chat of its own, so at start the
//! conversation state a child's sidecar may still hold is emptied: the transcript and every
//! field below. Questions, comments, every other field and the document are kept exactly.
//!
//! # Fields cleared
//!
//! - `transcript`: emptied (`[]`) when it has entries; left alone when absent or empty;
//! - `workflowRuns` (the workflow run cards the Chat shows), `conversation` (the conversation
//!   analysis state, with its decision and research queues), `cardMirrors` (Chat card mirrors)
//!   and `effectOutbox` (effects waiting to be published): removed when present.
//!
//! # A child that cites the Chat
//!
//! A decision record cites the Chat when a question with `"decision": true` has a non-null
//! `chatMessageId` (the Chat message it came from) or `chatThreadId` (the conversation thread it
//! came from). Such a child would fail restoration without its conversation, so it is left
//! unchanged.
//!
//! The sidecar is handled as JSON, not as the typed [`crate::Sidecar`], so that a version 1
//! sidecar stays version 1 and nothing the types do not know is touched. The unanswered-decision
//! count does not change: questions are kept.

use fermata_store::SidecarState;
use serde_json::{Map, Value};

use crate::sidecar::SidecarError;

/// The conversation fields removed from a child's sidecar, besides the emptied transcript.
pub const CHILD_CONVERSATION_FIELDS: [&str; 4] = [
    "workflowRuns",
    "conversation",
    "cardMirrors",
    "effectOutbox",
];

/// The question fields through which a decision record cites the Chat.
pub const CHAT_CITATION_FIELDS: [&str; 2] = ["chatMessageId", "chatThreadId"];

/// What clearing one stored sidecar of a child comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildClearing {
    /// There was no conversation to clear.
    Nothing,
    /// The sidecar with its conversation cleared, to store instead.
    Cleared(SidecarState),
    /// A decision record cites the Chat: the child must be left unchanged.
    CitesChat,
}

/// Clears the conversation of one stored child sidecar.
pub fn clear_child_conversation(stored: &SidecarState) -> Result<ChildClearing, SidecarError> {
    let value: Value = serde_json::from_str(&stored.json).map_err(SidecarError::NotJson)?;
    let Value::Object(mut fields) = value else {
        return Err(SidecarError::Malformed {
            field: "sidecar".to_owned(),
            problem: "is not an object",
        });
    };
    if cites_chat(&fields) {
        return Ok(ChildClearing::CitesChat);
    }
    let mut changed = false;
    if let Some(Value::Array(transcript)) = fields.get_mut("transcript")
        && !transcript.is_empty()
    {
        transcript.clear();
        changed = true;
    }
    for field in CHILD_CONVERSATION_FIELDS {
        changed |= fields.remove(field).is_some();
    }
    if !changed {
        return Ok(ChildClearing::Nothing);
    }
    let json = serde_json::to_string(&Value::Object(fields)).map_err(SidecarError::Shape)?;
    Ok(ChildClearing::Cleared(SidecarState {
        version: stored.version,
        json,
        unanswered_decisions: stored.unanswered_decisions,
    }))
}

fn cites_chat(fields: &Map<String, Value>) -> bool {
    let Some(Value::Array(questions)) = fields.get("questions") else {
        return false;
    };
    questions
        .iter()
        .filter_map(Value::as_object)
        .filter(|question| question.get("decision") == Some(&Value::Bool(true)))
        .any(|decision| {
            CHAT_CITATION_FIELDS
                .iter()
                .any(|field| decision.get(*field).is_some_and(|value| !value.is_null()))
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn state(value: &Value) -> SidecarState {
        SidecarState {
            version: 2,
            json: value.to_string(),
            unanswered_decisions: 1,
        }
    }

    fn child() -> Value {
        json!({
            "version": 2, "documentSequence": 4, "planRevision": 2,
            "questions": [
                { "id": "q1", "text": "Which?", "decision": true, "status": "open" },
                { "id": "q2", "text": "Why?", "decision": false, "status": "open",
                  "chatMessageId": "m9" }
            ],
            "comments": [{ "id": "c1", "body": "kept" }],
            "drafts": [{ "kept": true }],
            "transcript": [{ "id": "m1", "text": "hello" }],
            "workflowRuns": [{ "id": "r1" }],
            "conversation": { "version": 2, "decisionQueue": [], "researchQueue": [] },
            "cardMirrors": { "r1": {} },
            "effectOutbox": [{ "kind": "publish" }],
            "unknownToThisRelease": { "kept": 1 }
        })
    }

    #[test]
    fn clears_the_conversation_and_keeps_everything_else() {
        let ChildClearing::Cleared(cleared) = clear_child_conversation(&state(&child())).unwrap()
        else {
            panic!("expected the conversation to be cleared");
        };
        let value: Value = serde_json::from_str(&cleared.json).unwrap();
        let mut expected = child();
        let fields = expected.as_object_mut().unwrap();
        fields.insert("transcript".to_owned(), json!([]));
        for field in CHILD_CONVERSATION_FIELDS {
            fields.remove(field);
        }
        assert_eq!(value, expected);
        assert_eq!(
            (cleared.version, cleared.unanswered_decisions),
            (2, 1),
            "the version and the decision count stay"
        );
        // A second run finds nothing.
        assert_eq!(
            clear_child_conversation(&cleared).unwrap(),
            ChildClearing::Nothing
        );
    }

    #[test]
    fn each_conversation_field_alone_is_cleared() {
        for field in CHILD_CONVERSATION_FIELDS {
            let value = json!({ "documentSequence": 0, "planRevision": 0, field: [] });
            assert!(
                matches!(
                    clear_child_conversation(&state(&value)).unwrap(),
                    ChildClearing::Cleared(_)
                ),
                "{field}"
            );
        }
        let empty = json!({ "documentSequence": 0, "planRevision": 0, "transcript": [] });
        assert_eq!(
            clear_child_conversation(&state(&empty)).unwrap(),
            ChildClearing::Nothing
        );
        let absent = json!({ "documentSequence": 0, "planRevision": 0 });
        assert_eq!(
            clear_child_conversation(&state(&absent)).unwrap(),
            ChildClearing::Nothing
        );
    }

    #[test]
    fn a_decision_citing_the_chat_leaves_the_child_unchanged() {
        for field in CHAT_CITATION_FIELDS {
            let mut value = child();
            value["questions"][0][field] = json!("m1");
            assert_eq!(
                clear_child_conversation(&state(&value)).unwrap(),
                ChildClearing::CitesChat,
                "{field}"
            );
            value["questions"][0][field] = Value::Null;
            assert!(matches!(
                clear_child_conversation(&state(&value)).unwrap(),
                ChildClearing::Cleared(_)
            ));
        }
    }

    #[test]
    fn a_version_one_sidecar_stays_version_one() {
        let value = json!({ "docSeq": 1, "planRev": 1, "transcript": ["x"] });
        let stored = SidecarState {
            version: 1,
            json: value.to_string(),
            unanswered_decisions: 0,
        };
        let ChildClearing::Cleared(cleared) = clear_child_conversation(&stored).unwrap() else {
            panic!("expected the transcript to be cleared");
        };
        assert_eq!(cleared.version, 1);
        let value: Value = serde_json::from_str(&cleared.json).unwrap();
        assert_eq!(
            value,
            json!({ "docSeq": 1, "planRev": 1, "transcript": [] })
        );
    }

    #[test]
    fn an_unreadable_sidecar_is_an_error() {
        for json in ["not json", "[1]"] {
            let stored = SidecarState {
                version: 2,
                json: json.to_owned(),
                unanswered_decisions: 0,
            };
            assert!(clear_child_conversation(&stored).is_err(), "{json}");
        }
    }
}
