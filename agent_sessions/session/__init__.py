"""One conversation: the :class:`Session` facade and the parts it is composed of.

``facade.Session`` holds the message operations and delegates to ``context.SessionContext``
(blocks, system prompt, skills, tools), ``compaction.SessionCompaction`` (overlays,
``compact()``, the auto-compaction check, through a ``CompactionRunner``) and
``model_calls.SessionModelCalls`` (model-call records: ``ModelCall``, ``model_input``).  The facade is the one
public way to each operation; ``Session.compaction`` shows runners only a ``CompactionHandle``.
"""

from __future__ import annotations

from .compaction import CompactionHandle, CompactionRunner, LeaseRun, SessionCompaction, default_runner
from .context import PROMPT_KEY, ContextConfig, SessionContext
from .facade import Session
from .model_calls import AsyncModelCall, ModelCall, SessionModelCalls

__all__ = [
    "PROMPT_KEY",
    "AsyncModelCall",
    "CompactionHandle",
    "CompactionRunner",
    "ContextConfig",
    "LeaseRun",
    "ModelCall",
    "Session",
    "SessionCompaction",
    "SessionContext",
    "SessionModelCalls",
    "default_runner",
]
