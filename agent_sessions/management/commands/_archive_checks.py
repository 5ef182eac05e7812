"""Validation of an ``export_sessions`` document before ``import_sessions`` writes any of it.

An archive is untrusted input: a hand-edited or crafted file must not store what the
library itself would refuse (wrong types, oversize or unstorable text, numbers a column
or JSON cannot hold, a parent outside the session or a parent cycle, which would hang
every read of the tree) nor write rows of another session's namespace.  Each problem is
a :class:`~._fields.BadField` naming the field (``messages[2].created_at``); the command
adds the line.  Values are normalised in place where the check fixes their form
(timestamps become UTC ISO text, integral floats become ints), so the writer can trust them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agent_sessions import conf
from agent_sessions.exceptions import ArchiveError, InvalidMessage, InvalidText
from agent_sessions.models import Compaction, Message, SessionRecord, owner_candidates
from agent_sessions.session.context import PROMPT_KEY
from agent_sessions.session.model_calls import content_hash, to_json
from agent_sessions.types import check_indexed, message_id, validate_message

from . import _fields as f
from ._archive import FORMAT
from ._fields import BadField

LISTS = ("messages", "compactions", "context_blocks", "search_entries", "model_calls", "model_call_content")
_IN_CHUNK = 500


@dataclass
class Checked:
    """What the cross-document checks need of a valid document (the rows stay in the document)."""

    session_id: str
    labels: list[tuple[str, str]] = field(default_factory=list)
    """``(field, label)`` of every context block and search entry."""


def check_document(document: Any, *, contents: bool = True) -> Checked:
    """Check every value of one document (raises ``ArchiveError`` or ``BadField``); normalises it in place.

    ``contents=False`` skips the UIMessage checks, for a caller that validates contents as it stores them.
    """
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ArchiveError(f"not an agent_sessions session document (expected format {FORMAT!r})")
    limits = conf.message_limits()
    session_id = f.ident(document.get("session_id"), "session_id", empty=True, id_bytes=limits.id_bytes)
    for key in LISTS:
        document[key] = f.array(document.get(key, []), key)
    record = document.get("session")
    if record is not None:
        _check_record(f.obj(record, "session"), session_id)
    ids = _check_messages(document["messages"], limits, contents)
    _check_compactions(document["compactions"], ids, limits.id_bytes)
    hashes = _check_call_content(document["model_call_content"])
    _check_model_calls(document["model_calls"], hashes, limits.id_bytes)
    checked = Checked(session_id)
    _check_blocks(document["context_blocks"], checked)
    _check_entries(document["search_entries"], checked)
    return checked


def _check_blocks(blocks: list, checked: Checked) -> None:
    seen: set[str] = set()
    for index, raw in enumerate(blocks):
        where = f"context_blocks[{index}]"
        block = f.obj(raw, where)
        label = _label(block.get("label"), f"{where}.label", checked.session_id)
        if label in seen:
            raise BadField(f"{where}.label", f"duplicate label {label!r}")
        seen.add(label)
        block["content"] = f.text(block.get("content", ""), f"{where}.content")
        block["updated_at"] = f.stamp(block.get("updated_at"), f"{where}.updated_at")
        checked.labels.append((f"{where}.label", label))


def _check_entries(entries: list, checked: Checked) -> None:
    keys: set[tuple[str, str]] = set()
    for index, raw in enumerate(entries):
        where = f"search_entries[{index}]"
        entry = f.obj(raw, where)
        label = _label(entry.get("label"), f"{where}.label", checked.session_id)
        key = f.text(entry.get("key"), f"{where}.key", max_bytes=conf.max_search_key_bytes())
        if not key:
            raise BadField(f"{where}.key", "must not be empty")
        if (label, key) in keys:
            raise BadField(f"{where}.key", f"duplicate key {key!r} under label {label!r}")
        keys.add((label, key))
        content = f.text(entry.get("content"), f"{where}.content")
        try:
            check_indexed(content, "the content")
        except InvalidText as refused:
            raise BadField(f"{where}.content", str(refused)) from None
        for name in ("created_at", "updated_at"):
            entry[name] = f.stamp(entry.get(name), f"{where}.{name}")
        checked.labels.append((f"{where}.label", label))


def _check_record(record: dict, session_id: str) -> None:
    if record.get("id") != session_id:
        raise BadField("session.id", "must equal the document's session_id")
    f.text(record.get("name", ""), "session.name", max_chars=conf.max_session_name_chars(), nullable=True)
    f.ident(record.get("parent_session_id"), "session.parent_session_id", nullable=True, empty=True)
    for name in ("model", "source", "end_reason"):
        f.text(record.get(name), f"session.{name}", max_chars=conf.max_session_field_chars(), nullable=True)
    for name in ("input_tokens", "output_tokens"):
        record[name] = f.count(record.get(name), f"session.{name}")
    f.amount(record.get("estimated_cost"), "session.estimated_cost")
    for name in ("created_at", "updated_at"):
        record[name] = f.stamp(record.get(name), f"session.{name}")
    f.text(record.get("owner"), "session.owner", max_chars=conf.max_session_name_chars(), nullable=True)


def _check_messages(entries: list, limits: conf.MessageLimits, contents: bool) -> dict[str, int]:
    """Check every message entry; returns ``{message id: index}``.  Parents must be messages of the list
    and form no cycle."""
    ids: dict[str, int] = {}
    for index, raw in enumerate(entries):
        try:  # field names relative to the entry, prefixed only on error (a file may hold millions)
            mid = _check_message(raw, limits, contents)
            if mid in ids:
                raise BadField("id", f"duplicate message id {mid!r} (also messages[{ids[mid]}])")
        except BadField as exc:
            raise BadField(f"messages[{index}]{'.' if exc.field else ''}{exc.field}", exc.problem) from None
        ids[mid] = index
    _check_parents(entries, ids)
    return ids


def _check_message(raw: Any, limits: conf.MessageLimits, contents: bool) -> str:
    """One message entry, with field names relative to it; returns its id."""
    entry = f.obj(raw, "")
    mid = f.ident(entry.get("id"), "id", id_bytes=limits.id_bytes)
    f.ident(entry.get("parent_id"), "parent_id", nullable=True, id_bytes=limits.id_bytes)
    f.ident(entry.get("origin_id"), "origin_id", nullable=True, id_bytes=limits.id_bytes)
    entry["created_at"] = f.stamp(entry.get("created_at"), "created_at")
    if "message" in entry:
        message = entry["message"]
        try:
            validate_message(message, limits) if contents else message_id(message, limits)
        except InvalidMessage as exc:
            raise BadField("message", str(exc)) from None
        if message["id"] != mid:
            raise BadField("message.id", f"{message['id']!r} does not match the entry's id {mid!r}")
        entry.setdefault("role", message.get("role", ""))
    elif "content" in entry:
        content = f.text(entry["content"], "content")
        size = len(content.encode("utf-8"))
        if size > limits.message_bytes:
            raise BadField("content", f"is {size} bytes; the limit is {limits.message_bytes}")
    else:
        raise BadField("", "needs a 'message' object or a 'content' string")
    f.text(entry.get("role", ""), "role", max_chars=conf.max_role_chars())
    return mid


def _check_parents(entries: list[dict], ids: dict[str, int]) -> None:
    """Every parent is a message of the session, and following parents always reaches a root."""
    parents = {entry["id"]: entry.get("parent_id") for entry in entries}
    for entry in entries:
        parent = entry.get("parent_id")
        if parent is not None and parent not in parents:
            where = f"messages[{ids[entry['id']]}].parent_id"
            raise BadField(where, f"{parent!r} is not a message of this session")
    rooted: set[str] = set()
    for start in parents:
        path: list[str] = []
        on_path: set[str] = set()
        cursor: str | None = start
        while cursor is not None and cursor not in rooted:
            if cursor in on_path:
                loop = path[path.index(cursor) :] + [cursor]
                shown = " → ".join(repr(m) for m in loop[:6]) + (" → …" if len(loop) > 6 else "")
                raise BadField(f"messages[{ids[cursor]}].parent_id", f"parent links form a cycle: {shown}")
            path.append(cursor)
            on_path.add(cursor)
            cursor = parents[cursor]
        rooted.update(path)


def _check_compactions(entries: list, message_ids: dict[str, int], id_bytes: int) -> None:
    seen: set[str] = set()
    for index, raw in enumerate(entries):
        where = f"compactions[{index}]"
        overlay = f.obj(raw, where)
        cid = f.ident(overlay.get("id"), f"{where}.id", id_bytes=id_bytes)
        if cid in seen:
            raise BadField(f"{where}.id", f"duplicate compaction id {cid!r}")
        seen.add(cid)
        f.text(overlay.get("summary"), f"{where}.summary")
        for name in ("from_message_id", "to_message_id"):
            ref = f.ident(overlay.get(name), f"{where}.{name}", id_bytes=id_bytes)
            if ref not in message_ids:
                raise BadField(f"{where}.{name}", f"{ref!r} is not a message of this session")
        overlay["created_at"] = f.stamp(overlay.get("created_at"), f"{where}.created_at")


CALL_STATUSES = ("ok", "error", "cancelled", "unfinished")


def _check_call_content(entries: list) -> set[str]:
    """Each content entry's hash must be its content's (so a hand edit cannot make a record lie)."""
    seen: set[str] = set()
    for index, raw in enumerate(entries):
        where = f"model_call_content[{index}]"
        entry = f.obj(raw, where)
        kind = f.text(entry.get("kind"), f"{where}.kind")
        body = f.text(entry.get("content"), f"{where}.content")
        key = f.text(entry.get("hash"), f"{where}.hash")
        if key != content_hash(kind, body):
            raise BadField(f"{where}.hash", "does not match the content")
        if key in seen:
            raise BadField(f"{where}.hash", f"duplicate content {key!r}")
        seen.add(key)
    return seen


def _check_model_calls(entries: list, hashes: set[str], id_bytes: int) -> None:
    seen: set[str] = set()
    for index, raw in enumerate(entries):
        where = f"model_calls[{index}]"
        call = f.obj(raw, where)
        cid = f.ident(call.get("id"), f"{where}.id", id_bytes=id_bytes)
        if cid in seen:
            raise BadField(f"{where}.id", f"duplicate model call id {cid!r}")
        seen.add(cid)
        for name in ("message_id", "leaf_id"):
            f.ident(call.get(name), f"{where}.{name}", nullable=True, id_bytes=id_bytes)
        refs = [
            call.get("system_hash"),
            call.get("tools_hash"),
            call.get("sent_hash"),
            *f.array(call.get("overlays", []), f"{where}.overlays"),
        ]
        for ref in refs:
            if ref is not None and ref not in hashes:
                raise BadField(where, f"references content {ref!r} that the document does not hold")
        f.text(call.get("model"), f"{where}.model")
        if call.get("status") not in CALL_STATUSES:
            raise BadField(f"{where}.status", f"must be one of {', '.join(CALL_STATUSES)}")
        f.text(call.get("error") or "", f"{where}.error")
        f.obj(call.get("params") or {}, f"{where}.params")
        for name in ("cost", "latency_ms"):
            f.amount(call.get(name), f"{where}.{name}")
        call["started_at"] = f.stamp(call.get("started_at"), f"{where}.started_at", nullable=False)
        try:
            to_json([call.get("params"), call.get("usage")])
        except ValueError as exc:
            raise BadField(where, f"params or usage cannot be stored: {exc}") from None


def _label(value: Any, where: str, session_id: str) -> str:
    """A label of this session's namespace: ``<label>_<session id>`` with a non-empty ``<label>``."""
    label = f.text(value, where)
    suffix = f"_{session_id}"
    if not session_id or not label.endswith(suffix) or len(label) == len(suffix):
        raise BadField(where, f"{label[:80]!r} is not namespaced by the session id ('<label>_<session id>')")
    if label.startswith(f"{PROMPT_KEY}_") and label != f"{PROMPT_KEY}{suffix}":
        raise BadField(where, f"{label[:80]!r} is another session's stored prompt")
    base, limit = label[: -len(suffix)], conf.max_block_label_chars()
    if len(base) > limit:
        raise BadField(where, f"the label before '_<session id>' is {len(base)} characters; the limit is {limit}")
    return label


