"""Fork of an n-message session (one bulk copy) against n single appends (what a per-message fork costs).

    python -m bench.fork [n] [alias]       # standalone: migrates bench.settings' database first

``run()`` returns the timings and query counts; the bench runner can call it
with any configured alias.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .harness import script_main


def _message(i: int) -> dict:
    role = "user" if i % 2 == 0 else "assistant"
    text = f"message {i}: " + "the quick brown fox jumps over the lazy dog " * 4
    return {"id": f"m{i}", "role": role, "parts": [{"type": "text", "text": text}]}


def _progress(label: str, done: int, total: int) -> None:
    step = max(1, total // 10)
    if done == total or done % step == 0:
        print(f"  {label}: {done}/{total}", file=sys.stderr, flush=True)


@contextmanager
def _counting(connection) -> Iterator[list[int]]:
    """Count statements sent on ``connection`` (no query log: it caps at 9000)."""
    count = [0]

    def wrapper(execute, sql, params, many, context):
        count[0] += 1
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        yield count


def run(n: int = 10_000, using: str = "default") -> dict[str, Any]:
    """Time n single appends, one ``append_all`` of n, and a fork at the n-th message; print the ratio."""
    from django.db import connections

    from agent_sessions import SessionManager

    manager = SessionManager(using=using)
    single = manager.create("bench: single appends").id
    batch = manager.create("bench: append_all").id
    created = [single, batch]
    try:
        session = manager.get_session(single)
        with _counting(connections[using]) as appends:
            start = time.perf_counter()
            for i in range(n):
                session.append_message(_message(i))
                _progress("single appends", i + 1, n)
            append_s = time.perf_counter() - start

        messages = [_message(i) for i in range(n)]
        with _counting(connections[using]) as bulk:
            start = time.perf_counter()
            manager.append_all(batch, messages)
            append_all_s = time.perf_counter() - start
        _progress("append_all", n, n)

        with _counting(connections[using]) as copy:
            start = time.perf_counter()
            forked = manager.fork(single, f"m{n - 1}", "bench: fork")
            fork_s = time.perf_counter() - start
        created.append(forked.id)
        _progress("fork", n, n)
        assert manager.get_message_count(forked.id) == n
    finally:
        for session_id in created:
            manager.delete(session_id)

    result = {
        "n": n,
        "database": connections[using].vendor,
        "single_appends_s": append_s,
        "single_appends_queries": appends[0],
        "append_all_s": append_all_s,
        "append_all_queries": bulk[0],
        "fork_s": fork_s,
        "fork_queries": copy[0],
        "ratio_single_appends_over_fork": append_s / fork_s if fork_s else float("inf"),
    }
    print(
        f"fork of {n} messages on {result['database']}: {fork_s:.3f} s in {result['fork_queries']} queries; "
        f"{n} single appends: {append_s:.3f} s in {result['single_appends_queries']} queries "
        f"(ratio {result['ratio_single_appends_over_fork']:.1f}×); "
        f"append_all: {append_all_s:.3f} s in {result['append_all_queries']} queries"
    )
    return result


def main(argv: list[str]) -> None:
    """``python -m bench.fork [n] [database]``."""
    script_main(argv, run, 10_000)


if __name__ == "__main__":
    main(sys.argv[1:])
