"""Model-call records (SPEC §8): snapshot what a model is given, append its reply, answer "what did it see?".

A call is recorded by reference: the last stored message it saw (the path to it is the history),
and the hashes of the prompt text, the tool list and each overlay applied, whose content is kept
once per session (:mod:`agent_sessions.storage.model_calls`).  The overlay's content is copied
there, so an operator deleting the live overlay, a later compaction or a prompt refresh does not
change the answer of :meth:`SessionModelCalls.model_input`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import time
import uuid
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager, nullcontext
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from .. import text
from ..asyncutils import run_sync
from ..exceptions import InvalidUsage
from ..overlays import apply_overlays
from ..storage.model_calls import ModelCallStore
from ..tools import Tool
from ..types import COMPACTION_PREFIX, StoredCompaction
from ..ui_message import UIMessage

if TYPE_CHECKING:
    from ..storage.base import SessionBackend
    from .facade import Session

__all__ = ["ModelCall", "SessionModelCalls"]

log = logging.getLogger(__name__)

SYSTEM, TOOLS, OVERLAY, SENT, HEAD = "system", "tools", "overlay", "sent", "head"


def to_json(value: Any) -> str:
    """Compact JSON of ``value`` that both databases store alike; objects the json module does not know
    (Pydantic models, dataclasses, SDK objects) are written as their fields, or as their text."""
    dumped = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_plain, allow_nan=False)
    return dumped if text.storable(dumped) else json.dumps(value, separators=(",", ":"), default=_plain)


def _plain(value: Any) -> Any:
    if isinstance(value, Tool):
        return tool_spec(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def tool_spec(tool: Tool) -> dict[str, Any]:
    """The JSON a model is offered for one of the session's tools."""
    return {"name": tool.name, "description": tool.description, "parameters": tool.parameters}


def content_hash(kind: str, content: str) -> str:
    """The key a content row is stored under: 128 bits of SHA-256 over the kind and the text."""
    return hashlib.sha256(f"{kind}\n{content}".encode("utf-8", "surrogatepass")).hexdigest()[:32]


def overlay_json(overlay: StoredCompaction) -> str:
    return to_json(
        {
            "id": overlay.id,
            "summary": overlay.summary,
            "from_message_id": overlay.from_message_id,
            "to_message_id": overlay.to_message_id,
        }
    )


def overlay_from_json(content: str) -> StoredCompaction | None:
    try:
        data = json.loads(content)
        return StoredCompaction(
            id=str(data["id"]),
            summary=str(data["summary"]),
            from_message_id=str(data["from_message_id"]),
            to_message_id=str(data["to_message_id"]),
            created_at=None,
        )
    except (ValueError, KeyError, TypeError):
        return None  # a content row a foreign writer damaged: the overlay is not applied


@dataclasses.dataclass
class Snapshot:
    """The input of one model call, as it was at the call's start."""

    system: str | None
    messages: list[dict]
    tools: list[Any]
    leaf_id: str | None
    overlays: list[StoredCompaction]
    sent: list[dict] = dataclasses.field(default_factory=list)
    """Messages after the stored path that the model got but the session did not hold yet (kept by value)."""
    head: list[dict] = dataclasses.field(default_factory=list)
    """Messages before the stored path (a framework's own system messages, say), kept by value."""


