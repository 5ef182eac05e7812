"""DjangoSessionProvider: one session's message tree in the seed's tables, through Django.

Reads of a path are one recursive CTE over ``(session_id, id, parent_id)``
with the content joined once at the end; appends are one ``INSERT … SELECT``
that picks the parent, depth and running token total in the same statement,
so appending costs the same at 10 or 10,000 messages.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Sized
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

from django.db import DataError, OperationalError, connections, router, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from .. import conf, text
from ..exceptions import InvalidMessage, MessageCycle
from ..models import Compaction, Message
from ..overlays import apply_overlays
from ..reconnect import read_with_retry, ready
from ..search.args import page as page_bounds
from ..search.args import query_terms
from ..search.args import roles as role_filter
from ..tokens import estimate_message_tokens, estimate_one_message_tokens
from ..types import (
    HistoryRowStat,
    RecentHistory,
    SearchResult,
    StoredCompaction,
    check_id_length,
    message_id,
    stored_fields,
)
from . import appends, backends, cycles, decode, range_reads, registration, visible_tokens, walks
from .base import OMITTED, AppendOutcome, SessionBackend
from .walks import (
    HAS_OVERLAYS,
    LATEST_LEAF,
    LATEST_LEAF_CONTENT,
    NEWEST_LEAF,
    NEWEST_LEAF_CONTENT,
    PATH_ROW,
    copy_cte,
    latest_leaf_params,
    newest_leaf_params,
    path_cte,
    recent_cte,
    walk_params,
)

_COPY_COLUMNS = (
    "id, session_id, parent_id, role, content, text_content, tool_text, created_at, tokens, depth, path_tokens, "
    "origin_id"
)
"""Columns :meth:`DjangoSessionProvider.copy_path_to` fills, in its SELECT's order."""

_STORED_ID = "SELECT 1 FROM assistant_messages WHERE session_id = %s AND id = %s"

T = TypeVar("T")


# The columns a damaged row's marked message takes (its id and role), by id or by stored text;
# ``(%s)`` stands for the list of values.
ROLES_BY_ID = "SELECT id, role FROM assistant_messages WHERE session_id = %s AND id IN (%s) ORDER BY seq"
ROLES_BY_CONTENT = (
    "SELECT content, id, role FROM assistant_messages WHERE session_id = %s AND content IN (%s) ORDER BY seq"
)


def _orphaned_id(message_id: str, *, cycle: bool = False) -> InvalidMessage:
    """The refusal of an id stored rows name as their parent; :class:`MessageCycle` when the message,
    stored where it was asked to go, would be its own ancestor."""
    if cycle:
        return MessageCycle(
            f"message id {message_id!r} is named as their parent by messages stored above where it would go: "
            "storing it would close a parent cycle; use a new id"
        )
    return InvalidMessage(
        f"message id {message_id!r} was deleted while messages below it stayed, and they still name it as "
        "their parent: storing it again would re-attach them; use a new id"
    )


_BULK_DEFAULTS = {"tool_text": ""}
"""Values :meth:`DjangoSessionProvider.insert_rows` uses for keys a row leaves out (NOT NULL columns)."""

# Re-derive depth and running tokens below the given roots (after an update
# or a delete changed what lies above them).  A walk down the children can only go
# round a parent cycle by coming back to a root (each row has one parent, so the first
# row met twice is where the walk began), so it never steps onto a root again.
# The root depth is cast: bound by the server, a small int parameter arrives as smallint, which the
# recursive term's integer would not match.
_REPAIR_SUBTREE = (
    "WITH RECURSIVE sub(seq, id, depth, path_tokens) AS ("
    "  SELECT seq, id, CAST(%s AS INTEGER), {root_tokens} FROM assistant_messages"
    "    WHERE session_id = %s AND id IN ({roots})"
    "  UNION ALL"
    "  SELECT c.seq, c.id, sub.depth + 1, sub.path_tokens + c.tokens FROM assistant_messages c JOIN sub"
    "    ON c.session_id = %s AND c.parent_id = sub.id WHERE sub.depth < %s AND c.id NOT IN ({roots})"
    ") "
    "UPDATE assistant_messages SET depth = (SELECT sub.depth FROM sub WHERE sub.seq = assistant_messages.seq), "
    "path_tokens = (SELECT sub.path_tokens FROM sub WHERE sub.seq = assistant_messages.seq) "
    "WHERE session_id = %s AND seq IN (SELECT seq FROM sub)"
)


def as_datetime(value):
    """A timestamp read by raw SQL as an aware datetime (SQLite returns text)."""
    if isinstance(value, str):
        value = parse_datetime(value) or value
    if isinstance(value, datetime) and timezone.is_naive(value):
        value = timezone.make_aware(value, UTC)
    return value


@contextmanager
def permanent_errors_as_invalid() -> Iterator[None]:
    """Input the database refuses for good (a data exception, a program limit) is ``InvalidMessage``.

    The validation before each write keeps such input out; this is the net under it, so a
    permanent refusal never looks like a retryable outage (``OperationalError``).
    """
    try:
        yield
    except (DataError, OperationalError) as exc:
        state = str(getattr(exc.__cause__, "sqlstate", "") or getattr(exc.__cause__, "pgcode", "") or "")
        if isinstance(exc, DataError) or state[:2] in PERMANENT_SQLSTATE_CLASSES:
            raise InvalidMessage(f"the database refused this input: {exc}") from exc
        raise


# SQLSTATE classes of permanent refusals: data exception, program limit exceeded.
PERMANENT_SQLSTATE_CLASSES = {"22", "54"}


