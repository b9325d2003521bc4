//! The SQL search store (migration `0018`): each document's row of `document_search` (its
//! title and text), indexed by the engine itself: FTS5 on SQLite, a generated `tsvector` with a
//! GIN index on PostgreSQL. The rows are written where documents are (a created document's
//! first text here, a commit's text and title in `commit_statement.rs`, a deletion by its
//! cascade), in the same transaction.
//!
//! A search is one statement of the same shape on both engines: the matching documents the
//! reader may read, ranked by the engine (`bm25` on SQLite, `ts_rank` on PostgreSQL, the title
//! weighing more than the text), cut to one keyset page, and only then a snippet for each hit
//! (FTS5's `snippet`, `ts_headline`), marked with [`MATCH_START`] and [`MATCH_END`], which no
//! indexed text holds (`indexed_text`). The reader's rights are read in the same statement, from
//! the members and roles tables. The user's words reach the engine only as quoted phrases of its
//! own query language, rendered from the port's parsed [`SearchTerms`] and bound as a parameter:
//! neither engine is given an operator the user wrote.

use async_trait::async_trait;
use fermata_store::search::indexed_text;
use fermata_store::{
    ChannelId, Fence, Repository, SearchHit, SearchQuery, SearchStore, SearchTerms, Slug,
    SnippetPart, StoreResult, StoreResultExt,
};
use sqlx::AnyConnection;
use sqlx::any::AnyRow;

use crate::SqlStorage;
use crate::dialect::Dialect;
use crate::error::StoreContext;
use crate::row::{column, instant, optional_instant};

/// Where a snippet's match begins and ends: control characters, which `indexed_text` takes out
/// of every indexed text.
const MATCH_START: char = '\u{1}';
const MATCH_END: char = '\u{2}';

/// The search statements, rendered for one dialect.
#[derive(Debug)]
pub(crate) struct Statements {
    search: String,
    /// A new document's row: `$1` its ID, `$2` its title, `$3` its text.
    pub(crate) insert: String,
    /// A document's whole text replaced (an epoch replacement's), and its mark cleared.
    pub(crate) set_text: String,
    clear_mark: String,
    refresh: String,
    mark_current: String,
    stale: String,
}

/// What differs between the engines in a search.
struct Engine {
    /// The rows searched, as `s` (`document_search`) and whatever the match needs.
    searched: &'static str,
    /// Whether the row matches the query, bound as `$1`.
    matches: &'static str,
    /// The row's score, higher better.
    score: &'static str,
    /// What finds the row again for its snippet (`row`).
    row: &'static str,
    /// What the snippet reads, joined to the page by `row`, with its condition.
    snippet_from: &'static str,
    snippet: &'static str,
}

fn engine(dialect: Dialect) -> Engine {
    match dialect {
        // The title weighs ten times the text. FTS5 answers bm25 lower for better matches.
        Dialect::Sqlite => Engine {
            searched: "document_search_index \
                       JOIN document_search s ON s.id = document_search_index.rowid",
            matches: "document_search_index MATCH $1",
            score: "-bm25(document_search_index, 10.0, 1.0)",
            row: "s.id",
            snippet_from: "JOIN document_search_index ON document_search_index.rowid = page.row \
                           WHERE document_search_index MATCH $1",
            snippet: "snippet(document_search_index, 1, char(1), char(2), '…', 24)",
        },
        // ts_rank weighs the title (A) 1.0 and the text (B) 0.4, and with normalization 1
        // divides by one plus the logarithm of the document's length, as bm25 discounts long
        // documents. It answers a float4: doubled, so a page boundary compares exactly.
        Dialect::Postgres => Engine {
            searched: "document_search s",
            matches: "s.terms @@ websearch_to_tsquery('simple', $1)",
            score: "CAST(ts_rank(s.terms, websearch_to_tsquery('simple', $1), 1) \
                    AS DOUBLE PRECISION)",
            row: "s.channel_id",
            snippet_from: "JOIN document_search s ON s.channel_id = page.row",
            snippet: "ts_headline('simple', s.body, websearch_to_tsquery('simple', $1), \
                      'StartSel=' || chr(1) || ', StopSel=' || chr(2) || \
                      ', MaxWords=24, MinWords=12, MaxFragments=1')",
        },
    }
}

/// Whether the reader `$2` may read document `c`: a member of its repository, or a
/// `system_admin` where the search names the repository (`$3` = 1, `$4`); see
/// [`SearchStore::search`]. `$5` = 1 takes archived documents too.
const READABLE: &str = "(c.repository IN (SELECT m.repository FROM repository_members m \
                            WHERE m.user_id = $2) \
                         OR ($3 = 1 AND EXISTS (SELECT 1 FROM user_roles r \
                            WHERE r.user_id = $2 AND r.role = 'system_admin'))) \
                        AND ($3 = 0 OR c.repository = $4) \
                        AND ($5 = 1 OR c.archived_at IS NULL)";

