"""Search latency: our ``search()`` against the equivalent hand-written SQL on the same index.

    python -m bench.search [rows] [alias]     # standalone: bench.settings ("default" = SQLite, "postgres")

``run(rows, using)`` loads ``rows`` generated messages (English and Japanese,
100 sessions) with one ``executemany`` (SQLite) or ``COPY`` (Postgres), then
times the median latency of ``storage.orm.search`` and of the hand-written
SQL an expert would write for the same results (same index, ranking,
snippets), for an English, a Japanese (trigram) and a two-character Japanese
(bounded scan) query. It prints and returns the ratios ours ÷ raw.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from .harness import script_main

ROUNDS = 15
SESSIONS = 100
EN_WORDS = [f"w{i:04d}" for i in range(3000)] + ["database", "weather", "kyoto", "invoice", "release"]
JA_WORDS = ["天気", "京都", "請求書", "データベース", "会社", "予定", "確認", "資料", "開発", "担当", "報告", "来週"]
QUERIES = {"english": "deploying friday", "japanese": "デプロイ", "japanese_2_chars": "会議"}


def _text(i: int, rng: random.Random) -> str:
    """Every 3rd message is Japanese; 1 % carry the English or Japanese needle."""
    if i % 3 == 0:
        words = rng.sample(JA_WORDS, 6)
        if i % 100 == 3:
            words[2:4] = ["金曜日に", "デプロイ"]
        if i % 100 == 33:
            words[1] = "会議"
        return "".join(words) + "します。"
    words = rng.sample(EN_WORDS, 12)
    if i % 100 == 7:
        words[3:5] = ["deployment", "Friday"]
    return " ".join(words)


def _rows(
    rows: int, tag: str, text_of: Callable[[int, random.Random], str] = _text, seed: int = 7, sessions: int = SESSIONS
) -> Iterator[tuple]:
    """``rows`` message rows spread over ``sessions`` sessions named ``<tag>-<n>``, texts from ``text_of``."""
    rng = random.Random(seed)
    per_session = max(1, rows // sessions)
    for i in range(rows):
        text = text_of(i, rng)
        role = "user" if i % 2 == 0 else "assistant"
        content = json.dumps({"id": f"m{i}", "role": role, "parts": [{"type": "text", "text": text}]})
        yield (f"m{i}", f"{tag}-{i // per_session}", None, role, content, text, len(text) // 4 + 4, 1)


_COLUMNS = "id, session_id, parent_id, role, content, text_content, tokens, depth"


def _progress(done: int, total: int) -> None:
    if done == total or done % max(1, total // 10) == 0:
        print(f"  loading: {done:,}/{total:,} rows", file=sys.stderr, flush=True)


def load(rows: int, using: str, tag: str, **generate: Any) -> float:
    """Insert ``rows`` generated messages (executemany / COPY; ``generate``: :func:`_rows`'s options);
    returns the seconds it took."""
    from django.db import connections, transaction

    wrapper = connections[using]
    start = time.perf_counter()
    batch_size = 50_000
    with transaction.atomic(using=using), wrapper.cursor() as cursor:
        raw = cursor.cursor
        if wrapper.vendor == "postgresql":
            with raw.copy(f"COPY assistant_messages ({_COLUMNS}) FROM STDIN") as copy:
                for n, row in enumerate(_rows(rows, tag, **generate), 1):
                    copy.write_row(row)
                    if n % batch_size == 0 or n == rows:
                        _progress(n, rows)
        else:
            sql = f"INSERT INTO assistant_messages ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            batch: list[tuple] = []
            for n, row in enumerate(_rows(rows, tag, **generate), 1):
                batch.append(row)
                if len(batch) == batch_size or n == rows:
                    raw.executemany(sql, batch)
                    batch.clear()
                    _progress(n, rows)
    if wrapper.vendor == "postgresql":
        with wrapper.cursor() as cursor:
            cursor.execute("ANALYZE assistant_messages")
    return time.perf_counter() - start


def _median(fn: Callable[[], Any], rounds: int) -> float:
    fn()  # warm caches
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# The hand-written SQL: what one would type for the same hits, order and snippets.
_SQLITE_RAW = {
    "english": (
        "SELECT m.id, m.role, m.text_content, m.created_at, m.session_id, "
        "snippet(assistant_fts, -1, '**', '**', '…', 12) FROM assistant_messages m "
        "JOIN assistant_fts ON assistant_fts.rowid = m.seq WHERE assistant_fts MATCH ? "
        "ORDER BY bm25(assistant_fts, 1.0, 0.25), m.seq LIMIT 20",
        # deploying/deployment stem apart in Porter (deploi/deploy): match both spellings.
        ['("deploying" OR "deployness") AND ("friday")'],
    ),
    "japanese": (
        "SELECT m.id, m.role, m.text_content, m.created_at, m.session_id, "
        "snippet(assistant_fts_trigram, -1, '**', '**', '…', 32) FROM assistant_messages m "
        "JOIN assistant_fts_trigram ON assistant_fts_trigram.rowid = m.seq WHERE assistant_fts_trigram MATCH ? "
        "ORDER BY bm25(assistant_fts_trigram, 1.0, 0.25), m.seq LIMIT 20",
        ['"デプロイ"'],
    ),
    "japanese_2_chars": (
        "SELECT id, role, text_content, created_at, session_id FROM ("
        "SELECT * FROM assistant_messages ORDER BY seq DESC LIMIT ?) m WHERE instr(text_content, ?) > 0 "
        "ORDER BY (length(text_content) - length(replace(text_content, ?, ''))) / 2 DESC, seq LIMIT 20",
        [50_000, "会議", "会議"],
    ),
}
_PG_RAW = {
    "english": (
        "SELECT hit.id, hit.role, hit.text_content, hit.created_at, hit.session_id, "
        "ts_headline('english', hit.text_content, q, 'StartSel=**, StopSel=**, MaxWords=24, MinWords=8, "
        "ShortWord=2, MaxFragments=2') FROM (SELECT m.*, ts_rank_cd(content_tsv, q, 1) AS r "
        "FROM assistant_messages m, plainto_tsquery('english', %s) q WHERE content_tsv @@ q "
        "ORDER BY r DESC, seq LIMIT 20) hit, plainto_tsquery('english', %s) q ORDER BY hit.r DESC, hit.seq",
        ["deploying friday", "deploying friday"],
    ),
    "japanese": (
        "SELECT id, role, text_content, created_at, session_id FROM assistant_messages "
        "WHERE text_content LIKE %s ORDER BY "
        "(length(text_content) - length(replace(text_content, 'デプロイ', ''))) / 4 DESC, seq LIMIT 20",
        ["%デプロイ%"],
    ),
    "japanese_2_chars": (
        "SELECT id, role, text_content, created_at, session_id FROM ("
        "SELECT * FROM assistant_messages ORDER BY seq DESC LIMIT %s) m WHERE text_content LIKE %s "
        "ORDER BY (length(text_content) - length(replace(text_content, '会議', ''))) / 2 DESC, seq LIMIT 20",
        [50_000, "%会議%"],
    ),
}


def run(rows: int = 1_000_000, using: str = "default", *, rounds: int = ROUNDS, cleanup: bool = True) -> dict:
    """Load ``rows`` messages into ``using``, time ours vs raw per query, print and return the figures."""
    from django.db import connections

    from agent_sessions.storage import orm

    wrapper = connections[using]
    wrapper.ensure_connection()
    tag = f"bench-search-{uuid.uuid4().hex[:8]}"
    load_s = load(rows, using, tag)
    raw_sql = _PG_RAW if wrapper.vendor == "postgresql" else _SQLITE_RAW
    result: dict[str, Any] = {"rows": rows, "database": wrapper.vendor, "load_s": round(load_s, 2), "queries": {}}
    try:
        for name, query in QUERIES.items():
            sql, params = raw_sql[name]

            def raw(sql=sql, params=params):
                cur = wrapper.connection.cursor()
                cur.execute(sql, params)
                return cur.fetchall()

            def ours(query=query):
                return orm.search(query, limit=20, using=using)

            hits = len(ours())
            raw_hits = len(raw())
            ours_s, raw_s = _median(ours, rounds), _median(raw, rounds)
            result["queries"][name] = {
                "query": query,
                "hits": hits,
                "raw_hits": raw_hits,
                "ours_ms": round(ours_s * 1e3, 3),
                "raw_ms": round(raw_s * 1e3, 3),
                "ratio": round(ours_s / raw_s, 2) if raw_s else None,
            }
    finally:
        if cleanup:
            with wrapper.cursor() as cursor:
                cursor.execute("DELETE FROM assistant_messages WHERE session_id LIKE %s", [tag + "-%"])
    _print(result)
    return result


def _print(result: dict) -> None:
    print(f"search over {result['rows']:,} rows on {result['database']} (loaded in {result['load_s']} s)")
    print(f"  {'query':<18} {'hits':>5} {'ours':>11} {'raw SQL':>11} {'ours ÷ raw':>11}")
    for name, q in result["queries"].items():
        print(f"  {name:<18} {q['hits']:>5} {q['ours_ms']:>8.3f} ms {q['raw_ms']:>8.3f} ms {q['ratio']:>11}")


def main(argv: list[str]) -> None:
    """``python -m bench.search [rows] [database]``."""
    script_main(argv, run, 1_000_000)


if __name__ == "__main__":
    main(sys.argv[1:])
