"""Which session owns a row of the label-keyed tables (context blocks, stored prompts, search entries).

Rows are keyed ``<label>_<session id>`` (the seed's scheme), which is ambiguous:
``memory_user_X`` is label ``memory`` of session ``user_X`` or label ``memory_user``
of session ``X``.  So ownership is a column, ``session_id``: every row the library
writes for a session carries its owner, and a session's rows are found by that column
exactly.  Rows without an owner (NULL: written by the seed's providers or another
program) are found by exact keys built from labels the caller knows, never by a
suffix.  See docs/data-model.md.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import models
from django.db.models import Q

from ..models import ContextBlockRecord, SearchEntry, SessionRecord

PROMPT_KEY = "_system_prompt"
"""The stored prompt's label; a session's is ``_system_prompt_<session id>``."""


def exact_keys(session_id: str, labels: Iterable[str]) -> list[str]:
    """The keys ``<label>_<session id>`` of ``labels`` and of the stored prompt (sorted, unique)."""
    return sorted({f"{label}_{session_id}" for label in (*labels, PROMPT_KEY) if label})


def owned(model: type[models.Model], using: str, session_id: str, labels: Iterable[str] = ()) -> models.QuerySet:
    """The rows of ``model`` (a label-keyed table) that belong to ``session_id``.

    Owned by it (``session_id`` column), or ownerless under one of its exact keys
    (:func:`exact_keys`).  The default namespace ``''`` owns no rows.
    """
    if not session_id:
        return model.objects.using(using).none()
    unowned = Q(session_id__isnull=True, label__in=exact_keys(session_id, labels))
    return model.objects.using(using).filter(Q(session_id=session_id) | unowned)


def candidates(key: str) -> list[str]:
    """Every id ``i`` for which ``key`` reads ``<label>_<i>`` with a non-empty label, longest first.

    The bare ``_system_prompt`` is the default namespace's stored prompt, never a session's.
    """
    if key == PROMPT_KEY:
        return []
    return [key[i + 1 :] for i in range(1, len(key) - 1) if key[i] == "_"]


def registered_candidates(using: str, key: str) -> list[str]:
    """The registered session ids among :func:`candidates` of ``key``, longest first."""
    ids = candidates(key)
    if not ids:
        return []
    found = set(SessionRecord.objects.using(using).filter(id__in=ids).values_list("id", flat=True))
    return [i for i in ids if i in found]


def infer_owner(using: str, key: str) -> str | None:
    """The owner of a row keyed ``key`` whose writer named none: the longest registered id it ends with."""
    found = registered_candidates(using, key)
    return found[0] if found else None


def owner_for(using: str, key: str, session_id: str | None) -> str | None:
    """The owner column a provider writes: ``session_id`` as given (``''``: none), else :func:`infer_owner`."""
    if session_id is not None:
        return session_id or None
    return infer_owner(using, key)


def ambiguous_rows(using: str, limit: int = 100) -> list[tuple[str, str, str, list[str]]]:
    """Rows whose key ends with ``_<id>`` of several registered sessions: ``(table, label, owner, others)``.

    ``owner`` is the stored owner (``''`` when none); ``others`` the other registered
    sessions the key could also belong to.  At most ``limit`` rows.
    """
    found: list[tuple[str, str, str, list[str]]] = []
    tables: list[tuple[str, models.QuerySet]] = [
        (ContextBlockRecord._meta.db_table, ContextBlockRecord.objects.using(using).values_list("label", "session_id")),
        (SearchEntry._meta.db_table, SearchEntry.objects.using(using).values_list("label", "session_id").distinct()),
    ]
    for table, rows in tables:
        for label, owner in rows.filter(label__contains="_").order_by("label").iterator(chunk_size=2_000):
            ids = registered_candidates(using, label)
            if len(ids) > 1:
                found.append((table, label, owner or "", [i for i in ids if i != owner]))
                if len(found) >= limit:
                    return found
    return found
