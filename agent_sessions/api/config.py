"""Which SessionManager the API serves: a registered configuration, or the API's default one.

``AGENT_SESSIONS_API_CONFIG = "support"`` points the API at the SessionManager
registered under that name (``SessionManager(name="support")`` in an app's
``sessions.py``), so API sessions get its context blocks and compaction, and
the Celery worker can rebuild them.  Without it the API uses the default built
here: a writable ``memory`` block, a cached system prompt, and compaction with
the configured summariser (an OpenAI-compatible endpoint when
``AGENT_SESSIONS_SUMMARIZER_API_KEY`` is set, the offline extractive one otherwise).
Import this module in the worker (``AGENT_SESSIONS_CONFIG_MODULES``) so the
default is registered there too.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from .. import conf, registry
from ..compaction import create_compact_function
from ..manager import SessionManager
from ..summarizers import OpenAICompatibleSummarizer, extractive_summarizer

DEFAULT_NAME = "agent_sessions.api"
MEMORY_LABEL = "memory"
MEMORY_MAX_TOKENS = 1100


def _summarize(prompt: str) -> str:
    """The configured summariser, chosen per call (settings may change after import)."""
    summarizer = OpenAICompatibleSummarizer() if conf.summarizer_api_key() else extractive_summarizer
    return summarizer(prompt)


def build_default() -> SessionManager:
    """The API's default configuration, registered under :data:`DEFAULT_NAME`."""
    return (
        SessionManager(name=DEFAULT_NAME)
        .with_context(MEMORY_LABEL, description="Learned facts", max_tokens=MEMORY_MAX_TOKENS)
        .with_cached_prompt()
        .on_compaction(create_compact_function(_summarize))
    )


_default = build_default()


def get_manager() -> SessionManager:
    """The SessionManager behind the API (resolved per call, so settings overrides apply)."""
    name = conf.api_config()
    if name is None:
        if registry.get(DEFAULT_NAME) is not _default:
            registry.register(DEFAULT_NAME, _default)
        return _default
    manager = registry.get(name)
    if not isinstance(manager, SessionManager):
        raise ImproperlyConfigured(
            f"AGENT_SESSIONS_API_CONFIG={name!r} must name a registered SessionManager (SessionManager(name=...))"
        )
    return manager


def config_name(manager: SessionManager) -> str:
    """The registry name a worker rebuilds the manager's sessions by."""
    return manager.name or DEFAULT_NAME
