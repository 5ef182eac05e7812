"""Copy one root→message path into another session in bulk, recording each copy's origin."""

from __future__ import annotations

import dataclasses
import uuid

from ..models import Compaction, Message, ModelCallContent, ModelCallRecord
from ..session.model_calls import OVERLAY, content_hash, hash_list, overlay_from_json, overlay_json, to_json
from ..storage import decode
from ..storage.orm import DjangoSessionProvider
from ..tokens import estimate_one_message_tokens
from ..types import StoredCompaction, dump_message


def copy_path(source: DjangoSessionProvider, target_session_id: str, at_message_id: str) -> int:
    """Copy the path ending at ``at_message_id`` under new ids; returns how many messages it copied.

    The rows are copied in SQL, ids minted there too (one ``INSERT … SELECT``); a path
    SQL cannot copy as is (rows from a foreign writer) is copied here in Python.  The
    overlays that lie wholly on the path are carried over with mapped ids, and so are the
    model-call records of the replies on it (SPEC §8).  Run it inside a transaction.  An
    unknown message copies nothing and returns 0.
    """
    copied = source.copy_path_to(target_session_id, at_message_id) or _copy_path_in_python(
        source, target_session_id, at_message_id
    )
    if not copied:
        return 0
    overlays = source.get_compactions()
    calls = list(ModelCallRecord.objects.using(source.using).filter(session_id=source.session_id).order_by("seq"))
    if overlays or calls:  # the copies' ids, read back by their origin_id, only when something refers to them
        mapping = fork_mapping(source.using, target_session_id)
        overlay_ids = _copy_overlays(source, target_session_id, overlays, mapping)
        _copy_model_calls(source, target_session_id, calls, mapping, overlay_ids)
    return copied


def _copy_path_in_python(source: DjangoSessionProvider, target_session_id: str, at_message_id: str) -> int:
    """The row-by-row copy: every id, parent and total computed here, then multi-row INSERTs; returns
    how many messages it copied."""
    rows = source.get_path_rows(at_message_id)
    if not rows:
        return 0
    mapping = {row["id"]: uuid.uuid4().hex for row in rows}
    copies: list[dict] = []
    parent: str | None = None
    path_tokens = 0
    for depth, row in enumerate(rows, start=1):
        message = decode.message(row["content"], row_id=row["id"], role=row["role"])
        message["id"] = mapping[row["id"]]
        tokens = row["tokens"] if row["tokens"] is not None else estimate_one_message_tokens(message)
        path_tokens += tokens
        copies.append(
            {
                "id": message["id"],
                "parent_id": parent,
                "role": row["role"],
                "content": dump_message(message),
                "text_content": row["text_content"],
                "tool_text": row["tool_text"],
                "created_at": row["created_at"],
                "depth": depth,
                "tokens": tokens,
                "path_tokens": path_tokens,
                "origin_id": row["id"],
            }
        )
        parent = message["id"]
    DjangoSessionProvider(target_session_id, using=source.using).insert_rows(copies)
    return len(copies)


def _copy_overlays(
    source: DjangoSessionProvider, target_session_id: str, overlays: list[StoredCompaction], mapping: dict[str, str]
) -> dict[str, str]:
    """Overlays whose ``from`` and ``to`` both lie on the copied path, oldest first, with mapped ids;
    returns ``{overlay id: its copy's id}``.

    ``mapping`` is :func:`fork_mapping` (root first: both copies insert in path order)."""
    if not overlays:
        return {}
    position = {mid: i for i, mid in enumerate(mapping)}
    pairs = [
        (
            overlay.id,
            Compaction(
                compaction_id=uuid.uuid4().hex,
                session_id=target_session_id,
                summary=overlay.summary,
                from_message_id=mapping[overlay.from_message_id],
                to_message_id=mapping[overlay.to_message_id],
                created_at=overlay.created_at,
            ),
        )
        for overlay in overlays
        if overlay.from_message_id in position
        and overlay.to_message_id in position
        and position[overlay.from_message_id] <= position[overlay.to_message_id]
    ]
    Compaction.objects.using(source.using).bulk_create([c for _, c in pairs], batch_size=source.bulk_batch_size)
    return {old: copy.compaction_id for old, copy in pairs}


def _copy_model_calls(
    source: DjangoSessionProvider,
    target_session_id: str,
    calls: list[ModelCallRecord],
    mapping: dict[str, str],
    overlay_ids: dict[str, str],
) -> None:
    """The records of the replies on the copied path, with message and overlay ids mapped to the copies'.

    Prompt and tool content is copied as it is (same hash); an overlay a record saw is copied
    with its ids mapped, under the new content's hash."""
    calls = [c for c in calls if c.message_id in mapping and (c.leaf_id is None or c.leaf_id in mapping)]
    if not calls:
        return
    contents = {c.hash: c for c in ModelCallContent.objects.using(source.using).filter(session_id=source.session_id)}
    copied: dict[str, ModelCallContent] = {}
    renamed: dict[str, str | None] = {}

    def carry(key: str | None) -> str | None:
        if key is None or key not in contents:
            return None
        if key not in renamed:
            row = contents[key]
            new_key, body = key, row.content
            if row.kind == OVERLAY:
                overlay = overlay_from_json(row.content)
                if overlay is None or overlay.from_message_id not in mapping or overlay.to_message_id not in mapping:
                    renamed[key] = None
                    return None
                body = overlay_json(
                    dataclasses.replace(
                        overlay,
                        id=overlay_ids.get(overlay.id, overlay.id),
                        from_message_id=mapping[overlay.from_message_id],
                        to_message_id=mapping[overlay.to_message_id],
                    )
                )
                new_key = content_hash(OVERLAY, body)
            renamed[key] = new_key
            copied[new_key] = ModelCallContent(session_id=target_session_id, hash=new_key, kind=row.kind, content=body)
        return renamed[key]

    rows = []
    for call in calls:
        overlays = [k for k in (carry(h) for h in hash_list(call.overlays)) if k is not None]
        rows.append(
            ModelCallRecord(
                call_id=uuid.uuid4().hex,
                session_id=target_session_id,
                message_id=mapping[call.message_id],
                leaf_id=None if call.leaf_id is None else mapping[call.leaf_id],
                overlays=to_json(overlays),
                system_hash=carry(call.system_hash),
                tools_hash=carry(call.tools_hash),
                sent_hash=carry(call.sent_hash),
                model=call.model,
                params=call.params,
                usage=call.usage,
                cost=call.cost,
                latency_ms=call.latency_ms,
                status=call.status,
                error=call.error,
                started_at=call.started_at,
            )
        )
    ModelCallContent.objects.using(source.using).bulk_create(
        copied.values(), batch_size=source.bulk_batch_size, ignore_conflicts=True
    )
    ModelCallRecord.objects.using(source.using).bulk_create(rows, batch_size=source.bulk_batch_size)


def fork_mapping(using: str, fork_session_id: str) -> dict[str, str]:
    """``{original id: copy id}`` for the messages a fork copied from its parent session."""
    rows = (
        Message.objects.using(using)
        .filter(session_id=fork_session_id, origin_id__isnull=False)
        .order_by("seq")
        .values_list("origin_id", "message_id")
    )
    return dict(rows)
