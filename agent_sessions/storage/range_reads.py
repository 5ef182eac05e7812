"""Paths read as one ordered range of the session's rows instead of a recursive walk.

Most sessions never branch, and in those a leaf's path is every row up to it in ``seq``
order.  One index range scan of the primary key ``(session_id, seq)`` (what a flat message
list costs) then replaces the walk's two index probes per message.  It reads the rows up to
the leaf, newest first, at most the leaf's depth plus an eighth (and a few); a session whose
registry count already says it holds more is not tried.  The rows carry ``id`` and
``parent_id`` and the path is followed here in Python, so the result is the walk's whatever
the stored depths and counts say; they only decide whether to try.  Whatever the range cannot
settle (a root beyond the limit, a parent stored after its child, a dangling parent, a cycle,
a path past the depth limit) gives None, and the caller walks in SQL.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from .walks import NEWEST_LEAF_SEQ, SESSION_RANGE, newest_leaf_params

SLACK = 8
"""Read the rows up to the leaf when at most one in ``SLACK`` of them (plus ``SLACK``) is off its path
(the Postgres statement spells it out); a recent window with a byte budget reads ``SLACK`` rows
past the number it expects to need."""

Rows = Sequence[Sequence[Any]]

MAX_LIMIT = 2**31 - 1
"""The most rows one range read asks for: the Postgres function takes its limit as an ``integer``
(a larger window, possible only with a raised ``MAX_PATH_DEPTH``, is read on)."""

MAX_BUDGET = 2**63 - 1
"""The largest byte budget the Postgres window function takes (a ``bigint``); any larger one reads as
far, since no window holds that many bytes."""


class ReadCalls(NamedTuple):
    """The calls of the stored functions a database offers for these reads (Postgres:
    ``storage.postgres_reads``), None for each it lacks: the caller then sends the
    statement, or, for a window's first read, reads on."""

    recent: str | None
    path: str | None
    window: str | None


NO_CALLS = ReadCalls(recent=None, path=None, window=None)
"""What a database without the functions (SQLite, or Postgres not yet migrated) offers."""

_SEQ_BY_ID = "SELECT seq FROM assistant_messages WHERE session_id = %s AND id = %s"
# The latest leaf as the first arm of walks.LATEST_LEAF alone: when it is not among the newest
# rows, no leaf means no rows, and the caller walks (with the full lookup).
_LEAF = {
    True: NEWEST_LEAF_SEQ,
    False: "SELECT seq, depth, id FROM assistant_messages WHERE session_id = %s AND id = %s",
}
# Newest first, so the leaf is the first row and a LIMIT cuts the oldest rows: past the bound
# the chain cannot reach its root among them and the walk takes over.  The session as a
# one-value range keeps the scan on the primary key (see walks.SESSION_RANGE).
_RANGE = (
    "SELECT m.id, m.parent_id, {columns} FROM assistant_messages m WHERE "
    + SESSION_RANGE.format(t="m.")
    + " AND m.seq <= {seq} ORDER BY m.session_id DESC, m.seq DESC LIMIT {limit}"
)
# The registry's message count (when the session has a row there) rules a branching session
# out before any scan: for the latest leaf every row is at or before it.  The bound is
# depth + depth / SLACK + SLACK, with 8 spelled out.  The leaf is a CTE that both the bound
# and the LIMIT read: written out twice, it would be planned twice, and a client's statement
# pays its planning at every read (docs/performance.md, R6).
_REGISTERED = "(SELECT s.message_count FROM assistant_sessions s WHERE s.id = %s)"
_POSTGRES = "WITH leaf AS MATERIALIZED ({leaf}) " + _RANGE.format(
    columns="{columns}",
    seq="(SELECT leaf.seq FROM leaf WHERE COALESCE(" + _REGISTERED + ", 0) <= leaf.depth + leaf.depth / 8 + 8)",
    limit="(SELECT leaf.depth + leaf.depth / 8 + 9 FROM leaf)",
)
# SQLite: the leaf first (in-process, no round trip), then the range.  SQLite has the same
# trap with its rowid (``seq``: after ANALYZE it may walk the whole table backwards), so the
# index is named; it bounds that scan by seq only after an equality on session_id
# (docs/performance.md, G2).
_SQLITE_LEAF = "SELECT leaf.seq, leaf.depth, leaf.id, " + _REGISTERED + ", {once} FROM ({leaf}) leaf"
_SQLITE_RANGE = (
    "SELECT m.id, m.parent_id, {columns} FROM assistant_messages m INDEXED BY assistant_msg_sess_seq "
    "WHERE m.session_id = %s AND m.seq <= {seq} ORDER BY m.seq DESC LIMIT {limit}"
)
_SQLITE = _SQLITE_RANGE.format(columns="{columns}", seq="%s", limit="%s")

Fetch = Callable[[str, list], list[tuple]]


def _leaf_params(session_id: str, leaf_id: str | None) -> list:
    """The parameters of ``_LEAF`` / ``_NEWEST_LEAF``: the newest-leaf lookup's for None, else the
    session and the leaf's id."""
    return newest_leaf_params(session_id) if leaf_id is None else [session_id, leaf_id]


