//! The memory adapter's search store: a scan of every document, for the contract; not an
//! index. Words are runs of letters and digits compared in lowercase, as the SQL engines'
//! tokenizers mostly read them; a phrase matches where its words follow one another in the
//! title or in the text. The score rewards matches in the title ten times those in the text,
//! discounted by the text's length; the snippet is a window of words around the first match.

use async_trait::async_trait;

use super::MemoryStorage;
use super::collaboration::SearchText;
use fermata_store::channel::{Channel, ChannelId};
use fermata_store::error::StoreResult;
use fermata_store::lease::Fence;
use fermata_store::search::{
    Alternative, SearchHit, SearchQuery, SearchStore, SnippetPart, indexed_text,
};
use fermata_store::user::Role;

/// How many words a snippet shows, and how many of them come before the first match.
const SNIPPET_WORDS: usize = 24;
const SNIPPET_LEAD: usize = 6;

/// A word of a text: where it is, and its lowercase form.
struct Word {
    start: usize,
    end: usize,
    folded: String,
}

fn words(text: &str) -> Vec<Word> {
    let mut words = Vec::new();
    let mut start = None;
    for (at, c) in text.char_indices().chain([(text.len(), ' ')]) {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(at),
            (false, Some(from)) => {
                words.push(Word {
                    start: from,
                    end: at,
                    folded: text[from..at].to_lowercase(),
                });
                start = None;
            }
            _ => {}
        }
    }
    words
}

/// Where `phrase` starts in `text`'s words.
fn occurrences(text: &[Word], phrase: &[String]) -> Vec<usize> {
    if phrase.is_empty() || phrase.len() > text.len() {
        return Vec::new();
    }
    (0..=text.len() - phrase.len())
        .filter(|&at| {
            phrase
                .iter()
                .enumerate()
                .all(|(offset, word)| text[at + offset].folded == *word)
        })
        .collect()
}

fn folded(phrase: &str) -> Vec<String> {
    words(phrase).into_iter().map(|w| w.folded).collect()
}

/// One document as the search reads it.
struct Candidate<'a> {
    body: &'a str,
    title_words: Vec<Word>,
    body_words: Vec<Word>,
}

impl Candidate<'_> {
    fn holds(&self, phrase: &[String]) -> bool {
        !occurrences(&self.title_words, phrase).is_empty()
            || !occurrences(&self.body_words, phrase).is_empty()
    }

    fn matches(&self, alternative: &Alternative) -> bool {
        alternative.required.iter().all(|p| self.holds(&folded(p)))
            && !alternative.excluded.iter().any(|p| self.holds(&folded(p)))
    }

    /// The score over the alternatives it matches, and where their phrases occur in the text.
    fn score(&self, matched: &[&Alternative]) -> (f64, Vec<(usize, usize)>) {
        let mut raw = 0.0;
        let mut spans = Vec::new();
        for phrase in matched.iter().flat_map(|a| &a.required) {
            let phrase = folded(phrase);
            let in_body = occurrences(&self.body_words, &phrase);
            let in_title = occurrences(&self.title_words, &phrase).len() as f64;
            raw += 10.0_f64.mul_add(in_title, in_body.len() as f64);
            spans.extend(in_body.into_iter().map(|at| (at, at + phrase.len())));
        }
        let length = self.body_words.len() as f64;
        (raw / (1.0 + length.ln_1p()), spans)
    }

    /// A window of words around the first match (the text's first words when only the title
    /// matched), the matched words marked.
    fn snippet(&self, spans: &[(usize, usize)]) -> Vec<SnippetPart> {
        let words = &self.body_words;
        if words.is_empty() {
            return Vec::new();
        }
        let first = spans.iter().map(|(start, _)| *start).min().unwrap_or(0);
        let start = first.saturating_sub(SNIPPET_LEAD);
        let end = (start + SNIPPET_WORDS).min(words.len());
        let marked = |at: usize| spans.iter().any(|(from, to)| (*from..*to).contains(&at));
        let mut parts: Vec<SnippetPart> = Vec::new();
        let mut push = |text: &str, matched: bool| match parts.last_mut() {
            Some(last) if last.matched == matched => last.text.push_str(text),
            _ if text.is_empty() => {}
            _ => parts.push(SnippetPart {
                text: text.to_owned(),
                matched,
            }),
        };
        if start > 0 {
            push("…", false);
        }
        for at in start..end {
            if at > start {
                push(&self.body[words[at - 1].end..words[at].start], false);
            }
            push(&self.body[words[at].start..words[at].end], marked(at));
        }
        if end < words.len() {
            push("…", false);
        }
        parts
    }
}

