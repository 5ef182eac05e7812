"""Auto-compaction jobs: the Celery tasks, the per-session lease and the job record (SPEC §3.6).

A worker cannot receive a session's callbacks, so a named configuration is rebuilt
from :mod:`agent_sessions.registry`: ``compact_session(config_name, session_id, leaf_id)``.
Unnamed sessions compact inline (:func:`compact_inline`).  Both paths run under the
same lease, a compare-and-set on the session's :class:`~agent_sessions.models.CompactionJob`
row (plain ``UPDATE … WHERE``; no vendor SQL), so at most one compaction per session
runs at a time across processes, and every run and failure is recorded on that row.

Enqueueing happens after the surrounding transaction commits (unless tasks run eagerly).
If the broker is down the job stays ``pending``; :func:`sweep_pending_compactions`
re-enqueues it.  Suggested beat schedule::

    CELERY_BEAT_SCHEDULE = {
        "agent-sessions-sweep-compactions": {
            "task": "agent_sessions.tasks.sweep_pending_compactions",
            "schedule": 60.0,
        },
    }
"""

from __future__ import annotations

import logging
import threading
from contextlib import nullcontext
from datetime import datetime, timedelta
from importlib import import_module
from typing import Any

import httpx
from celery import Task, shared_task
from django.db import IntegrityError, InterfaceError, OperationalError, connections, router, transaction
from django.db.models import F, Q
from django.utils import timezone

from . import conf, registry
from .models import CompactionJob
from .storage.orm import DjangoSessionProvider
from .summarizers import SummarizerError

__all__ = [
    "TransientCompactionError",
    "compact_inline",
    "compact_session",
    "enqueue_compaction",
    "get_compaction_status",
    "request_auto_compaction",
    "sweep_pending_compactions",
]

logger = logging.getLogger("agent_sessions")
Status = CompactionJob.Status


class TransientCompactionError(Exception):
    """A failure worth retrying (e.g. the summariser's network); wraps the original."""


def is_transient(error: BaseException) -> bool:
    """Database connection trouble, summariser network errors, 429 and 5xx answers."""
    if isinstance(error, (OperationalError, InterfaceError, httpx.TransportError, TransientCompactionError)):
        return True
    if isinstance(error, SummarizerError):
        code = error.status_code
        return code is None or code == 429 or code >= 500
    return False


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:4000]


# ── the job row and its lease ────────────────────────────────────────────────


def _alias(using: str | None) -> str:
    return using or router.db_for_write(CompactionJob)


def _jobs(using: str | None):
    return CompactionJob.objects.using(_alias(using))


def session_alias(session: Any) -> str:
    """Where a session's job row lives: its ORM storage's database, else the router's choice."""
    storage = getattr(session, "storage", None)
    return storage.using if isinstance(storage, DjangoSessionProvider) else _alias(None)


def _ensure_row(session_id: str, using: str | None, **defaults: Any) -> None:
    """Create the session's job row if missing (a concurrent creator may win; that is fine)."""
    if _jobs(using).filter(session_id=session_id).exists():
        return
    try:
        with transaction.atomic(using=_alias(using)):
            _jobs(using).create(session_id=session_id, **defaults)
    except IntegrityError:
        pass


def acquire_lease(session_id: str, *, using: str | None = None, config_name: str = "") -> datetime | None:
    """Mark the session's job running unless another run holds a live lease.

    Returns the lease's expiry (the token to release it with), or None when busy.
    """
    _ensure_row(session_id, using, config_name=config_name)
    now = timezone.now()
    until = now + timedelta(seconds=conf.compaction_lease_seconds())
    free = ~Q(status=Status.RUNNING) | Q(lease_until__lt=now) | Q(lease_until__isnull=True)
    taken = (
        _jobs(using)
        .filter(Q(session_id=session_id) & free)
        .update(
            status=Status.RUNNING,
            lease_until=until,
            started_at=now,
            finished_at=None,
            attempts=F("attempts") + 1,
            updated_at=now,
        )
    )
    return until if taken else None


