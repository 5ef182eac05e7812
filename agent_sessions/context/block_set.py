"""``BlockSet``: the ordered blocks of one session, their providers and every write rule.

Content is read from the providers once (on first use, or on ``reload``) and
kept in memory; writes go to the provider first and then update that copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..asyncutils import call
from ..exceptions import ContextReadOnly, ContextTooLarge
from ..tokens import estimate_string_tokens
from .block import ContextBlock
from .keys import entry_key
from .kinds import READONLY, SEARCH, SKILL, WRITABLE, has_method, kind_of


@dataclass
class BlockSpec:
    """A resolved block: its declaration plus the provider serving it (None: empty readonly)."""

    label: str
    description: str | None
    max_tokens: int | None
    provider: Any


@dataclass
class _Entry:
    spec: BlockSpec
    kind: str
    content: str = ""
    loaded: bool = False

    @property
    def writable(self) -> bool:
        if self.kind == WRITABLE:
            return True
        return self.kind in (SKILL, SEARCH) and has_method(self.spec.provider, "set")


def unknown_block(label: str) -> KeyError:
    """The error for a label no block has."""
    return KeyError(f'Unknown context block "{label}"')


class BlockSet:
    """Blocks in registration order, with ``max_tokens`` and readonly rules enforced on every write."""

    def __init__(self, specs: list[BlockSpec], initialized: set[int] | None = None) -> None:
        self._entries: dict[str, _Entry] = {}
        # ids of providers whose init(label) already ran (shared across re-resolutions).
        self._initialized = initialized if initialized is not None else set()
        for spec in specs:
            self.add(spec, load=False)

    # ── structure ───────────────────────────────────────────────────
    def labels(self) -> list[str]:
        """Block labels in order."""
        return list(self._entries)

    def kind(self, label: str) -> str:
        """The provider kind of a block (``readonly``, ``writable``, ``skill`` or ``search``)."""
        return self._entry(label).kind

    def provider(self, label: str) -> Any:
        """The provider behind a block (None for an unwired block)."""
        return self._entry(label).spec.provider

    def has(self, label: str) -> bool:
        return label in self._entries

    def add(self, spec: BlockSpec, *, load: bool = True) -> ContextBlock | None:
        """Register a block (ValueError on a duplicate label); loads it right away unless ``load=False``."""
        if spec.label in self._entries:
            raise ValueError(f'Context block "{spec.label}" already exists')
        entry = _Entry(spec=spec, kind=kind_of(spec.provider) if spec.provider is not None else READONLY)
        self._entries[spec.label] = entry
        if load:
            self._load(entry)
            return self._snapshot(entry)
        return None

    def remove(self, label: str) -> bool:
        """Forget a block (its stored data stays); False if there was none."""
        return self._entries.pop(label, None) is not None

    def _entry(self, label: str) -> _Entry:
        try:
            return self._entries[label]
        except KeyError:
            raise unknown_block(label) from None

    # ── reading ─────────────────────────────────────────────────────
    def _init_provider(self, entry: _Entry) -> None:
        provider = entry.spec.provider
        if provider is not None and id(provider) not in self._initialized and has_method(provider, "init"):
            call(provider.init, entry.spec.label)
        if provider is not None:
            self._initialized.add(id(provider))

    def _load(self, entry: _Entry) -> None:
        self._init_provider(entry)
        provider = entry.spec.provider
        content = call(provider.get) if has_method(provider, "get") else None
        entry.content = "" if content is None else str(content)
        entry.loaded = True

    def ensure_loaded(self) -> None:
        """Read every block not read yet (``init(label)`` runs first, once per provider)."""
        for entry in self._entries.values():
            if not entry.loaded:
                self._load(entry)

    def reload(self) -> None:
        """Re-read every block from its provider."""
        for entry in self._entries.values():
            self._load(entry)

    def ensure_initialized(self, label: str) -> Any:
        """The provider of a block, after its ``init(label)`` ran."""
        entry = self._entry(label)
        self._init_provider(entry)
        return entry.spec.provider

    def _snapshot(self, entry: _Entry) -> ContextBlock:
        spec = entry.spec
        return ContextBlock(
            label=spec.label,
            description=spec.description,
            content=entry.content,
            tokens=estimate_string_tokens(entry.content),
            max_tokens=spec.max_tokens,
            writable=entry.writable,
            is_skill=entry.kind == SKILL,
            is_searchable=entry.kind == SEARCH,
        )

    def get(self, label: str) -> ContextBlock | None:
        """One block, or None for an unknown label."""
        entry = self._entries.get(label)
        if entry is None:
            return None
        if not entry.loaded:
            self._load(entry)
        return self._snapshot(entry)

    def all(self) -> list[ContextBlock]:
        """Every block, in registration order."""
        self.ensure_loaded()
        return [self._snapshot(e) for e in self._entries.values()]

    # ── writing ─────────────────────────────────────────────────────
    def _check_size(self, entry: _Entry, content: str) -> None:
        limit = entry.spec.max_tokens
        tokens = estimate_string_tokens(content)
        if limit is not None and tokens > limit:
            raise ContextTooLarge(
                f'Block "{entry.spec.label}" allows {limit} tokens; the new content has {tokens}. Nothing was written.'
            )

    def _plain_writable(self, label: str) -> _Entry:
        entry = self._entry(label)
        if entry.kind in (SKILL, SEARCH):
            raise ContextReadOnly(f'Block "{label}" is keyed: write entries with set_context (a title or content)')
        if entry.kind != WRITABLE:
            raise ContextReadOnly(f'Block "{label}" is readonly')
        return entry

    def replace(self, label: str, content: str) -> ContextBlock:
        """Replace a writable block's content (ContextReadOnly / ContextTooLarge leave it unchanged)."""
        if not isinstance(content, str):
            raise TypeError("content must be a string")
        entry = self._plain_writable(label)
        self._check_size(entry, content)
        self._init_provider(entry)
        call(entry.spec.provider.set, content)
        entry.content = content
        entry.loaded = True
        return self._snapshot(entry)

    def append(self, label: str, content: str) -> ContextBlock:
        """Append to a writable block, inserting ``"\\n"`` unless it is empty or ``content`` starts with one."""
        if not isinstance(content, str):
            raise TypeError("content must be a string")
        entry = self._plain_writable(label)
        if not entry.loaded:
            self._load(entry)
        separator = "" if not entry.content or content.startswith("\n") else "\n"
        joined = entry.content + separator + content
        return self.replace(label, joined)

    def set_entry(self, label: str, content: str, *, title: str | None = None, description: str | None = None) -> str:
        """Write one keyed entry of a skill/search block whose provider has ``set``; returns its key."""
        if not isinstance(content, str):
            raise TypeError("content must be a string")
        entry = self._entry(label)
        if entry.kind not in (SKILL, SEARCH):
            raise ContextReadOnly(f'Block "{label}" is not keyed')
        if not entry.writable:
            raise ContextReadOnly(f'Block "{label}" is readonly')
        self._check_size(entry, content)
        key = entry_key(content, title)
        provider = self.ensure_initialized(label)
        if entry.kind == SKILL:
            if description is not None:
                call(provider.set, key, content, description)
            else:
                call(provider.set, key, content)
        else:
            call(provider.set, key, content)
        self._load(entry)  # the listing / summary changed
        return key

    # ── keyed reads ─────────────────────────────────────────────────
    def load_skill(self, label: str, key: str) -> str | None:
        """A skill's full text from a skill block, or None when the provider has no such key."""
        entry = self._entry(label)
        if entry.kind != SKILL:
            raise ValueError(f'Block "{label}" is not a skill block')
        document = call(self.ensure_initialized(label).load, key)
        return None if document is None else str(document)

    def search(self, label: str, query: str) -> Any:
        """The provider's results for ``query`` on a search block (shape as the provider returns it)."""
        entry = self._entry(label)
        if entry.kind != SEARCH:
            raise ValueError(f'Block "{label}" is not searchable')
        return call(self.ensure_initialized(label).search, query)
