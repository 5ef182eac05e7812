"""Visible-history tokens of a leaf without loading the history (the auto-compaction estimate).

The leaf's ``path_tokens`` is the raw root→leaf total.  Each overlay visible on the path
is swapped for its summary: raw tokens of ``from..to`` = ``path_tokens(to) −
path_tokens(from) + tokens(from)``.  Visible overlays are found by walking root-ward from
the leaf to the nearest node that ends an overlay, then on from above that overlay's
start: the walk covers only the messages that are still visible, never the compacted
ranges, so the cost follows the visible history, not the stored one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import conf
from ..overlays import summary_message
from ..tokens import estimate_one_message_tokens
from ..types import StoredCompaction
from .walks import ROWS_BOUND

Fetch = Callable[[str, list], list[tuple]]

_ROWS = (
    "SELECT id, parent_id, depth, tokens, path_tokens FROM assistant_messages WHERE session_id = %s AND id IN ({ids})"
)

# Walk root-ward from ``cursor`` and return the first node (the cursor included) that ends an
# overlay; stops at depth ``min_depth`` since no overlay ends above it, and on a parent cycle
# as every walk does (walks.ROWS_BOUND).
_NEXT_OVERLAY_END = (
    "WITH RECURSIVE path(seq, id, parent_id, n) AS ("
    "  SELECT seq, id, parent_id, 0 FROM assistant_messages WHERE session_id = %s AND id = %s"
    "  UNION ALL"
    "  SELECT m.seq, m.id, m.parent_id, path.n + 1 FROM assistant_messages m JOIN path"
    "    ON m.session_id = %s AND m.id = path.parent_id"
    "  WHERE path.id NOT IN ({stops}) AND m.depth >= %s AND path.n < %s AND " + ROWS_BOUND + ") "
    "SELECT id FROM path WHERE id IN ({stops}) ORDER BY n LIMIT 1"
)

_MAX_OVERLAY_IDS = 500  # beyond this the estimate falls back to reading the history


@dataclass(frozen=True)
class _Row:
    """Key columns of one message; the numbers are None on rows a foreign writer stored without totals
    (typed ``Any``: each use checks for None where the walk can meet one)."""

    parent_id: str | None
    depth: Any
    tokens: Any
    path_tokens: Any


class _Irregular(Exception):
    """Overlays overlap in a way only the full read resolves exactly."""


def visible_history_tokens(
    fetchall: Fetch, session_id: str, leaf_id: str, overlays: list[StoredCompaction]
) -> int | None:
    """Tokens of the leaf's visible history from stored running totals, or None to read it instead.

    Ranges are assumed to be ancestor chains (``compact()`` only stores such ranges).
    Rows without totals (foreign writers), too many overlays and irregularly
    overlapping overlays return None.
    """
    ids = {leaf_id} | {c.from_message_id for c in overlays} | {c.to_message_id for c in overlays}
    if len(ids) > _MAX_OVERLAY_IDS:
        return None
    rows = _fetch_rows(fetchall, session_id, sorted(ids))
    leaf = rows.get(leaf_id)
    if leaf is None or leaf.path_tokens is None or leaf.depth is None:
        return None
    try:
        return _swap_visible_overlays(fetchall, session_id, leaf_id, leaf, rows, overlays)
    except _Irregular:
        return None


def _fetch_rows(fetchall: Fetch, session_id: str, ids: list[str]) -> dict[str, _Row]:
    sql = _ROWS.format(ids=", ".join(["%s"] * len(ids)))
    return {r[0]: _Row(r[1], r[2], r[3], r[4]) for r in fetchall(sql, [session_id, *ids])}


def _swap_visible_overlays(
    fetchall: Fetch,
    session_id: str,
    leaf_id: str,
    leaf: _Row,
    rows: dict[str, _Row],
    overlays: list[StoredCompaction],
) -> int:
    order = {c.id: i for i, c in enumerate(overlays)}
    by_end: dict[str, list[StoredCompaction]] = defaultdict(list)
    for overlay in overlays:
        end = rows.get(overlay.to_message_id)
        if end is not None and end.depth is not None:
            by_end[overlay.to_message_id].append(overlay)
    if not by_end:
        return int(leaf.path_tokens)
    stops = sorted(by_end)
    min_depth = min(rows[t].depth for t in stops)
    total = int(leaf.path_tokens)
    cursor: str | None = leaf_id
    depth = leaf.depth
    ends: set[str] = set()
    while cursor is not None and depth is not None and depth >= min_depth:
        end_id = _next_overlay_end(fetchall, session_id, cursor, stops, min_depth)
        if end_id is None:
            break
        if end_id in ends:
            raise _Irregular  # the path went round a parent cycle: the read cuts it
        ends.add(end_id)
        shown = _visible_at(end_id, by_end[end_id], rows, overlays, order)
        end = rows[end_id]
        if shown is None:
            cursor, depth = end.parent_id, end.depth - 1
            continue
        start = rows[shown.from_message_id]
        raw = end.path_tokens - start.path_tokens + start.tokens
        total += estimate_one_message_tokens(summary_message(shown)) - raw
        cursor, depth = start.parent_id, start.depth - 1
    return total


def _next_overlay_end(fetchall: Fetch, session_id: str, cursor: str, stops: list[str], min_depth: int) -> str | None:
    marks = ", ".join(["%s"] * len(stops))
    rows = fetchall(
        _NEXT_OVERLAY_END.format(stops=marks),
        [session_id, cursor, session_id, *stops, min_depth, conf.max_path_depth(), session_id, *stops],
    )
    return rows[0][0] if rows else None


def _visible_at(
    end_id: str,
    candidates: list[StoredCompaction],
    rows: dict[str, _Row],
    overlays: list[StoredCompaction],
    order: dict[str, int],
) -> StoredCompaction | None:
    """The overlay that shows at a path node ending overlays: the outermost (newest on ties).

    This is the read rule of :mod:`agent_sessions.overlays` seen from the leaf: the deepest
    end on the path reaches furthest, so overlays with the same start ending inside the
    range lose to it.  Raises ``_Irregular`` when one starting earlier ends inside the
    range (a crossing pair only the root-first walk resolves).
    """
    end = rows[end_id]

    def usable(c: StoredCompaction) -> bool:
        start = rows.get(c.from_message_id)
        return (
            start is not None
            and None not in (start.depth, start.tokens, start.path_tokens, end.path_tokens)
            and start.depth <= end.depth
        )

    found = [c for c in candidates if usable(c)]
    if not found:
        return None
    chosen = min(found, key=lambda c: (rows[c.from_message_id].depth, -order[c.id]))
    first, last = rows[chosen.from_message_id].depth, end.depth
    for other in overlays:
        if other is chosen:
            continue
        o_start, o_end = rows.get(other.from_message_id), rows.get(other.to_message_id)
        o_end_depth = o_end.depth if o_end is not None else None
        if o_end_depth is None or not first <= o_end_depth <= last:
            continue
        if o_start is not None and o_start.depth is not None and o_start.depth < first:
            raise _Irregular
    return chosen
