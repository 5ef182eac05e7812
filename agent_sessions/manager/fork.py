"""Copy one root→message path into another session in bulk, recording each copy's origin."""

from __future__ import annotations

import uuid

from ..models import Compaction, Message
from ..storage import decode
from ..storage.orm import DjangoSessionProvider
from ..tokens import estimate_one_message_tokens
from ..types import dump_message


def copy_path(source: DjangoSessionProvider, target_session_id: str, at_message_id: str) -> int:
    """Copy the path ending at ``at_message_id`` under new ids; returns how many messages it copied.

    The rows are copied in SQL, ids minted there too (one ``INSERT … SELECT``); a path
    SQL cannot copy as is (rows from a foreign writer) is copied here in Python.  The
    overlays that lie wholly on the path are carried over with mapped ids.  Run it
    inside a transaction.  An unknown message copies nothing and returns 0.
    """
    copied = source.copy_path_to(target_session_id, at_message_id) or _copy_path_in_python(
        source, target_session_id, at_message_id
    )
    if copied:
        _copy_overlays(source, target_session_id)
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


def _copy_overlays(source: DjangoSessionProvider, target_session_id: str) -> None:
    """Overlays whose ``from`` and ``to`` both lie on the copied path, oldest first, with mapped ids.

    The copies' ids are read back by their ``origin_id`` (:func:`fork_mapping`, root first: both
    copies insert in path order), and only when the source has overlays."""
    overlays = source.get_compactions()
    if not overlays:
        return
    mapping = fork_mapping(source.using, target_session_id)
    position = {mid: i for i, mid in enumerate(mapping)}
    carried = [
        Compaction(
            compaction_id=uuid.uuid4().hex,
            session_id=target_session_id,
            summary=overlay.summary,
            from_message_id=mapping[overlay.from_message_id],
            to_message_id=mapping[overlay.to_message_id],
            created_at=overlay.created_at,
        )
        for overlay in overlays
        if overlay.from_message_id in position
        and overlay.to_message_id in position
        and position[overlay.from_message_id] <= position[overlay.to_message_id]
    ]
    Compaction.objects.using(source.using).bulk_create(carried, batch_size=source.bulk_batch_size)


def fork_mapping(using: str, fork_session_id: str) -> dict[str, str]:
    """``{original id: copy id}`` for the messages a fork copied from its parent session."""
    rows = (
        Message.objects.using(using)
        .filter(session_id=fork_session_id, origin_id__isnull=False)
        .order_by("seq")
        .values_list("origin_id", "message_id")
    )
    return dict(rows)