class SessionModelCalls:
    """A session's model-call part: snapshots, records, and the exact input of a recorded reply."""

    def __init__(self, session: Session, backend: SessionBackend) -> None:
        self._session = session
        self._backend = backend
        self._store = ModelCallStore(backend.session_id, backend.alias)

    def rekey(self, session_id: str) -> None:
        self._store.rekey(session_id)

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """One transaction around a reply's append and its record, where both are in the same database
        (one commit).  When it rolls back, the content this store wrote is no longer known to be there."""
        same = self._backend.orm and (self._backend.alias or None) == (self._store.using or None)
        try:
            with transaction.atomic(using=self._store.alias) if same else nullcontext():
                yield
        except BaseException:
            self._store.forget()
            raise

    # ── recording ───────────────────────────────────────────────────
    def snapshot(self, tools: list[Any] | None, leaf_id: str | None, path: list[dict] | None = None) -> Snapshot:
        """The frozen prompt, the visible path (latest leaf, or ``leaf_id``) and the tools offered;
        ``path``: that visible path, when the caller has just read it (not read again)."""
        session = self._session
        system = session.freeze_system_prompt()
        messages = self._backend.get_history(leaf_id) if path is None else list(path)
        offered = [tool_spec(t) for t in session.tools().values()] if tools is None else list(tools)
        leaf, applied = self._path_refs(messages)
        return Snapshot(system, messages, offered, leaf_id or leaf, applied)

    def observed(
        self,
        sent: list[Any],
        *,
        render: Callable[[dict], list[Any]],
        to_messages: Callable[[list[Any]], list[dict]],
        system: str | None,
        tools: list[Any],
    ) -> Snapshot:
        """The snapshot of a call a framework made with its own messages ``sent``: the longest start of
        them that is the stored history (each stored message rendered by ``render`` as the framework's
        messages) is referenced; the rest, not stored yet, is kept by value (``to_messages``)."""
        history = self._backend.get_history()
        rendered = [render(stored) for stored in history]
        start = _start_of(sent, rendered[0]) if rendered and rendered[0] else 0
        if system is not None and start:
            start = len(sent)  # no head with a prompt of its own: the whole input is kept by value
        taken, matched = start, 0
        for index, messages in enumerate(rendered):
            if sent[taken : taken + len(messages)] != messages:
                break
            taken += len(messages)
            matched = index + 1
        if matched == 0:  # none of the stored history is in the input
            start = taken = 0
        prefix = history[:matched]
        leaf, applied = self._path_refs(prefix)
        head, extra = to_messages(list(sent[:start])), to_messages(list(sent[taken:]))
        return Snapshot(system, head + prefix + extra, list(tools), leaf, applied, extra, head)

    def _path_refs(self, messages: list[dict]) -> tuple[str | None, list[StoredCompaction]]:
        """The stored id of the path's last message, and the overlays shown on it."""
        applied: list[StoredCompaction] = []
        last = messages[-1]["id"] if messages else None
        if any(str(m.get("id", "")).startswith(COMPACTION_PREFIX) for m in messages):
            by_summary = {COMPACTION_PREFIX + c.id: c for c in self._backend.get_compactions()}
            applied = [by_summary[m["id"]] for m in messages if m.get("id") in by_summary]
            if last in by_summary:
                last = by_summary[last].to_message_id  # the overlay reaches the leaf: its stored end
        return last, applied

    def link(self, call_id: str, message_id: str) -> None:
        """Name the stored reply of a call recorded before its reply was stored (framework hooks)."""
        self._store.link(call_id, message_id)

    def record(self, call: ModelCall, *, status: str, message_id: str | None = None, error: str = "") -> None:
        """Store the call's row, and whichever of its prompt, tools and overlays this session lacks."""
        snap = call.snapshot
        contents: list[tuple[str, str, str]] = []

        def keep(kind: str, content: str) -> str:
            key = content_hash(kind, content)
            contents.append((key, kind, content))
            return key

        system_hash = None if snap.system is None else keep(SYSTEM, snap.system)
        if snap.head:  # messages before the stored path take the prompt's place (there is none then)
            system_hash = keep(HEAD, to_json(snap.head))
        tools_hash = keep(TOOLS, to_json(snap.tools))
        overlays = [keep(OVERLAY, overlay_json(o)) for o in snap.overlays]
        sent_hash = keep(SENT, to_json(snap.sent)) if snap.sent else None
        record = {
            "call_id": call.id,
            "message_id": message_id,
            "leaf_id": snap.leaf_id,
            "overlays": to_json(overlays),
            "system_hash": system_hash,
            "tools_hash": tools_hash,
            "sent_hash": sent_hash,
            "model": call.model,
            "params": to_json(call.params),
            "usage": None if call.usage is None else to_json(call.usage),
            "cost": call.cost,
            "latency_ms": call.latency_ms,
            "status": status,
            "error": error,
            "started_at": call.started_at,
        }
        self._store.save(record, contents)

    # ── reading ─────────────────────────────────────────────────────
    def model_input(self, message_id: str) -> dict[str, Any] | None:
        """The exact input of the call that produced ``message_id``, or None when no recorded call did."""
        if not isinstance(message_id, str) or not text.storable(message_id):
            return None
        row = self._store.for_message(message_id)
        if row is None:
            return None
        overlay_hashes = hash_list(row["overlays"])
        found = self._store.contents([row["system_hash"], row["tools_hash"], row["sent_hash"], *overlay_hashes])

        def content(key: str | None) -> str | None:
            return found[key][1] if key in found else None

        overlays = [o for o in (overlay_from_json(content(h) or "") for h in overlay_hashes) if o is not None]
        path = self._backend.get_raw_path(row["leaf_id"]) if row["leaf_id"] else []
        tools = json_or(content(row["tools_hash"]), [])
        sent = json_or(content(row["sent_hash"]), [])
        system = content(row["system_hash"])
        head: list = []
        if system is not None and found[row["system_hash"]][0] == HEAD:
            head, system = json_or(system, []), None
        return {
            **_public(row),
            "system": system,
            "messages": [m for m in (*head, *apply_overlays(path, overlays), *sent) if isinstance(m, dict)],
            "tools": tools if isinstance(tools, list) else [],
        }

    def model_calls(self, *, limit: int | None = None, offset: int = 0) -> list[dict[str, Any]]:
        """The session's recorded calls, newest first."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ValueError("limit must be a non-negative integer or None")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError("offset must be a non-negative integer")
        return [_public(row) for row in self._store.page(limit, offset)]

    def clear(self) -> None:
        """Forget every record of the session (``clear_messages``)."""
        self._store.delete_all()


def _start_of(sent: list[Any], first: list[Any]) -> int:
    """Where the rendering of the stored history's first message starts in ``sent`` (0 when nowhere)."""
    for start in range(len(sent) - len(first) + 1):
        if sent[start : start + len(first)] == first:
            return start
    return 0


