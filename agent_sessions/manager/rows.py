"""Rows of ``assistant_sessions`` and everything keyed by a session id (create, touch, usage, purge)."""

from __future__ import annotations

import math
import sys
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, overload

from django.db import connections, models, transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce
from django.db.models.lookups import LessThanOrEqual

from .. import conf, registry, text
from ..exceptions import InvalidUsage, SessionNotFound
from ..models import (
    Compaction,
    CompactionJob,
    ContextBlockRecord,
    Message,
    ModelCallContent,
    ModelCallRecord,
    SearchEntry,
    SessionRecord,
)
from ..storage import backends, owners, session_rows
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
    """A registry column's value checked by :mod:`agent_sessions.text` against that column's limit.

    ``TypeError`` for a non-string; ``InvalidText`` (a ``ValueError``) for NUL, a lone surrogate
    or a value over the limit (``AGENT_SESSIONS_MAX_SESSION_NAME_CHARS``, ``…_FIELD_CHARS``, ``…_ID_BYTES``).
    """
    if what == "parent_session_id":
        return text.check(value, what, size=conf.max_id_bytes(), optional=optional)
    limit = conf.max_session_name_chars() if what == "name" else conf.max_session_field_chars()
    return text.check(value, what, chars=limit, optional=optional)


TEXT_FIELDS = ("name", "parent_session_id", "model", "source", "end_reason")
"""Registry columns :func:`update` checks with :func:`check_text`."""


def _checked(fields: dict[str, Any]) -> dict[str, Any]:
    for name in TEXT_FIELDS:
        if isinstance(fields.get(name), str):
            check_text(fields[name], name)
    return fields


def new_id() -> str:
    """A fresh session id (uuid4 hex)."""
    return uuid.uuid4().hex


def insert(using: str, name: str, *, session_id: str | None = None, **fields: Any) -> SessionRecord:
    """A new registry row (id: ``session_id`` or a fresh uuid4 hex), stamped with the registry's clock.

    The row returned is what was stored: a row made after its session's messages (fork,
    compact_and_split) starts with their count (a database trigger) and this stamp.  Callers check
    new text with :func:`check_text`; values copied from a stored row (a fork's model) are not checked again.
    """
    stamp = clock.now()
    return SessionRecord.objects.using(using).create(
        id=session_id or new_id(), name=name, created_at=stamp, updated_at=stamp, **fields
    )


def fetch(using: str, session_id: str) -> SessionRecord | None:
    """The registry row, or None (also for an id no row can have: NUL, a lone surrogate)."""
    if not text.storable(session_id):
        return None
    return SessionRecord.objects.using(using).filter(id=session_id).first()


def fetch_or_raise(using: str, session_id: str) -> SessionRecord:
    row = fetch(using, session_id)
    if row is None:
        raise SessionNotFound(f"no session with id {session_id!r}")
    return row


def touch(using: str, session_id: str) -> None:
    """Bump ``updated_at`` with the registry's clock (a written-out UPDATE: the API runs it on every write)."""
    if not text.storable(session_id):
        return
    session_rows.touch(using, session_id, clock.now())


@contextmanager
def write_transaction(using: str) -> Iterator[None]:
    """One transaction for a write and its :func:`touch`: one commit (one WAL flush), not one each, and a
    touch that fails takes the write back.  SQLite: the write lock first, before FTS5 is read."""
    with transaction.atomic(using=using), connections[using].cursor() as cursor:
        backends.for_alias(using).reserve_write(cursor)
        yield


def update(using: str, session_id: str, **fields: Any) -> int:
    """Update a row and bump ``updated_at``; returns rows changed (0 for an unknown id)."""
    _checked(fields)
    if not text.storable(session_id):
        return 0
    return SessionRecord.objects.using(using).filter(id=session_id).update(updated_at=clock.now(), **fields)


MAX_TOKENS = 2**63 - 1
"""Largest running token count (the columns are 64-bit integers)."""
MAX_COST = sys.float_info.max
"""Largest running ``estimated_cost`` (the largest finite double)."""


def _usage_number(value: Any, what: str, *, integer: bool) -> None:
    """Refuse a usage increment that is not a number, negative, not finite or past its column's range."""
    if isinstance(value, bool) or not isinstance(value, int if integer else int | float):
        raise TypeError(f"{what} must be {'an int' if integer else 'a number'}")
    if not math.isfinite(value) or value < 0:
        raise InvalidUsage(f"{what} must be a finite number ≥ 0, not {value!r}")
    if value > (MAX_TOKENS if integer else MAX_COST):
        raise InvalidUsage(f"{what} {value!r} is out of range")


def add_usage(using: str, session_id: str, input_tokens: int, output_tokens: int, cost: float) -> int:
    """Atomic in-database increments, so concurrent callers never lose an update.

    The UPDATE's own WHERE refuses an add whose running total would pass the columns' range
    (``MAX_TOKENS``, ``MAX_COST``), so the check and the add are one statement; such an add (or one
    to a stored total that is not finite) raises :class:`InvalidUsage` with nothing changed.
    """
    _usage_number(input_tokens, "input_tokens", integer=True)
    _usage_number(output_tokens, "output_tokens", integer=True)
    _usage_number(cost, "cost", integer=False)
    if not text.storable(session_id):
        return 0
    big, real = models.BigIntegerField(), models.FloatField()  # typed: a bare int is bound as a 32-bit integer
    stored_in = Coalesce(F("input_tokens"), Value(0), output_field=big)
    stored_out = Coalesce(F("output_tokens"), Value(0), output_field=big)
    stored_cost = Coalesce(F("estimated_cost"), Value(0.0), output_field=real)
    rows = SessionRecord.objects.using(using).filter(id=session_id)
    changed = rows.filter(
        LessThanOrEqual(stored_in, Value(MAX_TOKENS - input_tokens, output_field=big)),
        LessThanOrEqual(stored_out, Value(MAX_TOKENS - output_tokens, output_field=big)),
        # One step below MAX_COST - cost: a total that passes it cannot round up to infinity.
        LessThanOrEqual(stored_cost, Value(math.nextafter(MAX_COST - float(cost), 0.0), output_field=real)),
    ).update(
        updated_at=clock.now(),
        input_tokens=stored_in + Value(input_tokens, output_field=big),
        output_tokens=stored_out + Value(output_tokens, output_field=big),
        estimated_cost=stored_cost + Value(float(cost), output_field=real),
    )
    if not changed and rows.exists():
        raise InvalidUsage(
            f"adding this usage to session {session_id!r} would take a running total past its range "
            f"({MAX_TOKENS} tokens, a cost of {MAX_COST:g}) or its stored total is not finite; nothing was added"
        )
    return changed


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
    entries, auto-compaction job, model-call records and registry row.  Call inside a transaction.

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
    ModelCallRecord.objects.using(using).filter(session_id=session_id).delete()
    ModelCallContent.objects.using(using).filter(session_id=session_id).delete()
    SessionRecord.objects.using(using).filter(id=session_id).delete()
