"""Least privilege in the admin: which Django permission shows which part of a session.

The session model's own *view* permission shows its metadata only (ids, title, owner, counts,
dates). Content is behind the view permission of the model that holds it, and the two
actions that hand content out or run work have permissions of their own (``SessionRecord.Meta``).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.http import HttpRequest

VIEW_MESSAGES = "agent_sessions.view_message"
"""Messages, their tool calls and the compaction summaries standing in for them."""
VIEW_BLOCKS = "agent_sessions.view_contextblockrecord"
"""The session's context blocks and its frozen system prompt."""
VIEW_CALLS = "agent_sessions.view_modelcallrecord"
"""The timeline of recorded model calls (model, latency, tokens, cost, status, error)."""
EXPORT = "agent_sessions.export_sessionrecord"
"""Download a session's messages and summaries as JSON (also needs :data:`VIEW_MESSAGES`)."""
COMPACT = "agent_sessions.compact_sessionrecord"
"""Enqueue a compaction now."""


@dataclass(frozen=True)
class Access:
    """What the requesting user may see and do with a session's content."""

    messages: bool
    blocks: bool
    calls: bool
    export: bool
    compact: bool

    @property
    def inputs(self) -> bool:
        """A model input shows the messages sent, so it needs both the calls' and the messages' permission."""
        return self.calls and self.messages


def access(request: HttpRequest) -> Access:
    user = request.user
    messages = user.has_perm(VIEW_MESSAGES)
    return Access(
        messages=messages,
        blocks=user.has_perm(VIEW_BLOCKS),
        calls=user.has_perm(VIEW_CALLS),
        export=messages and user.has_perm(EXPORT),
        compact=user.has_perm(COMPACT),
    )
