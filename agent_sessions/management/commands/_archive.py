"""One session as one JSON document (a line of ``export_sessions`` output), and back.

A document holds everything keyed by the session id: its registry row, every
message row in insertion order with its parent id (so branches survive), the
compaction overlays, the context blocks and search entries it owns (keyed
``<label>_<session id>``; the stored prompt is one of them), see storage/owners.py, and its
model-call records with the prompt texts, tool lists and overlays they saw (SPEC §8).  Derived columns
(``text_content``, ``tokens``, ``depth``, ``path_tokens``) are not exported:
the import recomputes them, so a hand-edited file cannot make them lie.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db import models
from django.utils.dateparse import parse_datetime

from agent_sessions import conf
from agent_sessions.manager import rows as session_rows
from agent_sessions.manager.rows import RECORD_FIELDS
from agent_sessions.models import (
    Compaction,
    ContextBlockRecord,
    Message,
    ModelCallContent,
    ModelCallRecord,
    SearchEntry,
    SessionRecord,
)
from agent_sessions.session.model_calls import json_or, to_json
from agent_sessions.storage.orm import DjangoSessionProvider
from agent_sessions.tokens import estimate_one_message_tokens
from agent_sessions.types import stored_fields

from ...exceptions import ArchiveError
from ...storage import decode, owners
from ._base import session_exists

FORMAT = "agent_sessions.session/1"
CHUNK = 2_000


def _stamp(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _when(value: Any, what: str) -> datetime | None:
    if value is None:
        return None
    parsed = parse_datetime(value) if isinstance(value, str) else None
    if parsed is None:
        raise ArchiveError(f"{what}: not an ISO 8601 timestamp: {value!r}")
    return parsed


def namespaced(model: type[models.Model], using: str, session_id: str) -> models.QuerySet:
    """Rows of a label-keyed table belonging to the session: owned by it, or ownerless under its exact keys."""
    return owners.owned(model, using, session_id, session_rows.known_labels())


# ── export ──────────────────────────────────────────────────────────────────


def _record(row: SessionRecord | None) -> dict | None:
    if row is None:
        return None
    data: dict[str, Any] = {f: getattr(row, f) for f in RECORD_FIELDS}
    data["created_at"], data["updated_at"] = _stamp(row.created_at), _stamp(row.updated_at)
    data["owner"] = row.owner.get_username() if row.owner_id else None
    return data


def _message(row: dict) -> dict:
    entry = {"id": row["message_id"], "parent_id": row["parent_id"], "role": row["role"]}
    message, damage = decode.checked(row["content"])
    if damage:  # a row that holds no message (docs/data-model.md): its text, kept verbatim
        entry["content"] = decode.raw_text(row["content"])
    else:
        entry["message"] = message
    entry["created_at"] = _stamp(row["created_at"])
    if row["origin_id"] is not None:
        entry["origin_id"] = row["origin_id"]
    return entry


def _model_calls(using: str, session_id: str) -> tuple[list[dict], list[dict]]:
    """The session's model-call records (oldest first) and the content they reference."""
    calls = [
        {
            "id": row.call_id,
            "message_id": row.message_id,
            "leaf_id": row.leaf_id,
            "overlays": json_or(row.overlays, []),
            "system_hash": row.system_hash,
            "tools_hash": row.tools_hash,
            "sent_hash": row.sent_hash,
            "model": row.model,
            "params": json_or(row.params, {}),
            "usage": json_or(row.usage, None),
            "cost": row.cost,
            "latency_ms": row.latency_ms,
            "status": row.status,
            "error": row.error,
            "started_at": _stamp(row.started_at),
        }
        for row in ModelCallRecord.objects.using(using).filter(session_id=session_id).order_by("seq")
    ]
    contents = ModelCallContent.objects.using(using).filter(session_id=session_id).order_by("seq")
    return calls, [{"hash": c.hash, "kind": c.kind, "content": c.content} for c in contents]