impl Statements {
    pub(crate) fn new(dialect: Dialect) -> Self {
        let Engine {
            searched,
            matches,
            score,
            row,
            snippet_from,
            snippet,
        } = engine(dialect);
        Statements {
            // $6 = 1 when there is a cursor, $7 its score, $8 its ID; $9 the page's size.
            search: dialect.render(&format!(
                "WITH matched AS ( \
                     SELECT s.channel_id AS id, {score} AS score, {row} AS row \
                     FROM {searched} JOIN channels c ON c.id = s.channel_id \
                     WHERE {matches} AND {READABLE}), \
                 page AS ( \
                     SELECT id, score, row FROM matched \
                     WHERE $6 = 0 OR score < $7 OR (score = $7 AND id{{bytewise}} > $8) \
                     ORDER BY score DESC, id{{bytewise}} LIMIT $9) \
                 SELECT c.id, c.repository, c.title, c.slug, c.archived_at, c.updated_at, \
                     page.score, {snippet} \
                 FROM page JOIN channels c ON c.id = page.id {snippet_from} \
                 ORDER BY page.score DESC, page.id{{bytewise}}"
            )),
            insert: dialect.render(
                "INSERT INTO document_search (channel_id, title, body) VALUES ($1, $2, $3)",
            ),
            set_text: dialect.render("UPDATE document_search SET body = $2 WHERE channel_id = $1"),
            // The text is current at the revision it was read at: the row is written, and the
            // mark cleared, only while the document is still at that revision.
            refresh: dialect.render(
                "UPDATE document_search SET body = $3 WHERE channel_id = $1 \
                 AND EXISTS (SELECT 1 FROM channels WHERE id = $1 AND revision = $2)",
            ),
            mark_current: dialect.render(
                "UPDATE channels SET search_stale_since = NULL WHERE id = $1 AND revision = $2",
            ),
            clear_mark: dialect
                .render("UPDATE channels SET search_stale_since = NULL WHERE id = $1"),
            stale: dialect.render(
                "SELECT id FROM channels WHERE search_stale_since IS NOT NULL \
                 AND id{bytewise} > $1 ORDER BY id{bytewise} LIMIT $2",
            ),
        }
    }
}

/// The query `terms` make in `dialect`'s language: every phrase quoted, so nothing the user
/// wrote is read as an operator. FTS5: `("a" AND "b c" NOT "d") OR ("e")` (`NOT` binds tighter
/// than `AND`, `AND` than `OR`). PostgreSQL, for `websearch_to_tsquery`: `"a" "b c" -"d" or "e"`
/// (its `or` binds looser than the implied and, as the port's syntax does).
fn engine_query(dialect: Dialect, terms: &SearchTerms) -> String {
    // The port keeps quotes out of phrases; doubling them anyway keeps FTS5's string whole.
    let quoted = |phrase: &str| format!("\"{}\"", phrase.replace('"', "\"\""));
    let alternatives = terms.alternatives().iter().map(|alternative| {
        let required = alternative.required.iter().map(|p| quoted(p));
        let excluded = alternative.excluded.iter().map(|p| quoted(p));
        match dialect {
            Dialect::Sqlite => {
                let mut text = required.collect::<Vec<_>>().join(" AND ");
                for phrase in excluded {
                    text = format!("{text} NOT {phrase}");
                }
                format!("({text})")
            }
            Dialect::Postgres => required
                .chain(excluded.map(|phrase| format!("-{phrase}")))
                .collect::<Vec<_>>()
                .join(" "),
        }
    });
    let separator = match dialect {
        Dialect::Sqlite => " OR ",
        Dialect::Postgres => " or ",
    };
    alternatives.collect::<Vec<_>>().join(separator)
}

/// A snippet marked with [`MATCH_START`] and [`MATCH_END`], as parts.
fn snippet_parts(marked: &str) -> Vec<SnippetPart> {
    let mut parts: Vec<SnippetPart> = Vec::new();
    let mut matched = false;
    let mut text = String::new();
    let mut flush = |text: &mut String, matched: bool| {
        if !text.is_empty() {
            parts.push(SnippetPart {
                text: std::mem::take(text),
                matched,
            });
        }
    };
    for c in marked.chars() {
        match c {
            MATCH_START => {
                flush(&mut text, matched);
                matched = true;
            }
            MATCH_END => {
                flush(&mut text, matched);
                matched = false;
            }
            c => text.push(c),
        }
    }
    flush(&mut text, matched);
    parts
}

fn hit_from(row: &AnyRow, action: &str) -> StoreResult<SearchHit> {
    let corrupt = |what: &str| format!("a stored document has an invalid {what}");
    Ok(SearchHit {
        id: ChannelId(column(row, 0, action)?),
        repository: Repository::new(column::<String>(row, 1, action)?)
            .or_corrupt(corrupt("repository"))?,
        title: column(row, 2, action)?,
        slug: Slug::new(column::<String>(row, 3, action)?).or_corrupt(corrupt("slug"))?,
        archived_at: optional_instant(row, 4, action)?,
        updated_at: instant(row, 5, action)?,
        score: column(row, 6, action)?,
        snippet: snippet_parts(&column::<Option<String>>(row, 7, action)?.unwrap_or_default()),
    })
}

