"""The async twins run concurrently, on a bounded number of connections that the threads close themselves.

A database that takes 50 ms a statement (Postgres behind bench's latency proxy, 25 ms each way;
SQLite with a 50 ms trace callback on every statement) keeps each statement in flight long enough
to see the overlap: the tests count the statements running at one moment, which is at least two
when the calls overlap, one when they run one after another, and never more than the pool's threads.
They measure no wall-clock time, so a loaded machine cannot fail them.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from asgiref.sync import ThreadSensitiveContext, async_to_sync, sync_to_async
from django.db import connections, transaction
from django.db.backends.signals import connection_created

from agent_sessions import dbthreads
from agent_sessions.asyncutils import run_sync
from agent_sessions.manager import SessionManager

# The twins' threads see committed rows only; "replica" is the test settings' second alias, pointed
# here at the slow database.
pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "replica"])

STATEMENT_SECONDS = 0.05
CALLS = 16
THREADS = 8


def text(id: str, words: str, role: str = "user") -> dict:
    return {"id": id, "role": role, "parts": [{"type": "text", "text": words}]}


@pytest.fixture
def threads(settings) -> Iterator[int]:
    """A pool of THREADS for this test, shut down (its connections closed) after it."""
    settings.AGENT_SESSIONS_ASYNC_THREADS = THREADS
    dbthreads.shutdown()
    yield THREADS
    dbthreads.shutdown()


class InFlight:
    """Counts the statements running at once on one alias, across every thread's connection."""

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.now = 0
        self.most = 0
        self.threads: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, execute, sql, params, many, context):
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.threads.add(threading.current_thread().name)
        try:
            return execute(sql, params, many, context)
        finally:
            with self._lock:
                self.now -= 1

    def attach(self, sender, connection, **kwargs) -> None:
        if connection.alias == self.alias:
            connection.execute_wrappers.append(self)


@pytest.fixture
def slow_alias(threads) -> Iterator[str]:
    """A database alias whose every statement takes at least 50 ms."""
    alias = "replica"
    saved = connections.settings[alias]
    connections[alias].close()
    base = connections.settings["default"]
    proxy = None
    if base["ENGINE"].endswith("postgresql"):
        from bench import latency_proxy

        host, port = base["HOST"] or "127.0.0.1", int(base["PORT"] or 5432)
        proxy, port = latency_proxy.start(host, port, 1000 * STATEMENT_SECONDS)
        connections.settings[alias] = {**base, "HOST": "127.0.0.1", "PORT": str(port)}
    else:
        connections.settings[alias] = {**base}

    def slow_sqlite(sender, connection, **kwargs):
        if connection.alias == alias and connection.vendor == "sqlite":
            connection.connection.set_trace_callback(lambda statement: time.sleep(STATEMENT_SECONDS))

    connection_created.connect(slow_sqlite)
    try:
        yield alias
    finally:
        connection_created.disconnect(slow_sqlite)
        dbthreads.shutdown()
        connections[alias].close()
        connections.settings[alias] = saved
        if proxy is not None:
            proxy.terminate()
            proxy.wait()


def _sessions(count: int) -> list[str]:
    manager = SessionManager()
    ids = [f"async-{uuid.uuid4().hex[:8]}-{i}" for i in range(count)]
    for sid in ids:
        manager.append_all(sid, [text("q", "what is the weather?"), text("a", "rain", "assistant")])
    return ids


@pytest.fixture
def in_flight(slow_alias) -> Iterator[InFlight]:
    """Statements in flight on the slow alias, from every connection opened after this point."""
    counter = InFlight(slow_alias)
    connections[slow_alias].close()
    connection_created.connect(counter.attach)
    try:
        yield counter
    finally:
        connection_created.disconnect(counter.attach)


