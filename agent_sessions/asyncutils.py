"""Sync/async bridging: callbacks may be plain functions or coroutines, and public
methods get ``a``-prefixed async twins declared with :func:`async_twin`."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import os
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from asgiref.sync import AsyncToSync, SyncToAsync, async_to_sync, sync_to_async
from django.db import connections

from . import dbthreads

T = TypeVar("T")
S = TypeVar("S")
R = TypeVar("R")
P = ParamSpec("P")


def resolve(value: Any) -> Any:
    """Return ``value``, or its result when it is awaitable (run to completion)."""
    if inspect.isawaitable(value):

        async def _wait():
            return await value

        return async_to_sync(_wait)()
    return value


def is_async_callable(fn: Any) -> bool:
    """True for a coroutine function, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a sync-or-async callable from sync code and return its result."""
    return resolve(fn(*args, **kwargs))


async def acall(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a sync-or-async callable from async code; sync ones run in a thread."""
    if is_async_callable(fn):
        return await fn(*args, **kwargs)
    result = await sync_to_async(fn, thread_sensitive=True)(*args, **kwargs)
    if inspect.isawaitable(result):
        return await result
    return result


def in_parent_sync_thread() -> bool:
    """True when this coroutine runs under ``async_to_sync`` called from a sync thread (sync code, a
    sync middleware in front of an async view): that thread may hold an open ``transaction.atomic``."""
    if getattr(AsyncToSync.executors, "current", None) is not None:
        return True
    try:
        return asyncio.get_running_loop() in AsyncToSync.loop_thread_executors
    except RuntimeError:
        return False


def _in_its_transaction(fn: Callable[..., R], args: tuple, kwargs: dict) -> tuple[bool, R | None]:
    """In the parent sync thread: run ``fn`` there if that thread is inside a transaction, else leave it."""
    if any(conn.in_atomic_block for conn in connections.all(initialized_only=True)):
        return True, fn(*args, **kwargs)
    return False, None


async def run_sync(fn: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    """Run sync database code from async code: in the pool of :mod:`agent_sessions.dbthreads` (up to
    ``AGENT_SESSIONS_ASYNC_THREADS`` at once), or in the calling sync thread when that thread is
    inside ``transaction.atomic`` (the call then joins its transaction, on its connection)."""
    if in_parent_sync_thread():
        ran, result = await sync_to_async(_in_its_transaction, thread_sensitive=True)(fn, args, kwargs)
        if ran:
            return cast("R", result)
    await dbthreads.watch_loop()
    loop = asyncio.get_running_loop()
    work = functools.partial(contextvars.copy_context().run, _in_pool_thread, loop, fn, args, kwargs)
    return await loop.run_in_executor(dbthreads.pool(), work)


def _in_pool_thread(loop: asyncio.AbstractEventLoop, fn: Callable[..., R], args: tuple, kwargs: dict) -> R:
    """Run ``fn`` in a pool thread, telling asgiref which loop called: an ``async_to_sync`` inside
    ``fn`` (an async callback) then runs on that loop, as under ``sync_to_async``."""
    SyncToAsync.threadlocal.main_event_loop = loop
    SyncToAsync.threadlocal.main_event_loop_pid = os.getpid()
    SyncToAsync.threadlocal.task_context = []
    return fn(*args, **kwargs)


def async_twin(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """The ``a``-prefixed coroutine twin of a sync method: runs it with :func:`run_sync`.

    Declared in the class body (``aget_history = async_twin(get_history)``), so type
    checkers see the twin with the sync method's parameters.  The twin looks the method
    up by name on the instance, so a subclass overriding the sync method changes both.
    """
    name = method.__name__

    async def twin(self: S, *args: P.args, **kwargs: P.kwargs) -> R:
        return await run_sync(getattr(self, name), *args, **kwargs)

    twin.__name__ = twin.__qualname__ = f"a{name}"
    twin.__module__ = method.__module__
    twin.__doc__ = f"Async twin of :meth:`{name}` (runs it in a database thread)."
    return twin


def _twin(name: str) -> Callable[..., Any]:
    async def method(self, *args, **kwargs):
        return await run_sync(getattr(self, name), *args, **kwargs)

    method.__name__ = f"a{name}"
    method.__qualname__ = f"a{name}"
    method.__doc__ = f"Async twin of :meth:`{name}` (runs it in a database thread)."
    return method


def with_async_twins(*names: str) -> Callable[[type[T]], type[T]]:
    """Class decorator adding ``a<name>`` coroutine twins for the given sync methods."""

    def decorate(cls: type[T]) -> type[T]:
        for name in names:
            if not hasattr(cls, f"a{name}"):
                twin = _twin(name)
                functools.update_wrapper(twin, getattr(cls, name), assigned=("__module__",), updated=())
                setattr(cls, f"a{name}", twin)
        return cls

    return decorate
