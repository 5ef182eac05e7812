"""Workload 7: HTTP through gunicorn, 20 clients: our API against bare Ninja endpoints, same server, same run.

``python -m bench --only http`` (Postgres). Each round runs ``--http-seconds`` of one route
for ours, then the same for the bare endpoint (``bench.http_urls``), alternating; the row's
time is seconds per request (1 / throughput), medians over the rounds.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import uuid

from .harness import Result

CLIENTS = 20
HISTORY_MESSAGES = 100
QUERY = "deploy friday"


def _message(i: int) -> dict:
    text = f"message {i} about the weather in kyoto" + (" deploying on Friday" if i % 10 == 3 else "")
    return {"id": f"h{i}-{uuid.uuid4().hex[:6]}", "role": "user" if i % 2 == 0 else "assistant",
            "parts": [{"type": "text", "text": text}]}  # fmt: skip


async def _throughput(
    base: str, token: str, route: str, sessions: list[str], seconds: float, search_path: str = "/search"
) -> float:
    """Requests per second that ``CLIENTS`` concurrent keep-alive clients get from one route.

    Each client sends at least one request, so a round on a busy machine (the smoke test's half
    second, beside other test runs) still measures something instead of dividing by zero."""
    import httpx

    done = 0
    deadline = 0.0

    async def client(index: int, http: httpx.AsyncClient) -> None:
        nonlocal done
        session = sessions[index % len(sessions)]
        turn = 0
        while True:
            if route == "append":
                turn += 1
                response = await http.post(
                    f"/sessions/{session}/messages", json={"message": _message(10_000 + index * 100_000 + turn)}
                )
            elif route == "history":
                response = await http.get(f"/sessions/{session}/history")
            else:
                response = await http.get(search_path, params={"q": QUERY})
            if response.status_code >= 400:
                raise RuntimeError(f"{route} {response.status_code}: {response.text[:300]}")
            done += 1
            if time.monotonic() >= deadline:
                return

    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, limits=limits, timeout=60) as http:
        started = time.monotonic()
        deadline = started + seconds
        await asyncio.gather(*(client(i, http) for i in range(CLIENTS)))
        return done / (time.monotonic() - started)


def _check_same_hits(root: str, headers: dict) -> None:
    """The bare search must answer what ours does (the same ids in the same order), or the row compares nothing."""
    import httpx

    ours = httpx.get(f"{root}/api/search", params={"q": QUERY}, headers=headers, timeout=30).json()["results"]
    bare = httpx.get(f"{root}/bare/search", params={"q": QUERY}, headers=headers, timeout=30).json()["results"]
    if not ours or [h["id"] for h in ours] != [h["id"] for h in bare]:
        raise RuntimeError(f"bare search differs from ours: {len(ours)} vs {len(bare)} hits")


def workload(alias: str, database: str, rounds: int, seconds: float) -> list[Result]:
    """Start gunicorn on the bench database, seed sessions over HTTP, then time each route both ways."""
    import httpx
    from django.contrib.auth import get_user_model
    from django.db import connections

    from agent_sessions.manager import SessionManager
    from agent_sessions.models import ApiKey
    from scripts import load

    if database != "postgresql" and database != "postgres":
        return []
    dsn = connections[alias].settings_dict
    env = load.production_env(dsn["NAME"])
    env.update(DJANGO_SETTINGS_MODULE="bench.http_settings", DATABASE_CONN_MAX_AGE="600")
    user = get_user_model().objects.db_manager(alias).create_user(f"bench-http-{uuid.uuid4().hex[:6]}")
    token = ApiKey.issue(user, "bench", using=alias)[1]
    port = load.free_port()
    workers = max(2, 2 * (os.cpu_count() or 1))
    process = load.start_gunicorn(env, port, workers=workers)
    results = []
    try:
        root = f"http://127.0.0.1:{port}"
        headers = {"Authorization": f"Bearer {token}"}
        sessions = []
        manager = SessionManager(using=alias)
        for i in range(CLIENTS):
            response = httpx.post(f"{root}/api/sessions", json={"name": f"http {i}"}, headers=headers, timeout=30)
            response.raise_for_status()
            sessions.append(response.json()["id"])
            manager.append_all(sessions[-1], [_message(j) for j in range(HISTORY_MESSAGES)])
        _check_same_hits(root, headers)
        for route in ("append", "history", "search"):
            impls = [("ours", f"{root}/api", "/search"), ("bare ninja", f"{root}/bare", "/search")]
            if route == "search":  # shown beside the goal's reference: the plainer query (no owner, no snippets)
                impls.append(("bare ninja, plain query", f"{root}/bare", "/search-plain"))
            rates: dict[str, list[float]] = {impl: [] for impl, _, _ in impls}
            for _ in range(rounds):
                for impl, base, search_path in impls:
                    rates[impl].append(asyncio.run(_throughput(base, token, route, sessions, seconds, search_path)))
            for impl, values in rates.items():
                rps = statistics.median(values)
                results.append(
                    Result(
                        f"7. HTTP {route} ({CLIENTS} clients, gunicorn ×{workers})",
                        "postgres",
                        impl,
                        1 / rps,
                        rounds,
                        {"req/s": f"{rps:.0f}"},
                    )
                )
    finally:
        load.stop(process)
    return results