def release_lease(session_id: str, token: datetime, *, status: str, error: str = "", using: str | None = None) -> bool:
    """End a run: record its outcome, if the lease is still ours (it may have expired and moved on)."""
    now = timezone.now()
    return bool(
        _jobs(using)
        .filter(session_id=session_id, status=Status.RUNNING, lease_until=token)
        .update(status=status, last_error=error, lease_until=None, finished_at=now, updated_at=now)
    )


def _record(session_id: str, *, using: str | None = None, **fields: Any) -> None:
    _ensure_row(session_id, using)
    _jobs(using).filter(session_id=session_id).update(updated_at=timezone.now(), **fields)


# ── running a compaction ─────────────────────────────────────────────────────

_LOCAL_LOCKS: dict[tuple[int, str], threading.Lock] = {}
_LOCAL_LOCKS_GUARD = threading.Lock()


def _local_lock(session: Any) -> threading.Lock:
    """Single-flight inside one process, for custom storages that have no job row."""
    key = (id(session.storage), session.session_id)
    with _LOCAL_LOCKS_GUARD:
        return _LOCAL_LOCKS.setdefault(key, threading.Lock())


def run_compaction(
    session: Any,
    *,
    leaf_id: str | None = None,
    force: bool = False,
    config_name: str = "",
    using: str | None = None,
    failure_status: str = Status.FAILED,
) -> dict:
    """Compact ``session`` under its lease and record the outcome on its job row.

    Without ``force`` the threshold is re-checked under the lease, so a second run (or a
    duplicate task) finds nothing to do.  Returns ``{"status": ...}``: "busy" when another
    run holds the lease, "idle" when nothing was compacted, "succeeded" otherwise.  Errors
    are recorded with ``failure_status`` and re-raised.
    """
    alias = using or session_alias(session)
    token = acquire_lease(session.session_id, using=alias, config_name=config_name)
    if token is None:
        return {"status": "busy"}
    try:
        result = session.compact(leaf_id) if force or session._over_threshold(leaf_id) else None
    except Exception as exc:
        release_lease(session.session_id, token, status=failure_status, error=_describe(exc), using=alias)
        raise
    status = Status.SUCCEEDED if result is not None else Status.IDLE
    release_lease(session.session_id, token, status=status, using=alias)
    if result is None:
        return {"status": str(status), "compaction": None}
    return {"status": str(status), "compaction": {"from": result.from_message_id, "to": result.to_message_id}}


def compact_inline(session: Any, leaf_id: str | None = None) -> dict:
    """Auto-compact an unnamed session in this process, after its append; never raises.

    ORM sessions take the database lease (so other processes stay out); custom storages a
    process-local lock.  Inside an atomic block the run gets a savepoint, so a database
    error cannot break the caller's transaction.
    """
    if not isinstance(session.storage, DjangoSessionProvider):
        return _compact_with_local_lock(session, leaf_id)
    alias = session_alias(session)
    guard = transaction.atomic(using=alias) if connections[alias].in_atomic_block else nullcontext()
    try:
        with guard:
            return run_compaction(session, leaf_id=leaf_id, using=alias)
    except Exception as exc:  # noqa: BLE001 - never fatal to the append
        try:  # the savepoint may have rolled the record back: write it again
            _record(session.session_id, using=alias, status=Status.FAILED, last_error=_describe(exc),
                    lease_until=None, finished_at=timezone.now())
        except Exception:  # noqa: BLE001
            logger.exception("agent_sessions: could not record the compaction failure")
        session._report_auto_error(exc)
        return {"status": str(Status.FAILED), "error": _describe(exc)}


def _compact_with_local_lock(session: Any, leaf_id: str | None) -> dict:
    lock = _local_lock(session)
    if not lock.acquire(blocking=False):
        return {"status": "busy"}
    try:
        result = session.compact(leaf_id) if session._over_threshold(leaf_id) else None
    except Exception as exc:  # noqa: BLE001 - never fatal to the append
        session._report_auto_error(exc)
        return {"status": str(Status.FAILED), "error": _describe(exc)}
    finally:
        lock.release()
    return {"status": str(Status.SUCCEEDED if result is not None else Status.IDLE)}


# ── the Celery tasks ─────────────────────────────────────────────────────────

_imported_modules: set[str] = set()


