//! Contract cases for search: a commit's text and title are found as soon as the commit
//! answers, ranked and paged by keyset without duplicates or gaps, with snippets that mark what
//! matched; archived documents only on request; a deleted document is gone from the index; a
//! reader finds only what they may read, and an outsider nothing, not even a count; odd input
//! is parsed or refused as invalid, never failing the store; and texts an upgrade left behind
//! their journal are listed until refreshed.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::Harness;
use super::lease::{grant, plain};
use fermata_store::channel::{ChannelId, CreationKey, NewChannel, Repository};
use fermata_store::collaboration::{Commit, NewCheckpoint, OperationId, PublishedChannel};
use fermata_store::error::ErrorKind;
use fermata_store::lease::{Fence, Lease};
use fermata_store::repository::RepositoryRole;
use fermata_store::search::{SearchCursor, SearchHit, SearchQuery, SearchTerms, SnippetPart};
use fermata_store::user::{NewUser, Role, User, UserId, UserName};
use fermata_store::{Channel, Storage};

const LONG: Duration = Duration::from_secs(3600);

/// A store with a writer lease, and the users and repositories of a case.
struct World {
    store: Arc<dyn Storage>,
    lease: Lease,
    fence: Fence,
}

fn repo(name: &str) -> Repository {
    Repository::new(name).unwrap()
}

impl World {
    async fn open(harness: &dyn Harness) -> Self {
        let store = plain(harness).await;
        let lease = grant(&*store, "writer", LONG).await;
        let fence = lease.fence();
        World {
            store,
            lease,
            fence,
        }
    }

    async fn user(&self, name: &str, roles: &[Role]) -> User {
        self.store
            .users()
            .create_user(&NewUser {
                id: UserId(format!("user-{name}")),
                name: UserName::new(name).unwrap(),
                password_hash: format!("$argon2id$hash-of-{name}"),
                roles: roles.iter().copied().collect(),
            })
            .await
            .unwrap()
    }

    /// `ann`, the admin of `ann/app`, where most cases write.
    async fn with_ann(harness: &dyn Harness) -> (Self, User) {
        let world = World::open(harness).await;
        let ann = world.user("ann", &[]).await;
        world.repository("ann/app", &ann).await;
        (world, ann)
    }

    async fn repository(&self, name: &str, admin: &User) {
        self.store
            .repositories()
            .create_repository(&self.fence, &repo(name), &admin.id)
            .await
            .unwrap();
    }

    /// A document of `repository` titled `title` whose first commit saves `text`.
    async fn document(&self, repository: &str, title: &str, text: &str) -> Channel {
        let channel = self
            .store
            .collaboration()
            .create_channel(
                &self.fence,
                &NewChannel {
                    id: ChannelId::random(),
                    repository: repo(repository),
                    title: title.to_owned(),
                    parent: None,
                },
            )
            .await
            .unwrap();
        self.save(&channel, text).await;
        self.store
            .collaboration()
            .channel(&channel.id)
            .await
            .unwrap()
            .unwrap()
    }

    /// Commits an update that leaves `text` as the document's text.
    async fn save(&self, channel: &Channel, text: &str) {
        let current = self
            .store
            .collaboration()
            .channel(&channel.id)
            .await
            .unwrap()
            .unwrap();
        self.commit(&Commit {
            update: Some(text.as_bytes().to_vec()),
            text: Some(text.to_owned()),
            ..commit(&current)
        })
        .await;
    }

    async fn rename(&self, channel: &Channel, title: &str) {
        let current = self
            .store
            .collaboration()
            .channel(&channel.id)
            .await
            .unwrap()
            .unwrap();
        self.commit(&Commit {
            title: Some(title.to_owned()),
            ..commit(&current)
        })
        .await;
    }

    async fn commit(&self, commit: &Commit) {
        self.store
            .collaboration()
            .commit(&self.fence, commit)
            .await
            .unwrap();
    }

    async fn search(&self, reader: &User, text: &str) -> Vec<SearchHit> {
        self.search_with(query(reader, text)).await
    }

    async fn search_with(&self, query: SearchQuery) -> Vec<SearchHit> {
        self.store.search().search(&query).await.unwrap()
    }

