use axocoatl_store::repo::{self, OpenOptions};

use super::*;

fn repo() -> (tempfile::TempDir, Repo) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = repo::init(dir.path()).expect("init");
    let repo = Repo::open(&root, &OpenOptions::default()).expect("open");
    (dir, repo)
}

fn added(text: &str) -> NewRecord {
    NewRecord {
        text: text.to_owned(),
        source: Source {
            turn: None,
            kind: SourceKind::Added,
            at: 1_700_000_000_000,
        },
    }
}

const FACTS: &[&str] = &[
    "My daughter Lena turns seven on the fourth of March.",
    "The production database is PostgreSQL 15 on a machine called orca.",
    "I am allergic to peanuts.",
    "The Wi-Fi password at the cabin is bluefjord42.",
    "Our cat Pixel is afraid of the vacuum cleaner.",
];

fn lexical_only() -> Result<&'static Embedder, EmbedError> {
    Err(EmbedError::FeatureOff)
}

#[cfg(feature = "embeddings")]
fn model() -> &'static Embedder {
    match Embedder::shared() {
        Ok(e) => e,
        Err(e) => panic!("{e}: run scripts/fetch-model.sh first"),
    }
}

#[test]
fn lexical_path_finds_shared_words_and_says_so_once() {
    let (_d, repo) = repo();
    let mut s = SemanticStore::open_with(&repo, "main:coder", lexical_only()).expect("open");
    assert!(
        s.search("anything", 5).expect("search").is_empty(),
        "empty store"
    );
    let facts: Vec<NewRecord> = FACTS.iter().map(|f| added(f)).collect();
    assert_eq!(s.add(&facts).expect("add"), vec![0, 1, 2, 3, 4]);
    let hits = s
        .search("what is the cabin wifi password?", 3)
        .expect("search");
    assert_eq!(hits[0].id, 3);
    assert_eq!(hits[0].text, FACTS[3]);
    assert_eq!(hits[0].source.kind, SourceKind::Added);
    assert!(hits[0].score > 0.0 && hits[0].score < 1.0);
    let status = s.status().expect("status");
    assert_eq!(status.path, RecallPath::Lexical);
    assert_eq!(status.records, 5);
    assert!(status
        .reason
        .as_deref()
        .unwrap_or("")
        .contains("without the `embeddings` feature"));
    let warning = s.path_warning().expect("warning").expect("first time");
    assert!(warning.contains("lexical fallback"), "{warning}");
    assert_eq!(s.path_warning().expect("warning"), None, "only once");
    let mut again = SemanticStore::open_with(&repo, "main:coder", lexical_only()).expect("open");
    assert_eq!(
        again.path_warning().expect("warning"),
        None,
        "not per process either"
    );
    assert_eq!(
        again.reindex().expect("reindex"),
        Reindexed {
            path: RecallPath::Lexical,
            records: 5
        }
    );
    assert_eq!(again.status().expect("status").indexed, 5);
}

#[test]
fn stores_are_scoped_by_agent_and_survive_reopening() {
    let (_d, repo) = repo();
    let mut a = SemanticStore::open_with(&repo, "main:a", lexical_only()).expect("open");
    a.add(&[added("the launch code is tangerine")])
        .expect("add");
    let mut b = SemanticStore::open_with(&repo, "main:b", lexical_only()).expect("open");
    assert!(b.search("launch code", 5).expect("search").is_empty());
    drop(a);
    let mut a = SemanticStore::open_with(&repo, "main:a", lexical_only()).expect("open");
    assert_eq!(a.search("launch code", 5).expect("search").len(), 1);
}

#[test]
fn long_text_is_chunked_into_several_records() {
    let (_d, repo) = repo();
    let mut s = SemanticStore::open_with(&repo, "main:c", lexical_only()).expect("open");
    let long: String = (0..300).map(|i| format!("word{i} ")).collect();
    let ids = s
        .add(&[added(&long), added("  "), added("short")])
        .expect("add");
    assert_eq!(ids, vec![0, 1, 2, 3]);
    let hits = s.search("word250", 5).expect("search");
    assert_eq!(hits[0].id, 2);
}

