//! Channels (documents): their metadata, repository-scoped slugs, children, archive state and
//! generated descriptions.

use std::fmt;

use crate::cluster::Shard;
use crate::error::{StoreError, StoreResult, StoreResultExt};
use crate::time::UnixMillis;

/// A channel's stable ID (a UUID).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChannelId(pub String);

impl ChannelId {
    /// A new random ID.
    pub fn random() -> Self {
        ChannelId(uuid::Uuid::new_v4().to_string())
    }

    /// The deterministic ID of a channel created in `repository` under an idempotency key, so a
    /// repeated creation finds the same channel and, after full deletion, makes it afresh.
    pub fn for_creation_key(repository: &Repository, key: &CreationKey) -> Self {
        let name = format!("{}\u{0}{}", repository.as_str(), key.as_str());
        ChannelId(uuid::Uuid::new_v5(&NAMESPACE, name.as_bytes()).to_string())
    }

    /// Checks a given ID is a UUID.
    pub fn parse(text: &str) -> StoreResult<Self> {
        uuid::Uuid::parse_str(text)
            .map(|id| ChannelId(id.to_string()))
            .or_invalid("a document ID is a UUID")
    }
}

/// The namespace of deterministic channel IDs.
const NAMESPACE: uuid::Uuid = uuid::Uuid::from_u128(0x6d1f_40b3_9a55_4c4e_8a1e_3f52_7d2c_f7a1);