def path_statement(columns: str, *, latest: bool) -> str:
    """Postgres: the path's range read, ``(id, parent_id, *columns)`` of the rows up to the leaf
    (``latest``: the latest leaf), newest first, as many as the leaf's depth allows and none when
    the registry's count rules the session out; parameters: :func:`path_params`."""
    return _POSTGRES.format(columns=columns, leaf=_LEAF[latest])


def path_params(session_id: str, leaf_id: str | None, params: list) -> list:
    """The parameters of :func:`path_statement`: the leaf's lookup, those of its ``columns``, then
    the session thrice (the registry's count, the range).  ``leaf_id`` None: the latest leaf (the
    values may also be placeholders' names)."""
    return [*_leaf_params(session_id, leaf_id), *params, session_id, session_id, session_id]


def read_path(
    fetch: Fetch,
    vendor: str,
    session_id: str,
    leaf_id: str | None,
    columns: str,
    params: list,
    max_depth: int,
    *,
    once: tuple[str, list] = ("NULL", []),
    call: str | None = None,
) -> tuple[list[Sequence[Any]], Any] | None:
    """``(rows, value)``: ``(id, parent_id, *columns)`` of the root→leaf path (``leaf_id`` None: the
    latest leaf), root first, and the value of ``once`` (an SQL expression and its parameters, read
    once per call rather than per row); None when the session branches too much before the leaf, or
    only the walk can tell.  ``params`` are those of ``columns``.  ``call`` (Postgres): a function
    that runs :func:`path_statement` with these columns and ``once`` (its arguments the session and
    the leaf or None; ``storage.postgres_reads``), sent instead of it."""
    once_sql, once_params = once
    if vendor == "postgresql":
        # One round trip: the value rides on every row (an InitPlan, evaluated once).
        if call is not None:
            rows = fetch(call, [session_id, leaf_id])
        else:
            sql = path_statement(f"{columns}, {once_sql}", latest=leaf_id is None)
            rows = fetch(sql, path_params(session_id, leaf_id, [*params, *once_params]))
        expected = leaf_id
        value = rows[0][-1] if rows else None
    else:
        # In-process: the value comes with the leaf, so the range's rows carry no extra column
        # (docs/performance.md, R9).
        leaf = fetch(
            _SQLITE_LEAF.format(leaf=_LEAF[leaf_id is None], once=once_sql),
            [session_id, *once_params, *_leaf_params(session_id, leaf_id)],
        )
        if not leaf or leaf[0][1] is None:
            return None
        seq, depth, expected, registered, value = leaf[0]
        bound = depth + depth // SLACK + SLACK
        if registered is not None and registered > bound:
            return None
        rows = fetch(_SQLITE.format(columns=columns), [*params, session_id, seq, bound + 1])
    path = follow(rows[::-1], expected, max_depth)
    return None if path is None else (list(path), value)


def follow(rows: Rows, leaf_id: str | None, max_depth: int) -> Rows | None:
    """The root→leaf rows among ``rows`` (``(id, parent_id, ...)`` in ``seq`` order, the leaf last),
    as the SQL walk would return them; None when only the walk can tell."""
    if not rows:
        return None
    leaf = rows[-1]
    if leaf_id is not None and leaf[0] != leaf_id:
        return None
    parents = [row[1] for row in rows]
    if parents[0] is None and parents[1:] == [row[0] for row in rows[:-1]]:
        path: Rows = rows  # one chain: every row is on the path (compared as two lists, in C)
    else:
        by_id = {row[0]: row for row in rows}
        chain = [leaf]
        node = leaf
        while node[1] is not None:
            parent = by_id.get(node[1])
            if parent is None or len(chain) >= len(rows):  # stored later or missing; or a cycle
                return None
            chain.append(parent)
            node = parent
        chain.reverse()
        path = chain
    return path if len(path) <= max_depth + 1 else None


_NEWEST_LEAF = {True: "(SELECT leaf.seq FROM (" + NEWEST_LEAF_SEQ + ") leaf)", False: "(" + _SEQ_BY_ID + ")"}


def recent_statement(vendor: str, columns: str, *, latest: bool) -> str:
    """The recent window's range read: ``(id, parent_id, *columns)`` of the newest rows up to the
    leaf (``latest``: the latest leaf), newest first; parameters: :func:`recent_params`."""
    template = _RANGE if vendor == "postgresql" else _SQLITE_RANGE
    return template.format(columns=columns, seq=_NEWEST_LEAF[latest], limit="%s")


def recent_params(vendor: str, session_id: str, leaf_id: str | None, params: list, limit: object) -> list:
    """The parameters of :func:`recent_statement`: those of its ``columns``, the session (Postgres
    names it as a one-value range, twice; SQLite by equality, once), the leaf's lookup, the limit.
    ``leaf_id`` None: the latest leaf (the values may also be placeholders' names)."""
    named = [session_id] * (2 if vendor == "postgresql" else 1)
    return [*params, *named, *_leaf_params(session_id, leaf_id), limit]