def export_session(using: str, session_id: str, on_message: Callable[[], None] = lambda: None) -> dict:
    """The session's document; ``on_message`` is called once per exported message row (progress)."""
    record = SessionRecord.objects.using(using).select_related("owner").filter(id=session_id).first()
    rows = (
        Message.objects.using(using)
        .filter(session_id=session_id)
        .order_by("seq")
        .values("message_id", "parent_id", "role", "content", "created_at", "origin_id")
    )
    messages = []
    for row in rows.iterator(chunk_size=CHUNK):
        messages.append(_message(row))
        on_message()
    overlays = Compaction.objects.using(using).filter(session_id=session_id).order_by("seq")
    blocks = namespaced(ContextBlockRecord, using, session_id).order_by("label")
    entries = namespaced(SearchEntry, using, session_id).order_by("seq")
    calls, call_content = _model_calls(using, session_id)
    return {
        "format": FORMAT,
        "session_id": session_id,
        "session": _record(record),
        "messages": messages,
        "compactions": [
            {
                "id": c.compaction_id,
                "summary": c.summary,
                "from_message_id": c.from_message_id,
                "to_message_id": c.to_message_id,
                "created_at": _stamp(c.created_at),
            }
            for c in overlays
        ],
        "context_blocks": [
            {"label": b.label, "content": b.content, "updated_at": _stamp(b.updated_at)} for b in blocks
        ],
        "search_entries": [
            {
                "label": e.label,
                "key": e.key,
                "content": e.content,
                "created_at": _stamp(e.created_at),
                "updated_at": _stamp(e.updated_at),
            }
            for e in entries
        ],
        "model_calls": calls,
        "model_call_content": call_content,
    }


def dump(document: dict) -> str:
    """One JSON Lines line (no trailing newline)."""
    return json.dumps(document, ensure_ascii=False)


# ── import ──────────────────────────────────────────────────────────────────


def _labels(document: dict) -> tuple[list[str], set[Any]]:
    """The block labels and search entry labels the document writes."""
    blocks = [b["label"] for b in document.get("context_blocks", [])]
    entries = {e.get("label") for e in document.get("search_entries", []) if isinstance(e, dict)}
    return blocks, entries


def conflicts(using: str, document: dict) -> bool:
    """True when anything the document would write already exists."""
    blocks, entries = _labels(document)
    return (
        session_exists(using, document["session_id"])
        or (bool(blocks) and ContextBlockRecord.objects.using(using).filter(label__in=blocks).exists())
        or (bool(entries) and SearchEntry.objects.using(using).filter(label__in=entries).exists())
    )


def _refuse_foreign(using: str, document: dict) -> None:
    """Refuse a document whose keys are still taken once the session's own rows are gone: another's rows."""
    blocks, entries = _labels(document)
    taken = [
        *ContextBlockRecord.objects.using(using).filter(label__in=blocks).values_list("label", flat=True)[:1],
        *SearchEntry.objects.using(using).filter(label__in=entries).values_list("label", flat=True)[:1],
    ]
    if taken:
        raise ArchiveError(f"label {taken[0]!r} belongs to another session; nothing was imported")


def remove_existing(using: str, document: dict) -> None:
    """Delete what the document replaces (``--replace``); call inside a transaction."""
    session_id = document["session_id"]
    if session_id:
        session_rows.purge(using, session_id, session_rows.known_labels())
    else:  # the default namespace has no registry row or namespaced blocks of its own
        Message.objects.using(using).filter(session_id="").delete()
        Compaction.objects.using(using).filter(session_id="").delete()
        SessionRecord.objects.using(using).filter(id="").delete()
    _refuse_foreign(using, document)


def _stamps(**values: Any) -> dict[str, datetime]:
    """Parsed timestamps, leaving out missing ones (the model's default applies)."""
    parsed = {k: _when(v, k) for k, v in values.items()}
    return {k: when for k, when in parsed.items() if when is not None}


def _owner(username: str | None, using: str) -> Any:
    if not username:
        return None
    model = get_user_model()
    return model._default_manager.db_manager(using).filter(**{model.USERNAME_FIELD: username}).first()


def owner_named(username: str | None, using: str) -> Any:
    """The user a command's ``--owner USERNAME`` names (None without one); an unknown name is an error."""
    if username is None:
        return None
    user = _owner(username, using)
    if user is None:
        raise ArchiveError(f"--owner: no user named {username!r}")
    return user


def _message_rows(entries: list) -> Iterator[dict]:
    """Rows for ``insert_rows``, in file order, with tokens, depth and running totals derived."""
    rows: dict[str, dict] = {}
    limits = conf.message_limits()
    for entry in entries:
        if not isinstance(entry, dict):
            raise ArchiveError("each message must be an object")
        if "message" in entry:
            message = entry["message"]
            content, text, extra = stored_fields(message, limits)
            if message["id"] != entry.get("id"):
                raise ArchiveError(f"message id {entry.get('id')!r} does not match its content")
            tokens = estimate_one_message_tokens(message)
        else:
            stored = entry.get("content")
            if not isinstance(stored, str) or not isinstance(entry.get("id"), str):
                raise ArchiveError("a message needs an id and either 'message' or a 'content' string")
            content, text, tokens, extra = stored, "", None, ""
        if entry["id"] in rows:
            raise ArchiveError(f"duplicate message id {entry['id']!r}")
        rows[entry["id"]] = {
            "id": entry["id"],
            "parent_id": entry.get("parent_id"),
            "role": str(entry.get("role") or ""),
            "content": content,
            "text_content": text,
            "tool_text": extra,
            "created_at": _when(entry.get("created_at"), "created_at"),
            "tokens": tokens,
            "origin_id": entry.get("origin_id"),
        }
    _derive_paths(rows)
    yield from rows.values()


