"""Which session owns a row of the label-keyed tables (context blocks, stored prompts, search entries).

Rows are keyed ``<label>_<session id>`` (the seed's scheme), which is ambiguous:
``memory_user_X`` is label ``memory`` of session ``user_X`` or label ``memory_user``
of session ``X``.  So ownership is a column, ``session_id``: every row the library
writes for a session carries its owner, and a session's rows are found by that column
exactly.  Rows without an owner (NULL: written by the seed's providers or another
program) are found by exact keys built from labels the caller knows, never by a
suffix.  The default namespace ``''`` owns its rows as ``''``, which no session's
operation reaches.  See docs/data-model.md.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import models
from django.db.models import Q

from ..models import PROMPT_KEY, ContextBlockRecord, SearchEntry, SessionRecord, infer_owner, owner_candidates

__all__ = ["PROMPT_KEY", "ambiguous_rows", "exact_keys", "infer_owner", "owned", "owner_for"]

CHUNK = 500


def exact_keys(session_id: str, labels: Iterable[str]) -> list[str]:
    """The keys ``<label>_<session id>`` of ``labels`` and of the stored prompt (sorted, unique)."""
    return sorted({f"{label}_{session_id}" for label in (*labels, PROMPT_KEY) if label})


def owned(model: type[models.Model], using: str, session_id: str, labels: Iterable[str] = ()) -> models.QuerySet:
    """The rows of ``model`` (a label-keyed table) that belong to ``session_id``.

    Owned by it (``session_id`` column), or ownerless under one of its exact keys
    (:func:`exact_keys`).  Nothing for the default namespace ``''``: no session operation reaches its rows.
    """
    if not session_id:
        return model.objects.using(using).none()
    unowned = Q(session_id__isnull=True, label__in=exact_keys(session_id, labels))
    return model.objects.using(using).filter(Q(session_id=session_id) | unowned)


def owner_for(using: str, key: str, session_id: str | None) -> str | None:
    """The owner column a provider writes: ``session_id`` as given (``''``: the default namespace), else
    :func:`~agent_sessions.models.infer_owner` of the key."""
    if session_id is not None:
        return session_id
    return infer_owner(using, key)


def _registered(using: str, ids: set[str]) -> set[str]:
    """The registered session ids among ``ids`` (one query per chunk of them)."""
    wanted, found = sorted(ids), set()
    for start in range(0, len(wanted), CHUNK):
        chunk = wanted[start : start + CHUNK]
        found.update(SessionRecord.objects.using(using).filter(id__in=chunk).values_list("id", flat=True))
    return found


def ambiguous_rows(using: str, limit: int = 100) -> list[tuple[str, str, str, list[str]]]:
    """Rows whose key ends with ``_<id>`` of several registered sessions: ``(table, label, owner, others)``.

    ``owner`` is the stored owner (``''`` when none); ``others`` the other registered
    sessions the key could also belong to.  At most ``limit`` rows; the tables are read
    in chunks, one registry query per chunk.
    """
    found: list[tuple[str, str, str, list[str]]] = []
    tables: list[tuple[str, models.QuerySet]] = [
        (ContextBlockRecord._meta.db_table, ContextBlockRecord.objects.using(using).values_list("label", "session_id")),
        (SearchEntry._meta.db_table, SearchEntry.objects.using(using).values_list("label", "session_id").distinct()),
    ]
    for table, rows in tables:
        chunk: list[tuple[str, str | None]] = []
        for row in rows.filter(label__contains="_").order_by("label").iterator(chunk_size=CHUNK):
            chunk.append(row)
            if len(chunk) == CHUNK:
                found += _ambiguous(using, table, chunk)
                chunk = []
        found += _ambiguous(using, table, chunk)
        if len(found) >= limit:
            break
    return found[:limit]


def _ambiguous(using: str, table: str, rows: list[tuple[str, str | None]]) -> list[tuple[str, str, str, list[str]]]:
    registered = _registered(using, {c for label, _ in rows for c in owner_candidates(label)})
    found = []
    for label, owner in rows:
        ids = [c for c in owner_candidates(label) if c in registered]
        if len(ids) > 1:
            found.append((table, label, owner if owner is not None else "", [i for i in ids if i != owner]))
    return found