impl SqlStorage {
    /// Writes a new document's search row on `conn`, inside the caller's transaction.
    pub(crate) async fn insert_search_row(
        &self,
        conn: &mut AnyConnection,
        id: &ChannelId,
        title: &str,
        text: &str,
        action: &str,
    ) -> StoreResult<()> {
        sqlx::query(&self.inner.search_sql.insert)
            .bind(&id.0)
            .bind(title)
            .bind(indexed_text(text))
            .execute(conn)
            .await
            .context(action)?;
        Ok(())
    }

    /// Replaces a document's indexed text on `conn`, inside the caller's transaction.
    pub(crate) async fn set_search_text(
        &self,
        conn: &mut AnyConnection,
        id: &ChannelId,
        text: &str,
        action: &str,
    ) -> StoreResult<()> {
        sqlx::query(&self.inner.search_sql.set_text)
            .bind(&id.0)
            .bind(indexed_text(text))
            .execute(&mut *conn)
            .await
            .context(action)?;
        sqlx::query(&self.inner.search_sql.clear_mark)
            .bind(&id.0)
            .execute(conn)
            .await
            .context(action)?;
        Ok(())
    }
}

#[async_trait]
impl SearchStore for SqlStorage {
    async fn search(&self, query: &SearchQuery) -> StoreResult<Vec<SearchHit>> {
        let action = "searching documents";
        let limit = i64::try_from(query.most_hits()).unwrap_or(0);
        let after = query.after.as_ref();
        let rows = sqlx::query(&self.inner.search_sql.search)
            .bind(engine_query(self.inner.dialect, &query.terms))
            .bind(&query.reader.0)
            .bind(i64::from(query.repository.is_some()))
            .bind(query.repository.as_ref().map_or("", Repository::as_str))
            .bind(i64::from(query.include_archived))
            .bind(i64::from(after.is_some()))
            .bind(after.map_or(0.0, |cursor| cursor.score))
            .bind(after.map_or("", |cursor| cursor.id.0.as_str()))
            .bind(limit)
            .fetch_all(&self.inner.pool)
            .await
            .context(action)?;
        rows.iter().map(|row| hit_from(row, action)).collect()
    }

    async fn stale_texts(
        &self,
        after: Option<&ChannelId>,
        limit: usize,
    ) -> StoreResult<Vec<ChannelId>> {
        let action = "listing documents to index again";
        let ids: Vec<String> = sqlx::query_scalar(&self.inner.search_sql.stale)
            .bind(after.map_or("", |id| id.0.as_str()))
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(&self.inner.pool)
            .await
            .context(action)?;
        Ok(ids.into_iter().map(ChannelId).collect())
    }

    async fn refresh_text(
        &self,
        fence: &Fence,
        id: &ChannelId,
        revision: i64,
        text: &str,
    ) -> StoreResult<bool> {
        let action = "indexing a document's text";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let written = sqlx::query(&self.inner.search_sql.refresh)
            .bind(&id.0)
            .bind(revision)
            .bind(indexed_text(text))
            .execute(tx.conn())
            .await
            .context(action)?
            .rows_affected();
        sqlx::query(&self.inner.search_sql.mark_current)
            .bind(&id.0)
            .bind(revision)
            .execute(tx.conn())
            .await
            .context(action)?;
        tx.commit(action).await?;
        Ok(written > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_text_reaches_each_engine_only_as_quoted_phrases() {
        let terms =
            SearchTerms::parse("alpha \"beta gamma\" -delta or NEAR(x) -\"a OR b\" x*").unwrap();
        assert_eq!(
            engine_query(Dialect::Sqlite, &terms),
            "(\"alpha\" AND \"beta gamma\" NOT \"delta\") OR (\"NEAR(x)\" AND \"x*\" NOT \"a OR b\")"
        );
        assert_eq!(
            engine_query(Dialect::Postgres, &terms),
            "\"alpha\" \"beta gamma\" -\"delta\" or \"NEAR(x)\" \"x*\" -\"a OR b\""
        );
    }

    #[test]
    fn marked_snippets_become_parts() {
        let part = |text: &str, matched| SnippetPart {
            text: text.to_owned(),
            matched,
        };
        assert_eq!(
            snippet_parts("the \u{1}quick\u{2} brown \u{1}fox\u{2}…"),
            [
                part("the ", false),
                part("quick", true),
                part(" brown ", false),
                part("fox", true),
                part("…", false),
            ]
        );
        assert_eq!(snippet_parts(""), []);
        assert_eq!(snippet_parts("\u{1}\u{2}plain"), [part("plain", false)]);
    }
}
