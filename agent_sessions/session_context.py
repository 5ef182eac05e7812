"""Context blocks, the system prompt and the AI tools of a Session (SPEC §3.2 "Context", §3.3, §3.4).

STUB: the builder surface only; filled in by the context work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class ContextConfig:
    """How one context block is declared: label, description, token limit and provider."""

    label: str
    description: str | None = None
    max_tokens: int | None = None
    provider: Any = None


class ContextMixin:
    """Context-block half of :class:`~agent_sessions.Session`."""

    def _init_context(self, configs: list[ContextConfig], prompt_store: Any) -> None:
        self._context_configs = configs
        self._prompt_store = prompt_store
        self._cached_prompt = prompt_store is not None

    def _reset_context_resolution(self) -> None:
        """Forget resolved providers (the session id they were keyed by changed)."""

    def _after_clear(self) -> None:
        """Hook run after ``clear_messages``."""

    def with_context(self, label: str, *, description=None, max_tokens=None, provider=None):
        """Declare a context block (builder)."""
        self._context_configs.append(ContextConfig(label, description, max_tokens, provider))
        return self

    def with_cached_prompt(self, provider: Any = None):
        """Persist the frozen system prompt (builder)."""
        self._prompt_store = provider
        self._cached_prompt = True
        return self

    def tools(self) -> dict:
        """The AI tools this session offers, by name."""
        return {}