def json_or(value: str | None, default: Any) -> Any:
    """A stored JSON column's value, or ``default`` when it is NULL or not JSON (a foreign writer's row)."""
    if value is None:
        return default
    try:
        return json.loads(value)
    except ValueError:
        return default


def hash_list(value: str | None) -> list[str]:
    """The content hashes of a record's ``overlays`` column (anything else in it is ignored)."""
    data = json_or(value, [])
    return [h for h in data if isinstance(h, str)] if isinstance(data, list) else []


def _public(row: dict[str, Any]) -> dict[str, Any]:
    """A stored row as the public API returns it."""
    params = json_or(row["params"], {})
    return {
        "id": row["call_id"],
        "message_id": row["message_id"],
        "leaf_id": row["leaf_id"],
        "model": row["model"],
        "params": params if isinstance(params, dict) else {},
        "usage": json_or(row["usage"], None),
        "cost": row["cost"],
        "latency_ms": row["latency_ms"],
        "status": row["status"],
        "error": row["error"] or None,
        "started_at": row["started_at"],
    }


class ModelCall:
    """One model call (``with session.model_call(model=...) as call``): its input, taken at entry, and
    :meth:`finish` to append the reply.  ``system``, ``messages`` and ``tools`` are what to send."""

    def __init__(
        self,
        calls: SessionModelCalls,
        session: Session,
        *,
        model: str,
        params: dict | None,
        tools: list[Any] | None,
        leaf_id: str | None,
    ) -> None:
        if not isinstance(model, str) or not model or not text.storable(model):
            raise ValueError("model must be a non-empty string")
        if params is not None and not isinstance(params, dict):
            raise ValueError("params must be a dict or None")
        self._calls = calls
        self._session = session
        self.id = uuid.uuid4().hex
        self.model = model
        self.params: dict = dict(params or {})
        to_json(self.params)  # refuse what cannot be stored (NaN) before the model runs
        self._tools = tools
        self._leaf_id = leaf_id
        self.usage: Any = None
        self.cost: float | None = None
        self.latency_ms: float | None = None
        self.started_at: datetime | None = None
        self.message: UIMessage | None = None
        self._started = 0.0
        self._snapshot: Snapshot | None = None
        self._finished = False

    # ── the input ───────────────────────────────────────────────────
    @property
    def snapshot(self) -> Snapshot:
        if self._snapshot is None:
            raise RuntimeError("the model call has not started: use it as a context manager")
        return self._snapshot

    @property
    def system(self) -> str | None:
        """The frozen system prompt the model is given."""
        return self.snapshot.system

    @property
    def messages(self) -> list[dict]:
        """The visible history (overlays applied) the model is given."""
        return self.snapshot.messages

    @property
    def tools(self) -> list[Any]:
        """The tools offered: the session's own AI tools (name, description, parameters) unless given."""
        return self.snapshot.tools

    @property
    def leaf_id(self) -> str | None:
        """The last stored message of the input: the reply's parent."""
        return self.snapshot.leaf_id

    def start(self, snapshot: Snapshot | None = None, *, path: list[dict] | None = None) -> ModelCall:
        """Take the snapshot (or use the one given) and start the clock (``__enter__`` does this);
        ``path``: the visible path to the call's leaf, when the caller holds it already."""
        if snapshot is None:
            snapshot = self._calls.snapshot(self._tools, self._leaf_id, path)
        self._snapshot = snapshot
        self.started_at = timezone.now()
        self._started = time.perf_counter()
        return self

    def observed(
        self, *, message_id: str | None = None, usage: Any = None, cost: float | None = None, error: str = ""
    ) -> None:
        """Record a call whose reply the caller stores itself (``message_id`` when already known; else
        :meth:`SessionModelCalls.link` names it once it is stored); ``error``: it failed part-way."""
        self._check_open()
        self._measure(usage, cost)
        self._finished = True
        self._calls.record(self, status="error" if error else "ok", message_id=message_id, error=error[:10_000])

    # ── the outcome ─────────────────────────────────────────────────
    def finish(self, message: UIMessage, *, usage: Any = None, cost: float | None = None) -> UIMessage:
        """Append ``message`` as the child of the input's last message and record the call; returns it."""
        self._check_open()
        self._measure(usage, cost)
        with self._calls.atomic():  # the reply and its record land together: one commit
            self._session.append_message(message, self.snapshot.leaf_id)
            self._calls.record(self, status="ok", message_id=message["id"])
        self._finished = True
        self.message = message
        return message

    def _check_open(self) -> None:
        if self._snapshot is None:
            raise RuntimeError("the model call has not started: use it as a context manager")
        if self._finished:
            raise RuntimeError("finish() was already called for this model call")

    def _measure(self, usage: Any, cost: float | None) -> None:
        if cost is not None and (
            isinstance(cost, bool) or not isinstance(cost, (int, float)) or not math.isfinite(cost) or cost < 0
        ):
            raise InvalidUsage(f"cost must be a finite number ≥ 0 or None, not {cost!r}")
        self.usage = usage
        self.cost = None if cost is None else float(cost)
        self.latency_ms = (time.perf_counter() - self._started) * 1000.0

    def close(self, error: BaseException | None) -> None:
        """End the call: an error (or a block left without :meth:`finish`) is recorded, never raised here."""
        if self._finished or self._snapshot is None:
            return
        self._finished = True
        if self.latency_ms is None:
            self.latency_ms = (time.perf_counter() - self._started) * 1000.0
        if error is None:
            status, reason = "unfinished", ""
        elif isinstance(error, Exception):
            status, reason = "error", str(error) or type(error).__name__
        else:
            status, reason = "cancelled", type(error).__name__
        try:
            self._calls.record(self, status=status, error=reason[:10_000])
        except Exception:  # noqa: BLE001 - never mask the caller's own exception
            log.exception(
                "agent_sessions: could not record model call %s of session %r", self.id, self._session.session_id
            )

    def __enter__(self) -> ModelCall:
        return self.start()

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.close(exc)