#[async_trait]
impl SearchStore for MemoryStorage {
    async fn search(&self, query: &SearchQuery) -> StoreResult<Vec<SearchHit>> {
        let state = self.inner.state();
        let system_admin = state
            .users
            .get(&query.reader)
            .is_some_and(|user| user.has_role(Role::SystemAdmin));
        let readable = |channel: &Channel| {
            let member = state
                .repositories
                .role(&channel.repository, &query.reader)
                .is_some();
            match &query.repository {
                Some(named) => &channel.repository == named && (member || system_admin),
                None => member,
            }
        };
        let empty = SearchText::default();
        let mut hits: Vec<SearchHit> = Vec::new();
        for channel in state.documents.all() {
            if !readable(channel) || (!query.include_archived && channel.archived_at.is_some()) {
                continue;
            }
            let body = &state
                .documents
                .texts()
                .get(&channel.id)
                .unwrap_or(&empty)
                .body;
            let candidate = Candidate {
                body,
                title_words: words(&channel.title),
                body_words: words(body),
            };
            let matched: Vec<&Alternative> = query
                .terms
                .alternatives()
                .iter()
                .filter(|a| candidate.matches(a))
                .collect();
            if matched.is_empty() {
                continue;
            }
            let (score, spans) = candidate.score(&matched);
            if query
                .after
                .as_ref()
                .is_some_and(|cursor| !cursor.precedes(score, &channel.id))
            {
                continue;
            }
            hits.push(SearchHit {
                id: channel.id.clone(),
                repository: channel.repository.clone(),
                title: channel.title.clone(),
                slug: channel.slug.clone(),
                archived_at: channel.archived_at,
                updated_at: channel.updated_at,
                score,
                snippet: candidate.snippet(&spans),
            });
        }
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
        hits.truncate(query.most_hits());
        Ok(hits)
    }

    async fn stale_texts(
        &self,
        after: Option<&ChannelId>,
        limit: usize,
    ) -> StoreResult<Vec<ChannelId>> {
        let state = self.inner.state();
        Ok(state
            .documents
            .texts()
            .iter()
            .filter(|(id, text)| text.stale && after.is_none_or(|after| *id > after))
            .map(|(id, _)| id.clone())
            .take(limit)
            .collect())
    }

    async fn refresh_text(
        &self,
        fence: &Fence,
        id: &ChannelId,
        revision: i64,
        text: &str,
    ) -> StoreResult<bool> {
        self.inner
            .fenced(fence, |state, _now| {
                let current = state.documents.get(id).map(|c| c.revision);
                let Some(stored) = state.documents.text_mut(id) else {
                    return Ok(false);
                };
                if current != Some(revision) {
                    return Ok(false);
                }
                *stored = SearchText {
                    body: indexed_text(text),
                    stale: false,
                };
                Ok(true)
            })
            .await
    }
}

impl MemoryStorage {
    /// Leaves a document's indexed text as an upgrade may: `text` (its last checkpoint's),
    /// possibly behind its journal.
    pub fn seed_stale_search_text(&self, id: &ChannelId, text: &str) {
        let mut state = self.inner.state();
        if let Some(stored) = state.documents.text_mut(id) {
            *stored = SearchText {
                body: indexed_text(text),
                stale: true,
            };
        }
    }
}
