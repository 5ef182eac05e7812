"""Rows of ``assistant_sessions`` and everything keyed by a session id (create, touch, usage, purge)."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, overload

from django.db import connections, transaction
from django.db.models import F

from .. import registry
from ..exceptions import SessionNotFound
from ..models import Compaction, CompactionJob, ContextBlockRecord, Message, SearchEntry, SessionRecord
from ..storage import backends, owners
from ..storage.owners import PROMPT_KEY
from ..types import SessionInfo
from . import clock

RECORD_FIELDS = (
    "id",
    "name",
    "parent_session_id",
    "model",
    "source",
    "input_tokens",
    "output_tokens",
    "estimated_cost",
    "end_reason",
    "created_at",
    "updated_at",
)
"""The columns of a session row that exports and archives carry."""

# Newest first; the monotonic clock makes ties rare, the id makes them deterministic.
LIST_ORDER = ("-updated_at", "-created_at", "-id")


def to_info(row: SessionRecord) -> SessionInfo:
    """The public dataclass for a registry row."""
    return SessionInfo(
        id=row.id,
        name=row.name,
        parent_session_id=row.parent_session_id,
        model=row.model,
        source=row.source,
        input_tokens=int(row.input_tokens or 0),
        output_tokens=int(row.output_tokens or 0),
        estimated_cost=float(row.estimated_cost or 0),
        end_reason=row.end_reason,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


@overload
def check_text(value: Any, what: str) -> str: ...


@overload
def check_text(value: Any, what: str, *, optional: bool) -> str | None: ...


def check_text(value: Any, what: str, *, optional: bool = False) -> str | None:
    """Reject non-strings and NUL characters (Postgres TEXT cannot hold NUL)."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, not {type(value).__name__}")
    if "\x00" in value:
        raise ValueError(f"{what} must not contain NUL characters")
    return value


def new_id() -> str:
    """A fresh session id (uuid4 hex)."""
    return uuid.uuid4().hex


def insert(using: str, name: str, *, session_id: str | None = None, **fields: Any) -> SessionRecord:
    """A new registry row (id: ``session_id`` or a fresh uuid4 hex), stamped with the registry's clock.

    The row returned is what was stored: a row made after its session's messages (fork,
    compact_and_split) starts with their count (a database trigger) and this stamp.
    """
    stamp = clock.now()
    return SessionRecord.objects.using(using).create(
        id=session_id or new_id(), name=name, created_at=stamp, updated_at=stamp, **fields
    )


def fetch(using: str, session_id: str) -> SessionRecord | None:
    return SessionRecord.objects.using(using).filter(id=session_id).first()


def fetch_or_raise(using: str, session_id: str) -> SessionRecord:
    row = fetch(using, session_id)
    if row is None:
        raise SessionNotFound(f"no session with id {session_id!r}")
    return row


_TOUCH = "UPDATE assistant_sessions SET updated_at = %s WHERE id = %s"


def touch(using: str, session_id: str) -> None:
    """Bump ``updated_at`` with the registry's clock (written out: the ORM's UPDATE compilation costs
    more than the statement, and the API runs it on every write)."""
    connection = connections[using]
    stamp = connection.ops.adapt_datetimefield_value(clock.now())
    with connection.cursor() as cursor:
        cursor.execute(_TOUCH, [stamp, session_id])


@contextmanager
def write_transaction(using: str) -> Iterator[None]:
    """One transaction for a write and its :func:`touch`: one commit (one WAL flush), not one each, and a
    touch that fails takes the write back.  SQLite: the write lock first, before FTS5 is read."""
    with transaction.atomic(using=using), connections[using].cursor() as cursor:
        backends.for_alias(using).reserve_write(cursor)
        yield


def update(using: str, session_id: str, **fields: Any) -> int:
    """Update a row and bump ``updated_at``; returns rows changed (0 for an unknown id)."""
    return SessionRecord.objects.using(using).filter(id=session_id).update(updated_at=clock.now(), **fields)


