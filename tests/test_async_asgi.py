"""Under ASGI (gunicorn + uvicorn, as the compose stack serves), an async view's twins run in the
bounded pool: concurrent requests overlap, on no more connections than the pool's threads.

The server reaches Postgres through bench's latency proxy (25 ms each way, so 50 ms a statement),
so each request's database work (five statements: a first append registers its session) stays in
flight for a quarter of a second. Each answer carries the span of that work; the test counts the
spans open at one moment: at least two when requests overlap, one when the server serves them one
after another. No wall-clock bound, so a loaded machine cannot fail it.
"""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from django.db import connection

from bench import latency_proxy
from tests.support.chat_server import asgi_server

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]

REQUESTS = 16
THREADS = 8  # tests/support/async_server_settings.py
STATEMENT_SECONDS = 0.05


def _backends() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def _most_open(spans: list[list[float]]) -> int:
    """The largest number of [began, ended] spans open at one moment."""
    edges = sorted([(began, 1) for began, _ in spans] + [(ended, -1) for _, ended in spans], key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


@pytest.mark.timeout(180)
def test_concurrent_requests_overlap_on_a_bounded_pool(monkeypatch):
    db = connection.settings_dict
    proxy, port = latency_proxy.start(db["HOST"] or "127.0.0.1", int(db["PORT"] or 5432), 1000 * STATEMENT_SECONDS)
    monkeypatch.setenv("PGHOST", "127.0.0.1")
    monkeypatch.setenv("PGPORT", str(port))
    baseline = _backends()
    try:
        with asgi_server("postgres", db["NAME"], settings="tests.support.async_server_settings") as base:

            async def burst(tag: str) -> list[dict]:
                async with httpx.AsyncClient(base_url=base, timeout=60) as client:
                    answers = await asyncio.gather(
                        *(client.get(f"/async-turn/asgi-{tag}-{i}", params={"n": "1"}) for i in range(REQUESTS))
                    )
                return [a.json() for a in answers]

            asyncio.run(burst(uuid.uuid4().hex[:8]))  # the pool's threads connect (slowly, through the proxy)
            answers = asyncio.run(burst(uuid.uuid4().hex[:8]))
            during = _backends() - baseline
    finally:
        proxy.terminate()
        proxy.wait()
    assert [a["messages"] for a in answers] == [1] * REQUESTS
    assert _most_open([a["span"] for a in answers]) >= 2  # one after another would keep this at 1
    assert during <= THREADS, during  # the pool's connections, not one per request in flight