#[cfg(feature = "embeddings")]
#[test]
fn neural_path_recalls_by_meaning() {
    let (_d, repo) = repo();
    let mut s = SemanticStore::open_with(&repo, "main:n", Ok(model())).expect("open");
    let facts: Vec<NewRecord> = FACTS.iter().map(|f| added(f)).collect();
    s.add(&facts).expect("add");
    for (question, want) in [
        ("When is my little girl's birthday?", 0),
        ("Which SQL engine holds our live data?", 1),
        ("Which nut makes me sick?", 2),
        ("What scares the pet?", 4),
    ] {
        let hits = s.search(question, 2).expect("search");
        assert_eq!(hits[0].id, want, "{question}: {hits:?}");
        assert!(hits[0].score > hits[1].score);
    }
    let status = s.status().expect("status");
    assert_eq!(
        (status.path, status.records, status.indexed),
        (RecallPath::Neural, 5, 5)
    );
    assert_eq!(status.reason, None);
    assert_eq!(s.path_warning().expect("warning"), None);
}

#[cfg(feature = "embeddings")]
#[test]
fn switching_to_neural_catches_up_or_asks_for_a_reindex() {
    let (_d, repo) = repo();
    let mut lex = SemanticStore::open_with(&repo, "main:s", lexical_only()).expect("open");
    lex.add(&[added(FACTS[2])]).expect("add");
    // A few records without vectors are embedded by the next search.
    let mut s = SemanticStore::open_with(&repo, "main:s", Ok(model())).expect("open");
    assert_eq!(s.status().expect("status").path, RecallPath::Neural);
    assert_eq!(
        s.search("Which nut makes me sick?", 1).expect("search")[0].id,
        0
    );
    assert_eq!(s.status().expect("status").indexed, 1);
    // Many need a reindex; until then the lexical path answers.
    let many: Vec<NewRecord> = (0..CATCH_UP + 5)
        .map(|i| added(&format!("filler note {i}")))
        .collect();
    lex.add(&many).expect("add");
    let mut s = SemanticStore::open_with(&repo, "main:s", Ok(model())).expect("open");
    let status = s.status().expect("status");
    assert_eq!(status.path, RecallPath::Lexical);
    assert!(
        status
            .reason
            .as_deref()
            .unwrap_or("")
            .contains("vectors cover 1 of 70"),
        "{status:?}"
    );
    assert!(status
        .hint
        .as_deref()
        .unwrap_or("")
        .contains("memory reindex"));
    assert_eq!(s.search("filler note 7", 1).expect("search")[0].id, 8);
    assert_eq!(
        s.reindex().expect("reindex"),
        Reindexed {
            path: RecallPath::Neural,
            records: 70
        }
    );
    let status = s.status().expect("status");
    assert_eq!((status.path, status.indexed), (RecallPath::Neural, 70));
}

#[cfg(feature = "embeddings")]
#[test]
fn absent_model_files_mean_the_lexical_path_with_the_file_named() {
    let (_d, repo) = repo();
    let empty = tempfile::tempdir().expect("tempdir");
    let missing = Embedder::load(&crate::memory::embed::ModelFiles::in_dir(empty.path()));
    let mut s =
        SemanticStore::open_with(&repo, "main:m", missing.map(|e| &*Box::leak(Box::new(e))))
            .expect("open");
    s.add(&[added(FACTS[3])]).expect("add");
    let status = s.status().expect("status");
    assert_eq!(status.path, RecallPath::Lexical);
    let model = empty.path().join("model.onnx");
    assert!(status
        .reason
        .as_deref()
        .unwrap_or("")
        .contains(&model.display().to_string()));
    assert!(status
        .hint
        .as_deref()
        .unwrap_or("")
        .contains("axocoatl models fetch"));
    assert_eq!(s.search("cabin password", 1).expect("search")[0].id, 0);
}

