"""Auto-compaction jobs: the Celery tasks, the per-session lease and the job record.

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
import os
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime, timedelta
from typing import Any

import httpx
from celery import Task, shared_task
from celery.signals import worker_ready, worker_shutting_down
from django.db import IntegrityError, InterfaceError, OperationalError, connections, router, transaction
from django.db.models import Q
from django.utils import timezone

from . import conf, leases, registry, text
from .exceptions import EnqueueTimeout, SummarizerError, TransientCompactionError
from .models import CompactionJob

__all__ = [
    "CeleryCompactionRunner",
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


def is_transient(error: BaseException) -> bool:
    """Database connection trouble, summariser network errors, 429 and 5xx answers."""
    if isinstance(error, (OperationalError, InterfaceError, httpx.TransportError, TransientCompactionError)):
        return True
    if isinstance(error, SummarizerError):
        code = error.status_code
        return code is None or code == 429 or code >= 500
    return False


def _describe(error: BaseException) -> str:
    return text.clean(f"{type(error).__name__}: {error}"[:4000])  # stored in a text column


# ── the job row and its lease ────────────────────────────────────────────────


def _alias(using: str | None) -> str:
    return leases.alias_for(using)


def _jobs(using: str | None):
    return leases.jobs(using)


def _database(session: Any) -> str | None:
    """The database of a session's ORM storage (``session.compaction.database``); None for a custom storage."""
    return getattr(getattr(session, "compaction", None), "database", None)


def session_alias(session: Any) -> str:
    """Where a session's job row lives: its ORM storage's database, else the router's choice."""
    database = _database(session)
    return database if database is not None else _alias(None)


def _ensure_row(session_id: str, using: str | None, **defaults: Any) -> None:
    leases.ensure_row(session_id, using, **defaults)


def acquire_lease(
    session_id: str, *, using: str | None = None, config_name: str = "", label: str | None = None
) -> str | None:
    """Mark the session's job running unless a live run holds the lease (see :mod:`agent_sessions.leases`).

    Returns the holder id (the token to release it with), or None when busy.
    """
    return leases.acquire(session_id, using=using, config_name=config_name, label=label)


def release_lease(session_id: str, token: str, *, status: str, error: str = "", using: str | None = None) -> bool:
    """End a run: record its outcome, if the lease is still ours (it may have been taken over)."""
    return leases.release(session_id, token, status=status, error=error, using=using)


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
    failure_status: str = str(Status.FAILED),
    label: str | None = None,
) -> dict:
    """Compact ``session`` under its lease and record the outcome on its job row.

    Without ``force`` the threshold is re-checked under the lease, so a second run (or a
    duplicate task) finds nothing to do.  Returns ``{"status": ...}``: "busy" when another
    live run holds the lease, "idle" when nothing was compacted, "succeeded" otherwise.
    Errors are recorded with ``failure_status`` and re-raised.  ``label`` names the run in
    the lease holder (the Celery task id).
    """
    alias = using or session_alias(session)
    token = acquire_lease(session.session_id, using=alias, config_name=config_name, label=label)
    if token is None:
        return {"status": "busy"}
    try:
        with leases.Heartbeat(session.session_id, token, using=alias):
            over = force or session.compaction.over_threshold(leaf_id)
            result = session.compaction.compact_held(leaf_id) if over else None
    except Exception as exc:
        release_lease(session.session_id, token, status=failure_status, error=_describe(exc), using=alias)
        raise
    status = str(Status.SUCCEEDED if result is not None else Status.IDLE)
    release_lease(session.session_id, token, status=status, using=alias)
    if result is None:
        return {"status": str(status), "compaction": None}
    return {"status": str(status), "compaction": {"from": result.from_message_id, "to": result.to_message_id}}


class ManualRun:
    """What :func:`manual_lease` yields: whether the lease was taken; set ``compacted`` for the record."""

    def __init__(self, held: bool) -> None:
        self.held = held
        self.compacted = False


