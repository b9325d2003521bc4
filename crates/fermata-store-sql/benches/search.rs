//! Benchmark of full-text search, on SQLite (WAL, synchronous=FULL) and durable PostgreSQL, each
//! figure a ratio against a baseline measured in the same run:
//!
//! - search: the first page (20 hits, snippets included) of `search()` over 10,000 documents of
//!   about 250 words each (a synthetic vocabulary of 5,000 words drawn by Zipf's law, so some
//!   words are in nearly every document and most in few), for a reader who is a member of their
//!   repository; five kinds of search, interleaved: a common word, a middling one, a rare one,
//!   two words, and a phrase. The floor is the page of the same size a reader lists
//!   (`documents_page`, most recently updated first) from the same repository: the cheapest read
//!   of a page of those documents.
//! - commit: one fenced, revision-checked commit of a small Yjs update carrying the document's
//!   whole text (the index updated in the commit's statement: a program's edit), against the
//!   same commit without the text (a live room's batch, which only marks the indexed text as
//!   behind; the room indexes it once its writers pause), on a document of about 4 KB and one of
//!   about 64 KB of text, one word of which changes each time; interleaved, the order reversed
//!   every iteration.
//!
//! The corpus is seeded in bulk (`seed_documents`), then on PostgreSQL vacuumed and analyzed
//! as autovacuum would have done; SQLite's FTS5 index is left as its own merging left it.
//!
//! `FERMATA_BENCH_ITERATIONS` sets the iterations of each commit kind (default 1000); the
//! searches run a fifth as many rounds of all five kinds.

use std::time::{Duration, Instant};

use fermata_store::repository::DocumentScope;
use fermata_store::{
    Acquisition, ChannelId, Commit, Fence, LeaseName, NewChannel, NewUser, OperationId, Repository,
    SearchQuery, SearchTerms, Storage, StoreOptions, User, UserId, UserName,
};
use fermata_store_sql::testing::bench::{
    Figure, Summary, durable_setting, micros, ratio, seed_documents,
};
use fermata_store_sql::testing::{POSTGRES_URL_VAR, ScratchDatabase, ScratchStorage};

const DOCUMENTS: usize = 10_000;
const WORDS_PER_DOCUMENT: usize = 250;
const VOCABULARY: usize = 5_000;
const PAGE: usize = 20;
/// The text sizes commits are measured at, in bytes.
const COMMIT_TEXTS: [usize; 2] = [4 * 1024, 64 * 1024];
const WARMUP: usize = 50;

fn main() {
    assert!(
        std::env::var_os(POSTGRES_URL_VAR).is_some(),
        "{POSTGRES_URL_VAR} is not set: run the benchmark with scripts/bench, which starts a \
         throwaway PostgreSQL server with fsync on"
    );
    let iterations: usize = std::env::var("FERMATA_BENCH_ITERATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000);
    // One thread: the timed futures never wait on a scheduler hop to another worker.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        measure("sqlite", ScratchDatabase::sqlite(), iterations).await;
        measure("postgres", ScratchDatabase::postgres().await, iterations).await;
    });
}

/// A deterministic generator (xorshift64*), so every run searches the same corpus.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..1`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1_u64 << 53) as f64
    }
}

/// Words made of syllables, in the order of their frequency, with Zipf's cumulative weights.
struct Vocabulary {
    words: Vec<String>,
    cumulative: Vec<f64>,
}

impl Vocabulary {
    fn new() -> Self {
        const SYLLABLES: [&str; 20] = [
            "ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "po", "da", "fe", "gu", "hi",
            "jo", "ba", "ce", "wu", "xi", "yo",
        ];
        let words = (0..VOCABULARY)
            .map(|n| {
                let mut word = String::new();
                let mut rest = n + SYLLABLES.len();
                while rest > 0 {
                    word.push_str(SYLLABLES[rest % SYLLABLES.len()]);
                    rest /= SYLLABLES.len();
                }
                word
            })
            .collect();
        let mut total = 0.0;
        let cumulative = (1..=VOCABULARY)
            .map(|rank| {
                total += 1.0 / rank as f64;
                total
            })
            .collect();
        Vocabulary { words, cumulative }
    }

    fn draw(&self, random: &mut Random) -> &str {
        let target = random.unit() * self.cumulative[VOCABULARY - 1];
        let rank = self.cumulative.partition_point(|&c| c < target);
        &self.words[rank.min(VOCABULARY - 1)]
    }

    /// A text of `words` words, in sentences.
    fn text(&self, random: &mut Random, words: usize) -> String {
        let mut text = String::new();
        for n in 0..words {
            let word = self.draw(random);
            if n % 12 == 0 {
                if n > 0 {
                    text.push_str(". ");
                }
                let mut chars = word.chars();
                if let Some(first) = chars.next() {
                    text.extend(first.to_uppercase());
                    text.push_str(chars.as_str());
                }
            } else {
                text.push(' ');
                text.push_str(word);
            }
        }
        text.push('.');
        text
    }
}