def test_async_calls_run_concurrently(slow_alias, in_flight, threads):
    ids = _sessions(CALLS)
    manager = SessionManager(using=slow_alias)
    sessions = [manager.get_session(sid) for sid in ids]

    async def read_all() -> list[list[dict]]:
        return await asyncio.gather(*(s.aget_history() for s in sessions))

    histories = asyncio.run(read_all())
    assert [[m["id"] for m in h] for h in histories] == [["q", "a"]] * CALLS
    assert in_flight.most >= 2, in_flight.threads  # one after another would keep this at 1
    assert in_flight.most <= threads
    assert all(name.startswith("agent-sessions-db") for name in in_flight.threads)
    assert dbthreads.pool().threads <= threads


def test_inside_requests_calls_share_the_bounded_pool(slow_alias, in_flight, threads):
    """Django's ASGI handler gives each request a ThreadSensitiveContext (one thread per request in
    flight for thread-sensitive calls); the twins use the bounded pool there too, concurrently."""
    ids = _sessions(CALLS)
    manager = SessionManager(using=slow_alias)

    async def request(sid: str) -> list[dict]:
        async with ThreadSensitiveContext():
            return await manager.get_session(sid).aget_history()

    async def serve() -> list[list[dict]]:
        return await asyncio.gather(*(request(sid) for sid in ids))

    histories = asyncio.run(serve())
    assert all(len(h) == 2 for h in histories)
    assert in_flight.most >= 2, in_flight.threads
    assert in_flight.most <= threads
    assert all(name.startswith("agent-sessions-db") for name in in_flight.threads)
    assert dbthreads.pool().threads <= threads


def _open_backends() -> int:
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def _counted_elsewhere() -> int:
    """:func:`_open_backends` from a thread of its own, whose connection it closes (not counted)."""
    try:
        return _open_backends()
    finally:
        connections["default"].close()


def _settled_backends(expected: int) -> int:
    """The backend count once closed connections' backends have exited (they go a moment after the client)."""
    for _ in range(100):
        if (count := _open_backends()) <= expected:
            return count
        time.sleep(0.05)
    return count


def test_connections_stay_bounded_and_close_with_each_event_loop(threads, is_postgres):
    """Each ``asyncio.run`` uses at most THREADS connections and leaves none open when it returns."""
    created: list = []

    def remember(sender, connection, **kwargs):
        if threading.current_thread().name.startswith("agent-sessions-db"):
            created.append(connection)

    ids = _sessions(CALLS)
    manager = SessionManager()
    sessions = [manager.get_session(sid) for sid in ids]
    baseline = _open_backends() if is_postgres else 0
    connection_created.connect(remember)

    async def turn(t: int) -> int:
        await asyncio.gather(*(s.aappend_message(text(f"m{t}", f"turn {t}")) for s in sessions))
        await asyncio.gather(*(s.aget_history() for s in sessions))
        if not is_postgres:
            return 0
        counted = await asyncio.get_running_loop().run_in_executor(None, _counted_elsewhere)
        return counted - baseline - 1  # less the test thread's own connection

    try:
        for t in range(12):
            created.clear()
            during = asyncio.run(turn(t))
            assert during <= threads
            assert 1 <= len(created) <= threads  # one connection per thread of this loop
            assert all(c.connection is None for c in created)  # closed by their threads as the loop ended
            if is_postgres:
                assert _settled_backends(baseline) == baseline
        assert all(len(manager.get_history(sid)) == 2 + 12 for sid in ids)
    finally:
        connection_created.disconnect(remember)


def test_a_loop_that_ends_keeps_the_pool_for_a_loop_still_running(threads):
    """Two loops in two threads share the pool: the first to end leaves the other's connections open."""
    sid = _sessions(1)[0]
    session = SessionManager().get_session(sid)
    second_started, first_ended = threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    async def second() -> None:
        await session.aget_history()
        seen["pool"] = dbthreads.pool()
        second_started.set()
        await asyncio.get_running_loop().run_in_executor(None, first_ended.wait, 30)
        seen["same pool"] = dbthreads.pool() is seen["pool"]
        seen["history"] = await session.aget_history()

    other = threading.Thread(target=asyncio.run, args=(second(),))
    other.start()
    assert second_started.wait(30)
    asyncio.run(session.aget_history())
    first_ended.set()
    other.join(30)
    assert seen["same pool"] is True
    assert [m["id"] for m in seen["history"]] == ["q", "a"]
    assert not dbthreads._pool  # the last loop to end shut it down