@contextmanager
def manual_lease(session: Any) -> Iterator[ManualRun]:
    """The lease a manual ``Session.compact()`` runs under (``run.held`` False: another run holds it).

    ORM sessions take the job row's lease (the one the Celery task takes, heartbeat included)
    and record the outcome; custom storages take the process-local lock.
    """
    if _database(session) is None:
        lock = _local_lock(session)
        if not lock.acquire(blocking=False):
            yield ManualRun(False)
            return
        try:
            yield ManualRun(True)
        finally:
            lock.release()
        return
    alias = session_alias(session)
    token = acquire_lease(session.session_id, using=alias, label=f"manual-{uuid.uuid4().hex[:12]}")
    if token is None:
        yield ManualRun(False)
        return
    run = ManualRun(True)
    try:
        with leases.Heartbeat(session.session_id, token, using=alias):
            yield run
    except Exception as exc:
        release_lease(session.session_id, token, status=str(Status.FAILED), error=_describe(exc), using=alias)
        raise
    outcome = Status.SUCCEEDED if run.compacted else Status.IDLE
    release_lease(session.session_id, token, status=str(outcome), using=alias)


def compact_inline(session: Any, leaf_id: str | None = None) -> dict:
    """Auto-compact an unnamed session in this process, after its append; never raises.

    ORM sessions take the database lease (so other processes stay out); custom storages a
    process-local lock.  Inside an atomic block the run gets a savepoint, so a database
    error cannot break the caller's transaction.
    """
    if _database(session) is None:
        return _compact_with_local_lock(session, leaf_id)
    alias = session_alias(session)
    guard = transaction.atomic(using=alias) if connections[alias].in_atomic_block else nullcontext()
    try:
        with guard:
            return run_compaction(session, leaf_id=leaf_id, using=alias)
    except Exception as exc:  # noqa: BLE001 - never fatal to the append
        try:  # the savepoint may have rolled the record back: write it again
            _record(
                session.session_id,
                using=alias,
                status=Status.FAILED,
                last_error=_describe(exc),
                lease_until=None,
                finished_at=timezone.now(),
            )
        except Exception:  # noqa: BLE001
            logger.exception("agent_sessions: could not record the compaction failure")
        session.compaction.report_error(exc)
        return {"status": str(Status.FAILED), "error": _describe(exc)}


def _compact_with_local_lock(session: Any, leaf_id: str | None) -> dict:
    lock = _local_lock(session)
    if not lock.acquire(blocking=False):
        return {"status": "busy"}
    try:
        result = session.compaction.compact_held(leaf_id) if session.compaction.over_threshold(leaf_id) else None
    except Exception as exc:  # noqa: BLE001 - never fatal to the append
        session.compaction.report_error(exc)
        return {"status": str(Status.FAILED), "error": _describe(exc)}
    finally:
        lock.release()
    return {"status": str(Status.SUCCEEDED if result is not None else Status.IDLE)}


class CeleryCompactionRunner:
    """The default :class:`~agent_sessions.session.CompactionRunner` (``AGENT_SESSIONS_COMPACTION_RUNNER``).

    Manual ``compact()`` takes the job row's lease; crossing the threshold publishes
    ``compact_session`` for a named configuration (after commit) and compacts inline otherwise.
    """

    def lease(self, session: Any) -> AbstractContextManager[ManualRun]:
        return manual_lease(session)

    def auto_compact(self, session: Any, leaf_id: str) -> None:
        if session.config_name:
            request_auto_compaction(session, session.config_name, leaf_id)
        else:
            compact_inline(session, leaf_id)


# ── the Celery tasks ─────────────────────────────────────────────────────────


def load_session(config_name: str, session_id: str) -> Any:
    """Rebuild a named configuration's session (configuration modules are imported first)."""
    factory = registry.get(config_name)
    if factory is None:
        raise LookupError(f"no session configuration is registered as {config_name!r}")
    return factory.get_session(session_id)


class CompactionTask(Task):
    """Base of :func:`compact_session`: ``max_retries`` follows the setting at call time."""

    @property
    def max_retries(self) -> int:
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
    self: Task,
    config_name: str,
    session_id: str,
    leaf_id: str | None = None,
    force: bool = False,
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
            session,
            leaf_id=leaf_id,
            force=force,
            config_name=config_name,
            using=alias,
            failure_status=str(Status.FAILED if not retries_left else Status.PENDING),
            label=self.request.id,
        )
    except Exception as exc:  # noqa: BLE001
        if is_transient(exc) and retries_left:
            logger.warning("agent_sessions: compaction of %r failed, will retry: %s", session_id, _describe(exc))
            now = timezone.now()
            _record(session_id, using=alias, status=Status.PENDING, requested_at=now, enqueued_at=now)
            if isinstance(exc, (OperationalError, InterfaceError, TransientCompactionError)):
                raise
            raise TransientCompactionError(_describe(exc)) from exc
        logger.error("agent_sessions: compaction of %r failed: %s", session_id, _describe(exc))
        _record(session_id, using=alias, status=Status.FAILED, last_error=_describe(exc))
        session.compaction.report_error(exc)
        return {"status": str(Status.FAILED), "error": _describe(exc)}


