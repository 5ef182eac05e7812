"""Apply compaction overlays to a root→leaf path (SPEC §3.6), without touching stored rows."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .types import COMPACTION_PREFIX, StoredCompaction


def summary_message(compaction: StoredCompaction) -> dict:
    """The synthetic assistant message that stands in for a compacted range."""
    return {
        "id": f"{COMPACTION_PREFIX}{compaction.id}",
        "role": "assistant",
        "parts": [{"type": "text", "text": compaction.summary}],
    }


def visible_overlays(
    path_ids: Sequence[str], compactions: Iterable[StoredCompaction], *, window: bool = False
) -> dict[int, tuple[int, StoredCompaction]]:
    """Map a start index on the path to ``(end index, overlay)``.

    Only overlays whose ``from`` and ``to`` both lie on this path (in order)
    count, so a sibling branch's overlays never leak; for one ``from`` the
    newest such overlay wins (``compactions`` come oldest first).  With
    ``window=True`` the path is a recent suffix: an overlay ending inside it
    whose ``from`` lies before it covers the suffix's start (a stored range is
    always one ancestor chain, so its ``from`` is then on this path too).
    """
    position = {mid: i for i, mid in enumerate(path_ids)}
    chosen: dict[int, tuple[int, StoredCompaction]] = {}
    for overlay in compactions:
        start = position.get(overlay.from_message_id)
        end = position.get(overlay.to_message_id)
        if start is None and window and end is not None:
            start = 0
        if start is None or end is None or end < start:
            continue
        chosen[start] = (end, overlay)
    return chosen


def apply_overlays(
    path: Sequence[dict], compactions: Iterable[StoredCompaction], *, window: bool = False
) -> list[dict]:
    """The path with each visible overlay's range replaced by its summary message."""
    compactions = list(compactions)
    if not compactions:
        return list(path)
    chosen = visible_overlays([m["id"] for m in path], compactions, window=window)
    out: list[dict] = []
    i = 0
    while i < len(path):
        hit = chosen.get(i)
        if hit is None:
            out.append(path[i])
            i += 1
        else:
            end, overlay = hit
            out.append(summary_message(overlay))
            i = end + 1
    return out