def load_session(config_name: str, session_id: str) -> Any:
    """Rebuild a named configuration's session (imports ``AGENT_SESSIONS_CONFIG_MODULES`` first)."""
    for module in conf.config_modules():
        if module not in _imported_modules:
            import_module(module)
            _imported_modules.add(module)
    factory = registry.get(config_name)
    if factory is None:
        raise LookupError(f"no session configuration is registered as {config_name!r}")
    return factory.get_session(session_id)


class CompactionTask(Task):
    """Base of :func:`compact_session`: ``max_retries`` follows the setting at call time."""

    @property
    def max_retries(self) -> int:  # type: ignore[override]
        return conf.compaction_max_retries()


@shared_task(
    bind=True,
    base=CompactionTask,
    name="agent_sessions.tasks.compact_session",
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(OperationalError, InterfaceError, TransientCompactionError),
    retry_backoff=True,
    retry_backoff_max=conf.compaction_retry_backoff_max(),
    retry_jitter=True,
)
def compact_session(
    self: Task, config_name: str, session_id: str, leaf_id: str | None = None, force: bool = False,
    using: str | None = None,
) -> dict:
    """Compact a named configuration's session on a worker (threshold re-checked unless ``force``).

    Transient errors are retried with exponential backoff (``AGENT_SESSIONS_COMPACTION_MAX_RETRIES``);
    the final failure is recorded on the job row and passed to ``on_compaction_error``.
    """
    try:
        session = load_session(config_name, session_id)
    except Exception as exc:  # noqa: BLE001 - a configuration problem is permanent: record it
        logger.error("agent_sessions: cannot load configuration %r: %s", config_name, exc)
        _record(session_id, using=using, status=Status.FAILED, last_error=_describe(exc), finished_at=timezone.now())
        return {"status": str(Status.FAILED), "error": _describe(exc)}
    alias = using or session_alias(session)
    retries_left = self.request.retries < self.max_retries
    try:
        return run_compaction(
            session, leaf_id=leaf_id, force=force, config_name=config_name, using=alias,
            failure_status=Status.FAILED if not retries_left else Status.PENDING,
        )
    except Exception as exc:  # noqa: BLE001
        if is_transient(exc) and retries_left:
            logger.warning("agent_sessions: compaction of %r failed, will retry: %s", session_id, _describe(exc))
            _record(session_id, using=alias, status=Status.PENDING, requested_at=timezone.now())
            if isinstance(exc, (OperationalError, InterfaceError, TransientCompactionError)):
                raise
            raise TransientCompactionError(_describe(exc)) from exc
        logger.error("agent_sessions: compaction of %r failed: %s", session_id, _describe(exc))
        _record(session_id, using=alias, status=Status.FAILED, last_error=_describe(exc))
        session._report_auto_error(exc)
        return {"status": str(Status.FAILED), "error": _describe(exc)}


def _stale_jobs(using: str | None):
    now = timezone.now()
    grace = now - timedelta(seconds=conf.compaction_pending_grace_seconds())
    stale_pending = Q(status=Status.PENDING) & (Q(requested_at__lt=grace) | Q(requested_at__isnull=True))
    expired = Q(status=Status.RUNNING, lease_until__lt=now)
    return _jobs(using).filter(stale_pending | expired)


@shared_task(name="agent_sessions.tasks.sweep_pending_compactions")
def sweep_pending_compactions(using: str | None = None) -> int:
    """Re-enqueue jobs stuck ``pending`` (enqueue failed) or ``running`` past their lease.

    Inline jobs (no configuration name) cannot be re-run by a worker; an expired one is
    marked failed.  Returns how many jobs were re-enqueued.
    """
    count = 0
    for job in _stale_jobs(using):
        if not job.config_name:
            _jobs(using).filter(pk=job.pk, status=job.status, updated_at=job.updated_at).update(
                status=Status.FAILED, lease_until=None, last_error=job.last_error or "lease expired: the run stopped",
                updated_at=timezone.now(),
            )
            continue
        claimed = (
            _jobs(using)
            .filter(pk=job.pk, status=job.status, updated_at=job.updated_at)
            .update(status=Status.PENDING, lease_until=None, requested_at=timezone.now(), updated_at=timezone.now())
        )
        if claimed and _send(job.config_name, job.session_id, job.leaf_id, job.force, using) is None:
            count += 1
    return count