def _orphaned(job: CompactionJob, now: datetime) -> bool:
    """A running job nobody runs any more: its lease expired, or its holder died on this host."""
    if job.lease_until is None or job.lease_until < now:
        return True
    return bool(job.holder) and leases.holder_is_dead(job.holder)


def _stale_jobs(using: str | None) -> list[CompactionJob]:
    """Pending jobs never published or waiting past the grace period, and orphaned running ones."""
    now = timezone.now()
    grace = now - timedelta(seconds=conf.compaction_pending_grace_seconds())
    unsent = Q(status=Status.PENDING) & (
        Q(enqueued_at__isnull=True) | Q(requested_at__lt=grace) | Q(requested_at__isnull=True)
    )
    running = list(_jobs(using).filter(status=Status.RUNNING))
    return list(_jobs(using).filter(unsent)) + [job for job in running if _orphaned(job, now)]


@shared_task(name="agent_sessions.tasks.sweep_pending_compactions")
def sweep_pending_compactions(using: str | None = None) -> int:
    """Re-send jobs left ``pending`` (publish failed, or nothing ran them) or orphaned while ``running``.

    Workers run this at start and every ``AGENT_SESSIONS_COMPACTION_SWEEP_SECONDS`` (no beat
    needed); beat may run it too.  Inline jobs (no configuration name) cannot be re-run by a
    worker; an orphaned one is marked failed.  Returns how many jobs were published.
    """
    count = 0
    for job in _stale_jobs(using):
        same = _jobs(using).filter(pk=job.pk, status=job.status, updated_at=job.updated_at, holder=job.holder)
        now = timezone.now()
        if not job.config_name:
            same.update(
                status=Status.FAILED, lease_until=None, holder="",
                last_error=job.last_error or "lease expired: the run stopped", updated_at=now,
            )  # fmt: skip
            continue
        claimed = same.update(
            status=Status.PENDING, lease_until=None, holder="", requested_at=now, enqueued_at=None, updated_at=now
        )
        if claimed and _send(job.config_name, job.session_id, job.leaf_id, job.force, using) is None:
            count += 1
    return count


# ── enqueueing and status ────────────────────────────────────────────────────

PUBLISHED, JOINED, UNSENT = "published", "joined", "failed to publish"


def _claim_pending(config_name: str, session_id: str, leaf_id: str | None, force: bool, using: str | None) -> bool:
    """Move the job to ``pending`` unless a run is queued (published, recently) or running: True if we did.

    A pending job whose publish failed is claimed again at once, so the next append (or a
    manual request) re-sends it.
    """
    now = timezone.now()
    grace = now - timedelta(seconds=conf.compaction_pending_grace_seconds())
    busy = Q(status=Status.RUNNING, lease_until__gte=now) | Q(
        status=Status.PENDING, requested_at__gte=grace, enqueued_at__isnull=False
    )
    fields = dict(
        config_name=config_name, leaf_id=leaf_id, force=force, requested_at=now, enqueued_at=None, updated_at=now
    )
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


_publisher: tuple[int, ThreadPoolExecutor] | None = None
_publisher_guard = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    """Threads that talk to the broker, one pool per process (a forked child builds its own)."""
    global _publisher
    with _publisher_guard:
        if _publisher is None or _publisher[0] != os.getpid():
            _publisher = (os.getpid(), ThreadPoolExecutor(max_workers=4, thread_name_prefix="agent-sessions-publish"))
        return _publisher[1]


def _publish(args: tuple, kwargs: dict) -> None:
    """``compact_session.apply_async`` bounded in time: a hung broker costs the caller at most the timeout."""
    if _is_eager():
        compact_session.apply_async(args=args, kwargs=kwargs)
        return
    timeout = conf.enqueue_timeout_seconds()
    future = _executor().submit(lambda: compact_session.apply_async(args=args, kwargs=kwargs))
    try:
        future.result(timeout=timeout)
    except FutureTimeout:
        raise EnqueueTimeout(f"the broker did not take the task within {timeout:g}s") from None


