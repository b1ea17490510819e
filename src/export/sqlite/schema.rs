//! The tables of a SQLite export, as Datasette and `sqlite-utils` expect them: plural table
//! names, declared foreign keys (Datasette links them), indexes on what is joined and
//! sorted on, and one full-text index made the way `sqlite-utils enable-fts
//! --create-triggers` makes it (`events_fts`, an FTS5 table whose content is `events`, kept
//! in step by the triggers `events_ai`, `events_ad` and `events_au`), which Datasette finds
//! by itself and offers as the search box of `events`.

/// The version of these tables. A file of a newer version is refused (this build cannot
/// know what its tables mean); a new version gets a new number here, and a refresh brings
/// a file of an older one up to it ([`UPGRADES`]).
///
/// 2: `sessions.name`, the name a session goes by now.
/// 3: the prompt cache's tokens and the cost of each model call and turn
/// (`cache_write_tokens`, `cache_read_tokens`, `cost_usd`; a turn's `priced_calls`).
pub const SCHEMA_VERSION: u32 = 3;

/// What a refresh runs on a file of version `n` (in the first element) to bring it to
/// version `n + 1`, in its transaction. A column a version adds comes last in [`TABLES`]
/// too, so an upgraded file and a new one have the same tables.
pub const UPGRADES: &[(u32, &str)] = &[
    (1, "ALTER TABLE sessions ADD COLUMN name TEXT;"),
    (2, CACHE_AND_COST),
];

/// Version 2 to 3: the cache and cost columns, filled from the events a file already holds
/// (a file written by a build that did not know these records has none: its older rows keep
/// NULL, unknown).
const CACHE_AND_COST: &str = "
ALTER TABLE turns ADD COLUMN cache_write_tokens INTEGER;
ALTER TABLE turns ADD COLUMN cache_read_tokens INTEGER;
ALTER TABLE turns ADD COLUMN cost_usd REAL;
ALTER TABLE turns ADD COLUMN priced_calls INTEGER;
ALTER TABLE model_calls ADD COLUMN cache_write_tokens INTEGER;
ALTER TABLE model_calls ADD COLUMN cache_read_tokens INTEGER;
ALTER TABLE model_calls ADD COLUMN cost_usd REAL;
UPDATE model_calls SET
    cache_write_tokens = json_extract(e.detail, '$.cache_write_tokens'),
    cache_read_tokens = json_extract(e.detail, '$.cache_read_tokens'),
    cost_usd = json_extract(e.detail, '$.cost_usd')
FROM events AS e WHERE e.seq = model_calls.seq;
UPDATE turns SET
    cache_write_tokens = c.w, cache_read_tokens = c.r, cost_usd = c.usd, priced_calls = c.p
FROM (SELECT turn,
        sum(json_extract(detail, '$.cache_write_tokens')) AS w,
        sum(json_extract(detail, '$.cache_read_tokens')) AS r,
        sum(json_extract(detail, '$.cost_usd')) AS usd,
        sum(json_extract(detail, '$.priced_calls')) AS p
    FROM events WHERE kind = 'usage_cost' GROUP BY turn) AS c
WHERE c.turn = turns.turn;
";

/// `PRAGMA application_id` of an export ("axoc"): what `file(1)` and our own check read
/// before anything else.
pub const APPLICATION_ID: i32 = 0x6178_6f63;