/// The searches measured, by name.
fn searches(vocabulary: &Vocabulary, first_text: &str) -> Vec<(&'static str, String)> {
    let word = |rank: usize| vocabulary.words[rank].clone();
    let phrase: Vec<&str> = first_text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .skip(3)
        .take(2)
        .collect();
    vec![
        ("a common word", word(2)),
        ("a middling word", word(60)),
        ("a rare word", word(2_500)),
        ("two words", format!("{} {}", word(5), word(120))),
        ("a phrase", format!("\"{}\"", phrase.join(" "))),
    ]
}

async fn measure(backend: &str, database: ScratchDatabase, iterations: usize) {
    let store = database.open(StoreOptions::default()).await;
    println!("{backend}: {}", durable_setting(&store).await);
    let fence = match store
        .leases()
        .acquire(
            &LeaseName::WRITER,
            "search benchmark",
            Duration::from_secs(3600),
        )
        .await
        .expect("acquire")
    {
        Acquisition::Granted(lease) => lease.fence(),
        Acquisition::Held(record) => panic!("held by {}", record.holder),
    };
    let reader = store
        .users()
        .create_user(&NewUser {
            id: UserId("reader".to_owned()),
            name: UserName::new("reader").expect("a user name"),
            password_hash: "$argon2id$bench".to_owned(),
            roles: Default::default(),
        })
        .await
        .expect("create the reader");
    let repository = Repository::new("reader/corpus").expect("a repository name");
    store
        .repositories()
        .create_repository(&fence, &repository, &reader.id)
        .await
        .expect("create the repository");

    let vocabulary = Vocabulary::new();
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    let corpus: Vec<(ChannelId, String, String)> = (0..DOCUMENTS)
        .map(|n| {
            let title = format!("{} {n}", vocabulary.text(&mut random, 4));
            let text = vocabulary.text(&mut random, WORDS_PER_DOCUMENT);
            (ChannelId::random(), title, text)
        })
        .collect();
    let seeding = Instant::now();
    seed_documents(&store, &repository, &corpus).await;
    println!(
        "  seeded {DOCUMENTS} documents of {WORDS_PER_DOCUMENT} words in {:.1} s",
        seeding.elapsed().as_secs_f64()
    );
    search(
        backend,
        &store,
        &reader,
        &vocabulary,
        &corpus[0].2,
        iterations / 5,
    )
    .await;
    for size in COMMIT_TEXTS {
        commits(
            backend,
            &store,
            &fence,
            &repository,
            &vocabulary,
            size,
            iterations,
        )
        .await;
    }
    println!();
    store.storage.close().await;
}

async fn search(
    backend: &str,
    store: &ScratchStorage,
    reader: &User,
    vocabulary: &Vocabulary,
    first_text: &str,
    rounds: usize,
) {
    let kinds = searches(vocabulary, first_text);
    let query = |text: &str| SearchQuery {
        reader: reader.id.clone(),
        terms: SearchTerms::parse(text).expect("a valid search"),
        repository: None,
        include_archived: false,
        after: None,
        limit: PAGE,
    };
    let scope = DocumentScope::MemberOf(reader.id.clone());
    let mut by_kind: Vec<Vec<Duration>> = vec![Vec::new(); kinds.len()];
    let mut all = Vec::new();
    let mut floor = Vec::new();
    let mut found = vec![0; kinds.len()];
    for round in 0..WARMUP + rounds {
        let started = Instant::now();
        let listed = store
            .repositories()
            .documents_page(&scope, false, None, PAGE)
            .await
            .expect("list a page");
        let listing = started.elapsed();
        assert_eq!(listed.len(), PAGE);
        for (kind, (_, text)) in kinds.iter().enumerate() {
            let query = query(text);
            let started = Instant::now();
            let hits = store.search().search(&query).await.expect("search");
            let elapsed = started.elapsed();
            found[kind] = hits.len();
            if round >= WARMUP {
                by_kind[kind].push(elapsed);
                all.push(elapsed);
            }
        }
        if round >= WARMUP {
            floor.push(listing);
        }
    }
    let floor = Summary::of(floor);
    let overall = Summary::of(all);
    println!("  search, first page of {PAGE} over {DOCUMENTS} documents ({rounds} rounds):");
    println!(
        "    {:<34} {:>6} {:>12} {:>12} {:>6}",
        "search", "n", "median us", "p99 us", "hits"
    );
    for ((name, text), (samples, hits)) in kinds.iter().zip(by_kind.into_iter().zip(found)) {
        let summary = Summary::of(samples);
        println!(
            "    {:<34} {:>6} {:>12.1} {:>12.1} {:>6}",
            format!("{name} ({text})"),
            summary.n,
            micros(summary.median),
            micros(summary.p99),
            hits
        );
    }
    println!(
        "    {:<34} {:>6} {:>12.1} {:>12.1}",
        "all searches",
        overall.n,
        micros(overall.median),
        micros(overall.p99)
    );
    println!(
        "    {:<34} {:>6} {:>12.1} {:>12.1}",
        "floor: a listed page",
        floor.n,
        micros(floor.median),
        micros(floor.p99)
    );
    println!(
        "    search vs listed page: median {:.2}x, p99 {:.2}x",
        ratio(overall.median, floor.median),
        ratio(overall.p99, floor.p99)
    );
    for (name, measured, base) in [
        (
            "search, first page of 20 over 10,000 documents, median",
            overall.median,
            floor.median,
        ),
        (
            "search, first page of 20 over 10,000 documents, p99",
            overall.p99,
            floor.p99,
        ),
    ] {
        Figure {
            group: format!("search/{backend}"),
            name,
            unit: "us",
            measured: micros(measured),
            floor: micros(base),
            floor_name: "a listed page of the same documents",
            goal: None,
        }
        .record();
    }
}

