"""Benchmark: append cost with auto-compaction configured, at 10 vs ``n`` messages.

Every append of a session with ``compact_after`` runs the threshold check.  Its cost
must not follow the history length: the target is ``ratio ≤ 1.3`` (large / small,
median per append).  The same appends without ``compact_after`` (``plain_ratio``) and
the threshold check alone (``check_ratio``) separate the storage's share from the
check's.  Both sessions carry an overlay over most of their path, as a long-running
compacted conversation does, so the check also swaps overlays for their summaries;
the threshold is never reached, so nothing is summarised.

``run()`` expects Django set up and the database migrated; ``python bench/autocompact.py``
does both on a throw-away test database.
"""

from __future__ import annotations

import statistics
import sys
import time
import uuid

ROUNDS = 200
TARGET_RATIO = 1.3


def _progress(text: str) -> None:
    print(f"[autocompact] {text}", file=sys.stderr, flush=True)


def _message(mid: str, i: int) -> dict:
    role = "user" if i % 2 == 0 else "assistant"
    return {"id": mid, "role": role, "parts": [{"type": "text", "text": f"message {i}: " + "lorem ipsum " * 8}]}


def _never(prompt: str) -> str:
    raise AssertionError("the benchmark threshold is never reached")


def _session(size: int, using: str):
    """A session of ``size`` messages in one chain, an overlay over most of it, auto-compaction on."""
    from agent_sessions import Session, create_compact_function

    session_id = f"bench-autocompact-{size}-{uuid.uuid4().hex[:8]}"
    session = (
        Session.create(using=using)
        .for_session(session_id)
        .on_compaction(create_compact_function(_never))
        .compact_after(10**15)
    )
    batch = 2_000
    for start in range(0, size, batch):
        chunk = [_message(f"m{i}", i) for i in range(start, min(size, start + batch))]
        session.storage.append_messages_bulk(chunk)
        _progress(f"{session_id}: {min(size, start + batch)}/{size} messages")
    session.add_compaction("summary of the earlier conversation " * 10, "m1", f"m{max(1, size - 5)}")
    _analyze(using)
    return session


def _analyze(using: str) -> None:
    """Refresh planner statistics after a bulk load, as autovacuum would shortly after."""
    from django.db import connections

    if connections[using].vendor == "postgresql":
        with connections[using].cursor() as cursor:
            cursor.execute("ANALYZE assistant_messages")


def _append_seconds(session, i: int) -> float:
    started = time.perf_counter()
    session.append_message(_message(f"new{i}", i))
    return time.perf_counter() - started


def _check_seconds(session, leaf_id: str) -> float:
    started = time.perf_counter()
    session.compaction.estimate_tokens(leaf_id)
    return time.perf_counter() - started


def _plain_twin(session):
    """The same stored session without auto-compaction: the baseline append."""
    from agent_sessions import Session

    return Session.create(using=session.storage.using).for_session(session.session_id)


def _cleanup(sessions, using: str) -> None:
    from agent_sessions.models import Compaction, CompactionJob, Message

    ids = [s.session_id for s in sessions]
    Message.objects.using(using).filter(session_id__in=ids).delete()
    Compaction.objects.using(using).filter(session_id__in=ids).delete()
    CompactionJob.objects.using(using).filter(session_id__in=ids).delete()


def run(n: int = 10_000, using: str = "default") -> dict:
    """Median append time with ``compact_after`` configured at 10 and ``n`` messages, and their ratio."""
    small, large = _session(10, using), _session(n, using)
    try:
        for i in range(10):  # warm up connections, caches and the query planner
            _append_seconds(small, -1 - i)
            _append_seconds(large, -1 - i)
        small_plain, large_plain = _plain_twin(small), _plain_twin(large)
        times: dict[str, list[float]] = {"small": [], "large": [], "small_plain": [], "large_plain": []}
        for i in range(ROUNDS):  # interleaved, so drift hits every side alike
            times["small"].append(_append_seconds(small, 2 * i))
            times["large"].append(_append_seconds(large, 2 * i))
            times["small_plain"].append(_append_seconds(small_plain, 2 * i + 1))
            times["large_plain"].append(_append_seconds(large_plain, 2 * i + 1))
            if (i + 1) % 50 == 0:
                _progress(f"appends: {i + 1}/{ROUNDS}")
        leaf = f"new{2 * ROUNDS - 1}"
        small_check = statistics.median(_check_seconds(small, leaf) for _ in range(50))
        large_check = statistics.median(_check_seconds(large, leaf) for _ in range(50))
        assert large.get_compactions()
        assert len(large.get_history()) < 30 + 2 * ROUNDS
    finally:
        _cleanup([small, large], using)
    ms = {key: statistics.median(values) * 1000 for key, values in times.items()}
    ratio = ms["large"] / ms["small"]
    return {
        "benchmark": "autocompact_append",
        "n": n,
        "rounds": ROUNDS,
        "small_append_ms": round(ms["small"], 3),
        "large_append_ms": round(ms["large"], 3),
        "ratio": round(ratio, 3),
        # The same appends without compact_after: what the storage alone costs.
        "small_plain_append_ms": round(ms["small_plain"], 3),
        "large_plain_append_ms": round(ms["large_plain"], 3),
        "plain_ratio": round(ms["large_plain"] / ms["small_plain"], 3),
        "small_check_ms": round(small_check * 1000, 3),
        "large_check_ms": round(large_check * 1000, 3),
        "check_ratio": round(large_check / small_check, 3),  # the threshold check alone
        "target_ratio": TARGET_RATIO,
        "ok": ratio <= TARGET_RATIO,
    }


def main() -> None:
    """Run on a throw-away test database of the configured settings (default: ``project.settings``)."""
    import os
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from django.db import connection

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0)
    try:
        result = run(n)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
    for key, value in result.items():
        print(f"{key}: {value}")
    print(f"ratio (append at {n} / at 10 messages): {result['ratio']} (target ≤ {TARGET_RATIO})")


if __name__ == "__main__":
    main()
