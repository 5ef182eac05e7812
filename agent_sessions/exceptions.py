"""Exceptions raised by agent_sessions; all derive from :class:`AgentSessionsError`."""


class AgentSessionsError(Exception):
    """Base class of every error this library raises on purpose."""


class InvalidMessage(AgentSessionsError, ValueError):
    """A message is not a valid UIMessage dict; nothing was written."""


class MessageTooLarge(InvalidMessage):
    """A message or id over a size limit (``AGENT_SESSIONS_MAX_MESSAGE_BYTES``, ``…_MAX_ID_BYTES``, ``…_PARTS``)."""


class SearchNotSupported(AgentSessionsError):
    """The storage behind a session cannot run full-text search."""


class ContextReadOnly(AgentSessionsError):
    """A write was attempted on a readonly context block."""


class ContextTooLarge(AgentSessionsError):
    """A write would push a context block over its ``max_tokens``; content unchanged."""


class CompactionNotConfigured(AgentSessionsError):
    """``compact()`` was called on a session without ``on_compaction``."""