class AsyncModelCall(ModelCall):
    """The async twin (``async with session.amodel_call(model=...) as call``); ``await call.finish(...)``
    (or ``call.afinish``).  A ``finish`` left unawaited is carried out when the block ends."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending: _PendingFinish | None = None

    async def afinish(self, message: UIMessage, *, usage: Any = None, cost: float | None = None) -> UIMessage:
        """Async twin of :meth:`ModelCall.finish`."""
        return await run_sync(ModelCall.finish, self, message, usage=usage, cost=cost)

    def finish(self, message: UIMessage, *, usage: Any = None, cost: float | None = None) -> Any:
        self._check_open()
        if self._pending is not None:
            raise RuntimeError("finish() was already called for this model call")
        self._pending = _PendingFinish(self, message, usage, cost)
        return self._pending

    async def __aenter__(self) -> AsyncModelCall:
        await run_sync(self.start)
        return self

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        pending = self._pending
        if exc is None and pending is not None and not pending.done:
            await pending
        await run_sync(self.close, exc)


class _PendingFinish:
    """What ``AsyncModelCall.finish`` returns: awaiting it appends now; otherwise the block's end does."""

    def __init__(self, call: AsyncModelCall, message: UIMessage, usage: Any, cost: float | None) -> None:
        self.call, self.message, self.usage, self.cost = call, message, usage, cost
        self.done = False

    def __await__(self) -> Generator[Any, None, UIMessage]:
        self.done = True
        return self.call.afinish(self.message, usage=self.usage, cost=self.cost).__await__()