# ── across documents and the database ──────────────────────────────────────


def other_owners(label: str, session_id: str) -> list[str]:
    """Session ids longer than ``session_id`` whose namespace also holds ``label``.

    ``memory_user_X`` is label ``memory_user`` of ``X`` or label ``memory`` of ``user_X``;
    a label belongs to the longest existing session id it ends with, so an import of
    ``X`` may not write it while ``user_X`` exists.
    """
    return [owner for owner in owner_candidates(label) if len(owner) > len(session_id)]


def check_owners(using: str, documents: Iterable[tuple[int, Checked]]) -> None:
    """Refuse a label that belongs to another session of the file or of the database (``ArchiveError``)."""
    documents = list(documents)
    in_file = {checked.session_id for _, checked in documents}
    claims: list[tuple[int, str, str, list[str]]] = []
    candidates: set[str] = set()
    for number, checked in documents:
        for where, label in checked.labels:
            others = other_owners(label, checked.session_id)
            if others:
                claims.append((number, where, label, others))
                candidates.update(others)
    existing = in_file & candidates
    existing.update(existing_sessions(using, candidates - existing))
    for number, where, label, others in claims:
        owner = next((sid for sid in others if sid in existing), None)
        if owner is not None:
            raise ArchiveError(f"line {number}: {where}: {label!r} belongs to session {owner!r}, not this one")


def existing_sessions(using: str, ids: set[str]) -> set[str]:
    """The ids among ``ids`` with a registry row, messages or overlays."""
    found: set[str] = set()
    wanted = sorted(ids)
    for start in range(0, len(wanted), _IN_CHUNK):
        chunk = wanted[start : start + _IN_CHUNK]
        found.update(SessionRecord.objects.using(using).filter(id__in=chunk).values_list("id", flat=True))
        for model in (Message, Compaction):
            rows = model.objects.using(using).filter(session_id__in=chunk).order_by().values_list("session_id")
            found.update(sid for (sid,) in rows.distinct())
    return found
