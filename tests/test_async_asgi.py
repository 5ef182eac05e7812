"""Under ASGI (gunicorn + uvicorn, as the compose stack serves), an async view's twins run in the
bounded pool: concurrent requests overlap, on no more connections than the pool's threads.

The server reaches Postgres through bench's latency proxy (25 ms each way, so 50 ms a statement):
16 requests of five statements each (a first append registers its session) take 4 s one after
another, about half a second on 8 threads.
"""

from __future__ import annotations

import asyncio
import time
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
STATEMENTS = 5  # BEGIN, the registry row, the append, COMMIT; the history read


def _backends() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


@pytest.mark.timeout(180)
def test_concurrent_requests_overlap_on_a_bounded_pool(monkeypatch):
    db = connection.settings_dict
    proxy, port = latency_proxy.start(db["HOST"] or "127.0.0.1", int(db["PORT"] or 5432), 1000 * STATEMENT_SECONDS)
    monkeypatch.setenv("PGHOST", "127.0.0.1")
    monkeypatch.setenv("PGPORT", str(port))
    baseline = _backends()
    try:
        with asgi_server("postgres", db["NAME"], settings="tests.support.async_server_settings") as base:

            async def burst(tag: str) -> tuple[float, list[int]]:
                async with httpx.AsyncClient(base_url=base, timeout=60) as client:
                    start = time.perf_counter()
                    answers = await asyncio.gather(
                        *(client.get(f"/async-turn/asgi-{tag}-{i}", params={"n": "1"}) for i in range(REQUESTS))
                    )
                    elapsed = time.perf_counter() - start
                return elapsed, [a.json()["messages"] for a in answers]

            asyncio.run(burst(uuid.uuid4().hex[:8]))  # the pool's threads connect (slowly, through the proxy)
            elapsed, counts = asyncio.run(burst(uuid.uuid4().hex[:8]))
            during = _backends() - baseline
    finally:
        proxy.terminate()
        proxy.wait()
    assert counts == [1] * REQUESTS
    one_after_another = REQUESTS * STATEMENTS * STATEMENT_SECONDS
    assert elapsed < one_after_another / 3, elapsed  # 8 threads: about one_after_another / 8
    assert during <= THREADS, during  # the pool's connections, not one per request in flight
