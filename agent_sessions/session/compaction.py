"""The compaction part of a Session: overlays, manual ``compact()`` and auto-compaction.

``compact(leaf_id)`` hands the overlay-applied history of that leaf to the compaction
function, maps the range it returns back to stored ids (a ``compaction_<id>`` boundary
becomes that overlay's own ``from`` / ``to``), extends it from the earliest overlay
already visible on the branch (iterative compaction, as the seed does), checks that both
ends are visible on that path in order, and stores one overlay.  An invalid range stores
nothing and returns ``None`` (the seed's behaviour), with a warning in the log.

Auto-compaction (``compact_after``) estimates the visible history of the new leaf after
every insert.  The storage's backend estimates it (``SessionBackend.history_tokens``): the ORM
storage from its running totals without reading the history, a custom storage from the loaded
history; a custom ``token_counter``
receives the messages, so it necessarily loads the history.  Where the compaction then
runs is the :class:`CompactionRunner`'s business (a setting; the default one runs Celery
tasks for named configurations and compacts inline otherwise); failures never fail the append.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

from asgiref.sync import sync_to_async
from django.utils.module_loading import import_string

from .. import conf, events, text
from ..asyncutils import acall, call
from ..compaction import CompactContext
from ..exceptions import CompactionNotConfigured
from ..storage.base import SessionBackend
from ..tokens import estimate_message_tokens, estimate_string_tokens
from ..types import COMPACTION_PREFIX, CompactResult, StoredCompaction, TokenCounterInput, is_finite_number
from .context import SessionContext

logger = logging.getLogger("agent_sessions")


class LeaseRun(Protocol):
    """What a runner's lease yields: ``held`` (False: another run holds it); set ``compacted`` for the record."""

    held: bool
    compacted: bool


class CompactionHandle(Protocol):
    """``Session.compaction``: what runners, the manager and the API ask of a session's compaction.

    The rest (overlays, ``compact()``, the builder settings) is reached through the ``Session``
    facade only, so each operation has one public way."""

    @property
    def database(self) -> str | None: ...

    @property
    def configured(self) -> bool: ...

    def over_threshold(self, leaf_id: str | None = None) -> bool: ...

    def compact_held(self, leaf_id: str | None = None) -> CompactResult | None: ...

    def report_error(self, error: BaseException) -> None: ...

    def after_append(self, leaf_id: str, *, path_tokens: int | None = None, parent_id: str | None = None) -> None: ...

    def estimate_tokens(self, leaf_id: str | None = None, *, path_tokens: int | None = None) -> int: ...

    def forget_estimate(self) -> None: ...


class CompactedSession(Protocol):
    """The session a runner is handed: what it rebuilds, leases and compacts (the ``Session`` facade)."""

    @property
    def compaction(self) -> CompactionHandle: ...

    @property
    def session_id(self) -> str: ...

    @property
    def config_name(self) -> str | None: ...

    @property
    def storage(self) -> Any: ...


class CompactionRunner(Protocol):
    """Where compactions run: the per-session lease and what happens once the threshold is crossed.

    The default (``AGENT_SESSIONS_COMPACTION_RUNNER``) is
    :class:`agent_sessions.tasks.CeleryCompactionRunner`; the session never imports it.
    """

    def lease(self, session: CompactedSession) -> AbstractContextManager[LeaseRun]:
        """The lease a manual ``compact()`` runs under (the one automatic runs take)."""
        ...

    def auto_compact(self, session: CompactedSession, leaf_id: str) -> None:
        """Compact ``session`` (or have it compacted) after ``leaf_id`` crossed the threshold; never raises."""
        ...


@dataclass
class _Estimate:
    """The last full threshold estimate: at which leaf, its raw path total, the estimate, when."""

    leaf_id: str
    path_tokens: int
    tokens: int
    read_at: float
    context_version: int


@cache
def _runner_at(path: str) -> CompactionRunner:
    return import_string(path)()


def default_runner() -> CompactionRunner:
    """The runner named by ``AGENT_SESSIONS_COMPACTION_RUNNER`` (one instance per path)."""
    return _runner_at(conf.compaction_runner())


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