    async fn archive_and_delete(&self, channel: &Channel) {
        let collaboration = self.store.collaboration();
        collaboration
            .archive(&self.fence, &channel.id)
            .await
            .unwrap();
        collaboration
            .delete_archived(&self.fence, &channel.id)
            .await
            .unwrap();
    }
}

/// An empty commit on `channel`'s revision, to fill in.
fn commit(channel: &Channel) -> Commit {
    Commit {
        channel: channel.id.clone(),
        operation: OperationId::new(uuid::Uuid::new_v4().to_string()).unwrap(),
        expected_revision: channel.revision,
        update: None,
        sidecar: None,
        events: Vec::new(),
        title: None,
        text: None,
    }
}

fn query(reader: &User, text: &str) -> SearchQuery {
    SearchQuery {
        reader: reader.id.clone(),
        terms: SearchTerms::parse(text).unwrap(),
        repository: None,
        include_archived: false,
        after: None,
        limit: 50,
    }
}

/// The one document a search should find.
fn one(id: &ChannelId) -> Vec<ChannelId> {
    vec![id.clone()]
}

fn ids(hits: &[SearchHit]) -> Vec<ChannelId> {
    hits.iter().map(|hit| hit.id.clone()).collect()
}

fn titles(hits: &[SearchHit]) -> Vec<&str> {
    hits.iter().map(|hit| hit.title.as_str()).collect()
}

/// The words of `text`, lowercase.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn matched(snippet: &[SnippetPart]) -> Vec<String> {
    snippet
        .iter()
        .filter(|part| part.matched)
        .flat_map(|part| words(&part.text))
        .collect()
}

fn whole(snippet: &[SnippetPart]) -> String {
    snippet.iter().map(|part| part.text.as_str()).collect()
}

