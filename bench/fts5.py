#!/usr/bin/env python3
"""SQLite FTS5 beside `axocoatl history --search`: the same rows, a MATCH query.

    bench/fts5.py build DB JSONL     # loads turn, session, request, output into an FTS5 table
    bench/fts5.py query DB WORD...   # times `MATCH` for each word, ids alone and with the
                                     # rows' text (medians of 101, or 5 for a slow one; in-process)
    bench/fts5.py once DB WORD       # one `MATCH`, printing the turn ids (timed as a process)

Prints one line per figure. Uses only Python's standard library (sqlite3).
"""
import json
import sqlite3
import sys
import time


def build(db, jsonl):
    start = time.monotonic()
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    con.execute("DROP TABLE IF EXISTS turns")
    con.execute("CREATE VIRTUAL TABLE turns USING fts5(turn UNINDEXED, session UNINDEXED, request, output)")
    batch = []
    with open(jsonl, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            batch.append((r["turn"], r["session"], r["request"], r["output"]))
            if len(batch) >= 10000:
                con.executemany("INSERT INTO turns VALUES (?, ?, ?, ?)", batch)
                batch.clear()
    con.executemany("INSERT INTO turns VALUES (?, ?, ?, ?)", batch)
    con.commit()
    con.close()
    print(f"sqlite FTS5 ({sqlite3.sqlite_version}): table built in {time.monotonic() - start:.1f} s")


def timed(con, sql, word, runs):
    """Median of `runs` runs of `sql` for `word` (ms), and the rows it returned."""
    times = []
    rows = 0
    for _ in range(runs):
        start = time.perf_counter()
        rows = len(con.execute(sql, ('"' + word + '"',)).fetchall())
        times.append(time.perf_counter() - start)
    times.sort()
    return times[runs // 2] * 1e3, rows


def query(db, words):
    con = sqlite3.connect(db)
    for word in words:
        # A quick query is timed 101 times (the first warms SQLite's page cache, as ours warms
        # its indexes), a long one 5 times.
        runs = 101 if timed(con, "SELECT turn FROM turns WHERE turns MATCH ?", word, 1)[0] < 100 else 5
        ids, rows = timed(con, "SELECT turn FROM turns WHERE turns MATCH ?", word, runs)
        whole, _ = timed(con, "SELECT turn, session, request, output FROM turns WHERE turns MATCH ?", word, runs)
        print(
            f"sqlite FTS5 MATCH {word!r}: {ids:.2f} ms ({rows} rows; median of {runs}, in-process); "
            f"returning the rows' text too (turn, session, request, output), as a search that "
            f"prints the turns needs: {whole:.2f} ms"
        )


def once(db, word):
    con = sqlite3.connect(db)
    for (turn,) in con.execute("SELECT turn FROM turns WHERE turns MATCH ?", ('"' + word + '"',)):
        print(turn)


if __name__ == "__main__":
    if sys.argv[1] == "build":
        build(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "once":
        once(sys.argv[2], sys.argv[3])
    else:
        query(sys.argv[2], sys.argv[3:])
