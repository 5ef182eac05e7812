"""Workload 8: model-call records (SPEC §8) on a 1,000-turn conversation: bytes per call, and their cost.

    python -m bench.model_calls [turns] [alias]     # standalone: migrates bench.settings' database first

Four per-operation timings, interleaved op by op (each op timed once per round, in a seeded order):

* ``bare append``: ``append_message`` of one message (the reference of the write);
* ``finish (append + record)``: ``call.finish(reply)`` inside ``model_call``, the snapshot taken
  outside the timer: what recording adds to the write;
* ``raw SQL: append + call row``: the floor of that write, our append and one raw ``INSERT`` in one
  transaction;
* ``recorded turn`` against ``unrecorded turn``: ``model_call`` + ``finish`` (snapshot included)
  against what a turn costs without records: ``get_history()`` and ``append_message()``.

The bytes per call are the stored values of the call rows (``pg_column_size`` of each row on
Postgres, the UTF-8 length of the values on SQLite), and of the content rows apart: the prompt and
the tools, stored once.
"""

from __future__ import annotations

import gc
import json
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from .harness import Result, script_main

PROMPT_BLOCK = "The user is planning a trip to Kyoto in April; prefers trains; vegetarian. " * 20
TOOLS = [
    {
        "name": f"tool_{i}",
        "description": "Look something up for the trip: " + "details " * 20,
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    }
    for i in range(8)
]


def _turn(i: int) -> list[dict]:
    text = f"turn {i}: what about the weather in kyoto on day {i % 30}? " * 3
    return [
        {"id": f"u{i}", "role": "user", "parts": [{"type": "text", "text": text}]},
        {"id": f"a{i}", "role": "assistant", "parts": [{"type": "text", "text": "It will be mild. " * 10}]},
    ]


def _stored_bytes(alias: str, session_id: str) -> tuple[float, int, int]:
    """(bytes per call row, content bytes in all, content rows) of the session's records."""
    from django.db import connections

    from agent_sessions.models import ModelCallContent, ModelCallRecord

    connection = connections[alias]
    calls = ModelCallRecord.objects.using(alias).filter(session_id=session_id)
    count = calls.count()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT sum(pg_column_size(t.*)) FROM agent_sessions_model_calls t WHERE session_id = %s", [session_id]
            )
            row_bytes = cursor.fetchone()[0] or 0
            cursor.execute(
                "SELECT sum(pg_column_size(t.*)), count(*) FROM agent_sessions_model_call_content t "
                "WHERE session_id = %s",
                [session_id],
            )
            content_bytes, content_rows = cursor.fetchone()
    else:
        row_bytes = sum(len(str(v).encode()) for row in calls.values_list() for v in row if v is not None)
        contents = ModelCallContent.objects.using(alias).filter(session_id=session_id)
        content_bytes = sum(len(str(v).encode()) for row in contents.values_list() for v in row if v is not None)
        content_rows = contents.count()
    return row_bytes / max(count, 1), int(content_bytes or 0), int(content_rows)


