"""The manager's builder: records ``Session`` builder calls and replays them on every session it builds.

Recording ``(method, args, kwargs)`` keeps the manager independent of how a
Session stores its context or compaction settings: whatever ``Session`` does
with a builder call, each managed session gets the same call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Self

BuilderCall = tuple[str, tuple[Any, ...], dict[str, Any]]


class RecordingBuilder:
    """Builder half of :class:`~agent_sessions.manager.SessionManager` (each method returns ``self``)."""

    _calls: list[BuilderCall]

    def _record(self, method: str, *args: Any, **kwargs: Any) -> Self:
        self._calls.append((method, args, kwargs))
        self._configuration_changed()
        return self

    def _configuration_changed(self) -> None:
        """Hook: the recorded configuration changed (cached sessions are stale)."""

    def replay(self, session: Any) -> Any:
        """Apply every recorded builder call, in order, to ``session``; returns it."""
        for method, args, kwargs in self._calls:
            session = getattr(session, method)(*args, **kwargs)
        return session

    def context_labels(self) -> list[str]:
        """The labels of the context blocks declared so far (builder order)."""
        return [args[0] for method, args, _ in self._calls if method == "with_context" and args]

    def with_context(self, label: str, **options: Any) -> Self:
        """Declare a context block on every session; unprovided blocks are keyed ``f"{label}_{session_id}"``."""
        return self._record("with_context", label, **options)

    def with_cached_prompt(self, provider: Any = None) -> Self:
        """Persist each session's frozen prompt (``_system_prompt_<session id>`` by default)."""
        return self._record("with_cached_prompt", provider)

    def on_compaction(self, fn: Callable[..., Any]) -> Self:
        """The compaction function of every session."""
        return self._record("on_compaction", fn)

    def compact_after(self, threshold: int, token_counter: Callable[..., Any] | None = None) -> Self:
        """Auto-compaction threshold (and optional token counter) of every session."""
        return self._record("compact_after", threshold, token_counter=token_counter)

    def on_compaction_error(self, handler: Callable[..., Any]) -> Self:
        """Receives auto-compaction errors of every session."""
        return self._record("on_compaction_error", handler)
