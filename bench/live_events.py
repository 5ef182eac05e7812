"""Benchmark of session events (docs/live-sessions.md), side by side in one run.

1. Append with events on ÷ off, on SQLite and Postgres (median per append; goal ≤ 1.05).  "On" is the
   expensive case: Redis configured (the publish after commit) and a signal receiver connected.
2. Time from a write's commit to its event at an SSE client of ``GET /api/sessions/{id}/events``
   (gunicorn with a uvicorn worker, as the compose stack serves ASGI): median and p99.
3. Memory and threads per idle SSE subscriber: ``--subscribers`` open streams on that one worker.
4. A resumed chat stream's time to first byte ÷ a fresh one's, on that server (the demo chat, resumable since
   Redis is configured): per round a POST starts a generation (fresh: request sent → first body bytes), then,
   while it runs, ``GET /api/chat/{id}/stream`` replays it (resumed: the same measure); medians.

``python -m bench.live_events`` (Redis DB 14 by default: ``BENCH_REDIS_URL``; Postgres as in bench/settings.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
GOAL = 1.05


def _message(i: int) -> dict:
    role = "user" if i % 2 == 0 else "assistant"
    return {"id": f"m{i}", "role": role, "parts": [{"type": "text", "text": f"message {i}: " + "lorem ipsum " * 8}]}


def append_ratio(alias: str, appends: int) -> dict:
    """Median append with events on and off, interleaved in blocks of 50 (drift hits both alike)."""
    from django.test.utils import override_settings

    from agent_sessions import Session, events
    from agent_sessions.signals import session_event

    def receiver(**kwargs):
        pass

    on = Session.create(using=alias).for_session(f"live-on-{uuid.uuid4().hex[:8]}")
    off = Session.create(using=alias).for_session(f"live-off-{uuid.uuid4().hex[:8]}")
    times: dict[str, list[float]] = {"on": [], "off": []}
    session_event.connect(receiver, dispatch_uid="bench-live")
    try:
        for i in range(20):  # warm up
            on.append_message(_message(-1 - i))
            off.append_message(_message(-1 - i))
        for block in range(appends // 50):
            for name, session, enabled in (("on", on, True), ("off", off, False)):
                with override_settings(AGENT_SESSIONS_SESSION_EVENTS=enabled, AGENT_SESSIONS_REDIS_URL=REDIS_URL):
                    for i in range(block * 50, block * 50 + 50):
                        started = time.perf_counter()
                        session.append_message(_message(i))
                        times[name].append(time.perf_counter() - started)
        events.flush(10)
    finally:
        session_event.disconnect(dispatch_uid="bench-live")
    on_ms, off_ms = (statistics.median(times[k]) * 1000 for k in ("on", "off"))
    return {"on_ms": round(on_ms, 4), "off_ms": round(off_ms, 4), "ratio": round(on_ms / off_ms, 3)}


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _rss_kib(pid: int) -> tuple[int, int]:
    """(VmRSS in KiB, threads) of a process."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return int(fields["VmRSS"].split()[0]), int(fields["Threads"])


def _worker_pid(master: int) -> int:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return int(children[0])


