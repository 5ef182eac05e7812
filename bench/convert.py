"""Workload 6: convert a history with tools to each target, against reading that history.

Ours: ``to_openai_chat`` / ``to_openai_responses`` / ``to_anthropic`` of an n-message
history (tool calls with results, reasoning, steps); references: our ``get_history()`` of
the same path, and the peer's read path (openai-agents ``get_items()`` of the same
conversation stored as Responses items). Conversion must cost < 20 % of the history read.

What is timed: the history is stored and read once; then, for ``rounds`` rounds, one
``get_history()`` (SQL, JSON decoding of the rows, overlays) and each public ``to_*`` of that
first read's list, one after the other, each call timed alone: wall time (``perf_counter``)
and this process's CPU time (``process_time``; on Postgres the server's share of the read is
not in it, so ``cpu ÷ cpu`` is higher there). Medians of the rounds. Every message of this
history is a stored shape, so the conversions run on their fast path (``convert/_walk.py``).

``python -m bench.convert [n] [database]`` runs it alone (n = 1,000).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from agent_sessions.convert import to_anthropic, to_openai_chat, to_openai_responses

from .harness import Result, median_of, script_main, timed

TARGETS = {"to_openai_chat": to_openai_chat, "to_openai_responses": to_openai_responses, "to_anthropic": to_anthropic}
BUDGET = 0.20  # conversion ÷ history read


def history_with_tools(n: int) -> list[dict]:
    """n messages alternating user / assistant; each assistant turn has reasoning, a tool call with its result
    and a second step."""
    messages = []
    for i in range(n):
        if i % 2 == 0:
            messages.append(
                {
                    "id": f"m{i}",
                    "role": "user",
                    "parts": [{"type": "text", "text": f"question {i}: the weather in kyoto?"}],
                }
            )
            continue
        meta = {"anthropic": {"signature": f"sig{i}"}, "openai": {"itemId": f"rs_{i}"}}
        messages.append(
            {
                "id": f"m{i}",
                "role": "assistant",
                "parts": [
                    {"type": "step-start"},
                    {"type": "reasoning", "text": "the user asks about the weather", "providerMetadata": meta},
                    {"type": "text", "text": "Let me check."},
                    {
                        "type": "tool-weather",
                        "toolCallId": f"call_{i}",
                        "state": "output-available",
                        "input": {"city": "Kyoto", "days": 3},
                        "output": {"sky": "clear", "celsius": 21},
                    },
                    {"type": "step-start"},
                    {"type": "text", "text": f"answer {i}: clear skies, 21 °C"},
                ],
            }
        )
    return messages


def workload(alias: str, database: str, n: int, rounds: int, peers: list) -> list[Result]:
    """Rows per target: ours = the conversion; references = get_history and each peer's get_items."""
    from agent_sessions.manager import SessionManager
    from agent_sessions.session import Session

    manager = SessionManager(using=alias)
    info = manager.create("bench convert")
    manager.append_all(info.id, history_with_tools(n))
    session = Session.create(using=alias).for_session(info.id)
    history = session.get_history()
    assert len(history) == n
    read, spent, fastest, cpu = _interleaved(
        session.get_history, {name: (lambda f=f: f(history)) for name, f in TARGETS.items()}, rounds
    )
    items = to_openai_responses(history)
    peer_reads = []
    for peer in peers:
        if not peer.name.startswith("openai-agents"):
            continue  # stores text messages only; cannot hold the tool history
        peer.reset()  # only this conversation, not the items earlier workloads stored
        peer.append_all(items)
        peer_reads.append((peer.name, median_of(peer.history, rounds), len(peer.history())))
    results = []
    for name in TARGETS:
        label = f"6. {name} ({n} msgs, tools)"
        ratio = spent[name] / read if read else float("inf")
        best = fastest[name] / fastest["get_history"] if fastest["get_history"] else float("inf")
        cpu_ratio = cpu[name] / cpu["get_history"] if cpu["get_history"] else float("inf")
        results.append(
            Result(
                label,
                database,
                "ours",
                spent[name],
                rounds,
                {
                    "÷ get_history": f"{ratio:.3f}",
                    "fastest ÷ fastest": f"{best:.3f}",
                    "cpu ÷ cpu": f"{cpu_ratio:.3f}",
                    "budget": f"{BUDGET:.2f}",
                    "ok": ratio < BUDGET,
                },
            )
        )
        results.append(Result(label, database, "get_history (our read)", read, rounds))
        for peer_name, peer_read, count in peer_reads:
            results.append(Result(label, database, f"{peer_name} get_items", peer_read, rounds, {"items": count}))
    return results


def _interleaved(
    read: Callable[[], Any], converts: dict[str, Callable[[], Any]], rounds: int
) -> tuple[float, dict[str, float], dict[str, float], dict[str, float]]:
    """Medians of the read and of each conversion, timed in alternation so a change of load on the
    machine hits both alike; also the fastest round of each and the median CPU time of this process
    (``get_history`` under its own name). On a busy machine wall time mostly measures the wait for a
    core; CPU time does not (on SQLite the read runs in this process, so it is all there)."""
    times: dict[str, list[float]] = {"get_history": [], **{name: [] for name in converts}}
    cpu: dict[str, list[float]] = {name: [] for name in times}
    for _ in range(rounds):
        for name, fn in [("get_history", read), *converts.items()]:
            start = time.process_time()
            times[name].append(timed(fn)[0])
            cpu[name].append(time.process_time() - start)
    medians = {name: statistics.median(t) for name, t in times.items() if name != "get_history"}
    fastest = {name: min(t) for name, t in times.items()}
    return statistics.median(times["get_history"]), medians, fastest, {n: statistics.median(t) for n, t in cpu.items()}


def run(n: int, using: str) -> list[Result]:
    """``python -m bench.convert``: this workload alone, with openai-agents SQLiteSession when installed."""
    from django.db import connections

    from . import peers as peer_mod
    from .harness import print_table

    database = "postgres" if connections[using].vendor == "postgresql" else "sqlite"
    peers = peer_mod.available(database, connections[using].settings_dict)
    try:
        results = workload(using, database, n, 15, peers)
    finally:
        for peer in peers:
            peer.close()
    print_table(results)
    for r in results:
        if r.impl == "ours":
            share, cpu_share = float(r.extra["÷ get_history"]), float(r.extra["cpu ÷ cpu"])
            print(
                f"{r.workload} [{database}]: conversion = {share:.1%} of the history read ({cpu_share:.1%} in CPU time)"
            )
    return results


def main(argv: list[str]) -> None:
    """``python -m bench.convert [n] [database]``."""
    script_main(argv, run, 1_000)


if __name__ == "__main__":
    main(sys.argv[1:])