pub async fn a_commit_is_found_by_its_text_and_title_as_soon_as_it_answers(harness: &dyn Harness) {
    let (world, ann) = World::with_ann(harness).await;
    let plan = world
        .document("ann/app", "Release plan", "We ship the zeppelin on Monday.")
        .await;
    let found = world.search(&ann, "zeppelin").await;
    assert_eq!(ids(&found), one(&plan.id));
    assert_eq!(found[0].title, "Release plan");
    assert_eq!(found[0].repository, repo("ann/app"));
    assert_eq!(found[0].slug, plan.slug);
    assert_eq!(found[0].updated_at, plan.updated_at);
    assert_eq!(found[0].archived_at, None);
    // Case does not matter, and every word must be there.
    assert_eq!(
        ids(&world.search(&ann, "ZEPPELIN monday").await),
        one(&plan.id)
    );
    assert!(world.search(&ann, "zeppelin tuesday").await.is_empty());
    // The title is searched too.
    assert_eq!(ids(&world.search(&ann, "release").await), one(&plan.id));

    // The next saved edit replaces the text: the old words are gone at once.
    world.save(&plan, "We ship the airship on Friday.").await;
    assert!(world.search(&ann, "zeppelin").await.is_empty());
    assert_eq!(
        ids(&world.search(&ann, "airship friday").await),
        one(&plan.id)
    );
    // A rename is searched at once; the text stays.
    world.rename(&plan, "Launch checklist").await;
    assert!(world.search(&ann, "release").await.is_empty());
    let renamed = world.search(&ann, "checklist airship").await;
    assert_eq!(titles(&renamed), ["Launch checklist"]);
    // A commit without text (a sidecar's, a rename's) leaves the text as it was.
    assert_eq!(ids(&world.search(&ann, "airship").await), one(&plan.id));

    // A document a program creates is found by its first text; one created empty by its title.
    let published = world
        .store
        .collaboration()
        .create_published(
            &world.fence,
            &PublishedChannel {
                repository: repo("ann/app"),
                key: CreationKey::new("key-1").unwrap(),
                title: "Research notes".to_owned(),
                parent: None,
                checkpoint: NewCheckpoint {
                    epoch: 1,
                    through_sequence: 0,
                    revision: 0,
                    canonical_text: "Observations about the lighthouse.".to_owned(),
                    source_hash: "h".to_owned(),
                    state: vec![1],
                    sidecar: None,
                },
            },
        )
        .await
        .unwrap();
    assert_eq!(ids(&world.search(&ann, "lighthouse").await), [published.id]);
    let empty = world
        .store
        .collaboration()
        .create_channel(
            &world.fence,
            &NewChannel {
                id: ChannelId::random(),
                repository: repo("ann/app"),
                title: "Untouched page".to_owned(),
                parent: None,
            },
        )
        .await
        .unwrap();
    let untouched = world.search(&ann, "untouched").await;
    assert_eq!(ids(&untouched), [empty.id]);
    assert!(
        untouched[0].snippet.is_empty(),
        "{:?}",
        untouched[0].snippet
    );

    // A new history (an epoch replacement) is indexed with its text, and is current: even a
    // text marked behind before it is not listed as behind any more.
    harness
        .seed_stale_search_text(&*world.store, &plan.id, "older airship")
        .await;
    assert_eq!(
        world.store.search().stale_texts(None, 10).await.unwrap(),
        std::slice::from_ref(&plan.id)
    );
    let current = world
        .store
        .collaboration()
        .channel(&plan.id)
        .await
        .unwrap()
        .unwrap();
    world
        .store
        .collaboration()
        .replace_epoch(
            &world.fence,
            &plan.id,
            current.revision,
            &NewCheckpoint {
                epoch: current.epoch + 1,
                through_sequence: 0,
                revision: 0,
                canonical_text: "A balloon instead.".to_owned(),
                source_hash: "h".to_owned(),
                state: vec![2],
                sidecar: None,
            },
        )
        .await
        .unwrap();
    assert!(world.search(&ann, "airship").await.is_empty());
    assert!(
        world
            .store
            .search()
            .stale_texts(None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(ids(&world.search(&ann, "balloon").await), [plan.id]);
}

pub async fn a_commit_carries_text_only_with_its_update(harness: &dyn Harness) {
    let (world, ann) = World::with_ann(harness).await;
    let plan = world.document("ann/app", "Plan", "first words").await;
    let current = world
        .store
        .collaboration()
        .channel(&plan.id)
        .await
        .unwrap()
        .unwrap();
    let refused = world
        .store
        .collaboration()
        .commit(
            &world.fence,
            &Commit {
                text: Some("other words".to_owned()),
                title: Some("Plan again".to_owned()),
                ..commit(&current)
            },
        )
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Invalid);
    assert!(world.search(&ann, "other").await.is_empty());
    assert_eq!(ids(&world.search(&ann, "first").await), [plan.id]);
}

pub async fn search_ranks_title_matches_first_then_by_how_much_matches(harness: &dyn Harness) {
    let (world, ann) = World::with_ann(harness).await;
    let filler = "The committee met again to discuss the budget and the timetable. ".repeat(6);
    world
        .document("ann/app", "Notes", &format!("{filler} One zebra was seen."))
        .await;
    world
        .document(
            "ann/app",
            "Sightings",
            "A zebra, then a zebra, then another zebra.",
        )
        .await;
    world
        .document(
            "ann/app",
            "Zebra crossing",
            "Where the road meets the park.",
        )
        .await;
    world
        .document("ann/app", "Elsewhere", "No striped animals here.")
        .await;
    let found = world.search(&ann, "zebra").await;
    assert_eq!(titles(&found), ["Zebra crossing", "Sightings", "Notes"]);
    assert!(
        found.windows(2).all(|pair| pair[0].score > pair[1].score),
        "{found:?}"
    );
}

pub async fn snippets_mark_the_words_that_matched(harness: &dyn Harness) {
    let (world, ann) = World::with_ann(harness).await;
    let text = "Intro line.\n\nThe quick brown Fox jumps over the lazy dog, \
                and <b>the</b> fox & hound sleep.\n\nClosing words.";
    world.document("ann/app", "Story", text).await;
    let found = world.search(&ann, "fox").await;
    assert_eq!(found.len(), 1);
    let snippet = &found[0].snippet;
    assert_eq!(
        matched(snippet).into_iter().collect::<BTreeSet<_>>(),
        BTreeSet::from(["fox".to_owned()]),
        "{snippet:?}"
    );
    // The matched text is the document's own, case and all; the rest is plain text around it.
    assert!(
        snippet
            .iter()
            .any(|part| part.matched && part.text == "Fox"),
        "{snippet:?}"
    );
    let shown = whole(snippet);
    assert!(
        shown.contains("brown") && shown.contains("jumps"),
        "{shown:?}"
    );
    for part in snippet {
        assert!(!part.text.is_empty(), "{snippet:?}");
        assert!(
            !part.text.contains(['\u{1}', '\u{2}']),
            "a marker leaked: {snippet:?}"
        );
    }
    // A phrase marks its words; an excluded word matches nothing to mark.
    let phrase = world.search(&ann, "\"quick brown\" -cat").await;
    assert_eq!(
        matched(&phrase[0].snippet)
            .into_iter()
            .collect::<BTreeSet<_>>(),
        BTreeSet::from(["quick".to_owned(), "brown".to_owned()]),
        "{:?}",
        phrase[0].snippet
    );
    // Highlight markers a text brings along are not markers.
    world
        .document(
            "ann/app",
            "Controls",
            "odd \u{1}marker\u{2} text near walrus",
        )
        .await;
    let controls = world.search(&ann, "walrus").await;
    assert_eq!(
        matched(&controls[0].snippet),
        ["walrus"],
        "{:?}",
        controls[0]
    );
}

pub async fn search_pages_by_keyset_without_duplicates_or_gaps(harness: &dyn Harness) {
    let (world, ann) = World::with_ann(harness).await;
    let mut made = BTreeSet::new();
    for n in 0..23 {
        // Three kinds of text, so many documents tie on score and the ID orders them.
        let text = match n % 3 {
            0 => "a lantern".to_owned(),
            1 => "a lantern and another lantern".to_owned(),
            _ => format!("lantern number {n} lit"),
        };
        made.insert(
            world
                .document("ann/app", &format!("Doc {n}"), &text)
                .await
                .id,
        );
    }
    world.document("ann/app", "Dark", "no light here").await;
    let all = world.search(&ann, "lantern").await;
    assert_eq!(ids(&all).into_iter().collect::<BTreeSet<_>>(), made);
    let mut paged = Vec::new();
    let mut after: Option<SearchCursor> = None;
    loop {
        let page = world
            .search_with(SearchQuery {
                after: after.clone(),
                limit: 4,
                ..query(&ann, "lantern")
            })
            .await;
        assert!(page.len() <= 4);
        let Some(last) = page.last() else { break };
        after = Some(SearchCursor {
            score: last.score,
            id: last.id.clone(),
        });
        paged.extend(ids(&page));
    }
    assert_eq!(paged, ids(&all), "the pages differ from one long page");
}

pub async fn archived_documents_are_searched_only_on_request(harness: &dyn Harness) {
    let (world, ann) = World::with_ann(harness).await;
    let kept = world.document("ann/app", "Kept", "the ledger").await;
    let shelved = world.document("ann/app", "Shelved", "the old ledger").await;
    world
        .store
        .collaboration()
        .archive(&world.fence, &shelved.id)
        .await
        .unwrap();
    assert_eq!(ids(&world.search(&ann, "ledger").await), one(&kept.id));
    let with_archived = world
        .search_with(SearchQuery {
            include_archived: true,
            ..query(&ann, "ledger")
        })
        .await;
    assert_eq!(
        ids(&with_archived).into_iter().collect::<BTreeSet<_>>(),
        BTreeSet::from([kept.id.clone(), shelved.id.clone()])
    );
    let archived = with_archived
        .iter()
        .find(|hit| hit.id == shelved.id)
        .unwrap();
    assert!(archived.archived_at.is_some());
    world
        .store
        .collaboration()
        .restore(&world.fence, &shelved.id)
        .await
        .unwrap();
    assert_eq!(world.search(&ann, "ledger").await.len(), 2);
}

pub async fn a_deleted_document_leaves_the_index(harness: &dyn Harness) {
    let (world, ann) = World::with_ann(harness).await;
    let doomed = world.document("ann/app", "Doomed", "the quokka").await;
    world.document("ann/app", "Other", "a wombat").await;
    world.archive_and_delete(&doomed).await;
    let everything = SearchQuery {
        include_archived: true,
        ..query(&ann, "quokka or doomed or wombat")
    };
    assert_eq!(
        titles(&world.search_with(everything.clone()).await),
        ["Other"]
    );

    // A program's document made again at the same ID starts from its own text alone.
    let published = |text: &str| PublishedChannel {
        repository: repo("ann/app"),
        key: CreationKey::new("again").unwrap(),
        title: "Again".to_owned(),
        parent: None,
        checkpoint: NewCheckpoint {
            epoch: 1,
            through_sequence: 0,
            revision: 0,
            canonical_text: text.to_owned(),
            source_hash: "h".to_owned(),
            state: vec![1],
            sidecar: None,
        },
    };
    let collaboration = world.store.collaboration();
    let first = collaboration
        .create_published(&world.fence, &published("the platypus"))
        .await
        .unwrap();
    world.archive_and_delete(&first).await;
    let second = collaboration
        .create_published(&world.fence, &published("the echidna"))
        .await
        .unwrap();
    assert_eq!(first.id, second.id);
    assert!(world.search(&ann, "platypus").await.is_empty());
    assert_eq!(ids(&world.search(&ann, "echidna").await), [second.id]);
}

pub async fn a_reader_finds_only_what_they_may_read_and_an_outsider_nothing(harness: &dyn Harness) {
    let world = World::open(harness).await;
    let ann = world.user("ann", &[]).await;
    let bob = world.user("bob", &[]).await;
    let vic = world.user("vic", &[]).await;
    let out = world.user("out", &[]).await;
    let root = world.user("root", &[Role::SystemAdmin]).await;
    world.repository("ann/app", &ann).await;
    world.repository("bob/web", &bob).await;
    world
        .store
        .repositories()
        .set_member(
            &world.fence,
            &repo("ann/app"),
            &vic.id,
            RepositoryRole::Viewer,
        )
        .await
        .unwrap();
    let mine = world.document("ann/app", "Harbor plan", "the harbor").await;
    let theirs = world
        .document("bob/web", "Harbor secret", "the harbor")
        .await;
    let named = |reader: &User, repository: &str| SearchQuery {
        repository: Some(repo(repository)),
        include_archived: true,
        ..query(reader, "harbor")
    };

    assert_eq!(ids(&world.search(&ann, "harbor").await), one(&mine.id));
    assert_eq!(ids(&world.search(&vic, "harbor").await), one(&mine.id));
    assert_eq!(ids(&world.search(&bob, "harbor").await), one(&theirs.id));
    assert_eq!(
        ids(&world.search_with(named(&vic, "ann/app")).await),
        one(&mine.id)
    );
    // A member of one repository finds nothing of another, even naming it.
    assert!(world.search_with(named(&ann, "bob/web")).await.is_empty());
    assert!(world.search_with(named(&vic, "bob/web")).await.is_empty());
    // An outsider finds nothing anywhere; a reader the store does not know neither.
    assert!(world.search(&out, "harbor").await.is_empty());
    assert!(world.search_with(named(&out, "ann/app")).await.is_empty());
    assert!(
        world
            .search_with(named(&out, "nobody/here"))
            .await
            .is_empty()
    );
    let ghost = User {
        id: UserId("user-ghost".to_owned()),
        ..out.clone()
    };
    assert!(world.search(&ghost, "harbor").await.is_empty());
    assert!(world.search_with(named(&ghost, "ann/app")).await.is_empty());
    // A system_admin reads a repository they name (the audited override), and only that one.
    assert!(world.search(&root, "harbor").await.is_empty());
    assert_eq!(
        ids(&world.search_with(named(&root, "bob/web")).await),
        one(&theirs.id)
    );
    // A member removed finds nothing more.
    world
        .store
        .repositories()
        .remove_member(&world.fence, &repo("ann/app"), &vic.id)
        .await
        .unwrap();
    assert!(world.search(&vic, "harbor").await.is_empty());
}

pub async fn odd_searches_are_refused_as_invalid_or_searched_never_failing(harness: &dyn Harness) {
    let (world, ann) = World::with_ann(harness).await;
    let odd = world
        .document(
            "ann/app",
            "Odd",
            "col:word NEAR(a b) x* 'quoted' \"double\" 日本語 über café 100% done_now a-b",
        )
        .await;
    let searches = [
        "\"unclosed",
        "a OR b AND NOT c",
        "NEAR(a b)",
        "col:word",
        "x*",
        "^x",
        "'; DROP TABLE channels; --",
        "\\",
        "\"\"\"",
        "-- -",
        "(((",
        "a & b | !c <-> d",
        "日本語",
        "ÜBER",
        "café 😀",
        "100%",
        "done_now",
        "a-b",
        "'quoted'",
        "\u{0}nul\u{7f}",
        "or or or",
        "-onlyexcluded",
    ];
    let mut long = "w ".repeat(200);
    long.push('w');
    let many = vec!["word"; 40].join(" ");
    for text in searches
        .iter()
        .copied()
        .chain([long.as_str(), many.as_str()])
    {
        let terms = match SearchTerms::parse(text) {
            Ok(terms) => terms,
            Err(error) => {
                assert_eq!(error.kind(), ErrorKind::Invalid, "{text:?}");
                continue;
            }
        };
        for include_archived in [false, true] {
            let query = SearchQuery {
                terms: terms.clone(),
                include_archived,
                ..query(&ann, "placeholder")
            };
            if let Err(error) = world.store.search().search(&query).await {
                panic!("{text:?} failed the store: {error:?}");
            }
        }
    }
    for text in [
        "col:word",
        "NEAR(a b)",
        "日本語",
        "über",
        "ÜBER café",
        "'quoted'",
        "x*",
    ] {
        assert_eq!(
            ids(&world.search(&ann, text).await),
            one(&odd.id),
            "{text:?}"
        );
    }
}

pub async fn texts_left_behind_by_an_upgrade_are_listed_until_refreshed(harness: &dyn Harness) {
    let (world, ann) = World::with_ann(harness).await;
    let behind = world.document("ann/app", "Behind", "current walrus").await;
    let fine = world.document("ann/app", "Fine", "current walrus").await;
    harness
        .seed_stale_search_text(&*world.store, &behind.id, "checkpointed narwhal")
        .await;
    let search = world.store.search();
    assert_eq!(search.stale_texts(None, 10).await.unwrap(), one(&behind.id));
    assert!(
        search
            .stale_texts(Some(&behind.id), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(search.stale_texts(None, 0).await.unwrap().is_empty());
    assert_eq!(ids(&world.search(&ann, "narwhal").await), one(&behind.id));

    // Refreshed at another revision, nothing changes.
    let stale_revision = behind.revision - 1;
    assert!(
        !search
            .refresh_text(&world.fence, &behind.id, stale_revision, "wrong")
            .await
            .unwrap()
    );
    assert!(
        !search
            .refresh_text(&world.fence, &ChannelId::random(), 1, "nothing")
            .await
            .unwrap()
    );
    assert_eq!(search.stale_texts(None, 10).await.unwrap(), one(&behind.id));
    // Refreshed at its revision, it is current.
    assert!(
        search
            .refresh_text(&world.fence, &behind.id, behind.revision, "current walrus")
            .await
            .unwrap()
    );
    assert!(search.stale_texts(None, 10).await.unwrap().is_empty());
    assert!(world.search(&ann, "narwhal").await.is_empty());
    let walrus: BTreeSet<ChannelId> = ids(&world.search(&ann, "walrus").await)
        .into_iter()
        .collect();
    assert_eq!(walrus, BTreeSet::from([behind.id.clone(), fine.id.clone()]));

    // A commit's text makes a stale row current too.
    harness
        .seed_stale_search_text(&*world.store, &fine.id, "older")
        .await;
    world.save(&fine, "newest walrus").await;
    assert!(search.stale_texts(None, 10).await.unwrap().is_empty());

    // An update committed without its text (a live room's batch) leaves the indexed text behind
    // until the room indexes it; a commit without an update (a rename) does not.
    world.rename(&fine, "Fine again").await;
    assert!(search.stale_texts(None, 10).await.unwrap().is_empty());
    let current = world
        .store
        .collaboration()
        .channel(&fine.id)
        .await
        .unwrap()
        .unwrap();
    world
        .commit(&Commit {
            update: Some(b"typed".to_vec()),
            ..commit(&current)
        })
        .await;
    assert_eq!(search.stale_texts(None, 10).await.unwrap(), one(&fine.id));
    assert!(
        search
            .refresh_text(
                &world.fence,
                &fine.id,
                current.revision + 1,
                "newest walrus typed"
            )
            .await
            .unwrap()
    );
    assert!(search.stale_texts(None, 10).await.unwrap().is_empty());

    // The refresh is a fenced write.
    world.store.leases().release(&world.lease).await.unwrap();
    grant(&*world.store, "successor", LONG).await;
    let current = world
        .store
        .collaboration()
        .channel(&behind.id)
        .await
        .unwrap()
        .unwrap();
    let refused = search
        .refresh_text(&world.fence, &behind.id, current.revision, "late")
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Fenced);
}