def read_recent(
    fetch: Fetch,
    vendor: str,
    session_id: str,
    leaf_id: str | None,
    columns: str,
    params: list,
    *,
    min_recent: int,
    budget: int,
    max_depth: int,
    call: str | None = None,
    window_call: str | None = None,
) -> list[tuple] | None:
    """The rows the recent-suffix walk (``walks.recent_cte``) would return, as ``(n, total, *rest)``
    with ``columns`` = ``bytes, *rest``, read as the newest rows up to the leaf, then on from the
    oldest row's parent while the window wants more; None when they do not form the leaf's chain
    far enough.  ``call``: a function that runs :func:`recent_statement` with these columns (its
    arguments the session, the leaf or None, and the limit; ``storage.postgres_reads``), sent
    instead of it.

    Without a budget the walk stops at row ``min_recent``, so ``min_recent`` + 1 rows are read.
    With one, as many as the window held last time (:data:`WINDOW_HINTS`), at least ``min_recent``,
    and ``SLACK`` more; with no hint, ``window_call`` (its arguments ``call``'s, the minimum and
    the budget; ``storage.postgres_reads``) reads the rows up to the window's stop at once."""
    key = (session_id, leaf_id, min_recent, budget)
    hinted = WINDOW_HINTS.get(key) if budget else 0
    limit = max(min_recent, hinted) + SLACK if budget else min_recent + 1
    expected = leaf_id
    rows: list[Sequence[Any]] = []
    sized_call = window_call if budget and not hinted else None
    if sized_call is not None:
        limit = max_depth + 1  # at most; the server stops at the window's end
    while True:
        limit = min(limit, MAX_LIMIT)
        if sized_call is not None:
            sizes = [min(min_recent, MAX_LIMIT), min(budget, MAX_BUDGET)]
            more = fetch(sized_call, [session_id, expected, limit, *sizes])
            sized_call = None  # a read on, if any, is a plain range read
        elif call is not None:
            more = fetch(call, [session_id, expected, limit])
        else:
            sql = recent_statement(vendor, columns, latest=expected is None)
            more = fetch(sql, recent_params(vendor, session_id, expected, params, limit))
        if not more or (expected is not None and more[0][0] != expected):
            return None
        rows += more
        window = _recent_suffix(rows, min_recent, budget, max_depth)
        if not isinstance(window, ReadOn):
            if window is not None and budget and len(window) != hinted:
                WINDOW_HINTS.put(key, len(window))
            return window
        expected, limit = window.parent_id, _read_on_limit(len(rows), window.total, min_recent, budget, max_depth)


class _WindowHints:
    """How many rows each recent window (by session, leaf, minimum and budget) held when last read
    in this process, so that the next read of it (a turn or two later, the usual agent loop) asks
    for that many at once instead of reading on.  A hint only: a window that changed is read on, or
    read a few rows too many.  Bounded: past ``size`` entries the oldest goes."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._rows: dict[tuple, int] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple) -> int:
        return self._rows.get(key, 0)

    def put(self, key: tuple, rows: int) -> None:
        with self._lock:
            self._rows.pop(key, None)
            self._rows[key] = rows
            if len(self._rows) > self.size:
                del self._rows[next(iter(self._rows))]

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()


WINDOW_HINTS = _WindowHints(4_096)


class ReadOn(NamedTuple):
    """The rows read so far form the leaf's chain but end before the walk would stop: read on from
    the oldest row's parent (``total``: the bytes read so far)."""

    parent_id: str
    total: int


def _read_on_limit(read: int, total: int, min_recent: int, budget: int, max_depth: int) -> int:
    """How many rows to read next: enough for the window if the older rows are the size of those
    read, an eighth more and ``SLACK``, at least as many as read so far (so rows that keep growing
    cost a number of reads logarithmic in the window), never past the depth limit."""
    wanted = max(min_recent - read, (budget - total) // max(1, total // read) + 1)
    return min(max(wanted + wanted // SLACK + SLACK, read), max_depth + 1 - read)


def _recent_suffix(rows: Rows, min_recent: int, budget: int, max_depth: int) -> list[tuple] | ReadOn | None:
    """The walk over ``rows`` (newest first, the leaf first) as ``(n, total, *rest)``, up to the row
    it stops at: the root, the depth limit, or the first row past ``min_recent`` whose running
    total exceeds ``budget``; :class:`ReadOn` when the rows end first, None when they break the
    chain before the walk would stop."""
    walked: list[tuple] = []
    total = 0
    for n, (_, parent, size, *rest) in enumerate(rows):
        if n and rows[n - 1][1] != rows[n][0]:
            return None  # not the parent of the row before: a branch, or a parent stored later
        total += size
        walked.append((n, total, *rest))
        if parent is None or not (n < max_depth and (n < min_recent or total <= budget)):
            return walked  # the walk stops here too: the root, the depth limit, one row past the window
    # The chain goes on past the rows read, unless back into them: a cycle, which the walk settles.
    oldest_parent = rows[-1][1]
    return None if any(row[0] == oldest_parent for row in rows) else ReadOn(oldest_parent, total)
