"""One conversation: the :class:`Session` facade and the parts it is composed of.

``facade.Session`` holds the message operations and delegates to ``context.SessionContext``
(blocks, system prompt, skills, tools) and ``compaction.SessionCompaction`` (overlays,
``compact()``, the auto-compaction check, through a ``CompactionRunner``).  The facade is the one
public way to each operation; ``Session.compaction`` shows runners only a ``CompactionHandle``.
"""

from __future__ import annotations

from .compaction import CompactionHandle, CompactionRunner, LeaseRun, SessionCompaction, default_runner
from .context import PROMPT_KEY, ContextConfig, SessionContext
from .facade import Session

__all__ = [
    "PROMPT_KEY",
    "CompactionHandle",
    "CompactionRunner",
    "ContextConfig",
    "LeaseRun",
    "Session",
    "SessionCompaction",
    "SessionContext",
    "default_runner",
]
