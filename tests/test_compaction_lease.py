"""The compaction lease: manual and automatic runs exclude each other, heartbeats, dead holders.

Runs on SQLite and Postgres with real threads and processes (``transaction=True``: each
thread has its own connection and sees the others' commits).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
from django.db import connections
from django.utils import timezone

from agent_sessions import Session, create_compact_function
from agent_sessions import tasks as jobs
from agent_sessions.leases import holder_id, holder_is_dead
from agent_sessions.models import CompactionJob
from tests.conftest import msg

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


class BlockingSummariser:
    """Blocks inside the summary until released; counts calls running at the same time."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.running = 0
        self.most_at_once = 0
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, prompt: str) -> str:
        with self._lock:
            self.calls += 1
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        self.entered.set()
        try:
            assert self.release.wait(30), "never released"
            return "BLOCKED SUMMARY"
        finally:
            with self._lock:
                self.running -= 1


def build(session_id: str, summarise) -> Session:
    fn = create_compact_function(summarise, protect_head=1, tail_token_budget=20, min_tail_messages=1)
    return Session.create().for_session(session_id).on_compaction(fn).compact_after(100_000)


def fill(session: Session, n: int = 10) -> None:
    for i in range(n):
        session.append_message(msg(f"m{i}", "user" if i % 2 == 0 else "assistant", f"words of message {i} " * 8))


def in_thread(target, *args):
    box: dict = {}

    def run():
        try:
            box["value"] = target(*args)
        except BaseException as exc:  # noqa: BLE001
            box["error"] = exc
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, box


def test_manual_and_automatic_compaction_never_summarise_at_once(session_id):
    summariser = BlockingSummariser()
    session = build(session_id, summariser)
    fill(session)
    manual, box = in_thread(session.compact)
    assert summariser.entered.wait(20), "the manual compaction never reached the summariser"
    job = CompactionJob.objects.get(session_id=session_id)
    assert job.status == "running"
    assert job.holder.endswith(job.holder.rsplit(":", 1)[1])
    assert ":manual-" in job.holder

    other = build(session_id, summariser)  # another Session object, as a worker would build it
    assert jobs.run_compaction(other, force=True)["status"] == "busy"  # the automatic path is refused
    assert other.compact() is None  # and so is a second manual run
    summariser.release.set()
    manual.join(30)
    assert "error" not in box, box.get("error")
    assert box["value"] is not None
    assert summariser.most_at_once == 1
    assert summariser.calls == 1
    assert len(session.get_compactions()) == 1
    job.refresh_from_db()
    assert job.status == "succeeded"
    assert job.holder == ""
    assert job.lease_until is None


def test_a_manual_compaction_waits_out_a_running_task(session_id):
    summariser = BlockingSummariser()
    session = build(session_id, summariser)
    fill(session)
    worker, box = in_thread(lambda: jobs.run_compaction(build(session_id, summariser), force=True, label="task-1"))
    assert summariser.entered.wait(20)
    assert ":task-1" in CompactionJob.objects.get(session_id=session_id).holder
    assert session.compact() is None  # busy: the summariser is not entered a second time
    summariser.release.set()
    worker.join(30)
    assert box["value"]["status"] == "succeeded"
    assert summariser.calls == 1
    assert len(session.get_compactions()) == 1


def test_async_compact_takes_the_same_lease(session_id):
    import asyncio

    session = build(session_id, lambda prompt: "ASYNC SUMMARY")
    fill(session)
    token = jobs.acquire_lease(session_id, label="someone-else")
    assert asyncio.run(session.acompact()) is None  # held elsewhere
    jobs.release_lease(session_id, token, status="idle")
    result = asyncio.run(session.acompact())
    assert result is not None
    assert result.summary == "ASYNC SUMMARY"
    assert CompactionJob.objects.get(session_id=session_id).status == "succeeded"


def test_a_failing_manual_compaction_records_the_error_and_frees_the_lease(session_id):
    def broken(prompt: str) -> str:
        raise RuntimeError("summariser down")

    session = build(session_id, broken)
    fill(session)
    with pytest.raises(RuntimeError, match="summariser down"):
        session.compact()
    job = CompactionJob.objects.get(session_id=session_id)
    assert job.status == "failed"
    assert "summariser down" in job.last_error
    assert job.holder == ""


def test_the_heartbeat_keeps_a_long_run_s_lease(session_id, settings):
    # AGENT_SESSIONS_COMPACTION_LEASE_SECONDS is a documented setting; shortened here so a
    # run outlives several leases within the test.  The shipped 60 s / 10 s pair keeps the
    # same ratio (three beats per lease, see conf.compaction_heartbeat_seconds).
    settings.AGENT_SESSIONS_COMPACTION_LEASE_SECONDS = 1.5
    summariser = BlockingSummariser()
    session = build(session_id, summariser)
    fill(session)
    worker, box = in_thread(session.compact)
    assert summariser.entered.wait(20)
    first = CompactionJob.objects.get(session_id=session_id)
    time.sleep(4)  # over two lease lengths
    later = CompactionJob.objects.get(session_id=session_id)
    assert first.lease_until < timezone.now()  # without renewal the lease would have run out
    assert later.holder == first.holder
    assert later.lease_until > timezone.now()
    assert jobs.acquire_lease(session_id) is None  # still held: the heartbeat renewed it
    summariser.release.set()
    worker.join(30)
    assert box["value"] is not None


def test_shipped_lease_and_heartbeat():
    from agent_sessions import conf

    assert conf.compaction_lease_seconds() == 60
    assert conf.compaction_heartbeat_seconds() == 10


def test_a_lease_whose_holder_died_on_this_host_is_taken_over_at_once(session_id):
    dead = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.1)"])
    dead.wait()
    token = jobs.acquire_lease(session_id)
    stale = token.replace(token.split(":")[1], str(dead.pid), 1)
    CompactionJob.objects.filter(session_id=session_id).update(holder=stale)  # as if that process held it
    assert holder_is_dead(stale)
    assert CompactionJob.objects.get(session_id=session_id).lease_until > timezone.now()  # not expired
    taken = jobs.acquire_lease(session_id, label="redelivered")
    assert taken is not None
    assert taken.endswith(":redelivered")
    assert not jobs.release_lease(session_id, stale, status="succeeded")  # the dead run cannot release it


def test_live_and_foreign_holders_are_not_declared_dead():
    assert not holder_is_dead(holder_id("me"))
    assert not holder_is_dead("another-host:1:123:task")  # other hosts: the lease expiry decides
    assert not holder_is_dead("garbage")
