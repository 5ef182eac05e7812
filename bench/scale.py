"""``python -m bench.scale``: per-session costs at scale, plain vs hash-partitioned tables (PostgreSQL).

Loads ``--messages`` (default 5,000,000) over ``--sessions`` (default 50,000) with
COPY, and the same shape at ``--small`` messages (default 50,000), once on plain
tables and once on tables hash-partitioned by session_id (``--partitions``, default
16, via ``manage.py partition_tables`` before the load).  Measures, as medians:

* append: ``Session.append_message`` (auto-parent) to an ordinary session and to the deep one;
* history: ``get_history()`` of a 1,000-deep path;
* per-session search: ``Session.search`` of a common word in the deep session;
* cross-session search: ``SessionManager().search`` of a word in ~0.1 % of all messages.

Per-session operations must stay within 1.3x of the small-database figures.
Prints load time and table/index sizes; writes JSON (``--json``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

DEEP = "deep-session"
DEEP_LENGTH = 1_000
WORDS = (
    "kite harbour weather deploy database friday python garden river train ticket invoice budget review meeting "
    "coffee printer laptop server backup network policy summary draft report travel hotel flight window "
    "battery camera recipe lemon orange violet marble copper silver timber canvas pepper"
).split()
RARE = "zephyr"
"""In about one message in a thousand: the cross-session query."""
PER_SESSION_WORD = "kite"
COPY_COLUMNS = "id, session_id, parent_id, role, content, text_content, created_at, tokens, depth, path_tokens"


def session_sizes(messages: int, sessions: int, rng: random.Random) -> list[int]:
    """Sizes of the ordinary sessions (the deep one is extra): skewed like real use, summing exactly."""
    rest = messages - DEEP_LENGTH
    count = max(1, sessions - 1)
    weights = [rng.paretovariate(1.6) for _ in range(count)]
    scale = rest / sum(weights)
    sizes = [max(1, int(w * scale)) for w in weights]
    sizes[0] += rest - sum(sizes)  # rounding goes to one session
    while sizes[0] < 1:  # (only at tiny --messages)
        sizes[sizes.index(max(sizes))] -= 1
        sizes[0] += 1
    return sizes


def session_rows(session_id: str, size: int, rng: random.Random, start: datetime, *, branches: bool = True):
    """One session's rows: a conversation whose every ~15th message regenerates an earlier reply (a branch)."""
    from agent_sessions.tokens import estimate_one_message_tokens

    rows: list[tuple] = []
    stats: list[tuple[int, int]] = []  # (depth, path_tokens) per row
    for i in range(size):
        if i == 0:
            parent = None
        elif branches and i % 15 == 0 and i >= 3:
            parent = i - 3
        else:
            parent = i - 1
        words = rng.choices(WORDS, k=8)
        if rng.random() < 0.001:
            words[rng.randrange(8)] = RARE
        text = " ".join(words)
        role = "user" if i % 2 == 0 else "assistant"
        mid = f"m{i}"
        message = {"id": mid, "role": role, "parts": [{"type": "text", "text": text}]}
        tokens = estimate_one_message_tokens(message)
        depth, path_tokens = (1, tokens) if parent is None else (stats[parent][0] + 1, stats[parent][1] + tokens)
        stats.append((depth, path_tokens))
        created = start + timedelta(seconds=i)
        rows.append(
            (
                mid,
                session_id,
                None if parent is None else f"m{parent}",
                role,
                json.dumps(message, separators=(",", ":")),
                text,
                created,
                tokens,
                depth,
                path_tokens,
            )
        )
    return rows


def load(alias: str, messages: int, sessions: int, *, seed: int = 7, progress: bool = True) -> dict:
    """COPY the synthetic data set into ``alias``; returns rows, sessions and seconds taken."""
    from django.db import connections
    from tqdm import tqdm

    rng = random.Random(seed)
    sizes = session_sizes(messages, sessions, rng)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    raw = connections[alias]
    raw.ensure_connection()
    conn = raw.connection
    began = time.perf_counter()
    with (
        conn.cursor() as cursor,
        tqdm(total=messages, unit="row", desc="COPY", disable=not progress) as bar,
        cursor.copy(f"COPY assistant_messages ({COPY_COLUMNS}) FROM STDIN") as copy,
    ):
        deep = session_rows(DEEP, DEEP_LENGTH, rng, start, branches=False)
        for row in deep:
            copy.write_row(row)
        bar.update(len(deep))
        for n, size in enumerate(sizes):
            for row in session_rows(f"s{n:06d}", size, rng, start):
                copy.write_row(row)
                bar.update(size)
    conn.commit()
    loaded = time.perf_counter() - began
    with conn.cursor() as cursor:
        cursor.execute("ANALYZE assistant_messages")
    conn.commit()
    return {
        "rows": messages,
        "sessions": len(sizes) + 1,
        "load_s": round(loaded, 1),
        "analyze_s": round(time.perf_counter() - began - loaded, 1),
    }


def sizes_of(alias: str) -> dict:
    """Heap and index bytes of assistant_messages (all partitions summed)."""
    from django.db import connections

    with connections[alias].cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(sum(pg_table_size(relid)), 0), COALESCE(sum(pg_indexes_size(relid)), 0) "
            "FROM (SELECT relid FROM pg_partition_tree('assistant_messages') WHERE isleaf "
            "UNION SELECT 'assistant_messages'::regclass) t"  # a plain table is not in its own tree
        )
        table, indexes = cursor.fetchone()
    return {"table_bytes": int(table), "indexes_bytes": int(indexes)}