def sse(database_url: str, samples: int, subscribers: int, resumes: int = 30) -> dict:
    """Start the ASGI server on the bench database; time commit → SSE client; then hold idle subscribers."""
    import httpx
    from django.contrib.auth import get_user_model

    from agent_sessions import Session, events
    from agent_sessions.models import ApiKey

    user = get_user_model().objects.db_manager("postgres").create_user(f"live-{uuid.uuid4().hex[:8]}")
    _, token = ApiKey.issue(user, "bench", using="postgres")
    headers = {"Authorization": f"Bearer {token}"}
    session_id = f"live-sse-{uuid.uuid4().hex[:8]}"
    session = Session.create(using="postgres", owner=user).for_session(session_id)
    session.append_message(_message(0))
    port = _free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": REDIS_URL,
        "CELERY_TASK_ALWAYS_EAGER": "1",
        "AGENT_SESSIONS_API_KEY_RATE_LIMIT": "off",
        "AGENT_SESSIONS_API_USER_RATE_LIMIT": "off",
    }
    gunicorn = Path(sys.executable).parent / "gunicorn"
    command = [str(gunicorn), "project.asgi:application", "--worker-class", "uvicorn_worker.UvicornWorker"]
    command += ["--workers", "1", "--bind", f"127.0.0.1:{port}", "--log-level", "warning", "--timeout", "300"]
    server = subprocess.Popen(command, cwd=ROOT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{base}/api/openapi.json", timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        url = f"{base}/api/sessions/{session_id}/events"
        latencies = []
        with httpx.stream("GET", url, headers=headers, timeout=10) as response:
            lines = response.iter_lines()
            for line in lines:
                if line == ": subscribed":
                    break
            for i in range(1, samples + 1):
                committed = time.perf_counter()  # autocommit: the append's commit is its return
                session.append_message(_message(i))
                committed = (committed + time.perf_counter()) / 2
                for line in lines:
                    if line.startswith("data: ") and json.loads(line[6:])["message_ids"] == [f"m{i}"]:
                        latencies.append(time.perf_counter() - committed)
                        break
        events.flush(10)
        latencies.sort()
        worker = _worker_pid(server.pid)
        time.sleep(1.0)
        rss_before, threads_before = _rss_kib(worker)
        held = asyncio.run(_hold(url, headers, subscribers, worker))
        rss_after, threads_after = held
        resume = _resume_ratio(base, headers, resumes)
        return {
            **resume,
            "commit_to_sse_median_ms": round(statistics.median(latencies) * 1000, 3),
            "commit_to_sse_p99_ms": round(latencies[int(len(latencies) * 0.99) - 1] * 1000, 3),
            "samples": len(latencies),
            "idle_subscribers": subscribers,
            "kib_per_idle_subscriber": round((rss_after - rss_before) / subscribers, 1),
            "worker_threads_before": threads_before,
            "worker_threads_with_subscribers": threads_after,
        }
    finally:
        server.terminate()
        server.wait(timeout=30)


def _first_byte(client: Any, method: str, url: str, **kwargs: Any) -> tuple[float, Any]:
    """Seconds from the request to its first body bytes, and the open response (read it to the end or close it)."""
    started = time.perf_counter()
    response = client.send(client.build_request(method, url, **kwargs), stream=True)
    assert response.status_code == 200, (url, response.status_code, response.read()[:300])
    chunks = response.iter_raw()
    first = next(chunks)
    return time.perf_counter() - started, (response, first, chunks)


def _resume_ratio(base: str, headers: dict, rounds: int) -> dict:
    """Median time to first byte of a resumed chat stream and of a fresh one (the POST that starts it)."""
    import httpx

    question = " ".join(f"word{i}" for i in range(12))  # the demo model answers word by word, 50 ms apart
    fresh, resumed = [], []
    with (
        httpx.Client(base_url=base, headers=headers, timeout=60) as posts,
        httpx.Client(base_url=base, headers=headers, timeout=60) as resumes,
    ):
        for n in range(rounds + 2):  # two rounds of warm-up
            chat_id = f"bench-resume-{uuid.uuid4().hex[:12]}"
            message = {"id": f"u{n}", "role": "user", "parts": [{"type": "text", "text": question}]}
            body = {"id": chat_id, "trigger": "submit-message", "messages": [message]}
            took, (post, first, rest) = _first_byte(posts, "POST", "/api/chat", json=body)
            again, (replay, replay_first, replay_rest) = _first_byte(resumes, "GET", f"/api/chat/{chat_id}/stream")
            answer = first + b"".join(rest)
            replayed = replay_first + b"".join(replay_rest)
            post.close()
            replay.close()
            assert answer == replayed, (answer[-200:], replayed[-200:])
            assert answer.endswith(b"data: [DONE]\n\n"), answer[-200:]
            if n >= 2:
                fresh.append(took)
                resumed.append(again)
    fresh_ms, resumed_ms = statistics.median(fresh) * 1000, statistics.median(resumed) * 1000
    return {
        "chat_fresh_first_byte_median_ms": round(fresh_ms, 3),
        "chat_resumed_first_byte_median_ms": round(resumed_ms, 3),
        "chat_resumed_over_fresh": round(resumed_ms / fresh_ms, 3),
        "chat_resume_rounds": rounds,
    }


async def _hold(url: str, headers: dict, count: int, worker: int) -> tuple[int, int]:
    """Open ``count`` idle SSE streams, wait until each is subscribed, read the worker's RSS and threads."""
    import httpx

    ready = 0
    done = asyncio.Event()
    release = asyncio.Event()
    limits = httpx.Limits(max_connections=count + 10, max_keepalive_connections=0)
    async with httpx.AsyncClient(limits=limits, timeout=120) as client:

        async def one() -> None:
            nonlocal ready
            async with client.stream("GET", url, headers=headers) as response:
                async for line in response.aiter_lines():
                    if line == ": subscribed":
                        ready += 1
                        if ready == count:
                            done.set()
                        await release.wait()
                        return

        tasks = [asyncio.create_task(one()) for _ in range(count)]
        await asyncio.wait_for(done.wait(), timeout=240)
        await asyncio.sleep(1.0)
        measured = _rss_kib(worker)
        release.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    return measured


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.live_events", description=__doc__)
    parser.add_argument("--appends", type=int, default=2000, help="appends per side and database")
    parser.add_argument("--samples", type=int, default=300, help="commit → SSE samples")
    parser.add_argument("--subscribers", type=int, default=1000)
    parser.add_argument("--resumes", type=int, default=30, help="chat streams started and resumed")
    parser.add_argument("--no-sse", action="store_true", help="only the append ratio")
    parser.add_argument("--json", default="bench/results/live_events.json")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("BENCH_PG_NAME", "agent_sessions_bench_live")
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections

    from .__main__ import _fresh_postgres

    pg = connections["postgres"].settings_dict
    _fresh_postgres(pg)
    results: dict = {"goal_append_ratio": GOAL}
    for database, alias in (("sqlite", "default"), ("postgres", "postgres")):
        call_command("migrate", database=alias, verbosity=0, interactive=False)
        results[f"append_{database}"] = append_ratio(alias, args.appends)
        print(database, results[f"append_{database}"], flush=True)
    dsn = f"postgres://{pg['USER']}@{pg['HOST']}:{pg['PORT']}/{pg['NAME']}"
    from django.test.utils import override_settings

    if not args.no_sse:
        with override_settings(AGENT_SESSIONS_REDIS_URL=REDIS_URL):
            results["sse"] = sse(dsn, args.samples, args.subscribers, args.resumes)
        print("sse", results["sse"], flush=True)
    results["ok"] = all(results[f"append_{d}"]["ratio"] <= GOAL for d in ("sqlite", "postgres"))
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
