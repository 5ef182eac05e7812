"""The context part of a Session: context blocks, the system prompt, skills and the AI tools.

Providers resolve lazily on first use, so builder order does not matter.  On
the ORM storage, blocks declared without a provider are wired to
``DjangoContextProvider`` under ``label`` (``label_<session id>`` once
``for_session`` named one), and ``with_cached_prompt()`` stores the prompt under
``_system_prompt`` (``_system_prompt_<session id>``); those rows carry the session
as their owner (storage/owners.py).  A custom storage gets no auto-wiring: an
unwired block is an empty readonly block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import conf, text
from ..asyncutils import call
from ..context.block import ContextBlock
from ..context.block_set import BlockSet, BlockSpec
from ..context.kinds import SKILL, has_method
from ..context.prompt import render_system_prompt
from ..context.providers import DjangoContextProvider
from ..context.skills import LoadedSkills, SkillHistory
from ..context.toolkit import context_tools
from ..storage.owners import PROMPT_KEY
from ..tools import Tool

__all__ = ["PROMPT_KEY", "ContextConfig", "SessionContext"]
_UNRESOLVED = object()


@dataclass
class ContextConfig:
    """How one context block is declared: label, description, token limit and provider."""

    label: str
    description: str | None = None
    max_tokens: int | None = None
    provider: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.label, str) or not self.label.strip():
            raise ValueError("context label must be a non-empty string")
        text.check(self.label, "context label", chars=conf.max_block_label_chars())  # InvalidText
        if self.max_tokens is not None and (
            isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1
        ):
            raise ValueError("max_tokens must be a positive integer or None")


class SessionContext:
    """Context blocks, the system prompt, skills and context tools of one session.

    The facade's part, not a second public API: each method a ``Session`` method also offers is
    the implementation that method delegates to (and what the context tools call); use the
    ``Session``'s.

    ``history`` is the session's message API (skills are restored from, and unloaded in,
    its history); ``orm`` says whether blocks without a provider are wired to the ORM
    (alias ``using``).  :meth:`rekey` follows the session id the blocks are keyed by.
    """

    def __init__(
        self,
        history: SkillHistory,
        *,
        orm: bool,
        using: str | None,
        configs: list[ContextConfig] | None = None,
        prompt_store: Any = None,
    ) -> None:
        configs = list(configs or [])
        labels = [c.label for c in configs]
        if len(set(labels)) != len(labels):
            raise ValueError("duplicate context block labels")
        self._history = history
        self._orm = orm
        self._using = using
        self._session_id = ""
        self._context_configs = configs
        self._prompt_store_arg = prompt_store
        self._cached_prompt = prompt_store is not None
        self._provider_inits: set[int] = set()
        self._skills = LoadedSkills()
        self._version = 0
        self._reset_resolution()

    def rekey(self, session_id: str) -> None:
        """Key blocks and the stored prompt by ``session_id`` from now on (resolved providers are dropped)."""
        self._version += 1
        self._session_id = session_id
        self._reset_resolution()

    @property
    def version(self) -> int:
        """Grows with every change of blocks or prompt made through this object (estimates keyed by it)."""
        return self._version

    @property
    def prompt_is_cached(self) -> bool:
        """True when the frozen system prompt is persisted (``with_cached_prompt``)."""
        return self._cached_prompt

    def _reset_resolution(self) -> None:
        """Forget resolved providers and prompt state (the session id they were keyed by changed)."""
        self._blocks: BlockSet | None = None
        self._prompt_store: Any = _UNRESOLVED
        self._memory_prompt: str | None = None
        self._skills.forget()

    def _namespaced(self, base: str) -> str:
        return f"{base}_{self._session_id}" if self._session_id else base

    def _orm_provider(self, base: str) -> DjangoContextProvider:
        """The ORM row of ``base`` for this session, owned by it (the default namespace owns nothing)."""
        return DjangoContextProvider(self._namespaced(base), using=self._using, session_id=self._session_id)

    def _spec(self, config: ContextConfig) -> BlockSpec:
        provider = config.provider
        if provider is None and self._orm:
            provider = self._orm_provider(config.label)
        return BlockSpec(config.label, config.description, config.max_tokens, provider)

    def _context(self) -> BlockSet:
        if self._blocks is None:
            self._blocks = BlockSet([self._spec(c) for c in self._context_configs], self._provider_inits)
        return self._blocks

    def _store(self) -> Any:
        """The prompt store (None: the frozen prompt lives in memory only)."""
        if self._prompt_store is _UNRESOLVED:
            store = self._prompt_store_arg
            if store is None and self._cached_prompt and self._orm:
                store = self._orm_provider(PROMPT_KEY)
            elif store is not None and has_method(store, "init") and id(store) not in self._provider_inits:
                call(store.init, self._namespaced(PROMPT_KEY))
                self._provider_inits.add(id(store))
            self._prompt_store = store
        return self._prompt_store

    def after_clear(self) -> None:
        """After ``clear_messages``: nothing is loaded any more; a stored/frozen prompt is re-rendered."""
        self._version += 1
        self._skills.clear()
        if self._memory_prompt is not None or self.stored_system_prompt() is not None:
            self.refresh_system_prompt()

    # ── builder ─────────────────────────────────────────────────────
    def with_context(
        self, label: str, *, description: str | None = None, max_tokens: int | None = None, provider: Any = None
    ) -> None:
        """Declare a context block (builder); without a provider the ORM storage auto-wires one."""
        self._version += 1
        config = ContextConfig(label, description, max_tokens, provider)
        if any(c.label == label for c in self._context_configs):
            raise ValueError(f'Context block "{label}" already exists')
        self._context_configs.append(config)
        if self._blocks is not None:
            self._blocks.add(self._spec(config), load=False)

    def with_cached_prompt(self, provider: Any = None) -> None:
        """Persist the frozen system prompt (builder); without a provider the ORM storage keeps it."""
        self._version += 1
        self._prompt_store_arg = provider
        self._cached_prompt = True
        self._prompt_store = _UNRESOLVED

    # ── blocks ──────────────────────────────────────────────────────
    def get_context_block(self, label: str) -> ContextBlock | None:
        """One block (read from its provider on first use), or None for an unknown label."""
        return self._context().get(label)

    def get_context_blocks(self) -> list[ContextBlock]:
        """Every block in registration order (providers read on first use)."""
        return self._context().all()

    def replace_context_block(self, label: str, content: str) -> ContextBlock:
        """Replace a writable block's content; ContextReadOnly / ContextTooLarge leave it unchanged."""
        self._version += 1
        return self._context().replace(label, content)

    def append_context_block(self, label: str, content: str) -> ContextBlock:
        """Append to a writable block (a ``"\\n"`` is inserted unless it is empty or ``content`` starts with one)."""
        self._version += 1
        return self._context().append(label, content)

    def set_context_entry(
        self, label: str, content: str, *, title: str | None = None, description: str | None = None
    ) -> str:
        """Write a keyed entry to a skill/search block (key from ``title`` or the content); returns the key."""
        self._version += 1
        return self._context().set_entry(label, content, title=title, description=description)

    def search_context(self, label: str, query: str) -> Any:
        """Run a search block's ``search(query)`` and return the provider's results."""
        return self._context().search(label, query)

    def add_context(
        self, label: str, *, description: str | None = None, max_tokens: int | None = None, provider: Any = None
    ) -> ContextBlock:
        """Add a block at runtime (ValueError on a duplicate label, or without a provider on custom storage)."""
        self._version += 1
        config = ContextConfig(label, description, max_tokens, provider)
        blocks = self._context()
        if blocks.has(label):
            raise ValueError(f'Context block "{label}" already exists')
        if provider is None and not self._orm:
            raise ValueError(f'Context block "{label}" needs a provider: this session\'s storage is not the ORM')
        block = blocks.add(self._spec(config))
        assert block is not None  # added with load=True, so the block is read
        self._context_configs.append(config)
        return block

    def remove_context(self, label: str) -> bool:
        """Remove a block (its stored content stays); False if there was none."""
        self._version += 1
        before = len(self._context_configs)
        self._context_configs = [c for c in self._context_configs if c.label != label]
        removed = self._blocks.remove(label) if self._blocks is not None else False
        return removed or len(self._context_configs) != before

    # ── system prompt ───────────────────────────────────────────────
    def stored_system_prompt(self) -> str | None:
        """The frozen prompt as stored (None before the first freeze); renders and stores nothing."""
        store = self._store()
        if store is None:
            return self._memory_prompt
        value = call(store.get)
        return None if value is None else str(value)

    def _persist_prompt(self, prompt: str) -> None:
        store = self._store()
        if store is not None and has_method(store, "set"):
            call(store.set, prompt)
        self._memory_prompt = prompt

    def freeze_system_prompt(self) -> str:
        """The stored prompt; the first call renders and persists it (an empty stored prompt counts as stored)."""
        self._version += 1
        stored = self.stored_system_prompt()
        if stored is not None:
            return stored
        prompt = render_system_prompt(self._context().all())
        store = self._store()
        if store is not None and has_method(store, "set_if_absent"):
            # Several processes may freeze at once: the first stored prompt wins for everyone.
            prompt = str(call(store.set_if_absent, prompt))
            self._memory_prompt = prompt
            return prompt
        self._persist_prompt(prompt)
        return prompt

    def refresh_system_prompt(self) -> str:
        """Re-read every provider, re-render and persist the prompt."""
        self._version += 1
        blocks = self._context()
        blocks.reload()
        prompt = render_system_prompt(blocks.all())
        self._persist_prompt(prompt)
        return prompt

    def system_prompt_for_estimate(self) -> str | None:
        """The frozen prompt if one is stored, else a render that is not persisted (estimates never freeze)."""
        stored = self.stored_system_prompt()
        if stored is not None:
            return stored
        return render_system_prompt(self._context().all())

    # ── skills ──────────────────────────────────────────────────────
    def _has_skill_blocks(self) -> bool:
        blocks = self._context()
        return any(blocks.kind(label) == SKILL for label in blocks.labels())

    def _skill_block(self, label: str) -> None:
        if self._context().kind(label) != SKILL:
            raise ValueError(f'"{label}" is not a loadable block')

    def load_skill(self, label: str, key: str) -> str | None:
        """A skill's full text (recorded as loaded), or None when the provider has no such key."""
        document = self._context().load_skill(label, key)
        if document is not None:
            self._skills.record_load(label, key)
        return document

    def unload_skill(self, label: str, key: str) -> bool:
        """Rewrite the skill's ``load_context`` results in history to ``[skill unloaded: KEY]``; True if loaded."""
        self._skill_block(label)
        return self._skills.unload(self._history, label, key)

    def get_loaded_skill_keys(self) -> set[str]:
        """``"label:key"`` of each loaded skill; restored from history (bounded windows) only with skill blocks."""
        if not self._has_skill_blocks():
            return self._skills.pending()
        return self._skills.keys(self._history)

    # ── tools ───────────────────────────────────────────────────────
    def tools(self) -> dict[str, Tool]:
        """The context tools for the current blocks, by name."""
        return context_tools(self)
