"""Session: one conversation's public API, a thin facade over its parts.

The message operations go straight to the storage's :class:`~agent_sessions.storage.base.SessionBackend`
(the ORM storage itself, or a generic adapter made once over a custom :class:`~agent_sessions.SessionProvider`);
context blocks, the system prompt and skills are :class:`SessionContext`'s; overlays and
compaction are :class:`SessionCompaction`'s.  Each part gets what it needs in its
constructor and talks to the others only through their public methods.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Self, cast

from .. import text
from ..asyncutils import async_twin
from ..context.block import ContextBlock
from ..storage.base import OMITTED, SessionProvider
from ..storage.orm import DjangoSessionProvider
from ..storage.provider_backend import backend_for
from ..tools import Tool
from ..types import (
    CompactResult,
    HistoryRowStat,
    RecentHistory,
    SearchResult,
    StoredCompaction,
    check_id_length,
    validate_message,
)
from ..ui_message import UIMessage
from . import tool_results
from .compaction import CompactionHandle, CompactionRunner, SessionCompaction
from .context import ContextConfig, SessionContext
from .model_calls import AsyncModelCall, ModelCall, SessionModelCalls

__all__ = ["Session"]


class Session:
    """One conversation: a message tree, its context blocks, prompt and compaction.

    Build it with :meth:`create` and the ``with_*`` / ``on_*`` builder methods
    (order does not matter; providers resolve on first use), or construct it
    directly with a storage object.  Every non-builder method has an ``a``-prefixed
    async twin.  ``config_name`` names a registered configuration, so a Celery worker
    can rebuild this session and auto-compaction runs there.
    """

    def __init__(
        self,
        storage: SessionProvider,
        *,
        context: list[ContextConfig] | None = None,
        prompt_store: Any = None,
        token_counter: Callable[..., Any] | None = None,
        on_compaction_error: Callable[..., Any] | None = None,
        runner: CompactionRunner | None = None,
        config_name: str | None = None,
    ) -> None:
        self._storage = storage
        self._backend = backend = backend_for(storage)  # the one place a storage's kind is told apart
        self._config_name = config_name or None
        # The two parts hold the implementation; the facade's methods are the one public way to each.
        self._context = SessionContext(
            self, orm=backend.orm, using=backend.alias, configs=context, prompt_store=prompt_store
        )
        self._context.rekey(self.session_id)
        self._compaction = SessionCompaction(
            self,
            backend,
            self._context,
            runner=runner,
            token_counter=token_counter,
            on_compaction_error=on_compaction_error,
        )
        self._model_calls = SessionModelCalls(self, backend)

    # ── builder ─────────────────────────────────────────────────────
    @classmethod
    def create(
        cls,
        storage: SessionProvider | None = None,
        *,
        using: str | None = None,
        config_name: str | None = None,
        owner: Any = None,
    ) -> Session:
        """A builder on ``storage``, or on the Django ORM (alias ``using``) when None.

        On the ORM the first append registers the session (``assistant_sessions``) unless it is
        registered: ``owner`` (a user or its pk) then sees it in the API; staff see every session.
        """
        if owner is not None and storage is not None:
            raise ValueError("owner is for the Django storage; give DjangoSessionProvider(owner=...) instead")
        provider = storage if storage is not None else DjangoSessionProvider("", using=using, owner=owner)
        return cls(provider, config_name=config_name)

    def for_session(self, session_id: str) -> Self:
        """Namespace this session: messages, memory blocks and the stored prompt are keyed by it."""
        if not isinstance(session_id, str):
            raise ValueError("session_id must be a string without NUL characters")
        text.check(session_id, "session_id")  # InvalidText (a ValueError): NUL, lone surrogates
        check_id_length(session_id, "session id")
        self._backend.session_id = session_id
        self._context.rekey(session_id)
        self._model_calls.rekey(session_id)
        return self

    def with_context(
        self, label: str, *, description: str | None = None, max_tokens: int | None = None, provider: Any = None
    ) -> Self:
        """Declare a context block; without a provider the ORM storage auto-wires one."""
        self._context.with_context(label, description=description, max_tokens=max_tokens, provider=provider)
        return self

    def with_cached_prompt(self, provider: Any = None) -> Self:
        """Persist the frozen system prompt; without a provider the ORM storage keeps it."""
        self._context.with_cached_prompt(provider)
        return self

    def on_compaction(self, fn: Callable[..., Any]) -> Self:
        """Set the compaction function ``fn(messages, context) -> CompactResult | None``."""
        self._compaction.on_compaction(fn)
        return self

    def compact_after(self, threshold: int, token_counter: Callable[..., Any] | None = None) -> Self:
        """Compact automatically once the estimated tokens exceed ``threshold``.

        ``token_counter(TokenCounterInput(messages, system_prompt, context_blocks))`` (sync or
        async) replaces the built-in estimate; a non-finite or non-numeric answer counts as 0.
        It is also handed to the compaction function as ``CompactContext.token_counter``.
        Unlike the built-in estimate, a custom counter reads the whole visible history
        after every append.
        """
        self._compaction.compact_after(threshold, token_counter)
        return self

    def on_compaction_error(self, handler: Callable[..., Any]) -> Self:
        """Receive errors of auto-compaction; a failing handler is swallowed."""
        self._compaction.on_compaction_error(handler)
        return self

    # ── identity ────────────────────────────────────────────────────
    @property
    def storage(self) -> Any:
        """The SessionProvider behind this session."""
        return self._storage

    @property
    def session_id(self) -> str:
        """The namespace given to :meth:`for_session` (or the ORM provider's), ``""`` by default."""
        return self._backend.session_id

    @property
    def config_name(self) -> str | None:
        """The registered configuration this session was built from, if any."""
        return self._config_name

    @property
    def compaction(self) -> CompactionHandle:
        """What runners, the manager and the API ask of the compaction part: the threshold check, a
        held run, error reports, the token estimate.  Overlays and ``compact()`` are the facade's."""
        return self._compaction

    # ── messages ────────────────────────────────────────────────────
    def append_message(self, message: UIMessage, parent_id: Any = OMITTED) -> bool:
        """Store a message; True if inserted, False if its id already exists here.

        ``parent_id`` omitted → child of the latest leaf; ``None`` → a new root;
        a string → child of that message (a root if it is not in this session).
        """
        return self._append(message, parent_id)[0]

    def _append(self, message: UIMessage, parent_id: Any, registry_stamp: datetime | None = None) -> tuple[bool, bool]:
        """:meth:`append_message`, and whether ``registry_stamp`` (SessionManager's clock) went in with it:
        the Django store sets ``updated_at`` in the insert's own transaction; a custom provider cannot."""
        backend = self._backend
        outcome = backend.append_message_stats(cast(dict, message), parent_id, registry_stamp=registry_stamp)
        if outcome.inserted:
            compaction = self._compaction
            compaction.after_append(message["id"], path_tokens=outcome.path_tokens, parent_id=outcome.parent_id)
            compaction.emit(
                "message",
                token_estimate=compaction.event_estimate(message["id"], outcome.path_tokens),
                message_ids=[message["id"]],
            )
        return outcome.inserted, registry_stamp is not None and backend.stamps_registry

    def update_message(self, message: UIMessage) -> Any:
        """Replace a stored message (matched by id); search is re-indexed.  False when no message has its id."""
        if isinstance(message, dict) and isinstance(message.get("id"), str) and not text.storable(message["id"]):
            return False  # NUL or a lone surrogate: no stored message has this id
        validate_message(message)
        self._compaction.forget_estimate()
        updated = self._backend.update_message(cast(dict, message))
        if updated:
            self._changed("message", message_ids=[message["id"]])
        return updated

    def delete_messages(self, message_ids: list[str]) -> Any:
        """Delete messages by id; their children stay as roots of their subtrees."""
        self._compaction.forget_estimate()
        ids = list(message_ids)
        deleted = self._backend.delete_messages(ids)
        if deleted:
            self._changed("deleted", message_ids=ids)
        return deleted

    def clear_messages(self) -> None:
        """Delete every message and overlay, forget loaded skills, refresh a stored prompt."""
        self._backend.clear_messages()
        self._model_calls.clear()
        self._compaction.forget_estimate()
        self._context.after_clear()
        self._changed("cleared")

    def get_history(self, leaf_id: str | None = None) -> list[UIMessage]:
        """Root→leaf path (latest leaf by default) with compaction overlays applied; ``[]`` if unknown."""
        return cast("list[UIMessage]", self._backend.get_history(leaf_id))

    def get_message(self, message_id: str) -> UIMessage | None:
        """One stored message, or None."""
        return cast("UIMessage | None", self._backend.get_message(message_id))

    def get_latest_leaf(self) -> UIMessage | None:
        """The most recently appended childless message, or None."""
        return cast("UIMessage | None", self._backend.get_latest_leaf())

    def get_path_length(self, leaf_id: str | None = None) -> int:
        """Stored messages from the root to the leaf (no overlays)."""
        return int(self._backend.get_path_length(leaf_id))

    def get_branches(self, message_id: str) -> list[UIMessage]:
        """Children of a message, oldest first."""
        return cast("list[UIMessage]", self._backend.get_branches(message_id))

    def get_recent_history(
        self, leaf_id: str | None = None, *, max_content_bytes: int, min_recent_messages: int = 1
    ) -> RecentHistory:
        """The longest recent suffix of the path whose stored sizes fit ``max_content_bytes``."""
        return self._backend.get_recent_history(
            leaf_id, max_content_bytes=max_content_bytes, min_recent_messages=min_recent_messages
        )

    def get_history_row_stats(self, leaf_id: str | None = None) -> list[HistoryRowStat]:
        """``HistoryRowStat(id, role, bytes)`` per stored message on the path."""
        return self._backend.get_history_row_stats(leaf_id)

    def search(
        self, query: str, *, limit: int = 20, offset: int = 0, role: str | list[str] | None = None
    ) -> list[SearchResult]:
        """Messages of this session matching ``query``, best first.

        Words are ANDed; ``"phrases"``, ``OR`` and ``-excluded`` work as on web search
        engines; CJK text matches by substring. ``offset``/``role`` need the ORM storage.
        """
        return self._backend.search_messages(query, limit, offset=offset, role=role)

    def add_tool_result(
        self, tool_call_id: str, output: Any = None, *, error: str | None = None, message_id: str | None = None
    ) -> UIMessage:
        """Store a tool call's result (state ``output-available``) or error (``output-error``).

        The call is looked up in ``message_id``, or in the latest message of the current path
        that has it. Returns the updated message; an unknown call raises InvalidMessage and
        writes nothing.
        """
        return tool_results.add_tool_result(self, tool_call_id, output, error=error, message_id=message_id)

    # ── model-call records (SessionModelCalls, SPEC §8) ─────────────
    def model_call(
        self, *, model: str, params: dict | None = None, tools: list | None = None, leaf_id: str | None = None
    ) -> ModelCall:
        """A context manager recording one model call: at entry it snapshots the frozen prompt, the visible
        path (latest leaf, or ``leaf_id``) and the tools (the session's own when ``tools`` is None), given as
        ``call.system`` / ``call.messages`` / ``call.tools``.  ``call.finish(message, usage=, cost=)``
        appends the reply under the input's last message; an exception leaving the block is recorded
        (``status="error"``) and re-raised."""
        return ModelCall(self._model_calls, self, model=model, params=params, tools=tools, leaf_id=leaf_id)

    def amodel_call(
        self, *, model: str, params: dict | None = None, tools: list | None = None, leaf_id: str | None = None
    ) -> AsyncModelCall:
        """Async twin of :meth:`model_call` (``async with``; ``await call.finish(...)``)."""
        return AsyncModelCall(self._model_calls, self, model=model, params=params, tools=tools, leaf_id=leaf_id)

    def observe_model_call(
        self,
        sent: list,
        *,
        model: str,
        render: Callable[[dict], list],
        to_messages: Callable[[list], list[dict]],
        system: str | None = None,
        params: dict | None = None,
        tools: list | None = None,
    ) -> ModelCall:
        """Start recording a call a framework makes with its own messages ``sent`` (its hooks call this):
        the start of ``sent`` that is this session's stored history (each stored message rendered by
        ``render``) is referenced, the rest kept by value (``to_messages``).  End it with
        ``call.observed(...)`` or ``call.close(error)``; :meth:`link_model_call` names the reply."""
        call = ModelCall(self._model_calls, self, model=model, params=params, tools=tools, leaf_id=None)
        snapshot = self._model_calls.observed(
            list(sent), render=render, to_messages=to_messages, system=system, tools=list(tools or [])
        )
        return call.start(snapshot)

    def link_model_call(self, call_id: str, message_id: str) -> None:
        """Name the stored reply of a call recorded before the framework stored it."""
        self._model_calls.link(call_id, message_id)

    def model_input(self, message_id: str) -> dict | None:
        """What the model was given for ``message_id``: ``system``, ``messages`` (as sent), ``tools``,
        ``model``, ``params``, ``usage``, ``cost``, ``latency_ms``, ``status``, ``error``, ``started_at``;
        None when no recorded call produced it."""
        return self._model_calls.model_input(message_id)

    def model_calls(self, *, limit: int | None = None, offset: int = 0) -> list[dict]:
        """This session's recorded model calls, newest first."""
        return self._model_calls.model_calls(limit=limit, offset=offset)

    # ── context blocks, system prompt, skills, tools (SessionContext) ──
    def get_context_block(self, label: str) -> ContextBlock | None:
        """One block (read from its provider on first use), or None for an unknown label."""
        return self._context.get_context_block(label)

    def get_context_blocks(self) -> list[ContextBlock]:
        """Every block in registration order (providers read on first use)."""
        return self._context.get_context_blocks()

    def replace_context_block(self, label: str, content: str) -> ContextBlock:
        """Replace a writable block's content; ContextReadOnly / ContextTooLarge leave it unchanged."""
        block = self._context.replace_context_block(label, content)
        self._changed("context")
        return block

    def append_context_block(self, label: str, content: str) -> ContextBlock:
        """Append to a writable block (a ``"\\n"`` is inserted unless it is empty or ``content`` starts with one)."""
        block = self._context.append_context_block(label, content)
        self._changed("context")
        return block

    def set_context_entry(
        self, label: str, content: str, *, title: str | None = None, description: str | None = None
    ) -> str:
        """Write a keyed entry to a skill/search block (key from ``title`` or the content); returns the key."""
        key = self._context.set_context_entry(label, content, title=title, description=description)
        self._changed("context")
        return key

    def search_context(self, label: str, query: str) -> Any:
        """Run a search block's ``search(query)`` and return the provider's results."""
        return self._context.search_context(label, query)

    def add_context(
        self, label: str, *, description: str | None = None, max_tokens: int | None = None, provider: Any = None
    ) -> ContextBlock:
        """Add a block at runtime (ValueError on a duplicate label, or without a provider on custom storage)."""
        return self._context.add_context(label, description=description, max_tokens=max_tokens, provider=provider)

    def remove_context(self, label: str) -> bool:
        """Remove a block (its stored content stays); False if there was none."""
        return self._context.remove_context(label)

    def stored_system_prompt(self) -> str | None:
        """The frozen prompt as stored (None before the first freeze); renders and stores nothing."""
        return self._context.stored_system_prompt()

    def freeze_system_prompt(self) -> str:
        """The stored prompt; the first call renders and persists it (an empty stored prompt counts as stored)."""
        return self._context.freeze_system_prompt()

    def refresh_system_prompt(self) -> str:
        """Re-read every provider, re-render and persist the prompt."""
        prompt = self._context.refresh_system_prompt()
        self._changed("prompt")
        return prompt

    def system_prompt_for_estimate(self) -> str | None:
        """The frozen prompt if one is stored, else a render that is not persisted (estimates never freeze)."""
        return self._context.system_prompt_for_estimate()

    def load_skill(self, label: str, key: str) -> str | None:
        """A skill's full text (recorded as loaded), or None when the provider has no such key."""
        return self._context.load_skill(label, key)

    def unload_skill(self, label: str, key: str) -> bool:
        """Rewrite the skill's ``load_context`` results in history to ``[skill unloaded: KEY]``; True if loaded."""
        return self._context.unload_skill(label, key)

    def get_loaded_skill_keys(self) -> set[str]:
        """``"label:key"`` of each loaded skill; restored from history (bounded windows) only with skill blocks."""
        return self._context.get_loaded_skill_keys()

    def tools(self) -> dict[str, Tool]:
        """The AI tools this session offers, by name."""
        return self._context.tools()

    def _changed(self, kind: str, *, message_ids: list[str] | None = None) -> None:
        """A session event for a change other than an append (the estimate is read only when someone listens)."""
        compaction = self._compaction
        compaction.emit(kind, token_estimate=compaction.current_estimate(), message_ids=message_ids)

    # ── overlays and compaction (SessionCompaction) ─────────────────
    def add_compaction(self, summary: str, from_message_id: str, to_message_id: str) -> StoredCompaction:
        """Store an overlay replacing ``from..to`` with ``summary`` on read."""
        return self._compaction.add_compaction(summary, from_message_id, to_message_id)

    def get_compactions(self) -> list[StoredCompaction]:
        """Every stored overlay, oldest first."""
        return self._compaction.get_compactions()

    def compact(self, leaf_id: str | None = None) -> CompactResult | None:
        """Summarise the middle of the path to ``leaf_id`` (latest leaf by default) into an overlay.

        Returns the stored range and summary, or None when the function found nothing to
        compact, returned a range that is not visible on this path, or another compaction
        of this session (manual or automatic, in any process) is running: both take the
        same job lease, so the summariser never runs twice at once for one session.
        Raises ``CompactionNotConfigured`` without ``on_compaction``; the function's own
        errors (e.g. the summariser's) propagate.
        """
        return self._compaction.compact(leaf_id)

    async def acompact(self, leaf_id: str | None = None) -> CompactResult | None:
        """Async twin of :meth:`compact` (same lease); awaits the function (its ``acall`` when it has one)."""
        return await self._compaction.acompact(leaf_id)

    # ── async twins ─────────────────────────────────────────────────
    aappend_message = async_twin(append_message)
    aupdate_message = async_twin(update_message)
    adelete_messages = async_twin(delete_messages)
    aclear_messages = async_twin(clear_messages)
    aget_history = async_twin(get_history)
    aget_message = async_twin(get_message)
    aget_latest_leaf = async_twin(get_latest_leaf)
    aget_path_length = async_twin(get_path_length)
    aget_branches = async_twin(get_branches)
    aget_recent_history = async_twin(get_recent_history)
    aget_history_row_stats = async_twin(get_history_row_stats)
    asearch = async_twin(search)
    aadd_tool_result = async_twin(add_tool_result)
    aget_context_block = async_twin(get_context_block)
    aget_context_blocks = async_twin(get_context_blocks)
    areplace_context_block = async_twin(replace_context_block)
    aappend_context_block = async_twin(append_context_block)
    aset_context_entry = async_twin(set_context_entry)
    asearch_context = async_twin(search_context)
    aadd_context = async_twin(add_context)
    aremove_context = async_twin(remove_context)
    astored_system_prompt = async_twin(stored_system_prompt)
    afreeze_system_prompt = async_twin(freeze_system_prompt)
    arefresh_system_prompt = async_twin(refresh_system_prompt)
    asystem_prompt_for_estimate = async_twin(system_prompt_for_estimate)
    aload_skill = async_twin(load_skill)
    aunload_skill = async_twin(unload_skill)
    aget_loaded_skill_keys = async_twin(get_loaded_skill_keys)
    atools = async_twin(tools)
    aobserve_model_call = async_twin(observe_model_call)
    alink_model_call = async_twin(link_model_call)
    amodel_input = async_twin(model_input)
    amodel_calls = async_twin(model_calls)
    aadd_compaction = async_twin(add_compaction)
    aget_compactions = async_twin(get_compactions)