# ── enqueueing and status ────────────────────────────────────────────────────


def _claim_pending(config_name: str, session_id: str, leaf_id: str | None, force: bool, using: str | None) -> bool:
    """Move the job to ``pending`` unless a run is queued (recently) or running: True if we did."""
    now = timezone.now()
    grace = now - timedelta(seconds=conf.compaction_pending_grace_seconds())
    busy = Q(status=Status.RUNNING, lease_until__gte=now) | Q(status=Status.PENDING, requested_at__gte=grace)
    fields = dict(config_name=config_name, leaf_id=leaf_id, force=force, requested_at=now, updated_at=now)
    free = _jobs(using).filter(session_id=session_id).exclude(busy)
    claimed = free.update(status=Status.PENDING, attempts=0, **fields)
    if claimed:
        return True
    if _jobs(using).filter(session_id=session_id).exists():
        return False  # coalesced with the queued or running one
    try:
        with transaction.atomic(using=_alias(using)):
            _jobs(using).create(session_id=session_id, status=Status.PENDING, **fields)
        return True
    except IntegrityError:
        return False


def _send(config_name: str, session_id: str, leaf_id: str | None, force: bool, using: str | None) -> Exception | None:
    """Publish the task; on failure keep the job pending (the sweeper retries) and return the error."""
    kwargs: dict[str, Any] = {"force": force}
    if using is not None and using != router.db_for_write(CompactionJob):
        kwargs["using"] = using
    try:
        compact_session.apply_async(args=(config_name, session_id, leaf_id), kwargs=kwargs)
    except Exception as exc:  # noqa: BLE001 - the broker being down must not fail the caller
        logger.warning("agent_sessions: could not enqueue compaction of %r: %s", session_id, _describe(exc))
        _record(session_id, using=using, last_error=f"enqueue failed: {_describe(exc)}")
        return exc
    return None


def _enqueue(
    config_name: str, session_id: str, leaf_id: str | None, force: bool, using: str | None
) -> Exception | None:
    if not _claim_pending(config_name, session_id, leaf_id, force, using):
        return None
    return _send(config_name, session_id, leaf_id, force, using)


def _is_eager() -> bool:
    return bool(compact_session.app.conf.task_always_eager)


def enqueue_compaction(
    config_name: str, session_id: str, leaf_id: str | None = None, *, force: bool = True, using: str | None = None
) -> CompactionJob:
    """Ask a worker to compact a named configuration's session now; returns its job row.

    ``force`` (default, a manual request) compacts even under the threshold; auto-compaction
    passes False.  A request while one is queued or running joins it.  If the broker is down
    the job stays ``pending`` with the error in ``last_error`` (see the sweeper).
    """
    _enqueue(config_name, session_id, leaf_id, force, using)
    return _jobs(using).get(session_id=session_id)


def request_auto_compaction(session: Any, config_name: str, leaf_id: str | None) -> None:
    """Enqueue auto-compaction of a named session once the caller's transaction commits; never raises."""
    alias = session_alias(session)

    def send() -> None:
        try:
            error = _enqueue(config_name, session.session_id, leaf_id, False, alias)
        except Exception as exc:  # noqa: BLE001 - never fatal to the append
            error = exc
        if error is not None:
            session._report_auto_error(error)

    if _is_eager():
        send()  # inline, on this connection: the new message is visible even inside a transaction
    else:
        transaction.on_commit(send, using=alias)


def get_compaction_status(session_id: str, *, using: str | None = None) -> dict:
    """The session's job as a dict: status, attempts, last_error and timestamps ("idle" if none)."""
    job = _jobs(using).filter(session_id=session_id).first()
    if job is None:
        job = CompactionJob(session_id=session_id, status=Status.IDLE, updated_at=None)
    return {
        "session_id": session_id,
        "config_name": job.config_name,
        "status": str(job.status),
        "attempts": job.attempts,
        "last_error": job.last_error,
        "requested_at": job.requested_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "lease_until": job.lease_until,
        "updated_at": job.updated_at,
    }
