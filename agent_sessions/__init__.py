"""Persistent, tree-structured conversation storage for LLM agents, as a Django app.

The public API is importable from here.  Names load lazily (PEP 562) so that
importing the package never touches the app registry before Django is set up.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # exceptions
    "AgentSessionsError": "exceptions",
    "InvalidMessage": "exceptions",
    "MessageTooLarge": "exceptions",
    "SearchNotSupported": "exceptions",
    "ContextReadOnly": "exceptions",
    "ContextTooLarge": "exceptions",
    "CompactionNotConfigured": "exceptions",
    # types
    "SearchResult": "types",
    "RecentHistory": "types",
    "HistoryRowStat": "types",
    "CompactResult": "types",
    "StoredCompaction": "types",
    "TokenCounterInput": "types",
    "SessionInfo": "types",
    "COMPACTION_PREFIX": "types",
    # tokens
    "estimate_string_tokens": "tokens",
    "estimate_message_tokens": "tokens",
    # storage
    "SessionProvider": "storage.base",
    "DjangoSessionProvider": "storage.orm",
    # session
    "Session": "session",
    "ContextConfig": "session_context",
    # context providers, blocks and tools
    "ContextBlock": "context",
    "StaticProvider": "context",
    "DjangoContextProvider": "context",
    "DjangoSearchProvider": "context",
    "StorageSkillProvider": "context",
    "Tool": "tools",
    # compaction
    "CompactContext": "compaction",
    "create_compact_function": "compaction",
    "is_compaction_message": "compaction",
    "sanitize_tool_pairs": "compaction",
    "align_boundary_forward": "compaction",
    "align_boundary_backward": "compaction",
    "find_tail_cut_by_tokens": "compaction",
    "compute_summary_budget": "compaction",
    "build_summary_prompt": "compaction",
    # manager
    "SessionManager": "manager",
    # converters and the tool loop
    "to_openai_chat": "convert",
    "from_openai_chat": "convert",
    "to_openai_responses": "convert",
    "from_openai_responses": "convert",
    "to_anthropic": "convert",
    "from_anthropic": "convert",
    "run_tool_calls": "convert",
    "arun_tool_calls": "convert",
    "pending_tool_calls": "convert",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agent_sessions' has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
