"""Every exception agent_sessions raises on purpose; all derive from :class:`AgentSessionsError`.

Errors that also mean "bad argument" or "not found" keep the matching builtin as a second
base (``ValueError``, ``LookupError``), so ``except ValueError`` around a call keeps working.
"""

from __future__ import annotations

__all__ = [
    "AgentSessionsError",
    "ArchiveError",
    "CompactionNotConfigured",
    "ContextReadOnly",
    "ContextTooLarge",
    "EnqueueTimeout",
    "InvalidMessage",
    "InvalidText",
    "InvalidUsage",
    "MessageCycle",
    "MessageTooLarge",
    "MissingToolResults",
    "PartitionError",
    "SearchNotSupported",
    "SearchQueryError",
    "SearchTooComplex",
    "SessionNotFound",
    "SummarizerError",
    "ToolArgumentError",
    "TranscriptError",
    "TransientCompactionError",
]


class AgentSessionsError(Exception):
    """Base class of every error this library raises on purpose."""


# ── messages and sessions ───────────────────────────────────────────────────


class InvalidMessage(AgentSessionsError, ValueError):
    """A message is not a valid UIMessage dict; nothing was written."""


class MessageTooLarge(InvalidMessage):
    """A message or id over a size limit (``AGENT_SESSIONS_MAX_MESSAGE_BYTES``, ``…_MAX_ID_BYTES``, ``…_PARTS``)."""


class InvalidText(InvalidMessage):
    """A text the databases cannot hold alike (NUL, a lone surrogate) or over its length limit; nothing written."""


class MessageCycle(InvalidMessage):
    """A parent link that would close a cycle, or a stored cycle met by a read that cannot step around it."""


class MissingToolResults(AgentSessionsError, ValueError):
    """A converter met tool calls that have no result (``incomplete_tool_calls="raise"``); ``tool_call_ids`` names them.

    Model APIs reject a call without its result (OpenAI and Anthropic answer 400), as the AI SDK's
    ``MissingToolResultsError`` does before sending one.
    """

    def __init__(self, tool_call_ids: list[str]) -> None:
        self.tool_call_ids = list(tool_call_ids)
        plural = len(self.tool_call_ids) > 1
        super().__init__(
            f"tool result{'s are' if plural else ' is'} missing for tool call{'s' if plural else ''} "
            + ", ".join(self.tool_call_ids)
        )


class InvalidUsage(AgentSessionsError, ValueError):
    """Token counts or a cost that are negative, not finite, or whose running total would not be finite."""


class SessionNotFound(AgentSessionsError, LookupError):
    """No row in ``assistant_sessions`` has this id."""


# ── search ──────────────────────────────────────────────────────────────────


class SearchNotSupported(AgentSessionsError):
    """The storage behind a session cannot run full-text search."""


class SearchQueryError(AgentSessionsError, ValueError):
    """A search argument (not the query text: that never fails) is unusable."""


class SearchTooComplex(SearchQueryError):
    """A query whose cost would pass the stated bound (too many terms or scanning terms); refused, not run."""


# ── context blocks and tools ────────────────────────────────────────────────


class ContextReadOnly(AgentSessionsError):
    """A write was attempted on a readonly context block."""


class ContextTooLarge(AgentSessionsError):
    """A write would push a context block over its ``max_tokens``; content unchanged."""


class ToolArgumentError(AgentSessionsError, ValueError):
    """Arguments do not match the tool's schema (reported to the model as ``Error: ...``)."""


# ── compaction ──────────────────────────────────────────────────────────────


class CompactionNotConfigured(AgentSessionsError):
    """``compact()`` was called on a session without ``on_compaction``."""


class SummarizerError(AgentSessionsError):
    """A summariser could not produce a summary (HTTP error, unreachable server, bad response)."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class TransientCompactionError(AgentSessionsError):
    """A compaction failure worth retrying (e.g. the summariser's network); wraps the original."""


class EnqueueTimeout(AgentSessionsError):
    """The broker did not take the task within ``AGENT_SESSIONS_ENQUEUE_TIMEOUT_SECONDS``."""


# ── operations (management commands) ───────────────────────────────────────


class PartitionError(AgentSessionsError):
    """The table cannot be partitioned as it stands (the message says why)."""


class ArchiveError(AgentSessionsError, ValueError):
    """An archive document that cannot be imported (wrong shape, duplicate ids)."""


class TranscriptError(AgentSessionsError, ValueError):
    """A transcript file that is not a Chat Completions message list."""