def _unknown_leaf(leaf_id: str | None) -> bool:
    """True when ``leaf_id`` names no row that can exist: a NUL or a lone surrogate is never stored."""
    return leaf_id is not None and not text.storable(leaf_id)


def _placeholders(n: int) -> str:
    return ", ".join(["%s"] * n)


class DjangoSessionProvider:
    """Stores one session's messages and overlays in the seed's tables via Django's connection."""

    def __init__(self, session_id: str = "", *, using: str | None = None, owner: Any = None) -> None:
        if not isinstance(session_id, str):
            raise ValueError("session_id must be a string without NUL characters")
        text.check(session_id, "session id")  # InvalidText (a ValueError): NUL, lone surrogates
        check_id_length(session_id, "session id")
        self.session_id = session_id
        self._using = using
        self.owner = owner  # who owns the registry row this storage makes: a user or its pk; None: staff only
        self._registered: str | None = None  # the session id whose registry row this object made or found

    def mark_registered(self) -> None:
        """Skip the registry row at the next append: the caller writes it (SessionManager's fork and split)
        or knows it exists.  Otherwise the first append of each session id makes one when it is missing
        (:mod:`~agent_sessions.storage.registration`); the default namespace ``''`` never gets one."""
        self._registered = self.session_id

    def _needs_registration(self) -> bool:
        return bool(self.session_id) and self._registered != self.session_id

    def _register(self, cursor) -> None:
        """The session's registry row, unless it exists (once per session id; see :meth:`mark_registered`)."""
        self.backend.reserve_write(cursor)  # SQLite: the write lock first, as every multi-statement write
        registration.register(cursor, self.session_id, stamp=timezone.now(), owner=self.owner)

    def __repr__(self) -> str:
        return f"DjangoSessionProvider(session_id={self.session_id!r}, using={self.using!r})"

    # ── as a Session's backend (storage.base.SessionBackend) ────────
    orm = True
    """Rows in Django's database: context blocks and the prompt are auto-wired, compactions take the job row's lease."""
    stamps_registry = True
    """``append_message_stats(registry_stamp=...)`` sets ``updated_at`` in the insert's own transaction."""

    def session_backend(self) -> SessionBackend:
        """This provider is its own SessionBackend: a Session calls its fast paths directly."""
        return self

    @property
    def provider(self) -> DjangoSessionProvider:
        return self

    # ── plumbing ────────────────────────────────────────────────────
    @property
    def alias(self) -> str | None:
        """The database alias given to the constructor; None lets the routers choose per model."""
        return self._using

    @property
    def using(self) -> str:
        """The database alias: the one given, or what the routers pick for messages."""
        return self._using or router.db_for_write(Message)

    @property
    def connection(self):
        """The alias's connection, replaced first if the server closed it (see :mod:`agent_sessions.reconnect`)."""
        return ready(self.using)

    @property
    def backend(self):
        return backends.for_alias(self.using)

    def _fetch(self, sql: str, params: list, *, one: bool = False) -> list[tuple]:
        """One read through the vendor's bare-connection fetch, retried once on a dropped connection."""
        using = self.using

        def read() -> list[tuple]:
            connection = ready(using)
            return backends.for_vendor(connection.vendor).fetch(connection, sql, params, one=one)

        return read_with_retry(using, read)

    def _fetchall(self, sql: str, params: list) -> list[tuple]:
        return self._fetch(sql, params)

    def _fetchone(self, sql: str, params: list) -> tuple | None:
        rows = self._fetch(sql, params, one=True)
        return rows[0] if rows else None

    # ── reads ───────────────────────────────────────────────────────
    def get_message(self, message_id: str) -> dict | None:
        """The stored message with this id in this session, or None."""
        if not text.storable(message_id):
            return None  # no such id can have been stored (lone surrogates, NUL)
        row = self._fetchone(
            "SELECT content, role FROM assistant_messages WHERE session_id = %s AND id = %s",
            [self.session_id, message_id],
        )
        return decode.message(row[0], row_id=message_id, role=row[1]) if row else None

    def _messages(self, texts: list, rows: list | None = None) -> list[dict]:
        """The rows' messages (:func:`decode.messages`): a damaged row comes back marked, its id and role
        read from its columns by one more query, made only when some row is damaged.  ``rows``: the
        read's rows in the same order, each starting with its id, when the read selected it."""
        return decode.messages(
            texts,
            lambda bad: self._row_columns([texts[i] for i in bad], None if rows is None else [rows[i][0] for i in bad]),
        )

    def _row_columns(self, texts: list, ids: list | None) -> list[tuple]:
        """``(id, role)`` of damaged rows: looked up by id when the read had it, else by their stored text
        (equal texts take this session's rows in insertion order, as a path lists them)."""
        if ids is not None:
            found = dict(self._rows_where(ROLES_BY_ID, list(dict.fromkeys(ids))))
            return [(i, found.get(i)) for i in ids]
        by_text: dict[Any, list[tuple]] = {}
        for content, row_id, role in self._rows_where(ROLES_BY_CONTENT, list(dict.fromkeys(texts))):
            by_text.setdefault(content, []).append((row_id, role))
        taken: dict[Any, int] = {}
        columns = []
        for stored in texts:
            matches = by_text.get(stored) or [(None, None)]
            n = taken.get(stored, 0)
            columns.append(matches[min(n, len(matches) - 1)])
            taken[stored] = n + 1
        return columns

    def _rows_where(self, sql: str, values: list) -> list[tuple]:
        """``sql`` (:data:`ROLES_BY_ID` or :data:`ROLES_BY_CONTENT`) over ``values``, in insertion order
        (500 values a query, under SQLite's bound-parameter limit)."""
        rows: list[tuple] = []
        for start in range(0, len(values), 500):
            chunk = values[start : start + 500]
            rows += self._fetchall(sql.replace("(%s)", f"({_placeholders(len(chunk))})"), [self.session_id, *chunk])
        return rows

    def _latest_leaf(self, newest: str, anywhere: str) -> tuple | None:
        """The latest leaf's row: looked for among the newest rows (a statement half as dear to plan
        on Postgres), and in the whole session only when none of them is childless, or it is empty."""
        row = self._fetchone(newest, newest_leaf_params(self.session_id))
        return row if row is not None else self._fetchone(anywhere, latest_leaf_params(self.session_id))

    def get_latest_leaf(self) -> dict | None:
        """The most recently appended childless message, or None for an empty session."""
        row = self._latest_leaf(NEWEST_LEAF_CONTENT, LATEST_LEAF_CONTENT)
        return self._messages([row[0]])[0] if row else None

    def _path_params(self, leaf_id: str) -> list:
        return walk_params(self.session_id, leaf_id)

    def _walk(self, leaf_id: str | None) -> tuple[str, list]:
        """The root-ward walk CTE from ``leaf_id`` (None: the latest leaf) and its parameters."""
        return walks.walk(self.connection.vendor, self.session_id, leaf_id)

    def _range_path(self, leaf_id: str | None) -> tuple[list, Any] | None:
        """``(id, parent_id, content)`` of the path, root first, from one range scan of the session
        (:mod:`~agent_sessions.storage.range_reads`; on Postgres one call of its function), and
        whether the session has overlays; None: the session branches, so walk instead."""
        connection = self.connection
        return self._with_read_calls(
            connection,
            lambda calls: range_reads.read_path(
                self._fetchall,
                connection.vendor,
                self.session_id,
                leaf_id,
                "m.content",
                [],
                conf.max_path_depth(),
                once=(HAS_OVERLAYS, [self.session_id]),
                call=calls.path,
            ),
        )

    def _with_read_calls(self, connection, read: Callable[[range_reads.ReadCalls], T]) -> T:
        """``read(calls)`` with the read functions ``connection``'s database has (each backend's
        ``read_calls``).  When one this connection remembered is gone (migrations taken back under a
        running process), ``read`` runs once more with those it has now; inside a transaction the
        error stands (it aborted the transaction), and the next read asks again."""
        backend = backends.for_vendor(connection.vendor)
        return backend.retry_if_functions_gone(
            connection, lambda: read(read_with_retry(self.using, lambda: backend.read_calls(connection)))
        )

    def get_raw_path(self, leaf_id: str | None = None) -> list[dict]:
        """Root→leaf messages as stored, without overlays (one query, the leaf lookup included)."""
        if _unknown_leaf(leaf_id):
            return []
        ranged = self._range_path(leaf_id)
        if ranged is not None:
            return self._messages([r[2] for r in ranged[0]], ranged[0])
        cte, params = self._walk(leaf_id)
        rows = self._fetchall(
            cte + "SELECT m.id, path.parent_id, m.content FROM path JOIN assistant_messages m ON " + PATH_ROW
            + " ORDER BY path.n DESC",
            params,
        )  # fmt: skip
        rows = cycles.root_first(rows, self.session_id)
        return self._messages([r[2] for r in rows], rows)

    def get_history(self, leaf_id: str | None = None) -> list[dict]:
        """Root→leaf path of ``leaf_id`` (or the latest leaf) with overlays applied; ``[]`` if unknown.

        A session that does not branch is read as one range of its rows, one that does by
        the walk; either query also tells whether the session has any overlay, so a
        session without one is read in a single query (two when it branches).
        """
        if _unknown_leaf(leaf_id):
            return []
        ranged = self._range_path(leaf_id)
        if ranged is not None:
            rows, has_overlays = ranged
        else:
            cte, params = self._walk(leaf_id)
            rows = self._fetchall(
                cte + f"SELECT m.id, path.parent_id, m.content, CASE WHEN path.n = 0 THEN {HAS_OVERLAYS} END "
                "FROM path JOIN assistant_messages m ON " + PATH_ROW + " ORDER BY path.n DESC",
                [*params, self.session_id],
            )
            rows = cycles.root_first(rows, self.session_id)
            has_overlays = rows[-1][3] if rows else None
        if not rows:
            return []
        path = self._messages([r[2] for r in rows], rows)
        return apply_overlays(path, self.get_compactions()) if has_overlays is not None else path

    def get_path_length(self, leaf_id: str | None = None) -> int:
        """Number of stored messages from the root to the leaf (no overlays)."""
        if _unknown_leaf(leaf_id):
            return 0
        if leaf_id is None:
            row = self._latest_leaf(NEWEST_LEAF, LATEST_LEAF)  # (id, depth, path_tokens)
        else:
            row = self._fetchone(
                "SELECT id, depth FROM assistant_messages WHERE session_id = %s AND id = %s",
                [self.session_id, leaf_id],
            )
        if row is None:
            return 0
        leaf = row[0]
        if row[1] is not None:
            return int(row[1])
        # Rows from a foreign writer carry no depth: count the walk instead.
        walk = path_cte(self.connection.vendor)
        counted = self._fetchone(walk + "SELECT count(DISTINCT path.seq) FROM path", self._path_params(leaf))
        return int(counted[0]) if counted else 0

    def get_branches(self, message_id: str) -> list[dict]:
        """Children of a message, oldest first."""
        if not text.storable(message_id):
            return []
        rows = self._fetchall(
            "SELECT content, id, role FROM assistant_messages WHERE session_id = %s AND parent_id = %s ORDER BY seq",
            [self.session_id, message_id],
        )
        return decode.messages([r[0] for r in rows], lambda bad: [rows[i][1:] for i in bad])

    def get_history_row_stats(self, leaf_id: str | None = None) -> list[HistoryRowStat]:
        """``(id, role, bytes)`` of each stored message on the path, root first, without content."""
        if _unknown_leaf(leaf_id):
            return []
        cte, params = self._walk(leaf_id)
        size = self.backend.BYTES_EXPR.format(col="m.content")
        rows = self._fetchall(
            cte + f"SELECT m.id, path.parent_id, m.role, {size} FROM path JOIN assistant_messages m ON {PATH_ROW} "
            "ORDER BY path.n DESC",
            params,
        )
        return [HistoryRowStat(id=r[0], role=r[2], bytes=int(r[3])) for r in cycles.root_first(rows, self.session_id)]

    def get_recent_history(
        self, leaf_id: str | None = None, *, max_content_bytes: int, min_recent_messages: int = 1
    ) -> RecentHistory:
        """The longest recent suffix of the path whose stored sizes fit ``max_content_bytes``.

        At least ``min_recent_messages`` (≥ 1) rows are returned; the walk stops
        one row past the budget, so the cost follows the window, not the path.
        """
        min_recent = max(1, int(min_recent_messages))
        budget = int(max_content_bytes)
        if _unknown_leaf(leaf_id):
            return RecentHistory(messages=[], truncated=False, total_content_bytes=0)
        connection = self.connection
        vendor = connection.vendor
        columns = f"{backends.for_vendor(vendor).BYTES_EXPR.format(col='m.content')}, m.content, {HAS_OVERLAYS}"
        rows = self._with_read_calls(
            connection,
            lambda calls: range_reads.read_recent(
                self._fetchall,
                vendor,
                self.session_id,
                leaf_id,
                columns,
                [self.session_id],
                min_recent=min_recent,
                budget=budget,
                max_depth=conf.max_path_depth(),
                call=calls.recent,
                window_call=calls.window,
            ),
        )
        if rows is None:  # the newest rows up to the leaf are not its chain: walk
            rows = self._walk_recent(leaf_id, min_recent, budget)
        kept = [r for r in rows if r[0] < min_recent or r[1] <= budget]
        # The walk only goes on past a kept row, so a dropped row means older ones exist.
        truncated = len(kept) < len(rows)
        window = self._messages([r[2] for r in reversed(kept)])
        total = int(kept[-1][1]) if kept else 0
        if window and rows[0][3] is not None:  # rows[0] is the leaf (n = 0): the session has overlays
            messages = apply_overlays(window, self.get_compactions(), window=True)
        else:
            messages = window
        return RecentHistory(messages=messages, truncated=truncated, total_content_bytes=total)

    def _walk_recent(self, leaf_id: str | None, min_recent: int, budget: int) -> list[tuple]:
        """``(n, total, content, has_overlays, id)`` of the walk that stops one row past the window,
        up to the first repeated row (a parent cycle)."""
        sql = recent_cte(self.connection.vendor, latest=leaf_id is None).format(
            bytes=self.backend.BYTES_EXPR.format(col="content"),
            mbytes=self.backend.BYTES_EXPR.format(col="m.content"),
        )
        rows = self._fetchall(
            sql + f"SELECT path.n, path.total, m.content, CASE WHEN path.n = 0 THEN {HAS_OVERLAYS} END, m.id "
            "FROM path JOIN assistant_messages m ON " + PATH_ROW + " ORDER BY path.n",
            [*walk_params(self.session_id, leaf_id), min_recent, budget, self.session_id],
        )
        return cycles.leaf_first(rows, self.session_id, key=4)

    def get_compactions(self) -> list[StoredCompaction]:
        """Every stored overlay of this session, oldest first."""
        rows = self._fetchall(
            "SELECT id, summary, from_message_id, to_message_id, created_at FROM assistant_compactions "
            "WHERE session_id = %s ORDER BY seq",
            [self.session_id],
        )
        return [
            StoredCompaction(
                id=r[0], summary=r[1], from_message_id=r[2], to_message_id=r[3], created_at=as_datetime(r[4])
            )
            for r in rows
        ]

    def visible_history_tokens(self, leaf_id: str | None = None, path_tokens: int | None = None) -> int | None:
        """Tokens of the leaf's visible history from stored running totals; None: read the history instead.

        ``leaf_id=None`` means the latest leaf.  After an append the caller passes the
        new row's ``path_tokens``, so a session without overlays costs one query.
        """
        if _unknown_leaf(leaf_id):
            return 0
        overlays = self.get_compactions()
        if leaf_id is None:
            row = self._latest_leaf(NEWEST_LEAF, LATEST_LEAF)  # (id, depth, path_tokens)
            if row is None:
                return 0
            leaf_id, path_tokens = row[0], row[2]
        if not overlays and path_tokens is not None:
            return int(path_tokens)
        return visible_tokens.visible_history_tokens(self._fetchall, self.session_id, leaf_id, overlays)

    def history_tokens(self, leaf_id: str | None = None, path_tokens: int | None = None) -> int:
        """:meth:`visible_history_tokens`, or the estimate of the loaded history where that cannot tell."""
        tokens = self.visible_history_tokens(leaf_id, path_tokens)
        return estimate_message_tokens(self.get_history(leaf_id)) if tokens is None else tokens

    def search_messages(
        self, query: str, limit: int = 20, *, offset: int = 0, role: str | list[str] | None = None
    ) -> list[SearchResult]:
        """Messages of this session matching ``query`` (see agent_sessions.search.query), best first."""
        return search(query, session_id=self.session_id, limit=limit, offset=offset, role=role, using=self.using)

    # ── writes ──────────────────────────────────────────────────────
    def append_message(self, message: dict, parent_id=OMITTED) -> bool:
        """Insert a message; False (and nothing written) if its id already exists here."""
        return self.append_message_stats(message, parent_id).inserted

    def append_message_stats(
        self, message: dict, parent_id=OMITTED, *, registry_stamp: datetime | None = None
    ) -> AppendOutcome:
        """Insert a message and report its parent, depth and running token total.

        ``registry_stamp``: also set the session's ``updated_at`` to it, in the insert's own
        transaction, when the message is stored (SessionManager's writes; see ``appends.STAMP``).
        """
        stored, search_text, tools = stored_fields(message)
        tokens = estimate_one_message_tokens(message)
        auto = parent_id is OMITTED
        parent = None if auto or parent_id is None else text.check(str(parent_id), "parent_id")
        connection = self.connection
        now = connection.ops.adapt_datetimefield_value(timezone.now())
        values = [message["id"], self.session_id, message["role"], stored, search_text, tools, now, tokens]
        stamp = None if registry_stamp is None else connection.ops.adapt_datetimefield_value(registry_stamp)
        if self._needs_registration():  # the session's first append here: its registry row in the same transaction
            with permanent_errors_as_invalid(), transaction.atomic(using=self.using), connection.cursor() as cursor:
                self._register(cursor)
                row = self.backend.locked_insert(cursor, self.session_id, values, parent, auto=auto, stamp=stamp)
            self._registered = self.session_id  # after the commit: a failed append leaves no row, and tries again
        else:
            with permanent_errors_as_invalid(), connection.cursor() as cursor:
                row = self.backend.locked_insert(cursor, self.session_id, values, parent, auto=auto, stamp=stamp)
        if row is None:
            if self._fetchone(_STORED_ID, [self.session_id, message["id"]]) is None:
                # Not a duplicate: refused (see storage.appends); a cycle if it would sit below its children.
                self._refuse_if_cycle(message["id"], parent if not auto else None, latest=auto)
                raise _orphaned_id(message["id"])
            return AppendOutcome(inserted=False)
        return AppendOutcome(inserted=True, parent_id=row[1], depth=row[2], path_tokens=row[3])

    def _refuse_if_cycle(self, message_id: str, parent_id: str | None, *, latest: bool = False) -> None:
        """Raise :class:`MessageCycle` when ``message_id`` (not stored, but named as a parent by stored
        rows) stored under ``parent_id`` (``latest``: the latest leaf) would be its own ancestor: when
        a row on the parent's path names it as its parent.  Only on the rare branch of a refused append."""
        if parent_id is None and not latest:
            return
        cte, params = self._walk(None if latest else parent_id)
        if self._fetchone(cte + "SELECT 1 FROM path WHERE path.parent_id = %s LIMIT 1", [*params, message_id]):
            raise _orphaned_id(message_id, cycle=True)

    def update_message(self, message: dict) -> bool:
        """Replace a stored message's content (same id); re-indexes search. False if absent."""
        if isinstance(message, dict) and isinstance(message.get("id"), str) and not text.storable(message["id"]):
            return False  # no stored message has this id
        stored, search_text, tools = stored_fields(message)
        tokens = estimate_one_message_tokens(message)
        with permanent_errors_as_invalid(), transaction.atomic(using=self.using), self.connection.cursor() as cursor:
            # The subtree repair below updates many rows: serialise with the session's other
            # writers, or two updates repairing overlapping subtrees deadlock (Postgres).
            self.backend.lock_session(cursor, self.session_id)
            cursor.execute(
                "UPDATE assistant_messages SET role = %s, content = %s, text_content = %s, tool_text = %s, tokens = %s "
                "WHERE session_id = %s AND id = %s",
                [
                    message["role"],
                    stored,
                    search_text,
                    tools,
                    tokens,
                    self.session_id,
                    message["id"],
                ],  # fmt: skip
            )
            if cursor.rowcount == 0:
                return False
            self._repair_below([message["id"]], cursor, from_parent=True)
        return True

    def pop_latest_leaf(self, registry_stamp: datetime) -> dict | None:
        """Delete the latest leaf and return it (None: the session is empty), setting the registry's
        ``updated_at`` to ``registry_stamp`` in the same commit; Postgres: one round trip."""
        if not text.storable(self.session_id):
            return None  # no row can belong to such an id (lone surrogates, NUL)
        connection = self.connection
        stamp = connection.ops.adapt_datetimefield_value(registry_stamp)
        with connection.cursor() as cursor:
            row = self.backend.pop_latest(cursor, self.session_id, stamp)
        return None if row is None else self._messages([row[0]])[0]

    def delete_messages(self, message_ids: list[str]) -> int:
        """Delete these messages (children stay, as roots of their subtrees). Returns rows deleted."""
        ids = [i for i in dict.fromkeys(message_ids) if text.storable(i)]
        if not ids:
            return 0
        deleted = 0
        with transaction.atomic(using=self.using), self.connection.cursor() as cursor:
            self.backend.lock_session(cursor, self.session_id)  # as in update_message
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                cursor.execute(
                    f"DELETE FROM assistant_messages WHERE session_id = %s AND id IN ({_placeholders(len(chunk))})",
                    [self.session_id, *chunk],
                )
                deleted += cursor.rowcount
                # Orphaned children become roots: re-derive their subtrees' totals.
                cursor.execute(
                    "SELECT id FROM assistant_messages WHERE session_id = %s "
                    f"AND parent_id IN ({_placeholders(len(chunk))})",
                    [self.session_id, *chunk],
                )
                orphans = [r[0] for r in cursor.fetchall()]
                for o_start in range(0, len(orphans), 500):
                    self._repair_below(orphans[o_start : o_start + 500], cursor, from_parent=False)
        return deleted

    def _repair_below(self, roots: list[str], cursor, *, from_parent: bool) -> None:
        """Recompute depth/path_tokens for ``roots`` and everything below them.

        ``from_parent``: the roots keep their parent (an update); otherwise they
        have just lost it (a delete) and become depth-1 roots.
        """
        if from_parent:
            # One root (an updated message): start from its parent's totals.
            cursor.execute(
                "SELECT p.depth, p.path_tokens FROM assistant_messages c JOIN assistant_messages p "
                "ON p.session_id = c.session_id AND p.id = c.parent_id WHERE c.session_id = %s AND c.id = %s",
                [self.session_id, roots[0]],
            )
            parent = cursor.fetchone()
            base_depth, base_tokens = (parent[0], parent[1]) if parent else (0, 0)
            if parent is not None and (base_depth is None or base_tokens is None):
                return  # above a foreign row: totals stay unknown (NULL) below it anyway
        else:
            base_depth, base_tokens = 0, 0
        sql = _REPAIR_SUBTREE.format(root_tokens=f"{int(base_tokens)} + tokens", roots=_placeholders(len(roots)))
        cursor.execute(
            sql,
            [
                int(base_depth) + 1,
                self.session_id,
                *roots,
                self.session_id,
                conf.max_path_depth(),
                *roots,
                self.session_id,
            ],  # fmt: skip
        )

    def clear_messages(self) -> None:
        """Delete every message and overlay of this session."""
        with transaction.atomic(using=self.using):
            Message.objects.using(self.using).filter(session_id=self.session_id).delete()
            Compaction.objects.using(self.using).filter(session_id=self.session_id).delete()

    def add_compaction(self, summary: str, from_message_id: str, to_message_id: str) -> StoredCompaction:
        """Store an overlay that replaces ``from..to`` with ``summary`` on read.

        A summary or id a text column cannot hold (NUL, lone surrogates, over its limit) raises
        :class:`~agent_sessions.exceptions.InvalidText` with nothing written.
        """
        text.check_content(summary, "compaction summary")
        text.check_id(from_message_id, "from_message_id")
        text.check_id(to_message_id, "to_message_id")
        row = Compaction.objects.using(self.using).create(
            compaction_id=uuid.uuid4().hex,
            session_id=self.session_id,
            summary=summary,
            from_message_id=from_message_id,
            to_message_id=to_message_id,
        )
        return StoredCompaction(
            id=row.compaction_id,
            summary=row.summary,
            from_message_id=row.from_message_id,
            to_message_id=row.to_message_id,
            created_at=row.created_at,
        )

    def add_compaction_if_unchanged(
        self, summary: str, from_message_id: str, to_message_id: str, seen: frozenset[str]
    ) -> StoredCompaction | None:
        """Store an overlay only if the session's overlays are still exactly ``seen`` (else None).

        Under the session's write lock, so of several compactions planned on the same
        overlays only the first is stored.
        """
        with transaction.atomic(using=self.using), self.connection.cursor() as cursor:
            self.backend.reserve_write(cursor)
            self.backend.lock_session(cursor, self.session_id)
            current = Compaction.objects.using(self.using).filter(session_id=self.session_id)
            if set(current.values_list("compaction_id", flat=True)) != set(seen):
                return None
            return self.add_compaction(summary, from_message_id, to_message_id)

    # ── bulk (used by SessionManager: append_all, fork) ─────────────
    bulk_batch_size = 500
    """Rows per multi-row INSERT or ``IN (...)`` lookup in bulk operations."""

    def append_messages_bulk(
        self, messages: list[dict], parent_id=OMITTED, *, registry_stamp: datetime | None = None
    ) -> AppendOutcome:
        """Append a chain (each message the child of the one before) in one transaction.

        The first message attaches like :meth:`append_message` (and so takes the
        session's write lock); the rest get depth and token totals computed here and
        are validated and turned into rows while they stream into the table (Postgres'
        ``COPY`` then indexes a row while the next is built).  An invalid message rolls
        the whole transaction back.  Ids already stored are skipped but still chain.
        Returns the last message's outcome (``inserted``: anything was).  ``registry_stamp``: as
        :meth:`append_message_stats`' (in the same transaction).
        """
        if not messages:
            return AppendOutcome(inserted=False)
        limits = conf.message_limits()  # once: a settings read costs as much as a message's id check
        ids = [message_id(m, limits) for m in messages]  # before the lock: all or nothing

        # A stale append function (migrations taken back under this process) fails the first
        # message inside the transaction: the whole chain is written again, once.
        def write() -> AppendOutcome:
            inserted = False
            with permanent_errors_as_invalid(), transaction.atomic(using=self.using):
                with self.connection.cursor() as cursor:
                    self.backend.reserve_write(cursor)
                first = self.append_message_stats(messages[0], parent_id)
                totals = self._stored_totals(ids)  # the first one included
                orphaned = self._named_as_parents([i for i in ids if i not in totals])
                if orphaned:
                    self._refuse_bulk_cycle(ids, set(totals), orphaned)
                    raise _orphaned_id(orphaned[0])
                now = self.connection.ops.adapt_datetimefield_value(timezone.now())

                def rows() -> Iterator[list]:
                    nonlocal inserted
                    previous = ids[0]
                    for message in messages[1:]:
                        mid = message["id"]
                        if mid not in totals:
                            content, search_text, tools = stored_fields(message, limits)
                            _, depth, path_tokens = totals[previous]
                            tokens = estimate_one_message_tokens(message)
                            depth = None if depth is None else depth + 1
                            path_tokens = None if path_tokens is None else path_tokens + tokens
                            totals[mid] = (previous, depth, path_tokens)
                            inserted = True
                            yield [
                                self.session_id, mid, previous, message["role"], content, search_text, tools, now,
                                tokens, depth, path_tokens, None,
                            ]  # fmt: skip
                        previous = mid

                self._insert_param_rows(rows(), len(messages) - 1)
                if registry_stamp is not None:
                    stamp = self.connection.ops.adapt_datetimefield_value(registry_stamp)
                    with self.connection.cursor() as cursor:
                        cursor.execute(appends.STAMP, appends.stamp_params(stamp, self.session_id, ids[-1]))
            last_parent, depth, path_tokens = totals[ids[-1]]
            return AppendOutcome(
                inserted=first.inserted or inserted, parent_id=last_parent, depth=depth, path_tokens=path_tokens
            )

        return self.backend.retry_if_functions_gone(self.connection, write)

    def _refuse_bulk_cycle(self, ids: list[str], stored: set[str], orphaned: list[str]) -> None:
        """:meth:`_refuse_if_cycle` for each orphaned id of a chain: its parent would be the nearest
        id before it that is stored (the rows between are new and chain to it)."""
        for orphan in orphaned:
            index = ids.index(orphan)
            below = next((ids[j] for j in range(index - 1, -1, -1) if ids[j] in stored), None)
            self._refuse_if_cycle(orphan, below)

    def _named_as_parents(self, message_ids: list[str]) -> list[str]:
        """Those of ``message_ids`` that stored rows name as their parent (deleted, children kept)."""
        if not message_ids:
            return []
        membership, param = self.backend.in_list(list(dict.fromkeys(message_ids)))
        rows = self._fetchall(
            f"SELECT DISTINCT parent_id FROM assistant_messages WHERE session_id = %s AND parent_id {membership}",
            [self.session_id, param],
        )
        return sorted(r[0] for r in rows)

    def _stored_totals(self, message_ids: list[str]) -> dict[str, tuple[str | None, int | None, int | None]]:
        """``{id: (parent_id, depth, path_tokens)}`` of the given ids already stored here (one query)."""
        ids = list(dict.fromkeys(message_ids))
        membership, param = self.backend.in_list(ids)
        rows = self._fetchall(
            "SELECT id, parent_id, depth, path_tokens FROM assistant_messages "
            f"WHERE session_id = %s AND id {membership}",
            [self.session_id, param],
        )
        return {r[0]: (r[1], r[2], r[3]) for r in rows}

    def get_path_rows(self, leaf_id: str) -> list[dict]:
        """Root→leaf rows as stored (one query), for copying a path.

        Keys: ``id, role, content`` (the JSON text), ``text_content, tool_text, created_at, tokens``.
        Raises :class:`MessageCycle` when the path goes round a parent cycle: a copy must not
        carry one, nor quietly drop the rows above it.
        """
        if _unknown_leaf(leaf_id):
            return []
        rows = self._fetchall(
            path_cte(self.connection.vendor)
            + "SELECT m.id, m.role, m.content, m.text_content, m.tool_text, m.created_at, m.tokens, path.parent_id "
            "FROM path JOIN assistant_messages m ON " + PATH_ROW + " ORDER BY path.n DESC",
            self._path_params(leaf_id),
        )
        simple = cycles.root_first(rows, self.session_id, parent=7)
        if len(simple) < len(rows):
            raise cycles.refuse(self.session_id, simple[0][7], "the path to copy goes round")
        keys = ("id", "role", "content", "text_content", "tool_text", "created_at", "tokens")
        return [dict(zip(keys, (*r[:5], as_datetime(r[5]), r[6]), strict=True)) for r in rows]

    def copy_path_to(self, target_session_id: str, leaf_id: str) -> int:
        """Copy the root→``leaf_id`` path into ``target_session_id`` under fresh uuid4-hex ids, in one statement.

        Ids, parents, depths and running token totals come out of the walk
        (:func:`~agent_sessions.storage.walks.copy_cte`, no window over the rows) and the rows
        are copied with one ``INSERT … SELECT`` (Postgres' per-statement triggers fire once;
        SQLite indexes the copies after them, see ``deferred_indexing``).  Each copy's JSON
        gets its new id in place of the old one, leaving the rest of the stored text as it was.
        Returns how many rows it copied (the copies' origins are their ``origin_id``; returning
        each pair costs time, docs/performance.md F2), or 0 with nothing written when
        the leaf is unknown or a row on the path cannot be copied this way (its JSON does not
        start with its id, or it has no token count: rows from a foreign writer; or the walk went
        round a parent cycle, its farthest row's parent being on it);
        :func:`agent_sessions.manager.fork.copy_path` then copies in Python (or refuses a cycle).
        """
        if _unknown_leaf(leaf_id):
            return 0
        backend = self.backend
        quote = backend.JSON_QUOTE_EXPR.format(col="m.id")
        sql = (
            copy_cte(self.connection.vendor, backend.RANDOM_HEX_EXPR) + ", src AS MATERIALIZED ("
            "SELECT m.id, m.role, m.content, m.text_content, m.tool_text, m.created_at, m.tokens, path.n, path.acc, "
            "path.h AS new_id, path.parent_h AS parent_new, path.parent_id, "
            f"'{{\"id\":' || {quote} AS old_prefix "
            "FROM path JOIN assistant_messages m ON " + PATH_ROW + "), "
            # The copy's root: the row farthest from the leaf, and the total from the leaf up to it.
            "root AS (SELECT src.n, src.acc, src.parent_id FROM src ORDER BY src.n DESC LIMIT 1) "
            f"INSERT INTO assistant_messages ({_COPY_COLUMNS}) "
            "SELECT c.new_id, %s, CASE WHEN c.n = root.n THEN NULL ELSE c.parent_new END, c.role, "
            "'{\"id\":\"' || c.new_id || '\"' || substr(c.content, length(c.old_prefix) + 1), "
            "c.text_content, c.tool_text, c.created_at, c.tokens, root.n - c.n + 1, root.acc - c.acc + c.tokens, c.id "
            "FROM src c CROSS JOIN root WHERE NOT EXISTS (SELECT 1 FROM src bad WHERE bad.tokens IS NULL "
            "OR substr(bad.content, 1, length(bad.old_prefix)) <> bad.old_prefix) "
            # Uncorrelated, so it runs once: correlated with the outer root, Postgres planned it as
            # an anti-join repeated for every copied row (9,000,000 comparisons at 3,000 rows).
            "AND NOT EXISTS (SELECT 1 FROM root farthest JOIN src again ON again.id = farthest.parent_id) "
            "ORDER BY c.n DESC"
        )
        with self.connection.cursor() as cursor, backend.deferred_indexing(cursor, target_session_id, None):
            cursor.execute(sql, [*self._path_params(leaf_id), target_session_id])
            return backend.inserted_rows(cursor)

    bulk_columns = (
        "id",
        "parent_id",
        "role",
        "content",
        "text_content",
        "tool_text",
        "created_at",
        "tokens",
        "depth",
        "path_tokens",
        "origin_id",
    )
    """Columns :meth:`insert_rows` fills (``session_id`` is this provider's)."""

    def insert_rows(self, rows: Iterable[dict]) -> None:
        """Insert prepared rows (keys from ``bulk_columns``; missing → NULL) in bulk.

        No validation, no conflict handling: callers computed parents and totals.
        """
        adapt = self.connection.ops.adapt_datetimefield_value
        now = timezone.now()
        self._insert_param_rows(
            (
                [
                    self.session_id,
                    *(
                        adapt(row.get(c) or now) if c == "created_at" else row.get(c, _BULK_DEFAULTS.get(c))
                        for c in self.bulk_columns
                    ),
                ]
                for row in rows
            ),
            len(rows) if isinstance(rows, Sized) else None,
        )

    def _insert_param_rows(self, param_rows: Iterable[list], count: int | None) -> None:
        """Insert ``count`` rows (None: unknown) given as values in ``("session_id", *bulk_columns)`` order,
        consumed as they come; on SQLite a large batch is indexed for search after it (one statement)."""
        columns = ("session_id", *self.bulk_columns)
        max_params = self.connection.features.max_query_params or 65_535
        per_statement = max(1, min(self.bulk_batch_size, max_params // len(columns)))
        with self.connection.cursor() as cursor, self.backend.deferred_indexing(cursor, self.session_id, count):
            self.backend.insert_many(cursor, "assistant_messages", columns, param_rows, per_statement)


def search(
    query: str,
    *,
    session_id: str | None = None,
    limit: int = 20,
    using: str | None = None,
    offset: int = 0,
    role: str | Iterable[str] | None = None,
    owner: object = None,
    summaries: bool = True,
) -> list[SearchResult]:
    """Messages matching ``query`` (one session, or all when ``session_id`` is None), best first.

    The query language is :mod:`agent_sessions.search.query` (words, "phrases",
    OR, -excluded; CJK by substring). ``offset`` pages; ``role`` (a string or
    several) filters; ``owner`` (a user id) keeps the sessions that user owns,
    inside the ranking query. Each hit carries a highlighted ``snippet``.
    Compaction summaries that match follow the messages (id ``compaction_<overlay id>``, role
    ``assistant``, as the overlay reads in a history): a summary restates messages, which rank first;
    ``summaries=False``: messages only.
    """
    terms = query_terms(query)
    if not terms:
        return []
    limit, offset = page_bounds(limit, offset)
    roles = role_filter(role)
    alias = using or router.db_for_read(Message)
    backend = backends.for_alias(alias)
    with connections[alias].cursor() as cursor:
        rows = backend.search_messages(
            cursor, session_id, terms, limit, offset=offset, role=role, snippets=True, owner=owner
        )  # fmt: skip
        hits = [
            SearchResult(
                id=mid, role=who, content=content, created_at=as_datetime(created_at), session_id=sid, snippet=snip
            )
            for mid, who, content, created_at, sid, snip in rows
        ]
        if summaries and len(hits) < limit and (roles is None or SUMMARY_ROLE in roles):
            # The messages ran out on this page: the summaries continue it, after every message.
            if hits or not offset:
                before = offset + len(hits)
            else:  # a page past the last message: how many there were, to know where the summaries start
                before = len(backend.search_messages(cursor, session_id, terms, offset, role=role, owner=owner))
            rows = backend.search_summaries(
                cursor, session_id, terms, limit - len(hits), offset=max(0, offset - before), snippets=True, owner=owner
            )  # fmt: skip
            hits += [summary_hit(*row) for row in rows]
    return hits


SUMMARY_ROLE = "assistant"
"""The role of a summary hit: an overlay is read as an assistant message (``compaction_<id>``)."""


def summary_hit(overlay_id: str, summary: str, created_at: object, session_id: str, snippet: str) -> SearchResult:
    """A compaction summary as a search hit, with the id its overlay has as a message (``compaction_<id>``)."""
    return SearchResult(
        id=f"compaction_{overlay_id}",
        role=SUMMARY_ROLE,
        content=summary,
        created_at=as_datetime(created_at),
        session_id=session_id,
        snippet=snippet,
    )