/// One document's commits: its text with one word changed each time, with the text (indexed)
/// and without it (the index untouched), interleaved.
async fn commits(
    backend: &str,
    store: &ScratchStorage,
    fence: &Fence,
    repository: &Repository,
    vocabulary: &Vocabulary,
    size: usize,
    iterations: usize,
) {
    let collaboration = store.collaboration();
    let channel = collaboration
        .create_channel(
            fence,
            &NewChannel {
                id: ChannelId::random(),
                repository: repository.clone(),
                title: format!("Commits of {} KB", size / 1024),
                parent: None,
            },
        )
        .await
        .expect("create the document");
    let mut random = Random(size as u64 | 1);
    let mut words = Vec::new();
    let mut length = 0;
    while length < size {
        let word = vocabulary.draw(&mut random).to_owned();
        length += word.len() + 1;
        words.push(word);
    }
    let mut revision = channel.revision;
    let mut operation = 0_u64;
    let mut commit = |with_text: bool, revision: i64| {
        operation += 1;
        // One word changes, as an edit does; the update is about an edit's size.
        let changed = (operation as usize * 7) % words.len();
        words[changed] = vocabulary.draw(&mut random).to_owned();
        Commit {
            channel: channel.id.clone(),
            operation: OperationId::new(format!("bench-{operation}")).expect("an operation ID"),
            expected_revision: revision,
            update: Some(vec![7; 40]),
            sidecar: None,
            events: Vec::new(),
            title: None,
            text: with_text.then(|| words.join(" ")),
        }
    };
    let mut with = Vec::new();
    let mut without = Vec::new();
    for i in 0..WARMUP + iterations {
        for kind in [i % 2 == 0, i % 2 == 1] {
            let request = commit(kind, revision);
            let started = Instant::now();
            let committed = collaboration.commit(fence, &request).await.expect("commit");
            let elapsed = started.elapsed();
            revision = committed.revision;
            if i >= WARMUP {
                if kind {
                    with.push(elapsed);
                } else {
                    without.push(elapsed);
                }
            }
        }
    }
    let (with, without) = (Summary::of(with), Summary::of(without));
    let kb = size / 1024;
    println!("  commit of a {kb} KB document, one word changed ({iterations} each):");
    println!(
        "    {:<34} {:>6} {:>12} {:>12}",
        "commit", "n", "median us", "p99 us"
    );
    for (name, summary) in [
        ("a program's edit (text indexed)", &with),
        ("a live batch (text marked behind)", &without),
    ] {
        println!(
            "    {name:<34} {:>6} {:>12.1} {:>12.1}",
            summary.n,
            micros(summary.median),
            micros(summary.p99)
        );
    }
    println!(
        "    indexed in the commit vs marked behind: median {:.2}x, p99 {:.2}x",
        ratio(with.median, without.median),
        ratio(with.p99, without.p99)
    );
    for (name, measured, base) in [
        (
            format!("commit of a {kb} KB text, indexed, median"),
            with.median,
            without.median,
        ),
        (
            format!("commit of a {kb} KB text, indexed, p99"),
            with.p99,
            without.p99,
        ),
    ] {
        Figure {
            group: format!("search/{backend}"),
            name: &name,
            unit: "us",
            measured: micros(measured),
            floor: micros(base),
            floor_name: "the same commit without text",
            goal: None,
        }
        .record();
    }
}
