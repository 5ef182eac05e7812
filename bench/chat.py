"""The chat endpoint's overhead: ChatView against a bare ``StreamingHttpResponse`` of the same chunks.

A uvicorn process (``bench/chat_server.py``) serves ``bench/chat_urls.py``; this process posts to it
over a keep-alive connection and times, per request, **time to first byte** (request sent → first
body bytes read) and **per chunk** ((last text delta read − first) ÷ the number of text deltas).
Before its first byte ChatView authenticates a Bearer key, parses the POST and reads the session
row (ownership); it then stores the turn (creates the session, stores the user message) before
``respond`` runs, and rebuilds and stores the reply after the last delta; the bare view does none of it,
and ``bare + DB connection`` only opens the database connection (under ASGI every request's thread
opens its own, which ChatView pays too). Rows: ChatView with an async ``respond`` and with a sync one,
against bare. The endpoints take turns in every round, in a fresh seeded order.

Then storing a reply, in this process: ``store_reply`` (append + the registry row's ``updated_at``,
one transaction) against a plain ``Session.append_message`` of the same message.

``python -m bench.chat [deltas] [database]`` (200 deltas; ``default`` = SQLite, or ``postgres``).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

from .harness import Result, fmt_time, median_of, print_table, script_main

ROUNDS = int(os.environ.get("BENCH_CHAT_ROUNDS", "41"))
GOAL_FIRST_BYTE_S = 0.005
GOAL_PER_CHUNK = 1.10
ROOT = Path(__file__).resolve().parents[1]
PATHS = {
    "bare StreamingHttpResponse": "/bare",
    "bare + DB connection": "/bare/connected",
    "ours, async respond": "/chat/async",
    "ours, sync respond": "/chat/sync",
}
_ids = itertools.count()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _request(client: httpx.Client, path: str) -> tuple[float, float]:
    """(seconds to the first body bytes, seconds from the first text delta read to the last)."""
    n = next(_ids)
    body = {"id": f"bench-chat-{os.getpid()}-{n}", "trigger": "submit-message",
            "messages": [{"id": f"u{n}", "role": "user", "parts": [{"type": "text", "text": "hello"}]}]}  # fmt: skip
    start = time.perf_counter()
    with client.stream("POST", path, content=json.dumps(body)) as response:
        assert response.status_code == 200, (path, response.status_code)
        stamps = [(time.perf_counter(), b'"text-delta"' in raw) for raw in response.iter_raw() if raw]
    deltas = [stamp for stamp, has_delta in stamps if has_delta]
    return stamps[0][0] - start, deltas[-1] - deltas[0]


def _measure(base: str, token: str, rounds: int) -> dict[str, tuple[float, float]]:
    order = random.Random(1)
    firsts: dict[str, list[float]] = {name: [] for name in PATHS}
    rests: dict[str, list[float]] = {name: [] for name in PATHS}
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
        for name in PATHS:
            _request(client, PATHS[name])  # warm up
        for _ in range(rounds):
            for name in order.sample(list(PATHS), len(PATHS)):
                first, rest = _request(client, PATHS[name])
                firsts[name].append(first)
                rests[name].append(rest)
    return {name: (statistics.median(firsts[name]), statistics.median(rests[name])) for name in PATHS}


def _serve(using: str, deltas: int) -> tuple[subprocess.Popen, str, str]:
    port = _free_port()
    env = {**os.environ, "BENCH_CHAT_DELTAS": str(deltas), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "bench.chat_server", str(port), using]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    token = process.stdout.readline().strip()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"{base}/bare", timeout=2)
            return process, base, token
        except httpx.TransportError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError("the chat bench server did not start") from None
            time.sleep(0.2)


def run(deltas: int, using: str) -> list[Result]:
    from agent_sessions.chat.store import store_reply
    from agent_sessions.manager import SessionManager

    database = "sqlite" if using == "default" else "postgres"
    results: list[Result] = []
    process, base, token = _serve(using, deltas)
    try:
        medians = _measure(base, token, ROUNDS)
    finally:
        process.terminate()
        process.wait(timeout=30)
    bare_first, bare_rest = medians["bare StreamingHttpResponse"]
    for name, (first, rest) in medians.items():
        first_note, chunk_note = {}, {}
        if name.startswith("ours"):
            met_first = first - bare_first <= GOAL_FIRST_BYTE_S
            first_note = {"− bare": fmt_time(first - bare_first), "goal": f"≤ bare + {fmt_time(GOAL_FIRST_BYTE_S)}",
                          "met": str(met_first)}  # fmt: skip
            ratio = rest / bare_rest if bare_rest else float("inf")
            met_chunk = ratio <= GOAL_PER_CHUNK
            chunk_note = {"÷ bare": f"{ratio:.2f}", "goal": f"≤ {GOAL_PER_CHUNK:.2f}", "met": str(met_chunk)}
        results.append(Result("chat: time to first byte", database, name, first, ROUNDS, first_note))
        results.append(Result("chat: per chunk", database, name, rest / (deltas - 1), ROUNDS, chunk_note))

    manager = SessionManager(using=using)
    session = manager.get_session(manager.create("bench store").id)
    session.append_message({"id": "root", "role": "user", "parts": [{"type": "text", "text": "hi"}]})
    text = "word " * deltas

    def reply() -> dict:
        return {"id": f"r{next(_ids)}", "role": "assistant",
                "parts": [{"type": "step-start"}, {"type": "text", "text": text, "state": "done"}]}  # fmt: skip

    store = median_of(lambda: store_reply(session, reply(), parent_id="root", continued=False, using=using), ROUNDS)
    plain = median_of(lambda: session.append_message(reply(), "root"), ROUNDS)
    note = {"÷ append_message": f"{store / plain:.2f}"}
    results.append(Result("chat: store the reply", database, "ours (store_reply)", store, ROUNDS, note))
    results.append(Result("chat: store the reply", database, "Session.append_message", plain, ROUNDS))
    print_table(sorted(results, key=lambda r: r.workload))
    return results


if __name__ == "__main__":
    script_main(sys.argv[1:], run, default_size=200)
