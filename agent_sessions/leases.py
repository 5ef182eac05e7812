"""The per-session compaction lease: who holds it, whether that holder still lives, heartbeats.

A lease is a compare-and-set on the session's :class:`~agent_sessions.models.CompactionJob`
row (plain ``UPDATE … WHERE``, no vendor SQL).  Its holder is ``host:pid:start-time:label``,
so a run whose process died on this host is taken over at once, and a live run renews
``lease_until`` from a heartbeat thread, so a holder that vanished elsewhere loses the
lease after ``AGENT_SESSIONS_COMPACTION_LEASE_SECONDS`` (60 by default) instead of a
fixed long lease.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.db import IntegrityError, connections, router, transaction
from django.db.models import F, Q
from django.utils import timezone

from . import conf
from .models import CompactionJob

logger = logging.getLogger("agent_sessions")
Status = CompactionJob.Status


def alias_for(using: str | None) -> str:
    """The job table's database: the one given, else the router's choice."""
    return using or router.db_for_write(CompactionJob)


def jobs(using: str | None):
    return CompactionJob.objects.using(alias_for(using))


def ensure_row(session_id: str, using: str | None, **defaults: Any) -> None:
    """Create the session's job row if missing (a concurrent creator may win; that is fine)."""
    if jobs(using).filter(session_id=session_id).exists():
        return
    try:
        with transaction.atomic(using=alias_for(using)):
            jobs(using).create(session_id=session_id, **defaults)
    except IntegrityError:
        pass


# ── holders ──────────────────────────────────────────────────────────────────


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(state, start time in clock ticks) of a process from /proc, or None when unavailable."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes().decode("ascii", "replace")
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2 :].split()
    return (fields[0], fields[19]) if len(fields) > 19 else None


def holder_id(label: str | None = None) -> str:
    """This process as a lease holder: ``host:pid:start-time:label`` (label: a task id or a nonce)."""
    pid = os.getpid()
    stat = _proc_stat(pid)
    tag = (label or f"run-{uuid.uuid4().hex[:12]}").replace(":", "-")
    return f"{socket.gethostname()}:{pid}:{stat[1] if stat else ''}:{tag}"


def holder_is_dead(holder: str) -> bool:
    """True when ``holder`` is a process on this host that no longer runs (killed, or its pid reused).

    Holders on other hosts are never declared dead here: their lease expires instead.
    """
    try:
        host, pid_text, started, _ = holder.rsplit(":", 3)
        pid = int(pid_text)
    except ValueError:
        return False
    if host != socket.gethostname():
        return False
    if pid == os.getpid():
        stat = _proc_stat(pid)
        return bool(started) and stat is not None and stat[1] != started
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    stat = _proc_stat(pid)
    if stat is None:
        return False
    state, ticks = stat
    return state in {"Z", "X"} or (bool(started) and ticks != started)


# ── taking, renewing and releasing ───────────────────────────────────────────


def _take(session_id: str, using: str | None, holder: str, condition: Q) -> bool:
    now = timezone.now()
    until = now + timedelta(seconds=conf.compaction_lease_seconds())
    return bool(
        jobs(using)
        .filter(Q(session_id=session_id) & condition)
        .update(
            status=Status.RUNNING,
            lease_until=until,
            holder=holder,
            heartbeat_at=now,
            started_at=now,
            finished_at=None,
            attempts=F("attempts") + 1,
            updated_at=now,
        )
    )


def acquire(
    session_id: str, *, using: str | None = None, config_name: str = "", label: str | None = None
) -> str | None:
    """Mark the session's job running unless a live run holds it; returns the holder (the token) or None.

    A lease whose holder died on this host, or that was not renewed in time, is taken over.
    """
    ensure_row(session_id, using, config_name=config_name)
    holder = holder_id(label)
    now = timezone.now()
    free = ~Q(status=Status.RUNNING) | Q(lease_until__lt=now) | Q(lease_until__isnull=True)
    if _take(session_id, using, holder, free):
        return holder
    current = jobs(using).filter(session_id=session_id).values("status", "holder", "lease_until").first()
    if current and current["status"] == Status.RUNNING and current["holder"] and holder_is_dead(current["holder"]):
        same = Q(status=Status.RUNNING, holder=current["holder"], lease_until=current["lease_until"])
        if _take(session_id, using, holder, same):
            logger.warning("agent_sessions: took over the compaction of %r from dead %s", session_id, current["holder"])
            return holder
    return None


def renew(session_id: str, holder: str, *, using: str | None = None) -> bool:
    """Push the lease's expiry forward (a heartbeat); False when the lease is no longer ours."""
    now = timezone.now()
    until = now + timedelta(seconds=conf.compaction_lease_seconds())
    return bool(
        jobs(using)
        .filter(session_id=session_id, status=Status.RUNNING, holder=holder)
        .update(lease_until=until, heartbeat_at=now)
    )


def release(session_id: str, holder: str, *, status: str, error: str = "", using: str | None = None) -> bool:
    """End a run: record its outcome, if the lease is still ours (it may have been taken over)."""
    now = timezone.now()
    return bool(
        jobs(using)
        .filter(session_id=session_id, status=Status.RUNNING, holder=holder)
        .update(status=status, last_error=error, lease_until=None, holder="", finished_at=now, updated_at=now)
    )


class Heartbeat:
    """Renews a lease from a daemon thread while the run goes on (``with Heartbeat(...):``).

    The thread uses its own database connection and closes it after every beat, so it
    holds nothing between beats.  Inside the caller's atomic block no thread is started
    (its row lock would block the beat): the lease then simply lasts its full length.
    """

    def __init__(self, session_id: str, holder: str, *, using: str | None = None) -> None:
        self.session_id, self.holder, self.using = session_id, holder, alias_for(using)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Heartbeat:
        if not connections[self.using].in_atomic_block:
            self._thread = threading.Thread(target=self._run, name="agent-sessions-heartbeat", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        interval = conf.compaction_heartbeat_seconds()
        while not self._stop.wait(interval):
            try:
                if not renew(self.session_id, self.holder, using=self.using):
                    logger.warning("agent_sessions: lost the compaction lease of %r", self.session_id)
                    return
            except Exception as exc:  # noqa: BLE001 - a missed beat is retried at the next one
                logger.warning("agent_sessions: compaction heartbeat of %r failed: %s", self.session_id, exc)
            finally:
                connections[self.using].close()
