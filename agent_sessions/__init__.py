"""Persistent, tree-structured conversation storage for LLM agents, as a Django app.

The public API is importable from here, and each public name is written once: in the
``if TYPE_CHECKING:`` block below, as an explicit re-export (``from .module import Name as
Name``, the form type checkers read as "exported" without an ``__all__``).  That block is what
mypy, pyright and IDEs see, with every name's real type.

At run time the block does not run, so importing the package never touches the app registry
before Django is set up.  Instead the module reads its own block once, at import, with
:mod:`ast` (:func:`_exports`): it gives :data:`__all__` and the name → module map that
:func:`__getattr__` loads each name from on first use (PEP 562); ``dir()`` and
``from agent_sessions import *`` go through the same list.  A name added to the block is
therefore exported everywhere at once; ``tests/test_public_api.py`` checks that every name
resolves to the object its module defines.
"""

from __future__ import annotations

import ast
from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # the list of exports; at run time read by _exports() and loaded lazily
    from .chat import ChatView as ChatView
    from .chat import anthropic_chunks as anthropic_chunks
    from .chat import chat_urls as chat_urls
    from .chat import openai_chunks as openai_chunks
    from .compaction import CompactContext as CompactContext
    from .compaction import align_boundary_backward as align_boundary_backward
    from .compaction import align_boundary_forward as align_boundary_forward
    from .compaction import build_summary_prompt as build_summary_prompt
    from .compaction import compute_summary_budget as compute_summary_budget
    from .compaction import create_compact_function as create_compact_function
    from .compaction import find_tail_cut_by_tokens as find_tail_cut_by_tokens
    from .compaction import is_compaction_message as is_compaction_message
    from .compaction import sanitize_tool_pairs as sanitize_tool_pairs
    from .context import ContextBlock as ContextBlock
    from .context import DjangoContextProvider as DjangoContextProvider
    from .context import DjangoSearchProvider as DjangoSearchProvider
    from .context import StaticProvider as StaticProvider
    from .context import StorageSkillProvider as StorageSkillProvider
    from .convert import arun_tool_calls as arun_tool_calls
    from .convert import from_anthropic as from_anthropic
    from .convert import from_openai_chat as from_openai_chat
    from .convert import from_openai_responses as from_openai_responses
    from .convert import pending_tool_calls as pending_tool_calls
    from .convert import run_tool_calls as run_tool_calls
    from .convert import to_anthropic as to_anthropic
    from .convert import to_openai_chat as to_openai_chat
    from .convert import to_openai_responses as to_openai_responses
    from .exceptions import AgentSessionsError as AgentSessionsError
    from .exceptions import CompactionNotConfigured as CompactionNotConfigured
    from .exceptions import ContextReadOnly as ContextReadOnly
    from .exceptions import ContextTooLarge as ContextTooLarge
    from .exceptions import InvalidMessage as InvalidMessage
    from .exceptions import InvalidText as InvalidText
    from .exceptions import InvalidUsage as InvalidUsage
    from .exceptions import MessageCycle as MessageCycle
    from .exceptions import MessageTooLarge as MessageTooLarge
    from .exceptions import MissingToolResults as MissingToolResults
    from .exceptions import SearchNotSupported as SearchNotSupported
    from .exceptions import SearchQueryError as SearchQueryError
    from .exceptions import SearchTooComplex as SearchTooComplex
    from .exceptions import SessionNotFound as SessionNotFound
    from .exceptions import SummarizerError as SummarizerError
    from .exceptions import ToolArgumentError as ToolArgumentError
    from .exceptions import TransientCompactionError as TransientCompactionError
    from .manager import SessionManager as SessionManager
    from .session import CompactionRunner as CompactionRunner
    from .session import ContextConfig as ContextConfig
    from .session import ModelCall as ModelCall
    from .session import Session as Session
    from .storage.base import SessionProvider as SessionProvider
    from .storage.orm import DjangoSessionProvider as DjangoSessionProvider
    from .tokens import estimate_message_tokens as estimate_message_tokens
    from .tokens import estimate_string_tokens as estimate_string_tokens
    from .tools import Tool as Tool
    from .types import COMPACTION_PREFIX as COMPACTION_PREFIX
    from .types import CompactResult as CompactResult
    from .types import HistoryRowStat as HistoryRowStat
    from .types import RecentHistory as RecentHistory
    from .types import SearchResult as SearchResult
    from .types import SessionInfo as SessionInfo
    from .types import StoredCompaction as StoredCompaction
    from .types import TokenCounterInput as TokenCounterInput
    from .ui_message import CustomContentUIPart as CustomContentUIPart
    from .ui_message import DataUIPart as DataUIPart
    from .ui_message import DynamicToolUIPart as DynamicToolUIPart
    from .ui_message import FileUIPart as FileUIPart
    from .ui_message import ProviderMetadata as ProviderMetadata
    from .ui_message import ReasoningFileUIPart as ReasoningFileUIPart
    from .ui_message import ReasoningUIPart as ReasoningUIPart
    from .ui_message import SourceDocumentUIPart as SourceDocumentUIPart
    from .ui_message import SourceUrlUIPart as SourceUrlUIPart
    from .ui_message import StepStartUIPart as StepStartUIPart
    from .ui_message import TextUIPart as TextUIPart
    from .ui_message import ToolApproval as ToolApproval
    from .ui_message import ToolState as ToolState
    from .ui_message import ToolUIPart as ToolUIPart
    from .ui_message import UIMessage as UIMessage
    from .ui_message import UIMessagePart as UIMessagePart
    from .ui_message import UIRole as UIRole


def _exports() -> dict[str, str]:
    """Name → submodule (relative to the package) of each import in this file's ``TYPE_CHECKING`` block."""
    get_source = getattr(__spec__.loader if __spec__ is not None else None, "get_source", None)
    source = get_source(__name__) if get_source is not None else None
    if source is None:  # a distribution without sources would have no list to read
        raise ImportError(f"{__name__} needs its source file to list its exports")
    tree = ast.parse(source)
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    return {
        alias.name: node.module
        for node in block.body
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
        for alias in node.names
    }


_EXPORTS = _exports()
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
