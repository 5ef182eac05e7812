"""Session events on the chat stream (SPEC §10): ``data-session-status`` parts, transient, so ``useChat``'s
``onData`` sees them without a second connection and they are never stored in the message.

A :class:`StatusTap` listens to the in-process ``session_event`` signal for one chat while its reply
streams (the posted message's append, the reply's, an inline compaction); the reply sends what it caught
between its chunks.  Events of other processes (a Celery worker's compaction) reach clients through
``GET /api/sessions/{id}/events``.
"""

from __future__ import annotations

import uuid
from collections import deque
from typing import Any

from ..signals import session_event
from .stream import sse


def status_chunk(event: dict) -> dict:
    return {"type": "data-session-status", "data": event, "transient": True}


class StatusTap:
    """Catches one session's events while connected; :meth:`drain` turns them into SSE bytes."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.caught: deque[dict] = deque(maxlen=64)
        self._uid = f"agent_sessions.chat.status.{uuid.uuid4().hex}"
        session_event.connect(self._receive, weak=False, dispatch_uid=self._uid)

    def _receive(self, sender: str, event: dict, **kwargs: Any) -> None:
        if sender == self.session_id:
            self.caught.append(event)

    def drain(self) -> bytes:
        out = []
        while self.caught:
            out.append(sse(status_chunk(self.caught.popleft())))
        return b"".join(out)

    def close(self) -> None:
        session_event.disconnect(dispatch_uid=self._uid)
