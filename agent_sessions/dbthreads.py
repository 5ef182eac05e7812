"""A bounded pool of threads that run the async twins' database work (``AGENT_SESSIONS_ASYNC_THREADS``).

asgiref's ``sync_to_async(thread_sensitive=True)`` runs every call of a process in one thread on one
connection; this pool runs up to N at once, each thread on its own Django connections, which the
thread closes itself when the pool shuts down, not the GC. The pool shuts down when the last event
loop that used it ends (``asyncio.run``, asgiref's ``async_to_sync`` and servers close their loops
through ``shutdown_asyncgens``), at interpreter exit, or on :func:`shutdown`; so a server's loop
keeps its connections for its lifetime, and a test's loop leaves none open behind it.
"""

from __future__ import annotations

import asyncio
import atexit
import queue
import threading
import weakref
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor, Future
from typing import Any

from django.db import connections

from . import conf


class DatabaseThreads(Executor):
    """At most ``size`` threads, started on demand; each owns its Django connections and closes them when it stops."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self._work: queue.SimpleQueue[tuple[Future, Callable[..., Any], tuple, dict] | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the database threads are shut down")
            self._work.put((future, fn, args, kwargs))
            if not self._idle.acquire(blocking=False) and len(self._threads) < self.size:
                thread = threading.Thread(target=self._run, name=f"agent-sessions-db-{len(self._threads)}", daemon=True)
                self._threads.append(thread)
                thread.start()
        return future

    def _run(self) -> None:
        try:
            while (item := self._work.get()) is not None:
                future, fn, args, kwargs = item
                del item
                if not future.set_running_or_notify_cancel():
                    self._idle.release()
                    continue
                try:
                    outcome, failed = fn(*args, **kwargs), False
                except BaseException as exc:
                    outcome, failed = exc, True
                del fn, args, kwargs
                _drop_broken_connections()
                # Idle before the caller hears back, so its next call finds this thread instead of starting one.
                self._idle.release()
                if failed:
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)
                del future, outcome
        finally:
            connections.close_all()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._work.put(None)  # queued after the pending work: that finishes first
        if wait:
            for thread in threads:
                if thread is not threading.current_thread():
                    thread.join()

    @property
    def threads(self) -> int:
        """Threads started so far (each holds at most one connection per database alias it used)."""
        return len(self._threads)


def _drop_broken_connections() -> None:
    """Close this thread's connections that failed and no longer answer (as Django does between requests)."""
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None and conn.errors_occurred:
            if conn.in_atomic_block or not conn.is_usable():
                conn.close()
            else:
                conn.errors_occurred = False


_pool: list[DatabaseThreads] = []
_pool_lock = threading.Lock()


def pool() -> DatabaseThreads:
    """The process's pool, started on first use with ``AGENT_SESSIONS_ASYNC_THREADS`` threads at most."""
    size = conf.async_threads()
    if _pool and _pool[0].size == size:
        return _pool[0]
    with _pool_lock:
        if _pool and _pool[0].size != size:  # the setting changed: the old threads finish their work and stop
            _pool.pop().shutdown(wait=False)
        if not _pool:
            _pool.append(DatabaseThreads(size))
        return _pool[0]


def shutdown() -> None:
    """Stop the pool's threads after their pending work (each closes its connections); the next call starts anew."""
    with _pool_lock:
        stopping = _pool.pop() if _pool else None
    if stopping is not None:
        stopping.shutdown(wait=True)


# The loops that used the pool and have not ended, each with the async generator that tells us when it ends.
_loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncIterator[None]] = weakref.WeakKeyDictionary()


async def watch_loop() -> None:
    """Remember the running loop, so that the pool shuts down when it (the last such loop) ends.

    An async generator started on the loop is closed by the loop's ``shutdown_asyncgens``; its
    ``finally`` is our hook. A loop closed without that step leaves the pool to the next loop's end
    or to interpreter exit."""
    loop = asyncio.get_running_loop()
    if loop in _loops:
        return
    ended = _until_loop_ends(weakref.ref(loop))
    with _pool_lock:
        if loop in _loops:
            return
        _loops[loop] = ended
    await ended.__anext__()


async def _until_loop_ends(loop: weakref.ref[asyncio.AbstractEventLoop]) -> AsyncIterator[None]:
    try:
        yield
    finally:
        with _pool_lock:
            if (ended := loop()) is not None:
                _loops.pop(ended, None)
            for closed in [other for other in _loops if other.is_closed()]:  # closed without telling us
                del _loops[closed]
            last = not _loops
        if last:
            # Waited for off the loop: a call still running (its caller cancelled) may need the loop
            # for an async callback (async_to_sync) before its thread can stop.
            await asyncio.get_running_loop().run_in_executor(None, shutdown)


atexit.register(shutdown)
