"""Compaction of a Session: overlays, manual ``compact()`` and auto-compaction (SPEC §3.5, §3.6).

``compact(leaf_id)`` hands the overlay-applied history of that leaf to the compaction
function, maps the range it returns back to stored ids (a ``compaction_<id>`` boundary
becomes that overlay's own ``from`` / ``to``), extends it from the earliest overlay
already visible on the branch (iterative compaction, as the seed does), checks that both
ends are visible on that path in order, and stores one overlay.  An invalid range stores
nothing and returns ``None`` (the seed's behaviour), with a warning in the log.

Auto-compaction (``compact_after``) estimates the visible history of the new leaf after
every insert.  With the ORM storage and the built-in estimate that check does not read the
history: it starts from the leaf's stored running total (``path_tokens``) and swaps each
overlay visible on the path for its summary (see :func:`_orm_history_tokens`).  A custom
``token_counter`` receives the messages, so it necessarily loads the history.  Crossing
the threshold compacts through :mod:`agent_sessions.tasks`: on a Celery worker for a
named configuration, inline otherwise; failures never fail the append.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async

from . import conf
from .asyncutils import acall, call, with_async_twins
from .compaction import CompactContext
from .exceptions import CompactionNotConfigured
from .overlays import summary_message
from .storage.orm import _LATEST_LEAF, DjangoSessionProvider, latest_leaf_params
from .tokens import estimate_message_tokens, estimate_one_message_tokens, estimate_string_tokens
from .types import COMPACTION_PREFIX, CompactResult, StoredCompaction, TokenCounterInput, is_finite_number

logger = logging.getLogger("agent_sessions")


@dataclass(frozen=True)
class _Plan:
    """What ``compact`` works on: the visible history and where each boundary id sits in it."""

    leaf_id: str | None
    history: list[dict]
    overlays: dict[str, StoredCompaction]  # compaction message id → overlay, for those in the history
    from_pos: dict[str, int]  # ids a range may start at → index in the history
    to_pos: dict[str, int]  # ids a range may end at → index in the history
    earliest: StoredCompaction | None  # the first overlay applied on this path
    seen: frozenset[str] = frozenset()  # ids of every stored overlay, read before the history


@with_async_twins("add_compaction", "get_compactions")
class CompactionMixin:
    """Compaction half of :class:`~agent_sessions.Session`."""

    def _init_compaction(self, *, token_counter: Callable | None, on_compaction_error: Callable | None) -> None:
        self._compact_fn: Callable | None = None
        self._compact_threshold: int | None = None
        self._token_counter = token_counter
        self._on_compaction_error = on_compaction_error

    # ── builder ─────────────────────────────────────────────────────
    def on_compaction(self, fn: Callable):
        """Set the compaction function ``fn(messages, context) -> CompactResult | None`` (builder)."""
        self._compact_fn = fn
        return self

    def compact_after(self, threshold: int, token_counter: Callable | None = None):
        """Compact automatically once the estimated tokens exceed ``threshold`` (builder).

        ``token_counter(TokenCounterInput(messages, system_prompt, context_blocks))`` (sync or
        async) replaces the built-in estimate; a non-finite or non-numeric answer counts as 0.
        It is also handed to the compaction function as ``CompactContext.token_counter``.
        Unlike the built-in estimate, a custom counter reads the whole visible history
        after every append.
        """
        self._compact_threshold = int(threshold)
        if token_counter is not None:
            self._token_counter = token_counter
        return self

    def on_compaction_error(self, handler: Callable):
        """Receive errors of auto-compaction (builder); a failing handler is swallowed."""
        self._on_compaction_error = handler
        return self

    # ── overlays ────────────────────────────────────────────────────
    def add_compaction(self, summary: str, from_message_id: str, to_message_id: str) -> StoredCompaction:
        """Store an overlay replacing ``from..to`` with ``summary`` on read."""
        return call(self.storage.add_compaction, summary, from_message_id, to_message_id)

    def get_compactions(self) -> list[StoredCompaction]:
        """Every stored overlay, oldest first."""
        return call(self.storage.get_compactions)

    # ── manual compaction ───────────────────────────────────────────
    def compact(self, leaf_id: str | None = None) -> CompactResult | None:
        """Summarise the middle of the path to ``leaf_id`` (latest leaf by default) into an overlay.

        Returns the stored range and summary, or None when the function found nothing to
        compact, returned a range that is not visible on this path, or another compaction
        of this session (manual or automatic, in any process) is running: both take the
        same job lease, so the summariser never runs twice at once for one session.
        Raises ``CompactionNotConfigured`` without ``on_compaction``; the function's own
        errors (e.g. the summariser's) propagate.
        """
        fn = self._require_compact_fn()
        from . import tasks

        with tasks.manual_lease(self) as run:
            if not run.held:
                logger.info("agent_sessions: session %r is being compacted already", getattr(self, "session_id", ""))
                return None
            result = self._compact_with(fn, leaf_id)
            run.compacted = result is not None
            return result

    def _compact_unlocked(self, leaf_id: str | None = None) -> CompactResult | None:
        """:meth:`compact` for a caller that holds the session's lease already (the Celery task)."""
        return self._compact_with(self._require_compact_fn(), leaf_id)

    def _compact_with(self, fn: Callable, leaf_id: str | None) -> CompactResult | None:
        plan = self._compaction_plan(leaf_id)
        if plan is None:
            return None
        return self._store_compaction(plan, call(fn, plan.history, self._compact_context()))

    async def acompact(self, leaf_id: str | None = None) -> CompactResult | None:
        """Async twin of :meth:`compact` (same lease); awaits the function (its ``acall`` when it has one)."""
        fn = self._require_compact_fn()
        from . import tasks

        lease = tasks.manual_lease(self)
        run = await sync_to_async(lease.__enter__, thread_sensitive=True)()
        try:
            if not run.held:
                logger.info("agent_sessions: session %r is being compacted already", getattr(self, "session_id", ""))
                result = None
            else:
                result = await self._acompact_with(fn, leaf_id)
                run.compacted = result is not None
        except BaseException as exc:
            if not await sync_to_async(lease.__exit__, thread_sensitive=True)(type(exc), exc, exc.__traceback__):
                raise
            return None
        await sync_to_async(lease.__exit__, thread_sensitive=True)(None, None, None)
        return result

    async def _acompact_with(self, fn: Callable, leaf_id: str | None) -> CompactResult | None:
        plan = await sync_to_async(self._compaction_plan, thread_sensitive=True)(leaf_id)
        if plan is None:
            return None
        context = self._compact_context()
        fn_acall = getattr(fn, "acall", None)
        if callable(fn_acall):
            result = await fn_acall(plan.history, context)
        else:
            result = await acall(fn, plan.history, context)
        return await sync_to_async(self._store_compaction, thread_sensitive=True)(plan, result)

    def _require_compact_fn(self) -> Callable:
        if self._compact_fn is None:
            raise CompactionNotConfigured("no compaction function: call on_compaction(fn) first")
        return self._compact_fn

    def _compact_context(self) -> CompactContext:
        return CompactContext(token_counter=self._token_counter)

    def _compaction_plan(self, leaf_id: str | None) -> _Plan | None:
        """Load the visible history of the leaf and index where ranges may start and end."""
        # Overlays first: one stored after this read makes the plan stale (see _store_compaction).
        stored = call(self.storage.get_compactions)
        history = call(self.storage.get_history, leaf_id)
        if not history:
            return None
        by_message = {f"{COMPACTION_PREFIX}{c.id}": c for c in stored}
        overlays: dict[str, StoredCompaction] = {}
        from_pos: dict[str, int] = {}
        to_pos: dict[str, int] = {}
        for index, message in enumerate(history):
            overlay = by_message.get(message["id"]) if message["id"].startswith(COMPACTION_PREFIX) else None
            if overlay is not None:
                overlays[message["id"]] = overlay
                from_pos.setdefault(overlay.from_message_id, index)
                to_pos.setdefault(overlay.to_message_id, index)
            else:
                from_pos.setdefault(message["id"], index)
                to_pos.setdefault(message["id"], index)
        earliest = next(iter(overlays.values()), None)
        return _Plan(leaf_id, history, overlays, from_pos, to_pos, earliest, frozenset(c.id for c in stored))

    def _store_compaction(self, plan: _Plan, result: Any) -> CompactResult | None:
        """Map, validate and store what the function returned; refresh a cached prompt."""
        if result is None:
            return None
        result = _as_result(result)
        if not result.summary.strip():
            return None
        from_id = _unwrap(result.from_message_id, plan, "from")
        to_id = _unwrap(result.to_message_id, plan, "to")
        start, end = plan.from_pos.get(from_id), plan.to_pos.get(to_id)
        if start is None or end is None or start > end:
            logger.warning(
                "agent_sessions: compaction range %r..%r is not on the path of session %r; nothing stored",
                result.from_message_id,
                result.to_message_id,
                getattr(self, "session_id", ""),
            )
            return None
        earliest = plan.earliest
        if earliest is not None and plan.from_pos[earliest.from_message_id] < start:
            from_id = earliest.from_message_id  # iterative: the new summary also replaces the older one
        if isinstance(self.storage, DjangoSessionProvider):
            # Concurrent compact() calls on one session all summarise the same history; only the
            # first to store wins, the others (their plan is stale) store nothing and return None.
            if self.storage.add_compaction_if_unchanged(result.summary, from_id, to_id, plan.seen) is None:
                logger.info(
                    "agent_sessions: session %r was compacted concurrently; this summary was dropped",
                    getattr(self, "session_id", ""),
                )
                return None
        else:
            self.add_compaction(result.summary, from_id, to_id)
        if getattr(self, "_cached_prompt", False) and hasattr(self, "refresh_system_prompt"):
            self.refresh_system_prompt()
        return CompactResult(from_message_id=from_id, to_message_id=to_id, summary=result.summary)

    # ── auto-compaction ─────────────────────────────────────────────
    def _after_append(self, outcome: Any, message: dict) -> None:
        """Hook run after an insert: estimate, and compact (or enqueue) above the threshold.

        Never raises: estimating, enqueueing and compacting errors go to
        :meth:`_report_auto_error` (the message is already stored).
        """
        if self._compact_fn is None or self._compact_threshold is None:
            return
        leaf_id = message["id"]
        try:
            tokens = self._estimate_tokens(leaf_id, path_tokens=getattr(outcome, "path_tokens", None))
        except Exception as exc:  # noqa: BLE001 - auto-compaction is never fatal to an append
            self._report_auto_error(exc)
            return
        if tokens <= self._compact_threshold:
            return
        from . import tasks

        config_name = getattr(self, "_config_name", None)
        if config_name:
            tasks.request_auto_compaction(self, config_name, leaf_id)
        else:
            tasks.compact_inline(self, leaf_id)

    def _over_threshold(self, leaf_id: str | None = None) -> bool:
        """True when auto-compaction is configured and the leaf's estimate exceeds the threshold."""
        if self._compact_fn is None or self._compact_threshold is None:
            return False
        return self._estimate_tokens(leaf_id) > self._compact_threshold

    def _estimate_tokens(self, leaf_id: str | None = None, *, path_tokens: int | None = None) -> int:
        """Estimated tokens of the leaf's visible history plus the system prompt (SPEC §3.5).

        After an append the caller passes the new message's id and the running total
        the insert returned (``path_tokens``), so no history is read.
        """
        prompt = self._prompt_for_estimate()
        if self._token_counter is not None:
            value = call(
                self._token_counter,
                TokenCounterInput(
                    messages=call(self.storage.get_history, leaf_id),
                    system_prompt=prompt,
                    context_blocks=self._blocks_for_estimate(),
                ),
            )
            return math.ceil(value) if is_finite_number(value) and value > 0 else 0
        history_tokens = None
        if isinstance(self.storage, DjangoSessionProvider):
            history_tokens = _orm_history_tokens(self.storage, leaf_id, path_tokens)
        if history_tokens is None:
            history_tokens = estimate_message_tokens(call(self.storage.get_history, leaf_id))
        return history_tokens + estimate_string_tokens(prompt or "")

    def _prompt_for_estimate(self) -> str | None:
        """The frozen prompt if stored, else a render that is not persisted (context half)."""
        render = getattr(self, "system_prompt_for_estimate", None)
        if render is None:
            return None
        prompt = call(render)
        return prompt if isinstance(prompt, str) else None

    def _blocks_for_estimate(self) -> list[Any]:
        blocks = getattr(self, "get_context_blocks", None)
        return list(call(blocks) or []) if blocks is not None else []

    def _report_auto_error(self, error: BaseException) -> None:
        """Log an auto-compaction failure and hand it to ``on_compaction_error`` (whose errors are swallowed)."""
        logger.warning(
            "agent_sessions: auto-compaction of session %r failed: %s: %s",
            getattr(self, "session_id", ""),
            type(error).__name__,
            error,
        )
        if self._on_compaction_error is None:
            return
        try:
            call(self._on_compaction_error, error)
        except Exception:  # noqa: BLE001 - a failing handler must not fail the append
            logger.exception("agent_sessions: the on_compaction_error handler failed")


def _as_result(result: Any) -> CompactResult:
    """Accept a ``CompactResult`` or anything with its three fields (attributes or keys)."""
    if isinstance(result, CompactResult):
        value = result
    elif isinstance(result, dict):
        value = CompactResult(result["from_message_id"], result["to_message_id"], result["summary"])
    else:
        value = CompactResult(result.from_message_id, result.to_message_id, result.summary)
    if not isinstance(value.summary, str):
        raise TypeError(f"a compaction summary must be a str, not {type(value.summary).__name__}")
    return value


def _unwrap(message_id: Any, plan: _Plan, end: str) -> Any:
    """A ``compaction_<id>`` boundary stands for that overlay's own ``from`` / ``to``."""
    overlay = plan.overlays.get(message_id) if isinstance(message_id, str) else None
    if overlay is None:
        return message_id
    return overlay.from_message_id if end == "from" else overlay.to_message_id


# ── O(1) estimate for the ORM storage ────────────────────────────────────────

_ROWS = (
    "SELECT id, parent_id, depth, tokens, path_tokens FROM assistant_messages WHERE session_id = %s AND id IN ({ids})"
)

# Walk root-ward from ``cursor`` and return the first node (the cursor included) that ends an
# overlay; stops at depth ``min_depth`` since no overlay ends above it.
_NEXT_OVERLAY_END = (
    "WITH RECURSIVE walk(id, parent_id, n) AS ("
    "  SELECT id, parent_id, 0 FROM assistant_messages WHERE session_id = %s AND id = %s"
    "  UNION ALL"
    "  SELECT m.id, m.parent_id, walk.n + 1 FROM assistant_messages m JOIN walk"
    "    ON m.session_id = %s AND m.id = walk.parent_id"
    "  WHERE walk.id NOT IN ({stops}) AND m.depth >= %s AND walk.n < %s"
    ") SELECT id FROM walk WHERE id IN ({stops}) ORDER BY n LIMIT 1"
)

_MAX_OVERLAY_IDS = 500  # beyond this the estimate falls back to reading the history


@dataclass(frozen=True)
class _Row:
    parent_id: str | None
    depth: int | None
    tokens: int | None
    path_tokens: int | None


class _Irregular(Exception):
    """Overlays overlap in a way only the full read resolves exactly."""


def _orm_history_tokens(storage: DjangoSessionProvider, leaf_id: str | None, path_tokens: int | None) -> int | None:
    """Visible-history tokens of a leaf without loading the history, or None to fall back.

    The leaf's ``path_tokens`` is the raw root→leaf total.  Each overlay visible on the path
    is swapped for its summary: raw tokens of ``from..to`` = ``path_tokens(to) −
    path_tokens(from) + tokens(from)``.  Visible overlays are found by walking root-ward from
    the leaf to the nearest node that ends an overlay, then on from above that overlay's
    start: the walk covers only the messages that are still visible, never the compacted
    ranges, so the cost follows the visible history, not the stored one.  Ranges are
    assumed to be ancestor chains (``compact()`` only stores such ranges).  Rows without
    totals (foreign writers) and irregularly overlapping overlays fall back (None).

    ``leaf_id=None`` means the latest leaf (``path_tokens`` is then read with it).
    """
    overlays = storage.get_compactions()
    if not overlays and path_tokens is not None and leaf_id is not None:
        return int(path_tokens)
    if leaf_id is None:
        row = storage._fetchone(_LATEST_LEAF, latest_leaf_params(storage.session_id))  # (id, depth, path_tokens)
        if row is None:
            return 0
        leaf_id, path_tokens = row[0], row[2]
        if not overlays and path_tokens is not None:
            return int(path_tokens)
    ids = {leaf_id} | {c.from_message_id for c in overlays} | {c.to_message_id for c in overlays}
    if len(ids) > _MAX_OVERLAY_IDS:
        return None
    rows = _fetch_rows(storage, sorted(ids))
    leaf = rows.get(leaf_id)
    if leaf is None or leaf.path_tokens is None or leaf.depth is None:
        return None
    try:
        return _swap_visible_overlays(storage, leaf_id, leaf, rows, overlays)
    except _Irregular:
        return None


def _fetch_rows(storage: DjangoSessionProvider, ids: list[str]) -> dict[str, _Row]:
    sql = _ROWS.format(ids=", ".join(["%s"] * len(ids)))
    return {r[0]: _Row(r[1], r[2], r[3], r[4]) for r in storage._fetchall(sql, [storage.session_id, *ids])}


def _swap_visible_overlays(
    storage: DjangoSessionProvider,
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
    cursor, depth = leaf_id, leaf.depth
    while cursor is not None and depth is not None and depth >= min_depth:
        end_id = _next_overlay_end(storage, cursor, stops, min_depth)
        if end_id is None:
            break
        overlay = _visible_at(end_id, by_end[end_id], rows, overlays, order)
        end = rows[end_id]
        if overlay is None:
            cursor, depth = end.parent_id, end.depth - 1
            continue
        start = rows[overlay.from_message_id]
        raw = end.path_tokens - start.path_tokens + start.tokens
        total += estimate_one_message_tokens(summary_message(overlay)) - raw
        cursor, depth = start.parent_id, start.depth - 1
    return total


def _next_overlay_end(storage: DjangoSessionProvider, cursor: str, stops: list[str], min_depth: int) -> str | None:
    marks = ", ".join(["%s"] * len(stops))
    row = storage._fetchone(
        _NEXT_OVERLAY_END.format(stops=marks),
        [storage.session_id, cursor, storage.session_id, *stops, min_depth, conf.max_path_depth(), *stops],
    )
    return row[0] if row else None


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
