"""What the admin's actions call in the rest of the app: compaction (Celery), its status, fork.

Kept apart from the ModelAdmins so the admin depends on one small surface,
resolved lazily (``manager`` and ``tasks`` import Celery and friends).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from types import ModuleType
from typing import Any

from .. import registry
from ..models import CompactionJob


class ActionUnavailable(Exception):
    """An action cannot run here (e.g. no compaction configuration is registered)."""


@dataclass(frozen=True)
class CompactionStatus:
    """The latest compaction job of a session as an operator sees it."""

    state: str
    error: str = ""
    updated_at: Any = None
    attempts: int = 0

    @property
    def failed(self) -> bool:
        return self.state == CompactionJob.Status.FAILED


def _optional(module: str) -> ModuleType | None:
    """The module, or None when it does not exist (an import error inside it still raises)."""
    try:
        return import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        return None


def compaction_configs() -> list[str]:
    """Names of the registered session configurations a worker can compact with."""
    return registry.names()


def compact_now(session_id: str, config: str | None = None, leaf_id: str | None = None) -> str:
    """Enqueue the compaction task for a session (its ``leaf_id`` branch, or the latest); returns a message.

    With ``CELERY_TASK_ALWAYS_EAGER`` the task runs inline, so the status the
    page shows afterwards is already final.
    """
    names = compaction_configs()
    if config is None and len(names) == 1:
        config = names[0]
    if not config or config not in names:
        raise ActionUnavailable(
            "No compaction configuration chosen: register one (SessionManager(name=...) or a sessions.py module)."
        )
    tasks = _optional("agent_sessions.tasks")
    enqueue = getattr(tasks, "enqueue_compaction", None)
    if enqueue is None:
        raise ActionUnavailable("The compaction task (agent_sessions.tasks) is not available.")
    # A manual request: force=True compacts even under the auto-compaction threshold.
    job = enqueue(config, session_id, leaf_id, force=True)
    state = getattr(job, "status", "")
    return f"Compaction of {session_id!r} enqueued with configuration {config!r}" + (
        f"; job {state}." if state else "."
    )


def compaction_status(session_id: str) -> CompactionStatus | None:
    """The recorded state of the session's compaction job (``CompactionJob``), if there is one."""
    job = CompactionJob.objects.filter(session_id=session_id).first()
    if job is None:
        return None
    return CompactionStatus(
        state=job.status,
        error=job.last_error or "",
        updated_at=job.finished_at or job.updated_at,
        attempts=job.attempts,
    )


def fork_session(session_id: str, at_message_id: str, name: str) -> str:
    """Fork the path up to ``at_message_id`` into a new session (SessionManager.fork); returns its id."""
    from ..manager import SessionManager

    return SessionManager().fork(session_id, at_message_id, name).id
