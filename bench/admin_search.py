"""The messages changelist's search on 100,000 messages: before (hit keys sent back as IN lists) and now.

    BENCH_DEFAULT_DB=postgres python -m bench.admin_search [rows]   # the admin reads the "default" alias
    python -m bench.admin_search [rows]                             # SQLite

Loads ``rows`` messages (1,000 sessions; a common word, ``error``, in a third of them; the compound
``db-replica-3`` in 35, with ``db replica 3`` / ``db-replica 3`` lookalikes in 600 more), then times,
median of ROUNDS, interleaved:

* the full changelist page (``GET /admin/agent_sessions/message/?q=…`` as a superuser, Django's test
  client: search, count, the page of 100 rows, the template);
* its COUNT alone, as the page makes it: now ``EstimatingPaginator.count``; before, ``COUNT(*)`` over
  ``session_id IN (…) AND seq IN (…)`` built from the storage's first 10,000 hit keys (the code this
  replaced, rebuilt here from ``admin.search.matches``), with the key fetch itself included;
* the size of the largest SQL statement each sends.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

ROUNDS = 7
SESSIONS = 1_000
WORDS = [f"w{i:04d}" for i in range(3000)]
TERMS = {"common word": "error", "compound term": "db-replica-3"}


def _text(i: int, rng: random.Random) -> str:
    words = rng.sample(WORDS, 10)
    if i % 3 == 0:
        words[2] = "error"
    if i % 2857 == 5:  # 35 in 100,000
        words[5] = "db-replica-3"
    elif i % 167 == 11:  # ~600 lookalikes that the old query also matched
        words[5:6] = ["db", "replica", "3"] if i % 2 else ["db-replica", "3"]
    return " ".join(words)


def _load(rows: int, tag: str) -> None:
    from .search import load

    load(rows, "default", tag, text_of=_text, seed=11, sessions=SESSIONS)


def _median(fn: Callable[[], Any]) -> float:
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _old_filter(term: str):
    """The replaced changelist filter: the first 10,000 hit keys, sent back as two IN lists."""
    from django.db.models import Q

    from agent_sessions.admin.search import matches

    found = matches(term, using="default")
    return Q(session_id__in={sid for sid, _ in found.keys}, pk__in=found.seqs)


def run(rows: int = 100_000, using: str = "default") -> dict:
    """Load, time before/now per term, print and return the figures."""
    from django.contrib.auth import get_user_model
    from django.core.paginator import Paginator
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, override_settings

    from agent_sessions.admin.search import EstimatingPaginator, text_condition
    from agent_sessions.models import Message

    tag = f"bench-admin-{uuid.uuid4().hex[:8]}"
    _load(rows, tag)
    user = get_user_model().objects.create_superuser(f"bench-{tag}", password=None)
    client = Client()
    client.force_login(user)
    result: dict[str, Any] = {"rows": rows, "database": connection.vendor, "terms": {}}
    messages = Message.objects.defer("content").order_by("-seq")
    try:
        with override_settings(ALLOWED_HOSTS=["*"], DEBUG=False):
            for name, term in TERMS.items():

                def page(term=term):
                    response = client.get("/admin/agent_sessions/message/", {"q": term})
                    assert response.status_code == 200
                    return response

                def count_now(term=term):
                    condition = text_condition(term, using="default").q
                    return EstimatingPaginator(messages.filter(condition), 100).count

                def count_before(term=term):
                    return Paginator(messages.filter(_old_filter(term)), 100).count

                def new_page(term=term):
                    qs = messages.filter(text_condition(term, using="default", exact_ids=True).q)
                    EstimatingPaginator(qs, 100).count  # noqa: B018
                    return list(qs[:100])

                def old_page(term=term):
                    qs = messages.filter(_old_filter(term))
                    Paginator(qs, 100).count  # noqa: B018
                    return list(qs[:100])

                with CaptureQueriesContext(connection) as sent:
                    page()
                largest_now = max(len(q["sql"]) for q in sent.captured_queries)
                with CaptureQueriesContext(connection) as sent:
                    old_page()
                largest_before = max(len(q["sql"]) for q in sent.captured_queries)
                page(), old_page()  # warm
                figures = {
                    "parts_anded": EstimatingPaginator(
                        messages.filter(text_condition(" ".join(term.replace("-", " ").split()), using="default").q),
                        100,
                    ).count,
                    "hits_now": count_now(),
                    "hits_before": count_before(),
                    "page_ms": _median(page) * 1e3,
                    "count_ms": _median(count_now) * 1e3,
                    "old_count_ms": _median(count_before) * 1e3,
                    "old_page_ms": _median(old_page) * 1e3,
                    "new_page_ms": _median(new_page) * 1e3,
                    "sql_bytes": largest_now,
                    "old_sql_bytes": largest_before,
                }
                result["terms"][name] = figures
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM assistant_messages WHERE session_id LIKE %s", [tag + "-%"])
        user.delete()
    _print(result)
    return result


def _print(result: dict) -> None:
    print(f"messages changelist search, {result['rows']:,} messages on {result['database']} (median of {ROUNDS})")
    print(
        f"  {'term':<14} {'hits now/before':>16} {'HTTP page':>10} {'count+page now':>15} {'before':>8}"
        f" {'COUNT now':>10} {'before':>8} {'SQL now':>9} {'before':>9}"
    )
    for name, f in result["terms"].items():
        print(f"  ({name}: {f['parts_anded']:,} messages have its words anywhere, as the old tokenizing matched)")
        hits = f"{f['hits_now']:>7,}/{f['hits_before']:<8,}"
        print(
            f"  {name:<14} {hits} {f['page_ms']:>7.0f} ms {f['new_page_ms']:>12.0f} ms {f['old_page_ms']:>5.0f} ms"
            f" {f['count_ms']:>7.0f} ms {f['old_count_ms']:>5.0f} ms {f['sql_bytes']:>7,} B {f['old_sql_bytes']:>7,} B"
        )


def main(argv: list[str]) -> None:
    """``python -m bench.admin_search [rows]`` (the database: BENCH_DEFAULT_DB)."""
    from .harness import script_main

    script_main(argv[:1], run, 100_000)


if __name__ == "__main__":
    main(sys.argv[1:])