def measure(alias: str, rounds: int) -> dict[str, float]:
    """Medians (seconds) of the four operations."""
    from agent_sessions import Session, SessionManager
    from agent_sessions.storage import orm

    from .harness import median_of

    deep = Session.create(using=alias).for_session(DEEP)
    assert len(deep.get_history()) == DEEP_LENGTH
    counter = iter(range(10**9))

    def append_to(session_id: str):
        def run():
            s = Session.create(using=alias).for_session(session_id)
            s.append_message(
                {"id": f"bench-{next(counter)}", "role": "user", "parts": [{"type": "text", "text": "one more kite"}]}
            )

        return run

    ordinary = [f"s{n:06d}" for n in range(1, 1 + rounds * 4)]
    out = {
        "append (ordinary session)": median_of(
            lambda: append_to(ordinary[next(counter) % len(ordinary)])(), rounds * 4
        ),
        "append (1,000-deep session)": median_of(append_to(DEEP), rounds * 4),
    }
    # History of the 1,000-deep path itself (the bench appends above hang below its leaf).
    leaf = f"m{DEEP_LENGTH - 1}"
    out["history of a 1,000-deep path"] = median_of(lambda: deep.get_history(leaf), rounds)
    assert len(deep.get_history(leaf)) == DEEP_LENGTH
    out["per-session search"] = median_of(lambda: deep.search(PER_SESSION_WORD), rounds)
    manager = SessionManager(using=alias)
    out["cross-session search"] = median_of(lambda: manager.search(RARE), rounds)
    assert orm.search(RARE, using=alias), "the rare word must match somewhere"
    return out


PER_SESSION = (
    "append (ordinary session)",
    "append (1,000-deep session)",
    "history of a 1,000-deep path",
    "per-session search",
)


def fresh_database(alias: str) -> None:
    """Drop and create the alias's database, then migrate it."""
    from django.core.management import call_command
    from django.db import connections

    from .__main__ import _fresh_postgres

    connections[alias].close()
    _fresh_postgres(connections[alias].settings_dict)
    call_command("migrate", database=alias, verbosity=0, interactive=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=5_000_000)
    parser.add_argument("--sessions", type=int, default=None, help="default: messages / 100")
    parser.add_argument("--small", type=int, default=50_000, help="messages of the reference database")
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--layouts", default="plain,partitioned")
    parser.add_argument("--keep", action="store_true", help="keep the last database (default: drop it)")
    parser.add_argument("--check", action="store_true", help="exit 1 if a per-session ratio is above 1.3")
    parser.add_argument("--json", default="bench/results/scale.json")
    args = parser.parse_args(argv)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    os.environ.setdefault("BENCH_PG_NAME", "agent_sessions_bench_scale")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections

    from .__main__ import _fresh_postgres
    from .harness import fmt_time

    alias = "postgres"
    sessions = args.sessions or max(2, args.messages // 100)
    report: dict = {"messages": args.messages, "sessions": sessions, "small": args.small, "runs": []}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    # Both small runs first: a long large run that gets cut short still leaves the references.
    for messages in (args.small, args.messages):
        for layout in args.layouts.split(","):
            n_sessions = max(2, round(sessions * messages / args.messages))
            print(f"== {layout}: {messages:,} messages over {n_sessions:,} sessions", flush=True)
            fresh_database(alias)
            if layout == "partitioned":
                call_command("partition_tables", partitions=args.partitions, database=alias, no_progress=True)
            run = {"layout": layout, **load(alias, messages, n_sessions), **sizes_of(alias)}
            run["medians_s"] = measure(alias, args.rounds)
            report["runs"].append(run)
            print(
                f"   load {run['load_s']} s (+ ANALYZE {run['analyze_s']} s); "
                f"table {run['table_bytes'] / 2**20:,.0f} MB, indexes {run['indexes_bytes'] / 2**20:,.0f} MB",
                flush=True,
            )
            for name, value in run["medians_s"].items():
                print(f"   {name:<32} {fmt_time(value):>10}", flush=True)
            Path(args.json).write_text(json.dumps(report, indent=2), encoding="utf-8")
    print()
    failed = _print_summary(report, fmt_time)
    if not args.keep:
        connections[alias].close()
        _fresh_postgres(connections[alias].settings_dict, create=False)
    print(f"JSON: {args.json}")
    return 1 if failed and args.check else 0


def _print_summary(report: dict, fmt_time) -> bool:
    """Large ÷ small per layout and operation; True if a per-session ratio is above 1.3."""
    failed = False
    header = f"{'operation':<32} {'layout':<12} {'small':>10} {'large':>10} {'large ÷ small':>14}"
    print(header)
    print("-" * len(header))
    runs = {(r["layout"], r["rows"]): r for r in report["runs"]}
    for layout in dict.fromkeys(r["layout"] for r in report["runs"]):
        small, large = runs.get((layout, report["small"])), runs.get((layout, report["messages"]))
        if not small or not large:
            continue
        for name, value in large["medians_s"].items():
            ratio = value / small["medians_s"][name]
            mark = ""
            if name in PER_SESSION and ratio > 1.3:
                mark, failed = "  > 1.3", True
            print(
                f"{name:<32} {layout:<12} {fmt_time(small['medians_s'][name]):>10} {fmt_time(value):>10} "
                f"{ratio:>13.2f}{mark}"
            )
    return failed


if __name__ == "__main__":
    sys.exit(main())