impl fmt::Display for ChannelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A repository a channel belongs to, as `owner/name` (1 to 200 characters of letters, digits,
/// `.`, `_`, `-` and `/`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Repository(String);

impl Repository {
    pub fn new(text: impl Into<String>) -> StoreResult<Self> {
        let text = text.into();
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/');
        if text.is_empty() || text.len() > 200 || !text.chars().all(allowed) {
            return Err(StoreError::invalid(
                "a repository is 1 to 200 characters of letters, digits, '.', '_', '-' and '/'",
            ));
        }
        Ok(Repository(text))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The owner and the name of an `OWNER/NAME` repository; `None` for a name of another shape,
    /// which earlier releases accepted and which new repositories may not take.
    pub fn owner_and_name(&self) -> Option<(&str, &str)> {
        let (owner, name) = self.0.split_once('/')?;
        (!owner.is_empty() && !name.is_empty() && !name.contains('/')).then_some((owner, name))
    }
}

impl fmt::Display for Repository {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An idempotency key of a program's creation request: 1 to 200 printable ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CreationKey(String);

impl CreationKey {
    pub fn new(text: impl Into<String>) -> StoreResult<Self> {
        let text = text.into();
        if text.is_empty() || text.len() > 200 || !text.chars().all(|c| c.is_ascii_graphic()) {
            return Err(StoreError::invalid(
                "an idempotency key is 1 to 200 printable ASCII characters",
            ));
        }
        Ok(CreationKey(text))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A URL slug: lowercase letters and digits in words joined by single hyphens, at most 80
/// characters. Unique within a repository.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Slug(String);

/// The longest slug.
const MAX_SLUG: usize = 80;

impl Slug {
    pub fn new(text: impl Into<String>) -> StoreResult<Self> {
        let text = text.into();
        let words_ok = text.split('-').all(|w| {
            !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        });
        if text.is_empty() || text.len() > MAX_SLUG || !words_ok {
            return Err(StoreError::invalid(
                "a slug is lowercase letters and digits in words joined by single hyphens, at most 80 characters",
            ));
        }
        Ok(Slug(text))
    }

    /// The slug a title suggests: letters and digits kept (lowercased, accents dropped where
    /// ASCII has a plain letter), everything else a word break; `untitled` when nothing is left.
    pub fn from_title(title: &str) -> Self {
        let mut slug = String::new();
        let mut pending_break = false;
        for c in title.chars().flat_map(char::to_lowercase) {
            let plain = fold_accent(c);
            if plain.is_ascii_alphanumeric() {
                if pending_break && !slug.is_empty() {
                    slug.push('-');
                }
                pending_break = false;
                slug.push(plain);
            } else {
                pending_break = true;
            }
            if slug.len() >= MAX_SLUG - 8 {
                break;
            }
        }
        let slug = slug.trim_end_matches('-').to_owned();
        if slug.is_empty() {
            Slug("untitled".to_owned())
        } else {
            Slug(slug)
        }
    }

    /// This slug with a collision suffix: `name-2`, `name-3`, ...
    pub fn with_suffix(&self, n: u32) -> Self {
        if n <= 1 {
            self.clone()
        } else {
            Slug(format!("{}-{n}", self.0))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn fold_accent(c: char) -> char {
    match c {
        'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' => 'a',
        'ç' => 'c',
        'è' | 'é' | 'ê' | 'ë' => 'e',
        'ì' | 'í' | 'î' | 'ï' => 'i',
        'ñ' => 'n',
        'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' => 'o',
        'ù' | 'ú' | 'û' | 'ü' => 'u',
        'ý' | 'ÿ' => 'y',
        other => other,
    }
}

impl fmt::Display for Slug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A display title: 1 to 300 characters, no control characters. Titles may repeat.
pub fn check_title(title: &str) -> StoreResult<()> {
    if title.trim().is_empty() || title.chars().count() > 300 || title.chars().any(char::is_control)
    {
        return Err(StoreError::invalid(
            "a title has 1 to 300 characters and no control characters",
        ));
    }
    Ok(())
}

/// The last completed generated description of a channel, with its provenance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Description {
    pub text: String,
    /// Raised by every accepted publication, independently of every collaboration counter.
    pub revision: i64,
    pub source_plan_revision: i64,
    pub source_hash: String,
    pub generator_version: String,
    pub job_id: String,
    pub projected_at: UnixMillis,
}

/// A description to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescriptionDraft {
    pub text: String,
    pub source_plan_revision: i64,
    pub source_hash: String,
    pub generator_version: String,
    pub job_id: String,
}

/// How far a document's `updated_at` may trail its last commit, in milliseconds. The recency
/// order of documents is an index on `updated_at`, so a commit that moved it would rewrite the
/// document's place in that index every time; a document being edited moves once a second.
pub const UPDATED_AT_RESOLUTION_MS: i64 = 1_000;

/// A document's `updated_at` after a commit at `now`, where it was `recorded`: `now` once
/// `recorded` is [`UPDATED_AT_RESOLUTION_MS`] or more older, `recorded` until then.
pub fn updated_at_after_commit(recorded: UnixMillis, now: UnixMillis) -> UnixMillis {
    if recorded.0 <= now.0.saturating_sub(UPDATED_AT_RESOLUTION_MS) {
        now
    } else {
        recorded
    }
}

/// A channel's metadata and collaboration counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channel {
    pub id: ChannelId,
    pub repository: Repository,
    pub title: String,
    /// The canonical slug; former slugs stay as aliases.
    pub slug: Slug,
    pub parent: Option<ChannelId>,
    /// The shard whose writer lease writes this document; fixed when it was created.
    pub shard: Shard,
    pub archived_at: Option<UnixMillis>,
    pub created_at: UnixMillis,
    /// When the document last changed, to within [`UPDATED_AT_RESOLUTION_MS`]: a commit moves
    /// it only where the time recorded is that much older ([`updated_at_after_commit`]); an
    /// archive, a restore or a new epoch always moves it.
    pub updated_at: UnixMillis,
    /// The storage revision: raised by every accepted durable commit.
    pub revision: i64,
    /// The last storage sequence assigned.
    pub sequence: i64,
    /// The Yjs epoch: histories of different epochs are never combined.
    pub epoch: i64,
    pub description: Option<Description>,
}

/// A channel to create the way a browser does: metadata only, no snapshot until first opened.
#[derive(Debug, Clone)]
pub struct NewChannel {
    pub id: ChannelId,
    pub repository: Repository,
    pub title: String,
    pub parent: Option<ChannelId>,
}

/// Which channels a list or scan returns.
#[derive(Debug, Clone, Default)]
pub struct ChannelFilter {
    pub repository: Option<Repository>,
    /// Archived channels are left out unless this is set.
    pub include_archived: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_moves_updated_at_once_it_is_a_second_old() {
        let recorded = UnixMillis(10_000);
        for (now, expected) in [
            (10_000, 10_000),
            (10_999, 10_000),
            (11_000, 11_000),
            (12_345, 12_345),
            // A clock behind the recorded time never moves it back.
            (9_000, 10_000),
        ] {
            assert_eq!(
                updated_at_after_commit(recorded, UnixMillis(now)),
                UnixMillis(expected),
                "{now}"
            );
        }
    }

    #[test]
    fn titles_make_slugs() {
        for (title, slug) in [
            ("Release plan", "release-plan"),
            ("  Q3 — Café budget!! ", "q3-cafe-budget"),
            ("", "untitled"),
            ("日本語", "untitled"),
            ("a--b", "a-b"),
        ] {
            assert_eq!(Slug::from_title(title).as_str(), slug, "{title:?}");
        }
        assert!(Slug::from_title(&"long words ".repeat(40)).as_str().len() <= MAX_SLUG - 8);
        assert_eq!(Slug::new("plan").unwrap().with_suffix(3).as_str(), "plan-3");
        for bad in ["", "Plan", "a--b", "-a", "a-", "a b"] {
            assert!(Slug::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn creation_ids_are_deterministic_per_repository() {
        let repo = Repository::new("acme/app").unwrap();
        let other = Repository::new("acme/web").unwrap();
        let key = CreationKey::new("req-1").unwrap();
        assert_eq!(
            ChannelId::for_creation_key(&repo, &key),
            ChannelId::for_creation_key(&repo, &key)
        );
        assert_ne!(
            ChannelId::for_creation_key(&repo, &key),
            ChannelId::for_creation_key(&other, &key)
        );
        assert!(ChannelId::parse(&ChannelId::for_creation_key(&repo, &key).0).is_ok());
    }
}

/// The slug a channel gets for `base`: the first of `base`, `base-2`, `base-3`, ... that is
/// either one of the channel's own slugs (so renaming back promotes a former slug instead of
/// minting a new one) or not taken in the repository.
pub fn choose_slug(
    base: &Slug,
    own: &[Slug],
    taken_by_others: &std::collections::HashSet<Slug>,
) -> Slug {
    (1..)
        .map(|n| base.with_suffix(n))
        .find(|candidate| own.contains(candidate) || !taken_by_others.contains(candidate))
        .unwrap_or_else(|| base.clone())
}

#[cfg(test)]
mod slug_choice {
    use std::collections::HashSet;

    use super::*;

    fn slug(text: &str) -> Slug {
        Slug::new(text).unwrap()
    }

    #[test]
    fn collisions_get_suffixes_and_own_slugs_come_back() {
        let taken = HashSet::from([slug("plan"), slug("plan-2")]);
        assert_eq!(choose_slug(&slug("plan"), &[], &taken), slug("plan-3"));
        assert_eq!(
            choose_slug(&slug("plan"), &[slug("plan-2")], &taken),
            slug("plan-2")
        );
        assert_eq!(choose_slug(&slug("notes"), &[], &taken), slug("notes"));
    }
}
