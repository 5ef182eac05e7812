"""Decoding stored message JSON: orjson where it returns what ``json.loads`` would, else ``json``.

A history of 10,000 rows is 10,000 small documents, so the parser's per-call overhead is most
of the cost (docs/performance.md, R11 and R12).  orjson (the ``fast`` extra) parses them faster; it
differs from ``json.loads`` only in what it refuses (``NaN``, ``1e400``, lone surrogates, a BOM:
those raise and go to ``json.loads``) and in one thing it accepts: an integer past 64 bits,
which it turns into a float.  A run of 19 digits anywhere in the text sends it to ``json`` too
(checked once for a whole batch).  Without orjson, ``json``'s own scanner is called directly:
for a row of a hundred bytes ``json.loads`` spends about as long around the scan as in it.
Anything but one compact JSON document goes to ``json.loads`` itself, so it returns or raises
exactly as ``json.loads`` does.

Reads of messages go through :func:`message` and :func:`messages`, which never raise: a row
another program left that is not a message (not JSON, not an object, nested too deep, no id or
role, parts not a list) comes back as a marked message (:func:`marked`).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Sequence
from itertools import repeat
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


def loads_many(texts: Sequence[str]) -> list[Any]:
    """``[json.loads(t) for t in texts]``, with the checks for orjson made once for the batch.

    The host's garbage collector is left alone: pausing it over a batch only moved the
    collection to whatever ran next (docs/performance.md, the tricks removed)."""
    return _loads_many(texts)


GUARD_CHUNK = 250
"""Texts joined per look for a long run of digits (about 25 KB of messages).  Joined all at once,
10,000 rows make three fresh 1 MB buffers, whose page faults cost as much as the look itself
(docs/performance.md, R13); a run inside one text is inside one chunk all the same."""


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


# ── rows that must be messages ─────────────────────────────────────────

DAMAGE_KEY = "damaged"
"""Key under ``metadata.agentSessions`` of a message read from a row that does not hold one."""

NOT_JSON = "not JSON"
NOT_AN_OBJECT = "not a JSON object"
TOO_DEEP = "nested too deep"
NO_ID = "no id"
NO_ROLE = "no role"
PARTS_NOT_A_LIST = "parts not a list"

Identify = Callable[[list[int]], Sequence[tuple[Any, Any]]]
"""Given the indexes of damaged rows in a batch, their ``(id, role)`` columns, in the same order."""

_LIST = {list}
_GET = dict.get
_KEY = dict.__getitem__
_PARTS = repeat("parts")
_NO_PARTS: repeat[list[Any]] = repeat([])  # what a message without parts counts as (never changed)
_IDS = repeat("id")
_ROLES = repeat("role")


def _all_messages(values: list[Any]) -> bool:
    """True when every value is an object with ``id``, ``role`` and, if it has ``parts``, a list of
    them: three C-level passes, about a seventh of what decoding the rows costs (no tuple per row,
    nothing kept); False sends the batch to the row-by-row check."""
    try:
        if not set(map(type, map(_GET, values, _PARTS, _NO_PARTS))) <= _LIST:
            return False
        deque(map(_KEY, values, _IDS), 0)
        deque(map(_KEY, values, _ROLES), 0)
    except (TypeError, KeyError):
        return False
    return True


def raw_text(text: object) -> str:
    """A stored content value as text (a SQLite BLOB as UTF-8, bad bytes replaced)."""
    if isinstance(text, str):
        return text
    if isinstance(text, bytes | bytearray | memoryview):
        return bytes(text).decode("utf-8", "replace")
    return "" if text is None else str(text)


def checked(text: object) -> tuple[Any, list[str]]:
    """The row's value and what is wrong with it as a message (nothing: it is one)."""
    try:
        value = loads(text)  # type: ignore[arg-type]
    except RecursionError:
        return None, [TOO_DEEP]
    except (ValueError, TypeError):
        return None, [NOT_JSON]
    if not isinstance(value, dict):
        return value, [NOT_AN_OBJECT]
    damage = [reason for key, reason in (("id", NO_ID), ("role", NO_ROLE)) if key not in value]
    if "parts" in value and not isinstance(value["parts"], list):
        damage.append(PARTS_NOT_A_LIST)
    return value, damage


def marked(text: object, damage: list[str], value: Any = None, *, row_id: Any = None, role: Any = None) -> dict:
    """The message a damaged row reads as (docs/data-model.md, "Rows that are not messages").

    An object that only lacks ``id`` or ``role`` keeps what it has and gets them from the row's
    columns; anything else becomes one text part holding the stored text as it is.  Either way
    ``metadata.agentSessions.damaged`` says what was wrong."""
    reason = ", ".join(damage)
    row_role = role if isinstance(role, str) and role else "assistant"
    if isinstance(value, dict) and PARTS_NOT_A_LIST not in damage:
        metadata = {} if value.get("metadata") is None else value["metadata"]
        ours = metadata.get("agentSessions") or {} if isinstance(metadata, dict) else None
        if isinstance(ours, dict):
            message = {"id": row_id, "role": row_role, **value}
            message["metadata"] = {**metadata, "agentSessions": {**ours, DAMAGE_KEY: reason}}
            return message
    return {
        "id": row_id,
        "role": row_role,
        "parts": [{"type": "text", "text": raw_text(text)}],
        "metadata": {"agentSessions": {DAMAGE_KEY: reason}},
    }


def message(text: object, *, row_id: Any = None, role: Any = None) -> dict:
    """One row's message: what :func:`loads` gives, or :func:`marked` for a row that holds no message."""
    value, damage = checked(text)
    return marked(text, damage, value, row_id=row_id, role=role) if damage else value


def _batch(texts: Sequence[Any]) -> list[Any] | None:
    """The rows' values when every one is a message; None: some row is damaged."""
    try:
        values = _loads_many(texts)
    except (ValueError, TypeError, RecursionError):
        return None
    return values if _all_messages(values) else None


def messages(texts: Sequence[Any], identify: Identify | None = None) -> list[dict]:
    """:func:`loads_many` for rows that must be messages; a damaged row comes back :func:`marked`.

    The batch is decoded and checked as a whole; only when that fails are the rows taken one by
    one, and ``identify`` is asked once for the damaged rows' ``id`` and ``role`` columns (reads
    select the content alone)."""
    values = _batch(texts)
    if values is not None:
        return values
    rows = [checked(text) for text in texts]
    bad = [i for i, (_, damage) in enumerate(rows) if damage]
    columns = list(identify(bad)) if identify is not None and bad else [(None, None)] * len(bad)
    out = [value for value, _ in rows]
    for i, (row_id, role) in zip(bad, columns, strict=True):
        value, damage = rows[i]
        out[i] = marked(texts[i], damage, value, row_id=row_id, role=role)
    return out