/// The tables, in dependency order. Times are UTC RFC 3339 text with milliseconds
/// (`2026-01-02T03:04:05.678Z`), which sorts as time does and which Datasette shows as is.
pub const TABLES: &str = r#"
CREATE TABLE _meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE sessions (
    session TEXT PRIMARY KEY,
    created_at TEXT,
    last_activity TEXT,
    turns INTEGER NOT NULL DEFAULT 0,
    agents TEXT,
    name TEXT
);
CREATE TABLE turns (
    turn TEXT PRIMARY KEY,
    seq INTEGER NOT NULL UNIQUE,
    session TEXT NOT NULL REFERENCES sessions(session),
    agent TEXT NOT NULL,
    mode TEXT NOT NULL,
    state TEXT NOT NULL,
    request TEXT NOT NULL,
    answer TEXT NOT NULL,
    answer_object TEXT,
    answer_len INTEGER,
    error TEXT,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    duration_ms INTEGER,
    superseded INTEGER NOT NULL DEFAULT 0,
    retry_of TEXT REFERENCES turns(turn),
    stop_requested INTEGER NOT NULL DEFAULT 0,
    origin_automation TEXT,
    origin_occurrence TEXT,
    origin_trigger TEXT,
    origin_runner TEXT,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    model_calls INTEGER,
    usage_complete INTEGER,
    cache_write_tokens INTEGER,
    cache_read_tokens INTEGER,
    cost_usd REAL,
    priced_calls INTEGER
);
CREATE INDEX turns_session_seq ON turns(session, seq);
CREATE INDEX turns_started_at ON turns(started_at);
CREATE INDEX turns_state ON turns(state);
CREATE TABLE events (
    seq INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    session TEXT REFERENCES sessions(session),
    turn TEXT REFERENCES turns(turn),
    agent TEXT,
    name TEXT,
    at TEXT,
    text TEXT,
    detail TEXT
);
CREATE INDEX events_turn ON events(turn);
CREATE INDEX events_session ON events(session);
CREATE INDEX events_kind ON events(kind);
CREATE TABLE model_calls (
    seq INTEGER PRIMARY KEY REFERENCES events(seq),
    turn TEXT NOT NULL REFERENCES turns(turn),
    agent TEXT NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    reserved_tokens INTEGER NOT NULL,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    finish_reason TEXT,
    at TEXT NOT NULL,
    cache_write_tokens INTEGER,
    cache_read_tokens INTEGER,
    cost_usd REAL
);
CREATE INDEX model_calls_turn_agent ON model_calls(turn, agent);
CREATE INDEX model_calls_model ON model_calls(model);
CREATE TABLE tool_calls (
    seq INTEGER PRIMARY KEY REFERENCES events(seq),
    turn TEXT NOT NULL REFERENCES turns(turn),
    agent TEXT NOT NULL,
    model_call INTEGER REFERENCES model_calls(seq),
    call_id TEXT NOT NULL,
    name TEXT NOT NULL,
    memory_edit INTEGER NOT NULL DEFAULT 0,
    arguments TEXT NOT NULL,
    arguments_object TEXT,
    output TEXT,
    output_object TEXT,
    is_error INTEGER,
    exit_code INTEGER,
    duration_ms INTEGER,
    started_at TEXT NOT NULL,
    ended_at TEXT
);
CREATE INDEX tool_calls_turn_call ON tool_calls(turn, call_id);
CREATE INDEX tool_calls_name ON tool_calls(name);
CREATE TABLE subtasks (
    id INTEGER PRIMARY KEY,
    turn TEXT NOT NULL REFERENCES turns(turn),
    subtask TEXT NOT NULL,
    worker TEXT NOT NULL,
    role TEXT,
    task TEXT,
    depends_on TEXT,
    state TEXT NOT NULL,
    error TEXT,
    output TEXT,
    output_object TEXT,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    model_calls INTEGER,
    started_at TEXT,
    ended_at TEXT
);
CREATE INDEX subtasks_turn ON subtasks(turn, subtask);
CREATE TABLE attachments (
    reference TEXT PRIMARY KEY,
    session TEXT NOT NULL REFERENCES sessions(session),
    name TEXT NOT NULL,
    media_type TEXT NOT NULL,
    size INTEGER NOT NULL,
    scope TEXT NOT NULL,
    object TEXT NOT NULL,
    text_object TEXT,
    text_truncated INTEGER NOT NULL,
    text TEXT,
    ocr TEXT,
    added_at TEXT NOT NULL,
    removed_at TEXT
);
CREATE INDEX attachments_session ON attachments(session);
CREATE TABLE turn_attachments (
    turn TEXT NOT NULL REFERENCES turns(turn),
    reference TEXT NOT NULL REFERENCES attachments(reference),
    name TEXT NOT NULL,
    media_type TEXT NOT NULL,
    size INTEGER NOT NULL,
    PRIMARY KEY (turn, reference)
);
CREATE INDEX turn_attachments_reference ON turn_attachments(reference);
CREATE TABLE automation_runs (
    automation TEXT NOT NULL,
    name TEXT NOT NULL,
    trigger TEXT NOT NULL,
    occurrence TEXT NOT NULL,
    state TEXT NOT NULL,
    session TEXT REFERENCES sessions(session),
    turn TEXT REFERENCES turns(turn),
    runner TEXT NOT NULL,
    runner_pid INTEGER NOT NULL,
    claimed_at TEXT NOT NULL,
    started_at TEXT,
    ended_at TEXT,
    reason TEXT,
    skipped INTEGER,
    PRIMARY KEY (automation, name)
);
CREATE INDEX automation_runs_turn ON automation_runs(turn);
"#;

/// The full-text index of `events.text` (requests, answers, tool arguments and outputs,
/// warnings, plans): external content, so the text is stored once.
pub const FTS_TABLE: &str = "
CREATE VIRTUAL TABLE [events_fts] USING FTS5 (
    [text],
    content=[events],
    content_rowid=[seq]
);
";

/// Fills the index from `events` in one pass (faster than a row at a time for a new file).
pub const FTS_REBUILD: &str = "INSERT INTO [events_fts] ([events_fts]) VALUES ('rebuild');";

/// The triggers that keep the index in step with `events`, as `sqlite-utils` writes them.
pub const FTS_TRIGGERS: &str = "
CREATE TRIGGER [events_ai] AFTER INSERT ON [events] BEGIN
  INSERT INTO [events_fts] (rowid, [text]) VALUES (new.[seq], new.[text]);
END;
CREATE TRIGGER [events_ad] AFTER DELETE ON [events] BEGIN
  INSERT INTO [events_fts] ([events_fts], rowid, [text]) VALUES('delete', old.[seq], old.[text]);
END;
CREATE TRIGGER [events_au] AFTER UPDATE ON [events] BEGIN
  INSERT INTO [events_fts] ([events_fts], rowid, [text]) VALUES('delete', old.[seq], old.[text]);
  INSERT INTO [events_fts] (rowid, [text]) VALUES (new.[seq], new.[text]);
END;
";
