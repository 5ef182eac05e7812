"""Django signals of agent_sessions.

``session_event``: a session changed (SPEC §10).  Sent once the change commits, in the process that made it,
with ``sender`` = the session id and ``event`` = the payload (see :mod:`agent_sessions.events`).
"""

from __future__ import annotations

from django.dispatch import Signal

__all__ = ["session_event"]

session_event = Signal()