def _send(config_name: str, session_id: str, leaf_id: str | None, force: bool, using: str | None) -> Exception | None:
    """Publish the task; on failure keep the job pending (re-sent later) and return the error."""
    kwargs: dict[str, Any] = {"force": force}
    if using is not None and using != router.db_for_write(CompactionJob):
        kwargs["using"] = using
    try:
        _publish((config_name, session_id, leaf_id), kwargs)
    except Exception as exc:  # noqa: BLE001 - the broker being down must not fail the caller
        logger.warning("agent_sessions: could not enqueue compaction of %r: %s", session_id, _describe(exc))
        _record(session_id, using=using, last_error=f"enqueue failed: {_describe(exc)}")
        return exc
    _jobs(using).filter(session_id=session_id, status=Status.PENDING, enqueued_at__isnull=True).update(
        enqueued_at=timezone.now()
    )
    return None


def _enqueue(
    config_name: str, session_id: str, leaf_id: str | None, force: bool, using: str | None
) -> tuple[str, Exception | None]:
    """Claim and publish: (PUBLISHED | JOINED | UNSENT, the publish error if any)."""
    if not _claim_pending(config_name, session_id, leaf_id, force, using):
        return JOINED, None
    error = _send(config_name, session_id, leaf_id, force, using)
    return (UNSENT, error) if error is not None else (PUBLISHED, None)


def _is_eager() -> bool:
    return bool(compact_session.app.conf.task_always_eager)


def runs_eagerly() -> bool:
    """True when tasks run in the caller's process (``CELERY_TASK_ALWAYS_EAGER``), not on a worker."""
    return _is_eager()


def enqueue_compaction(
    config_name: str, session_id: str, leaf_id: str | None = None, *, force: bool = True, using: str | None = None
) -> CompactionJob:
    """Ask a worker to compact a named configuration's session now; returns its job row.

    ``force`` (default, a manual request) compacts even under the threshold; auto-compaction
    passes False.  A request while one is queued or running joins it.  If the broker is down
    the job stays ``pending`` with the error in ``last_error`` and is re-sent later.  The
    row's ``outcome`` attribute says what happened: "published", "joined" or "failed to publish".
    """
    outcome, _ = _enqueue(config_name, session_id, leaf_id, force, using)
    job = _jobs(using).get(session_id=session_id)
    job.outcome = outcome
    return job


def request_auto_compaction(session: Any, config_name: str, leaf_id: str | None) -> None:
    """Enqueue auto-compaction of a named session once the caller's transaction commits; never raises.

    The publish waits at most ``AGENT_SESSIONS_ENQUEUE_TIMEOUT_SECONDS`` for the broker.
    """
    alias = session_alias(session)

    def send() -> None:
        try:
            _, error = _enqueue(config_name, session.session_id, leaf_id, False, alias)
        except Exception as exc:  # noqa: BLE001 - never fatal to the append
            error = exc
        if error is not None:
            session.compaction.report_error(error)

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
        "holder": job.holder,
        "heartbeat_at": job.heartbeat_at,
        "enqueued_at": job.enqueued_at,
        "updated_at": job.updated_at,
    }


# ── self-healing inside every worker (no beat needed) ────────────────────────


class _WorkerSweeper:
    """Runs :func:`sweep_pending_compactions` in the worker's main process: at start, then periodically.

    So a job whose publish failed (broker down), or whose worker died (its lease orphaned),
    is re-sent without Celery beat.  ``AGENT_SESSIONS_COMPACTION_SWEEP_SECONDS = 0`` keeps only
    the sweep at start.
    """

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="agent-sessions-sweeper", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def sweep_once(self) -> None:
        try:
            sent = sweep_pending_compactions()
            if sent:
                logger.info("agent_sessions: re-sent %d compaction job(s)", sent)
        except Exception as exc:  # noqa: BLE001 - the next pass tries again
            logger.warning("agent_sessions: compaction sweep failed: %s", _describe(exc))
        finally:
            connections.close_all()

    def _run(self) -> None:
        self.sweep_once()
        interval = conf.compaction_sweep_seconds()
        while interval > 0 and not self._stop.wait(interval):
            self.sweep_once()


worker_sweeper = _WorkerSweeper()


@worker_ready.connect
def _sweep_when_a_worker_starts(**_: Any) -> None:
    worker_sweeper.start()


@worker_shutting_down.connect
def _stop_sweeping(**_: Any) -> None:
    worker_sweeper.stop()
