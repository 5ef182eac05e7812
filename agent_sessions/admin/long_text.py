"""The part of a long text the tree page left out (its "show all"), looked up from the query string."""

from __future__ import annotations

from collections.abc import Mapping

from ..models import Compaction, Message
from ..storage import decode
from .context_panel import block_text
from .parts import FIELDS, part_views, remainder


def _part_field(session_id: str, node: str, part: str, name: str, *, using: str) -> str | None:
    row = (
        Message.objects.using(using)
        .filter(session_id=session_id, message_id=node)
        .values_list("content", "role")
        .first()
    )
    if row is None or name not in FIELDS:
        return None
    views = part_views(decode.message(row[0], row_id=node, role=row[1]))
    try:
        index = int(part)
    except ValueError:
        return None
    return views[index].field(name) if 0 <= index < len(views) else None


def long_text(session_id: str, query: Mapping[str, str], *, using: str) -> str | None:
    """What follows the preview of ``node=&part=&field=``, ``compaction=`` or ``block=`` (None: no such text)."""
    if query.get("node"):
        text = _part_field(session_id, query["node"], query.get("part", "0"), query.get("field", "text"), using=using)
    elif query.get("compaction"):
        text = (
            Compaction.objects.using(using)
            .filter(session_id=session_id, compaction_id=query["compaction"])
            .values_list("summary", flat=True)
            .first()
        )
    elif query.get("block"):
        text = block_text(session_id, query["block"], using=using)
    else:
        return None
    return None if text is None else remainder(text)
