"""Apply compaction overlays to a root→leaf path (docs/data-model.md), without touching stored rows.

One rule picks the overlays a path shows, and every reader (history, recent windows, the
admin tree, loaded-skill scans, the O(1) threshold check) goes through :func:`outranks`
and :func:`applied_ranges`: among overlays with the same ``from`` whose both ends lie on
the path, the one reaching furthest wins, and on ties the newest (by insertion order).
Walking from the root, a winning range hides every overlay that starts inside it.
"""

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


def outranks(end: int, current_end: int) -> bool:
    """True when an overlay ending at ``end`` beats one (stored earlier, same ``from``) ending at ``current_end``.

    Positions grow along the path; the later-stored overlay wins ties.  So compacting a
    side branch, whose range ends on the shared prefix, never un-compacts the main branch.
    """
    return end >= current_end


def visible_overlays(
    path_ids: Sequence[str], compactions: Iterable[StoredCompaction], *, window: bool = False
) -> dict[int, tuple[int, StoredCompaction]]:
    """Map a start index on the path to ``(end index, overlay)``: the winner for that start.

    Only overlays whose ``from`` and ``to`` both lie on this path (in order)
    count, so a sibling branch's overlays never leak; ``compactions`` come oldest
    first and :func:`outranks` decides between overlays of one start.  With
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
        current = chosen.get(start)
        if current is None or outranks(end, current[0]):
            chosen[start] = (end, overlay)
    return chosen


def applied_ranges(
    path_ids: Sequence[str], compactions: Iterable[StoredCompaction], *, window: bool = False
) -> list[tuple[int, int, StoredCompaction]]:
    """``(start, end, overlay)`` of each overlay the path shows, root first (inclusive indexes)."""
    chosen = visible_overlays(path_ids, compactions, window=window)
    ranges: list[tuple[int, int, StoredCompaction]] = []
    i = 0
    while i < len(path_ids):
        hit = chosen.get(i)
        if hit is None:
            i += 1
        else:
            end, overlay = hit
            ranges.append((i, end, overlay))
            i = end + 1
    return ranges


def apply_overlays(
    path: Sequence[dict], compactions: Iterable[StoredCompaction], *, window: bool = False
) -> list[dict]:
    """The path with each visible overlay's range replaced by its summary message."""
    compactions = list(compactions)
    if not compactions:
        return list(path)
    out: list[dict] = []
    i = 0
    for start, end, overlay in applied_ranges([m["id"] for m in path], compactions, window=window):
        out.extend(path[i:start])
        out.append(summary_message(overlay))
        i = end + 1
    out.extend(path[i:])
    return out