def workload(alias: str, database: str, turns: int = 1_000, ops: int = 200) -> list[Result]:
    """Workload 8 on ``alias``: a ``turns``-turn session, then ``ops`` interleaved rounds of the four timings."""
    from django.db import connections, transaction

    from agent_sessions import Session, SessionManager
    from agent_sessions.models import ModelCallRecord

    manager = SessionManager(using=alias)
    info = manager.create("bench: model calls")
    session = Session.create(using=alias).for_session(info.id).with_context("memory", description="facts")
    session.replace_context_block("memory", PROMPT_BLOCK[:2000])
    manager.append_all(info.id, [m for i in range(turns) for m in _turn(i)])
    # One recorded call per turn of the history, as a conversation recorded from the start would have.
    for i in range(turns):
        with session.model_call(model="gpt-bench", params={"temperature": 0.2}, tools=TOOLS, leaf_id=f"u{i}") as c:
            c.finish({**_turn(i)[1], "id": f"r{i}"}, usage={"input_tokens": 1200 + i, "output_tokens": 40}, cost=0.0012)
    per_call, content_bytes, content_rows = _stored_bytes(alias, info.id)

    raw = connections[alias].cursor()
    counter = iter(range(10**9))

    def message(role: str) -> dict:
        n = next(counter)
        return {"id": f"x{n}", "role": role, "parts": [{"type": "text", "text": f"bench {n} " * 20}]}

    def bare_append() -> Callable[[], Any]:
        m = message("user")
        return lambda: session.append_message(m)

    def finish() -> Callable[[], Any]:
        call = session.model_call(model="gpt-bench", params={"temperature": 0.2}, tools=TOOLS)
        call.start()
        m = message("assistant")

        def run() -> None:
            call.finish(m, usage={"input_tokens": 1, "output_tokens": 1}, cost=0.001)
            call.close(None)

        return run

    def raw_append_and_row() -> Callable[[], Any]:
        m = message("assistant")
        record = [uuid.uuid4().hex, info.id, m["id"], "gpt-bench", '{"temperature":0.2}', "ok"]
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")

        def run() -> None:
            with transaction.atomic(using=alias):  # one commit, as finish() makes
                session.append_message(m)  # the append itself is ours either way: one statement
                raw.execute(
                    "INSERT INTO agent_sessions_model_calls (id, session_id, message_id, model, params, status, "
                    "error, overlays, started_at) VALUES (%s, %s, %s, %s, %s, %s, '', '[]', %s)",
                    [*record, stamp],
                )

        return run

    def recorded_turn() -> Callable[[], Any]:
        m = message("assistant")

        def run() -> None:
            with session.model_call(model="gpt-bench", params={"temperature": 0.2}, tools=TOOLS) as call:
                call.finish(m)

        return run

    def unrecorded_turn() -> Callable[[], Any]:
        m = message("assistant")

        def run() -> None:
            session.get_history()
            session.append_message(m)

        return run

    makers: dict[str, Callable[[], Callable[[], Any]]] = {
        "bare append": bare_append,
        "finish (append + record)": finish,
        "raw SQL: append + call row": raw_append_and_row,
        "recorded turn": recorded_turn,
        "unrecorded turn": unrecorded_turn,
    }
    times: dict[str, list[float]] = {name: [] for name in makers}
    order = random.Random(8)
    for done in range(ops):
        for name, make in order.sample(list(makers.items()), len(makers)):
            fn = make()
            gc.collect()
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
        if (done + 1) % max(1, ops // 4) == 0:
            print(f"  model calls: {done + 1}/{ops}", file=sys.stderr, flush=True)
    medians = {name: statistics.median(values) for name, values in times.items()}
    ModelCallRecord.objects.using(alias).filter(session_id=info.id).delete()
    manager.delete(info.id)

    about = {
        "bytes per call row": round(per_call),
        "content rows": content_rows,
        "content bytes (prompt + tools, once)": content_bytes,
        "turns": turns,
    }
    label = "8. model calls"
    results = [
        Result(label, database, name, median, ops, dict(about) if i == 0 else {})
        for i, (name, median) in enumerate(medians.items())
    ]
    print(
        f"  {database}: {per_call:.0f} bytes per call row; content {content_bytes} bytes in {content_rows} rows; "
        f"finish ÷ bare append {medians['finish (append + record)'] / medians['bare append']:.2f}; "
        f"recorded ÷ unrecorded turn {medians['recorded turn'] / medians['unrecorded turn']:.2f}",
        flush=True,
    )
    print(json.dumps({k: round(v * 1000, 3) for k, v in medians.items()}), flush=True)
    return results


def run(turns: int = 1_000, using: str = "default") -> list[Result]:
    """Standalone entry: :func:`workload` on ``using``."""
    from django.db import connections

    return workload(using, connections[using].vendor, turns)


if __name__ == "__main__":
    script_main(sys.argv[1:], run, 1_000)