def test_concurrent_appends_to_one_session_form_one_chain(threads):
    """Many writers at once (SQLite: the write lock and busy timeout; Postgres: the advisory lock)."""
    manager = SessionManager()
    sid = f"async-chain-{uuid.uuid4().hex[:8]}"
    session = manager.get_session(sid)

    async def write() -> None:
        await asyncio.gather(*(session.aappend_message(text(f"m{i}", f"message {i}")) for i in range(32)))

    asyncio.run(write())
    history = manager.get_history(sid)
    assert len(history) == 32  # each one under the one before: one linear path of all of them
    assert sorted(m["id"] for m in history) == sorted(f"m{i}" for i in range(32))


def test_a_twin_under_atomic_runs_on_the_callers_connection(threads):
    """Sync code in a transaction that calls a twin through async_to_sync: the twin must join the
    transaction (on SQLite another connection would wait for the write lock forever)."""
    manager = SessionManager()
    sid = f"async-atomic-{uuid.uuid4().hex[:8]}"
    session = manager.get_session(sid)
    manager.append(sid, text("root", "kept"))

    class Undo(Exception):
        pass

    def write_then_undo() -> None:
        try:
            with transaction.atomic():
                async_to_sync(session.aappend_message)(text("gone", "rolled back"))
                assert [m["id"] for m in session.get_history()] == ["root", "gone"]
                raise Undo
        except Undo:
            pass

    write_then_undo()
    assert [m["id"] for m in manager.get_history(sid)] == ["root"]

    async def from_async() -> None:  # the same from a sync_to_async block of async code
        await sync_to_async(write_then_undo)()

    asyncio.run(from_async())
    assert [m["id"] for m in manager.get_history(sid)] == ["root"]


REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")


def test_pool_calls_see_the_callers_context_and_loop(threads):
    """The sync work sees the caller's context variables, and an async callback inside it (an
    ``async_to_sync``, as for an async summarizer) runs on the caller's loop, as under asgiref."""

    async def where() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    def work() -> tuple[str, str, asyncio.AbstractEventLoop]:
        return REQUEST_ID.get(), threading.current_thread().name, async_to_sync(where)()

    async def main() -> tuple[asyncio.AbstractEventLoop, tuple[str, str, asyncio.AbstractEventLoop]]:
        REQUEST_ID.set("req-7")
        return asyncio.get_running_loop(), await run_sync(work)

    loop, (request_id, thread, callback_loop) = asyncio.run(main())
    assert request_id == "req-7"
    assert thread.startswith("agent-sessions-db")
    assert callback_loop is loop


def test_a_loop_ends_while_a_cancelled_call_still_needs_it(threads):
    """A call whose caller was cancelled may still run an async callback on the caller's loop as that
    loop shuts down: the pool's shutdown waits for it without blocking the loop (no deadlock)."""
    started, finished = threading.Event(), threading.Event()

    async def callback() -> str:
        await asyncio.sleep(0.01)
        return "done"

    def work() -> None:
        started.set()
        time.sleep(0.2)  # the caller is cancelled meanwhile, and its loop starts to end
        assert async_to_sync(callback)() == "done"
        finished.set()

    async def main() -> None:
        call = asyncio.ensure_future(run_sync(work))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 30)
        call.cancel()

    runner = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    runner.start()
    runner.join(30)
    assert not runner.is_alive()  # asyncio.run returned: its loop did not wait on itself
    assert finished.is_set()  # the call's callback ran before the pool shut down
    assert not dbthreads._pool


def test_a_loop_closed_without_shutting_down_its_generators_does_not_keep_the_pool(threads):
    """``loop.close()`` alone never tells the pool; the next loop that ends properly still shuts it down."""
    old = asyncio.new_event_loop()
    try:
        assert old.run_until_complete(run_sync(lambda: 1)) == 1
    finally:
        old.close()
    assert dbthreads._pool  # nobody said the loop ended: the pool is still up
    assert asyncio.run(run_sync(lambda: 2)) == 2
    assert not dbthreads._pool
