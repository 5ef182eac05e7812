"""Sync/async bridging: callbacks may be plain functions or coroutines, and every
non-builder method gets an ``a``-prefixed async twin generated from one place."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import async_to_sync, sync_to_async

T = TypeVar("T")


def resolve(value: Any) -> Any:
    """Return ``value``, or its result when it is awaitable (run to completion)."""
    if inspect.isawaitable(value):

        async def _wait():
            return await value

        return async_to_sync(_wait)()
    return value


def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a sync-or-async callable from sync code and return its result."""
    return resolve(fn(*args, **kwargs))


async def acall(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a sync-or-async callable from async code; sync ones run in a thread."""
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__):
        return await fn(*args, **kwargs)
    result = await sync_to_async(fn, thread_sensitive=True)(*args, **kwargs)
    if inspect.isawaitable(result):
        return await result
    return result


def _twin(name: str) -> Callable[..., Any]:
    async def method(self, *args, **kwargs):
        return await sync_to_async(getattr(self, name), thread_sensitive=True)(*args, **kwargs)

    method.__name__ = f"a{name}"
    method.__qualname__ = f"a{name}"
    method.__doc__ = f"Async twin of :meth:`{name}` (runs it in Django's sync thread)."
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