def _derive_paths(rows: dict[str, dict]) -> None:
    """Set ``depth`` and ``path_tokens`` like the app does on append (missing parent → a root)."""
    done: dict[str, tuple[int | None, int | None]] = {}
    for start in rows:
        chain, seen, cursor = [], set(), start
        while cursor in rows and cursor not in done and cursor not in seen:
            seen.add(cursor)
            chain.append(cursor)
            cursor = rows[cursor]["parent_id"]
        if cursor in done:
            depth, total = done[cursor]
        elif cursor in seen:  # a parent cycle: the totals are undefined
            depth = total = None
        else:
            depth, total = 0, 0
        for mid in reversed(chain):
            tokens = rows[mid]["tokens"]
            depth = None if depth is None else depth + 1
            total = None if total is None or tokens is None else total + tokens
            done[mid] = (depth, total)
            rows[mid]["depth"], rows[mid]["path_tokens"] = depth, total


def import_session(using: str, document: dict, *, owner: Any = None) -> int:
    """Write the document's rows (call inside a transaction, after conflicts are handled); returns messages.

    Every session but the default namespace gets a registry row, so it is listed: the document's
    record, or one with no name when it has none.  ``owner``: the row's owner when the document names none.
    """
    session_id = document["session_id"]
    record = document.get("session")
    rows = list(_message_rows(document.get("messages", [])))
    DjangoSessionProvider(session_id, using=using).insert_rows(rows)
    if record is not None or session_id:
        # After the messages: the insert triggers would stamp updated_at; a new row counts them itself.
        record = record if record is not None else {"id": session_id}
        fields = {f: record[f] for f in RECORD_FIELDS if record.get(f) is not None}
        fields.update(_stamps(created_at=record.get("created_at"), updated_at=record.get("updated_at")))
        SessionRecord.objects.using(using).create(**fields, owner=_owner(record.get("owner"), using) or owner)
    Compaction.objects.using(using).bulk_create(
        Compaction(
            compaction_id=c["id"],
            session_id=session_id,
            summary=c["summary"],
            from_message_id=c["from_message_id"],
            to_message_id=c["to_message_id"],
            **_stamps(created_at=c.get("created_at")),
        )
        for c in document.get("compactions", [])
    )
    ContextBlockRecord.objects.using(using).bulk_create(
        ContextBlockRecord(
            label=b["label"],
            content=b.get("content", ""),
            session_id=session_id,
            **_stamps(updated_at=b.get("updated_at")),
        )
        for b in document.get("context_blocks", [])
    )
    SearchEntry.objects.using(using).bulk_create(
        SearchEntry(
            label=e["label"],
            key=e["key"],
            content=e["content"],
            session_id=session_id,
            **_stamps(created_at=e.get("created_at"), updated_at=e.get("updated_at")),
        )
        for e in document.get("search_entries", [])
    )
    ModelCallContent.objects.using(using).bulk_create(
        ModelCallContent(session_id=session_id, hash=c["hash"], kind=c["kind"], content=c["content"])
        for c in document.get("model_call_content", [])
    )
    ModelCallRecord.objects.using(using).bulk_create(
        ModelCallRecord(
            call_id=c["id"],
            session_id=session_id,
            message_id=c.get("message_id"),
            leaf_id=c.get("leaf_id"),
            overlays=to_json(c.get("overlays") or []),
            system_hash=c.get("system_hash"),
            tools_hash=c.get("tools_hash"),
            sent_hash=c.get("sent_hash"),
            model=c["model"],
            params=to_json(c.get("params") or {}),
            usage=None if c.get("usage") is None else to_json(c["usage"]),
            cost=c.get("cost"),
            latency_ms=c.get("latency_ms"),
            status=c["status"],
            error=c.get("error") or "",
            started_at=_when(c["started_at"], "started_at"),
        )
        for c in document.get("model_calls", [])
    )
    return len(rows)