class SessionCompaction:
    """Overlays, ``compact()`` and the auto-compaction check of one session.

    The facade's part, not a second public API: ``add_compaction``, ``get_compactions``,
    ``compact``, ``acompact`` and the builder setters are what the ``Session`` methods of those
    names delegate to; use the ``Session``'s.  Its own seam is the runner's (``over_threshold``,
    ``compact_held``, ``report_error``, ``database``).

    Depends on the session's storage backend, on its context part (the system prompt
    counts towards the threshold and is refreshed after a compaction) and on a
    :class:`CompactionRunner`, to which it hands ``session`` (the facade it is part of).
    """

    def __init__(
        self,
        session: CompactedSession,
        backend: SessionBackend,
        context: SessionContext,
        *,
        runner: CompactionRunner | None = None,
        token_counter: Callable[..., Any] | None = None,
        on_compaction_error: Callable[..., Any] | None = None,
    ) -> None:
        self._session = session
        self._backend = backend
        self._context = context
        self._runner = runner
        self._compact_fn: Callable[..., Any] | None = None
        self._threshold: int | None = None
        self._token_counter = token_counter
        self._on_error = on_compaction_error
        self._last: _Estimate | None = None

    @property
    def runner(self) -> CompactionRunner:
        """The runner given, or the configured default."""
        return self._runner if self._runner is not None else default_runner()

    @property
    def database(self) -> str | None:
        """The Django database whose job row leases this session's compactions (the ORM storage's);
        None for a custom storage, which compacts under a process-local lock."""
        return self._backend.using if self._backend.orm else None

    @property
    def configured(self) -> bool:
        """True once a compaction function is set (``on_compaction``)."""
        return self._compact_fn is not None

    @property
    def auto(self) -> bool:
        """True when auto-compaction is configured (a function and a threshold)."""
        return self._auto_threshold is not None

    @property
    def _auto_threshold(self) -> int | None:
        """The threshold when auto-compaction is configured (a function and a threshold), else None."""
        return self._threshold if self._compact_fn is not None else None

    # ── builder ─────────────────────────────────────────────────────
    def on_compaction(self, fn: Callable[..., Any]) -> None:
        """Set the compaction function ``fn(messages, context) -> CompactResult | None``."""
        self._compact_fn = fn

    def compact_after(self, threshold: int, token_counter: Callable[..., Any] | None = None) -> None:
        """Compact automatically once the estimated tokens exceed ``threshold``."""
        self._threshold = int(threshold)
        if token_counter is not None:
            self._token_counter = token_counter

    def on_compaction_error(self, handler: Callable[..., Any]) -> None:
        """Receive errors of auto-compaction; a failing handler is swallowed."""
        self._on_error = handler

    # ── overlays ────────────────────────────────────────────────────
    def add_compaction(self, summary: str, from_message_id: str, to_message_id: str) -> StoredCompaction:
        """Store an overlay replacing ``from..to`` with ``summary`` on read."""
        self.forget_estimate()
        return self._backend.add_compaction(summary, from_message_id, to_message_id)

    def get_compactions(self) -> list[StoredCompaction]:
        """Every stored overlay, oldest first."""
        return self._backend.get_compactions()

    # ── compaction ──────────────────────────────────────────────────
    def compact(self, leaf_id: str | None = None) -> CompactResult | None:
        """Summarise the middle of the path to ``leaf_id`` into an overlay, under the session's lease."""
        fn = self._require_compact_fn()
        with self.runner.lease(self._session) as run:
            if not run.held:
                logger.info("agent_sessions: session %r is being compacted already", self._backend.session_id)
                return None
            result = self._compact_with(fn, leaf_id)
            run.compacted = result is not None
            return result

    async def acompact(self, leaf_id: str | None = None) -> CompactResult | None:
        """Async :meth:`compact` (same lease); awaits the function (its ``acall`` when it has one)."""
        fn = self._require_compact_fn()
        lease = self.runner.lease(self._session)
        run = await sync_to_async(lease.__enter__, thread_sensitive=True)()
        try:
            if not run.held:
                logger.info("agent_sessions: session %r is being compacted already", self._backend.session_id)
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

    def compact_held(self, leaf_id: str | None = None) -> CompactResult | None:
        """:meth:`compact` for a runner that holds the session's lease already."""
        return self._compact_with(self._require_compact_fn(), leaf_id)

    def _compact_with(self, fn: Callable[..., Any], leaf_id: str | None) -> CompactResult | None:
        plan = self._compaction_plan(leaf_id)
        if plan is None:
            return None
        before = self._compaction_started(plan)
        try:
            result = self._store_compaction(plan, call(fn, plan.history, self._compact_context()))
        except Exception as exc:
            self._compaction_failed(exc)
            raise
        self._compaction_ended(plan, result, before)
        return result

    async def _acompact_with(self, fn: Callable[..., Any], leaf_id: str | None) -> CompactResult | None:
        plan = await sync_to_async(self._compaction_plan, thread_sensitive=True)(leaf_id)
        if plan is None:
            return None
        context = self._compact_context()
        before = await sync_to_async(self._compaction_started, thread_sensitive=True)(plan)
        try:
            fn_acall = getattr(fn, "acall", None)
            if callable(fn_acall):
                result = await fn_acall(plan.history, context)
            else:
                result = await acall(fn, plan.history, context)
            stored = await sync_to_async(self._store_compaction, thread_sensitive=True)(plan, result)
        except Exception as exc:
            await sync_to_async(self._compaction_failed, thread_sensitive=True)(exc)
            raise
        await sync_to_async(self._compaction_ended, thread_sensitive=True)(plan, stored, before)
        return stored

    # ── session events (agent_sessions.events) ──────────────────────
    @property
    def threshold(self) -> int | None:
        """The auto-compaction threshold (None when auto-compaction is not configured): ``tokenThreshold``."""
        return self._auto_threshold

    def event_estimate(self, leaf_id: str, path_tokens: int | None) -> int | None:
        """``tokenEstimate`` of an append, read from nothing: the threshold check's estimate of this leaf when
        it made one, else the insert's running total (``path_tokens``: raw, overlays not subtracted)."""
        last = self._last
        if last is not None and last.leaf_id == leaf_id:
            return last.tokens
        return None if path_tokens is None else int(path_tokens)

    def emit(self, kind: str, **fields: Any) -> None:
        """Send a session event for this session (``events.emit``), with the threshold filled in."""
        events.emit(
            self._backend.session_id, kind, using=self._backend.using, token_threshold=self._auto_threshold, **fields
        )

    def current_estimate(self) -> int | None:
        """The latest leaf's estimate for an event that is not an append (ORM storage only: it reads keys, not
        the history); None when nobody listens, on a custom storage, or when estimating fails."""
        if not self._backend.orm or not events.listened():
            return None
        try:
            return self.estimate_tokens(None)
        except Exception:  # noqa: BLE001 - an event never fails the write it reports
            logger.exception("agent_sessions: could not estimate tokens for a session event")
            return None

    def _compaction_started(self, plan: _Plan) -> int | None:
        """Emit ``phase: "compacting"``; returns the tokens before (from the history already loaded)."""
        if not events.listened():
            return None
        prompt = self._context.system_prompt_for_estimate()
        before = estimate_message_tokens(plan.history) + estimate_string_tokens(prompt or "")
        self.emit("compaction", phase="compacting", token_estimate=before)
        return before

    def _compaction_ended(self, plan: _Plan, result: CompactResult | None, before: int | None) -> None:
        if not events.listened():
            return
        after = self.current_estimate() if result is not None else before
        compacted = {"tokensBefore": before, "tokensAfter": after} if result is not None else None
        self.emit("compaction", token_estimate=after, compacted=compacted)

    def _compaction_failed(self, error: BaseException) -> None:
        self.emit("compaction", token_estimate=None, error=f"{type(error).__name__}: {error}")

    def _require_compact_fn(self) -> Callable[..., Any]:
        if self._compact_fn is None:
            raise CompactionNotConfigured("no compaction function: call on_compaction(fn) first")
        return self._compact_fn

    def _compact_context(self) -> CompactContext:
        return CompactContext(token_counter=self._token_counter)

    def _compaction_plan(self, leaf_id: str | None) -> _Plan | None:
        """Load the visible history of the leaf and index where ranges may start and end."""
        # Overlays first: one stored after this read makes the plan stale (see _store_compaction).
        stored = self._backend.get_compactions()
        history = self._backend.get_history(leaf_id)
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
        # The summary was made from stored text (a binary tool output, a foreign row): NUL and lone
        # surrogates would be refused on every retry, so they are replaced here, once.
        summary = text.clean_content(result.summary)
        if not summary.strip():
            return None
        from_id = _unwrap(result.from_message_id, plan, "from")
        to_id = _unwrap(result.to_message_id, plan, "to")
        start, end = plan.from_pos.get(from_id), plan.to_pos.get(to_id)
        if start is None or end is None or start > end:
            logger.warning(
                "agent_sessions: compaction range %r..%r is not on the path of session %r; nothing stored",
                result.from_message_id,
                result.to_message_id,
                self._backend.session_id,
            )
            return None
        earliest = plan.earliest
        if earliest is not None and plan.from_pos[earliest.from_message_id] < start:
            from_id = earliest.from_message_id  # iterative: the new summary also replaces the older one
        # Concurrent compact() calls on one session all summarise the same history; only the
        # first to store wins, the others (their plan is stale) store nothing and return None.
        if self._backend.add_compaction_if_unchanged(summary, from_id, to_id, plan.seen) is None:
            logger.info(
                "agent_sessions: session %r was compacted concurrently; this summary was dropped",
                self._backend.session_id,
            )
            return None
        if self._context.prompt_is_cached:
            self._context.refresh_system_prompt()
        self.forget_estimate()
        return CompactResult(from_message_id=from_id, to_message_id=to_id, summary=summary)

    # ── auto-compaction ─────────────────────────────────────────────
    def after_append(self, leaf_id: str, *, path_tokens: int | None = None, parent_id: str | None = None) -> None:
        """Run after an insert: estimate, and hand over to the runner above the threshold.

        An append under the leaf of the last full estimate (``parent_id``) adds its own
        tokens to that estimate instead of reading anything (see :meth:`_quick_estimate`);
        only a result over the threshold is confirmed by a full estimate before the runner
        is called.  Never raises: estimating errors go to :meth:`report_error` (the message
        is stored); the runner reports its own.
        """
        threshold = self._auto_threshold
        if threshold is None:
            return
        try:
            tokens = self._quick_estimate(leaf_id, path_tokens, parent_id)
            if tokens is None or tokens > threshold:
                tokens = self._full_estimate(leaf_id, path_tokens)
        except Exception as exc:  # noqa: BLE001 - auto-compaction is never fatal to an append
            self.report_error(exc)
            return
        if tokens > threshold:
            self.runner.auto_compact(self._session, leaf_id)

    def _quick_estimate(self, leaf_id: str, path_tokens: int | None, parent_id: str | None) -> int | None:
        """The last full estimate plus the new message's tokens, or None when a full one is due.

        Valid for a message appended under the leaf last estimated, within
        ``AGENT_SESSIONS_COMPACTION_CHECK_REFRESH_SECONDS`` of the full read: this session's
        own overlay and prompt writes drop the estimate at once; another process's (an
        overlay deleted, a prompt refreshed) are seen at the next full read.  Overlays added
        elsewhere only lower the true figure, and an estimate over the threshold is always
        re-read, so staleness can delay a compaction by that interval but never start one.
        """
        last = self._last
        if last is None or path_tokens is None or parent_id != last.leaf_id or self._token_counter is not None:
            return None
        if last.context_version != self._context.version:
            return None
        if time.monotonic() - last.read_at > conf.compaction_check_refresh_seconds():
            return None
        tokens = last.tokens + (int(path_tokens) - last.path_tokens)
        self._last = _Estimate(leaf_id, int(path_tokens), tokens, last.read_at, last.context_version)
        return tokens

    def _full_estimate(self, leaf_id: str, path_tokens: int | None) -> int:
        """Estimate from the store and remember it (only with a running total to add appends to)."""
        version = self._context.version
        tokens = self.estimate_tokens(leaf_id, path_tokens=path_tokens)
        self._last = (
            None if path_tokens is None else _Estimate(leaf_id, int(path_tokens), tokens, time.monotonic(), version)
        )
        return tokens

    def forget_estimate(self) -> None:
        """Drop the remembered estimate (this session changed overlays, messages or its prompt)."""
        self._last = None

    def over_threshold(self, leaf_id: str | None = None) -> bool:
        """True when auto-compaction is configured and the leaf's estimate exceeds the threshold."""
        threshold = self._auto_threshold
        return threshold is not None and self.estimate_tokens(leaf_id) > threshold

    def estimate_tokens(self, leaf_id: str | None = None, *, path_tokens: int | None = None) -> int:
        """Estimated tokens of the leaf's visible history plus the system prompt.

        After an append the caller passes the new message's id and the running total
        the insert returned (``path_tokens``), so no history is read.
        """
        prompt = self._context.system_prompt_for_estimate()
        if self._token_counter is not None:
            value = call(
                self._token_counter,
                TokenCounterInput(
                    messages=self._backend.get_history(leaf_id),
                    system_prompt=prompt,
                    context_blocks=list(self._context.get_context_blocks()),
                ),
            )
            return math.ceil(value) if is_finite_number(value) and value > 0 else 0
        return self._backend.history_tokens(leaf_id, path_tokens) + estimate_string_tokens(prompt or "")

    def report_error(self, error: BaseException) -> None:
        """Log an auto-compaction failure and hand it to ``on_compaction_error`` (whose errors are swallowed)."""
        logger.warning(
            "agent_sessions: auto-compaction of session %r failed: %s: %s",
            self._backend.session_id,
            type(error).__name__,
            error,
        )
        if self._on_error is None:
            return
        try:
            call(self._on_error, error)
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
