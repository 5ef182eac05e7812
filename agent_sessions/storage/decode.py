"""Decoding stored message JSON: orjson where it returns what ``json.loads`` would, else ``json``.

A history of 10,000 rows is 10,000 small documents, so the parser's per-call overhead is most
of the cost.  orjson (the ``fast`` extra) parses them in about half the time of ``json``; it
differs from ``json.loads`` only in what it refuses (``NaN``, ``1e400``, lone surrogates, a BOM:
those raise and go to ``json.loads``) and in one thing it accepts: an integer past 64 bits,
which it turns into a float.  A run of 19 digits anywhere in the text sends it to ``json`` too
(checked once for a whole batch).  Without orjson, ``json``'s own scanner is called directly:
for a row of a hundred bytes ``json.loads`` spends about as long around the scan as in it.
Anything but one compact JSON document goes to ``json.loads`` itself, which returns or raises
as it always did.
"""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from json.scanner import make_scanner
from typing import Any, cast

_orjson_loads: Callable[[str], Any] | None
try:
    from orjson import JSONDecodeError as _OrjsonError
    from orjson import loads as _orjson_loads
except ImportError:  # pragma: no cover - the ``fast`` extra is installed by the project's own requirements
    _OrjsonError = json.JSONDecodeError  # type: ignore[assignment,misc]
    _orjson_loads = None

# typeshed types the argument as the scanner itself; it is the decoder whose settings it takes.
_scan: Callable[[str, int], tuple[Any, int]] = make_scanner(cast(Any, json.JSONDecoder()))

# Every byte to a space but the ASCII digits, which all become "0": a run of 19 zeros in the
# translated text is a run of 19 digits in the original, the shortest integer orjson may not
# hold (it stores up to 2**64 - 1 and down to -2**63).  bytes.translate and ``in`` run in C.
_DIGITS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_RUN = b"0" * 19


def _may_hold_big_integer(text: str) -> bool:
    try:
        encoded = text.encode()
    except UnicodeEncodeError:  # a lone surrogate, which orjson refuses anyway
        return True
    return _LONG_RUN in encoded.translate(_DIGITS)


def _scanned(text: str) -> Any:
    """``json.loads(text)`` through the scanner (compact documents) or ``json.loads`` itself."""
    try:
        value, end = _scan(text, 0)
    except (StopIteration, TypeError):
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


def _fast(text: str) -> Any:
    """orjson's value for a text known to hold no run of 19 digits; ``json.loads`` where it refuses."""
    try:
        return _orjson_loads(text)  # type: ignore[misc]
    except (_OrjsonError, TypeError):
        return json.loads(text)


def loads(text: str) -> Any:
    """``json.loads(text)``, faster for the documents this library writes."""
    if _orjson_loads is None or not isinstance(text, str) or _may_hold_big_integer(text):
        return _scanned(text)
    return _fast(text)


PAUSE_AT = 256
"""Batches of at least this many rows are decoded with the cyclic collector paused."""

_pause_lock = threading.Lock()
_pausers = 0
_resume = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Hold the cyclic garbage collector off while a batch of rows becomes objects.

    A stored message decodes to a dict holding a list, both tracked by the collector, so a
    10,000-row history allocates 20,000 tracked objects: about 28 young collections and, once
    enough survivors pile up, full ones over the whole heap (15 ms of a 30 ms read in a Django
    process).  A batch creates no garbage cycles, so nothing is lost by collecting after it; the
    collector is switched back on by the last of the threads that paused it, and only if it was
    on when the first one did.
    """
    global _pausers, _resume
    with _pause_lock:
        if _pausers == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pausers += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pausers -= 1
            if _pausers == 0 and _resume:
                gc.enable()


def loads_many(texts: Sequence[str]) -> list[Any]:
    """``[json.loads(t) for t in texts]``, with the checks for orjson made once for the batch."""
    if len(texts) < PAUSE_AT:
        return _loads_many(texts)
    with collector_paused():
        return _loads_many(texts)


GUARD_CHUNK = 250
"""Texts joined per look for a long run of digits (about 25 KB of messages).  Joined all at once,
10,000 rows made three fresh 1 MB buffers, whose page faults cost as much as the look itself
(1.5 against 0.6 ms); a run inside one text is inside one chunk all the same."""


def _batch_may_hold_big_integer(texts: Sequence[str]) -> bool:
    """Whether any of ``texts`` may hold an integer orjson would turn into a float (TypeError: not all str)."""
    return any(
        _may_hold_big_integer("".join(texts[start : start + GUARD_CHUNK]))
        for start in range(0, len(texts), GUARD_CHUNK)
    )


def _loads_many(texts: Sequence[str]) -> list[Any]:
    if _orjson_loads is None:
        return [_scanned(t) for t in texts]
    try:
        risky = _batch_may_hold_big_integer(texts)
    except TypeError:  # a foreign writer's bytes among them
        return [loads(t) for t in texts]
    if risky:
        return [loads(t) for t in texts]
    fast = _orjson_loads
    try:
        return [fast(t) for t in texts]
    except _OrjsonError:
        return [_fast(t) for t in texts]