def add_usage(using: str, session_id: str, input_tokens: int, output_tokens: int, cost: float) -> int:
    """Atomic in-database increments, so concurrent callers never lose an update."""
    for value, what in ((input_tokens, "input_tokens"), (output_tokens, "output_tokens")):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{what} must be an int")
    if not isinstance(cost, int | float) or isinstance(cost, bool) or not math.isfinite(cost):
        raise ValueError("cost must be a finite number")
    return update(
        using,
        session_id,
        input_tokens=F("input_tokens") + input_tokens,
        output_tokens=F("output_tokens") + output_tokens,
        estimated_cost=F("estimated_cost") + float(cost),
    )


def known_labels(*extra: Iterable[str]) -> set[str]:
    """Context labels a session's ownerless rows may be keyed by: ``extra`` and every registered configuration's.

    Only used to build exact keys (``<label>_<session id>``) for rows without an owner.
    """
    labels = {label for group in extra for label in group}
    for name in registry.names():
        context_labels = getattr(registry.get(name), "context_labels", None)
        if callable(context_labels):
            labels.update(context_labels())
    return labels


def _copy_key(label: str, source_id: str, target_id: str) -> str | None:
    """``<label>_<source id>`` rewritten to ``<label>_<target id>``; None for a key of another form."""
    old = f"_{source_id}"
    if len(label) <= len(old) or not label.endswith(old):
        return None
    return label[: -len(old)] + f"_{target_id}"


def copy_namespaced(using: str, source_id: str, target_id: str, *, prompt: bool, labels: Iterable[str] = ()) -> None:
    """Copy the source session's context blocks and search entries to ``target_id``, owned by it.

    The source's rows are those it owns and its ownerless rows under exact keys of
    ``labels`` (:func:`~agent_sessions.storage.owners.owned`).  Keys ``<label>_<source id>``
    become ``<label>_<target id>`` (a row keyed otherwise has no counterpart and is not
    copied); contents and timestamps are kept.  The stored prompt
    (``_system_prompt_<source id>``) is copied only with ``prompt=True``.  Call inside a
    transaction, after the target's first writes.
    """
    if not source_id:
        return  # the default namespace owns no rows
    stored_prompt = f"{PROMPT_KEY}_{source_id}"
    blocks = []
    for row in owners.owned(ContextBlockRecord, using, source_id, labels).order_by("label"):
        key = _copy_key(row.label, source_id, target_id)
        if key is not None and (prompt or row.label != stored_prompt):
            blocks.append(
                ContextBlockRecord(label=key, content=row.content, updated_at=row.updated_at, session_id=target_id)
            )
    ContextBlockRecord.objects.using(using).bulk_create(blocks)
    entries = []
    for entry in owners.owned(SearchEntry, using, source_id, labels).order_by("seq"):
        key = _copy_key(entry.label, source_id, target_id)
        if key is not None:
            entries.append(
                SearchEntry(
                    label=key,
                    key=entry.key,
                    content=entry.content,
                    created_at=entry.created_at,
                    updated_at=entry.updated_at,
                    session_id=target_id,
                )
            )
    SearchEntry.objects.using(using).bulk_create(entries)


def purge(using: str, session_id: str, labels: Iterable[str] = ()) -> None:
    """Delete the session's messages, overlays, context blocks (incl. the stored prompt), search
    entries, auto-compaction job and registry row.  Call inside a transaction.

    Its blocks and entries: those it owns, and ownerless ones under exact keys of ``labels``."""
    if not session_id:
        raise ValueError("refusing to purge the default (empty) session namespace")
    with connections[using].cursor() as cursor:
        backends.for_alias(using).reserve_write(cursor)  # before the FTS-triggering deletes (SQLite)
    Message.objects.using(using).filter(session_id=session_id).delete()
    Compaction.objects.using(using).filter(session_id=session_id).delete()
    owners.owned(ContextBlockRecord, using, session_id, labels).delete()
    owners.owned(SearchEntry, using, session_id, labels).delete()
    CompactionJob.objects.using(using).filter(session_id=session_id).delete()
    SessionRecord.objects.using(using).filter(id=session_id).delete()