#[test]
fn concurrent_writers_lose_nothing() {
    let (_d, repo) = repo();
    let root = repo.root().to_owned();
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let root = root.clone();
            std::thread::spawn(move || {
                let repo = Repo::open(&root, &OpenOptions::default()).expect("open");
                let mut s =
                    SemanticStore::open_with(&repo, "main:w", lexical_only()).expect("open");
                for i in 0..10 {
                    s.add(&[added(&format!("writer{w} note{i}"))]).expect("add");
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer");
    }
    let mut s = SemanticStore::open_with(&repo, "main:w", lexical_only()).expect("open");
    assert_eq!(s.len(), 30);
    for w in 0..3 {
        for i in 0..10 {
            let hits = s.search(&format!("writer{w} note{i}"), 1).expect("search");
            assert_eq!(hits[0].text, format!("writer{w} note{i}"));
        }
    }
}

#[test]
fn a_pre_1_0_store_is_read_while_the_current_one_is_absent_and_never_written() {
    let (_d, repo) = repo();
    // A store written at the pre-1.0 path of main:coder (same format, no v1 directory).
    let old = repo.path("memory/semantic").join("main%3acoder");
    {
        let mut s = SemanticStore::open_with(&repo, "main:coder", lexical_only()).expect("open");
        let facts: Vec<NewRecord> = FACTS.iter().map(|f| added(f)).collect();
        s.add(&facts).expect("add");
        let current = repo.path("memory/semantic/v1").join("main%3acoder");
        std::fs::create_dir_all(&old).expect("mkdir");
        std::fs::rename(current.join("records"), old.join("records")).expect("move");
        std::fs::remove_dir_all(&current).expect("rm");
    }
    let before = std::fs::read(old.join("records")).expect("read");
    let mut s = SemanticStore::open_with(&repo, "main:coder", lexical_only()).expect("open");
    assert_eq!(s.len(), FACTS.len() as u64);
    let hits = s
        .search("what is the cabin wifi password?", 1)
        .expect("search");
    assert_eq!(hits[0].text, FACTS[3]);
    // The first write starts the current store from the old records.
    assert_eq!(
        s.add(&[added("The boat is called Ingrid.")]).expect("add"),
        vec![5]
    );
    let current = repo.path("memory/semantic/v1/main%3acoder/records");
    assert!(current.is_file());
    assert_eq!(std::fs::read(old.join("records")).expect("read"), before);
    let mut s = SemanticStore::open_with(&repo, "main:coder", lexical_only()).expect("open");
    assert_eq!(s.len(), 6);
    assert_eq!(s.search("boat name", 1).expect("search")[0].id, 5);
    // Another agent id does not see it; a symbolic link at the old path is not followed.
    let other = SemanticStore::open_with(&repo, "main:other", lexical_only()).expect("open");
    assert!(other.is_empty());
    std::os::unix::fs::symlink(&old, repo.path("memory/semantic").join("main%3alinked"))
        .expect("symlink");
    let linked = SemanticStore::open_with(&repo, "main:linked", lexical_only()).expect("open");
    assert!(linked.is_empty());
}

#[test]
fn recent_records_are_the_newest_after_a_time_oldest_first() {
    let (_dir, repo) = repo();
    let mut s = SemanticStore::open_with(&repo, "main:a", lexical_only()).expect("open");
    for (i, at) in [10, 20, 30, 40].into_iter().enumerate() {
        s.add(&[NewRecord {
            text: format!("fact {i}"),
            source: Source {
                turn: None,
                kind: SourceKind::Added,
                at,
            },
        }])
        .expect("add");
    }
    let texts = |hits: Vec<Hit>| hits.into_iter().map(|h| h.text).collect::<Vec<_>>();
    assert_eq!(
        texts(s.recent(None, 10).expect("all")),
        ["fact 0", "fact 1", "fact 2", "fact 3"]
    );
    assert_eq!(
        texts(s.recent(None, 2).expect("newest")),
        ["fact 2", "fact 3"]
    );
    assert_eq!(
        texts(s.recent(Some(20), 10).expect("since")),
        ["fact 2", "fact 3"]
    );
    assert!(s.recent(Some(40), 10).expect("none").is_empty());
}

/// Cuts the records file after its first `keep` records, as a power cut does to frames
/// written without fsync, and leaves the caches (vectors, lexical) as they were.
fn lose_records_after(repo: &Repo, agent: &str, keep: u64) {
    let path = SemanticDir::new(repo, agent).file(RECORDS_FILE);
    let at = Records::open(&path).expect("open").offset(keep);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open");
    file.set_len(at).expect("cut");
}

/// Records lost to a power cut are never answered for by a cache that outlived them: the
/// next append replaces their vector rows and drops a lexical index covering them.
fn lost_records_leave_no_stale_cache(embedder: Result<&'static Embedder, EmbedError>) {
    let (_d, repo) = repo();
    let mut s = SemanticStore::open_with(&repo, "main:p", embedder.clone()).expect("open");
    let facts: Vec<NewRecord> = FACTS.iter().map(|f| added(f)).collect();
    s.add(&facts).expect("add");
    s.reindex().expect("reindex");
    lose_records_after(&repo, "main:p", 3);
    let mut s = SemanticStore::open_with(&repo, "main:p", embedder.clone()).expect("open");
    assert_eq!(s.len(), 3);
    let boat = "The boat is called Ingrid and sails from Bergen.";
    let kettle = "The kettle in the office is the blue one.";
    // As many records as were lost: a cache covering the old ones would look complete.
    assert_eq!(
        s.add(&[added(boat), added(kettle)]).expect("add"),
        vec![3, 4]
    );
    let hits = s.search("What is the boat called?", 1).expect("search");
    assert_eq!((hits[0].id, hits[0].text.as_str()), (3, boat), "{hits:?}");
    // It answers as a store that never held the lost records does.
    let mut never = SemanticStore::open_with(&repo, "main:q", embedder).expect("open");
    let same: Vec<NewRecord> = FACTS[..3]
        .iter()
        .chain([&boat, &kettle])
        .map(|f| added(f))
        .collect();
    never.add(&same).expect("add");
    for query in [
        "What is the Wi-Fi password at the cabin? bluefjord42",
        "Is the cat afraid of the vacuum?",
        "boat",
    ] {
        let answer = |s: &mut SemanticStore| -> Vec<(u64, String, String)> {
            let hits = s.search(query, 4).expect("search");
            hits.into_iter()
                .map(|h| (h.id, h.text, format!("{:.4}", h.score)))
                .collect()
        };
        assert_eq!(answer(&mut s), answer(&mut never), "{query}");
    }
    assert_eq!(s.status().expect("status").records, 5);
}

#[test]
fn lost_records_leave_no_stale_lexical_index() {
    lost_records_leave_no_stale_cache(lexical_only());
}

#[cfg(feature = "embeddings")]
#[test]
fn lost_records_leave_no_stale_vector_rows() {
    lost_records_leave_no_stale_cache(Ok(model()));
}

#[test]
fn a_store_holding_only_excluded_exchanges_is_not_searched() {
    let (_d, repo) = repo();
    let mut s = SemanticStore::open_with(&repo, "main:coder", lexical_only()).expect("open");
    let exchange = |turn: &str, text: &str| NewRecord {
        text: text.to_owned(),
        source: Source {
            turn: Some(turn.to_owned()),
            kind: SourceKind::Exchange,
            at: 1_700_000_000_000,
        },
    };
    let window =
        |turns: &[&str]| -> HashSet<String> { turns.iter().map(|t| (*t).to_owned()).collect() };
    assert!(s.only_of_turns(&window(&[])).expect("empty store"));
    s.add(&[
        exchange(
            "t1",
            "User: the cabin wifi password?\nAssistant: bluefjord42",
        ),
        exchange("t2", "User: and the cabin address?\nAssistant: Fjordvei 3"),
    ])
    .expect("add");
    assert!(s.only_of_turns(&window(&["t1", "t2"])).expect("read"));
    assert!(!s.only_of_turns(&window(&["t2"])).expect("read"));
    let found = |s: &mut SemanticStore, turns: &[&str]| {
        crate::memory::recall::search_excluding(s, "cabin wifi", 5, &window(turns), None)
            .expect("search")
            .len()
    };
    assert_eq!(found(&mut s, &["t1", "t2"]), 0);
    assert_eq!(found(&mut s, &["t2"]), 1);
    s.add(&[added("The cabin has no mobile signal.")])
        .expect("add");
    assert!(!s.only_of_turns(&window(&["t1", "t2"])).expect("read"));
    assert_eq!(found(&mut s, &["t1", "t2"]), 1);
}
