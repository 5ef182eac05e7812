"""Persistent, tree-structured conversation storage for LLM agents, as a Django app.

The public API is importable from here.  Names load lazily (PEP 562) so that
importing the package never touches the app registry before Django is set up;
the ``TYPE_CHECKING`` block below states the same names for type checkers
(``tests/test_public_api.py`` keeps the two in step).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # exceptions
    "AgentSessionsError": "exceptions",
    "InvalidMessage": "exceptions",
    "InvalidText": "exceptions",
    "InvalidUsage": "exceptions",
    "MessageCycle": "exceptions",
    "MessageTooLarge": "exceptions",
    "SearchNotSupported": "exceptions",
    "ContextReadOnly": "exceptions",
    "ContextTooLarge": "exceptions",
    "CompactionNotConfigured": "exceptions",
    "SessionNotFound": "exceptions",
    "SearchQueryError": "exceptions",
    "SearchTooComplex": "exceptions",
    "ToolArgumentError": "exceptions",
    "SummarizerError": "exceptions",
    "TransientCompactionError": "exceptions",
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
    "ContextConfig": "session",
    "CompactionRunner": "session",
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

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time the names load lazily
    from .compaction import (
        CompactContext,
        align_boundary_backward,
        align_boundary_forward,
        build_summary_prompt,
        compute_summary_budget,
        create_compact_function,
        find_tail_cut_by_tokens,
        is_compaction_message,
        sanitize_tool_pairs,
    )
    from .context import ContextBlock, DjangoContextProvider, DjangoSearchProvider, StaticProvider, StorageSkillProvider
    from .convert import (
        arun_tool_calls,
        from_anthropic,
        from_openai_chat,
        from_openai_responses,
        pending_tool_calls,
        run_tool_calls,
        to_anthropic,
        to_openai_chat,
        to_openai_responses,
    )
    from .exceptions import (
        AgentSessionsError,
        CompactionNotConfigured,
        ContextReadOnly,
        ContextTooLarge,
        InvalidMessage,
        InvalidText,
        InvalidUsage,
        MessageCycle,
        MessageTooLarge,
        SearchNotSupported,
        SearchQueryError,
        SearchTooComplex,
        SessionNotFound,
        SummarizerError,
        ToolArgumentError,
        TransientCompactionError,
    )
    from .manager import SessionManager
    from .session import CompactionRunner, ContextConfig, Session
    from .storage.base import SessionProvider
    from .storage.orm import DjangoSessionProvider
    from .tokens import estimate_message_tokens, estimate_string_tokens
    from .tools import Tool
    from .types import (
        COMPACTION_PREFIX,
        CompactResult,
        HistoryRowStat,
        RecentHistory,
        SearchResult,
        SessionInfo,
        StoredCompaction,
        TokenCounterInput,
    )

__all__ = [
    "AgentSessionsError",
    "COMPACTION_PREFIX",
    "CompactContext",
    "CompactResult",
    "CompactionNotConfigured",
    "CompactionRunner",
    "ContextBlock",
    "ContextConfig",
    "ContextReadOnly",
    "ContextTooLarge",
    "DjangoContextProvider",
    "DjangoSearchProvider",
    "DjangoSessionProvider",
    "HistoryRowStat",
    "InvalidMessage",
    "InvalidText",
    "InvalidUsage",
    "MessageCycle",
    "MessageTooLarge",
    "RecentHistory",
    "SearchNotSupported",
    "SearchQueryError",
    "SearchResult",
    "SearchTooComplex",
    "Session",
    "SessionInfo",
    "SessionManager",
    "SessionNotFound",
    "SessionProvider",
    "StaticProvider",
    "StorageSkillProvider",
    "StoredCompaction",
    "SummarizerError",
    "TokenCounterInput",
    "Tool",
    "ToolArgumentError",
    "TransientCompactionError",
    "align_boundary_backward",
    "align_boundary_forward",
    "arun_tool_calls",
    "build_summary_prompt",
    "compute_summary_budget",
    "create_compact_function",
    "estimate_message_tokens",
    "estimate_string_tokens",
    "find_tail_cut_by_tokens",
    "from_anthropic",
    "from_openai_chat",
    "from_openai_responses",
    "is_compaction_message",
    "pending_tool_calls",
    "run_tool_calls",
    "sanitize_tool_pairs",
    "to_anthropic",
    "to_openai_chat",
    "to_openai_responses",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agent_sessions' has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
