"""Workload 9: many conversations in one event loop, at 0 ms and across a simulated network.

    python -m bench.async_load [--turns 50] [--rounds 3] [--threads 8] [--latency 0,2.5] [--concurrency 1,8,64]

C conversations run at once in one ``asyncio`` loop, each ``turns`` turns of two appends and a
history read (3 operations a turn), on Postgres: directly, and through :mod:`bench.latency_proxy`
(a round trip of 2.5 ms, half each way). Every implementation runs the same turns; the table gives
operations per second (median over rounds) and the most connections to the bench database seen in
``pg_stat_activity`` while it ran (sampled every 20 ms).

``ours``: ``Session.aappend_message`` / ``aget_history``, and ``ours, AgentsSession``:
``add_items`` / ``get_items``, with ``AGENT_SESSIONS_ASYNC_THREADS`` database threads (16 in
bench.settings); ``… before`` rows run the same through asgiref's ``sync_to_async(thread_sensitive=True)``
(what every twin did before the thread pool).
Peers: the Agents SDK's ``SQLAlchemySession`` on asyncpg (its default pool: 5 + 10 overflow) and
langchain-postgres' ``PostgresChatMessageHistory`` on async psycopg connections from a pool of 15.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from .harness import Result, print_table

Turn = Callable[[int, int], Awaitable[None]]


class ConnectionSampler:
    """The most backends connected to the bench database while it runs, beyond those open when it started."""

    def __init__(self, dsn: dict) -> None:
        import psycopg

        self._conn = psycopg.connect(
            host=dsn["HOST"], port=dsn["PORT"], user=dsn["USER"], dbname=dsn["NAME"], autocommit=True
        )
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._idle = self.count()

    def count(self) -> int:
        (count,) = self._conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
        return count

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self.count() - self._before)

    def __enter__(self) -> ConnectionSampler:
        """Count from here on, less the connections already open (this process's own, a closing one).

        The previous run's connections close as its loop ends, and their backends leave a moment
        later: wait (up to 2 s) for the count to fall back to what it was when sampling began."""
        self.peak = 0
        deadline = time.monotonic() + 2
        while self.count() > self._idle and time.monotonic() < deadline:
            time.sleep(0.02)
        self._before = self.count()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    def close(self) -> None:
        self._conn.close()


def user(c: int, t: int) -> str:
    return f"Conversation {c}, turn {t}: what is the weather in city number {t}?"


def answer(c: int, t: int) -> str:
    return f"In city {t} it rains, conversation {c}; take an umbrella."


# ── implementations: make(alias, dsn, conversations) -> (turn, close) ──


def ours_session(alias: str, dsn: dict, conversations: int):
    from agent_sessions.manager import SessionManager

    manager = SessionManager(using=alias)
    tag = uuid.uuid4().hex[:8]
    sessions = [manager.get_session(f"async-{tag}-{c}") for c in range(conversations)]

    async def turn(c: int, t: int) -> None:
        s = sessions[c]
        await s.aappend_message({"id": f"u{t}", "role": "user", "parts": [{"type": "text", "text": user(c, t)}]})
        await s.aget_history()
        await s.aappend_message({"id": f"a{t}", "role": "assistant", "parts": [{"type": "text", "text": answer(c, t)}]})

    return turn, _close_ours


def ours_agents(alias: str, dsn: dict, conversations: int):
    from agent_sessions.integrations.openai_agents import AgentsSession

    tag = uuid.uuid4().hex[:8]
    sessions = [AgentsSession(f"async-oa-{tag}-{c}", using=alias) for c in range(conversations)]

    async def turn(c: int, t: int) -> None:
        s = sessions[c]
        await s.add_items([{"role": "user", "content": user(c, t)}])
        await s.get_items()
        await s.add_items([_assistant_item(c, t)])

    return turn, _close_ours


def _assistant_item(c: int, t: int) -> dict:
    return {
        "id": f"msg_{t}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": answer(c, t), "annotations": []}],
    }


async def _close_ours() -> None:
    from agent_sessions import dbthreads

    dbthreads.shutdown()


def sqlalchemy_session(alias: str, dsn: dict, conversations: int):
    from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
    from sqlalchemy.ext.asyncio import create_async_engine

    url = f"postgresql+asyncpg://{dsn['USER']}@{dsn['HOST']}:{dsn['PORT']}/{dsn['NAME']}"
    engine = create_async_engine(url)  # the SDK's from_url: the default pool (5 + 10 overflow)
    tag = uuid.uuid4().hex[:8]
    sessions = [
        SQLAlchemySession(
            f"async-{tag}-{c}",
            engine=engine,
            create_tables=True,
            sessions_table="bench_async_oa_sessions",
            messages_table="bench_async_oa_messages",
        )
        for c in range(conversations)
    ]

    async def turn(c: int, t: int) -> None:
        s = sessions[c]
        await s.add_items([{"role": "user", "content": user(c, t)}])
        await s.get_items()
        await s.add_items([_assistant_item(c, t)])

    async def close() -> None:
        await engine.dispose()

    return turn, close


def langchain_pool(alias: str, dsn: dict, conversations: int):
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_postgres import PostgresChatMessageHistory
    from psycopg_pool import AsyncConnectionPool

    conninfo = f"host={dsn['HOST']} port={dsn['PORT']} user={dsn['USER']} dbname={dsn['NAME']}"
    pool = AsyncConnectionPool(conninfo, min_size=1, max_size=15, open=False, kwargs={"autocommit": True})
    ids = [str(uuid.uuid4()) for _ in range(conversations)]
    table = "bench_async_langchain"
    opened: list[bool] = []

    async def turn(c: int, t: int) -> None:
        if not opened:
            opened.append(True)
            await pool.open()
            async with pool.connection() as conn:
                await PostgresChatMessageHistory.acreate_tables(conn, table)
        async with pool.connection() as conn:
            await PostgresChatMessageHistory(table, ids[c], async_connection=conn).aadd_messages(
                [HumanMessage(content=user(c, t))]
            )
        async with pool.connection() as conn:
            await PostgresChatMessageHistory(table, ids[c], async_connection=conn).aget_messages()
        async with pool.connection() as conn:
            await PostgresChatMessageHistory(table, ids[c], async_connection=conn).aadd_messages(
                [AIMessage(content=answer(c, t))]
            )

    async def close() -> None:
        await pool.close()

    return turn, close


IMPLEMENTATIONS: dict[str, Callable[..., Any]] = {
    "ours": ours_session,
    "ours, AgentsSession": ours_agents,
    "openai-agents SQLAlchemySession (asyncpg)": sqlalchemy_session,
    "langchain-postgres (async psycopg, pool 15)": langchain_pool,
}


BEFORE = {"ours": "ours, before (sync_to_async)", "ours, AgentsSession": "ours, AgentsSession, before"}
"""The rows of ours run through asgiref's one sync thread, as every twin did before the pool."""


async def _drive(turn: Turn, conversations: int, turns: int) -> float:
    async def conversation(c: int) -> None:
        for t in range(turns):
            await turn(c, t)

    # Untimed: two turns of every conversation open the connections (every thread of ours, the
    # peers' pools) and warm the server's plans, as a running server has them.
    await turn(0, -3)
    for t in (-2, -1):
        await asyncio.gather(*(turn(c, t) for c in range(conversations)))
    start = time.perf_counter()
    await asyncio.gather(*(conversation(c) for c in range(conversations)))
    return time.perf_counter() - start


def run_one(make, alias: str, dsn: dict, conversations: int, turns: int, sampler: ConnectionSampler):
    """(ops/s, peak connections) of one round: a fresh event loop, fresh sessions."""
    turn, close = make(alias, dsn, conversations)

    async def main() -> float:
        try:
            with sampler:
                return await _drive(turn, conversations, turns)
        finally:
            await close()

    seconds = asyncio.run(main())
    return 3 * conversations * turns / seconds, sampler.peak


class Before:
    """Run ours the way every twin ran before the thread pool (asgiref's one sync thread)."""

    def __enter__(self) -> None:
        from asgiref.sync import sync_to_async

        from agent_sessions import asyncutils
        from agent_sessions.integrations import openai_agents

        async def one_thread(fn, *args, **kwargs):
            return await sync_to_async(fn, thread_sensitive=True)(*args, **kwargs)

        self._saved = asyncutils.run_sync
        asyncutils.run_sync = openai_agents.run_sync = one_thread  # type: ignore[assignment]

    def __exit__(self, *exc: Any) -> None:
        from agent_sessions import asyncutils
        from agent_sessions.integrations import openai_agents

        asyncutils.run_sync = openai_agents.run_sync = self._saved  # type: ignore[assignment]


def workload(
    alias: str,
    database: str,
    *,
    turns: int = 50,
    rounds: int = 3,
    latencies: tuple[float, ...] = (0.0, 2.5),
    concurrency: tuple[int, ...] = (1, 8, 64),
    before: bool = True,
    peers: bool = True,
    seed: int = 1,
) -> list[Result]:
    """Workload 9 on the Postgres ``alias``: every implementation, concurrency and round trip.

    Each round runs every implementation once, in an order drawn afresh (seeded), so a change of
    load on the shared machine hits all alike; the figure is the median over rounds. ``before``
    (asgiref's one thread) runs at C=1, and at C=64 only across the network, in one round (it
    takes a minute there).
    """
    from django.db import connections

    from . import latency_proxy

    dsn = connections[alias].settings_dict
    sampler = ConnectionSampler(dsn)
    order = random.Random(seed)
    results: list[Result] = []
    impls = {name: make for name, make in IMPLEMENTATIONS.items() if peers or name.startswith("ours")}
    try:
        for latency in latencies:
            proxy = None
            use, use_dsn = alias, dsn
            if latency:
                proxy, port = latency_proxy.start(dsn["HOST"] or "127.0.0.1", int(dsn["PORT"] or 5432), latency)
                use = f"{alias}_latency"
                use_dsn = connections.settings[use] = {**dsn, "HOST": "127.0.0.1", "PORT": str(port)}
            try:
                for conversations in concurrency:
                    variants = [(name, make, False) for name, make in impls.items()]
                    old_rounds = rounds if conversations == 1 else 1
                    if before and (conversations == 1 or (latency and conversations == max(concurrency))):
                        variants += [(BEFORE[name], impls[name], True) for name in impls if name in BEFORE]
                    figures: dict[str, list[tuple[float, int]]] = {name: [] for name, _, _ in variants}
                    for r in range(rounds):
                        for name, make, old in order.sample(variants, len(variants)):
                            if old and r >= old_rounds:
                                continue
                            with Before() if old else contextlib.nullcontext():
                                figures[name].append(run_one(make, use, use_dsn, conversations, turns, sampler))
                            connections[use].close()
                    label = f"9. async C={conversations}, {latency:g} ms"
                    for name, _, _ in variants:
                        ops = statistics.median(f[0] for f in figures[name])
                        peak = max(f[1] for f in figures[name])
                        extra = {"ops/s": f"{ops:,.0f}", "connections": peak}
                        results.append(Result(label, database, name, 1 / ops, len(figures[name]), extra))
                        print(f"  {label:<24} {name:<46} {ops:>8,.0f} ops/s  {peak:>3} connections", flush=True)
            finally:
                if proxy is not None:
                    proxy.terminate()
                    proxy.wait()
    finally:
        sampler.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.async_load", description=__doc__)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="AGENT_SESSIONS_ASYNC_THREADS (default: the setting)")
    parser.add_argument("--latency", default="0,2.5", help="round trips in ms, comma-separated")
    parser.add_argument("--concurrency", default="1,8,64")
    parser.add_argument("--no-before", action="store_true", help="skip ours through sync_to_async (the old path)")
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--drop", action="store_true", help="drop the bench database at the end")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections

    from .__main__ import _fresh_postgres

    if args.threads:
        settings.AGENT_SESSIONS_ASYNC_THREADS = args.threads
    _fresh_postgres(connections["postgres"].settings_dict)
    call_command("migrate", database="postgres", verbosity=0, interactive=False)
    connections["postgres"].close()
    results = workload(
        "postgres",
        "postgres",
        turns=args.turns,
        rounds=args.rounds,
        latencies=tuple(float(x) for x in args.latency.split(",")),
        concurrency=tuple(int(x) for x in args.concurrency.split(",")),
        before=not args.no_before,
        peers=not args.no_peers,
    )
    print()
    print_table(results)
    if args.drop:
        connections["postgres"].close()
        _fresh_postgres(connections["postgres"].settings_dict, create=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
