"""SessionManager under real threads: atomic usage counters and race-free batch appends."""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from agent_sessions import SessionManager
from agent_sessions.models import Message
from tests.conftest import msg

pytestmark = pytest.mark.django_db(transaction=True)


def run_threads(n: int, target) -> list[BaseException]:
    """Start ``n`` threads at once (a barrier), each calling ``target(i)``; return their errors."""
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            barrier.wait()
            target(i)
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return errors


def test_fifty_concurrent_add_usage_calls_add_up_exactly():
    manager = SessionManager()
    sid = manager.create("Busy").id
    assert run_threads(50, lambda i: manager.add_usage(sid, i + 1, 2, 0.25)) == []
    info = manager.get(sid)
    assert info.input_tokens == sum(range(1, 51))
    assert info.output_tokens == 100
    assert info.estimated_cost == 12.5


def test_concurrent_append_all_batches_form_one_chain():
    manager = SessionManager()
    sid = manager.create("Busy").id
    manager.append(sid, msg("root"))
    errors = run_threads(10, lambda i: manager.append_all(sid, [msg(f"t{i}-{k}") for k in range(5)]))
    assert errors == []
    children = {}
    for mid, parent in Message.objects.filter(session_id=sid).values_list("message_id", "parent_id"):
        children.setdefault(parent, []).append(mid)
    assert all(len(kids) == 1 for kids in children.values()), "an unintended branch"
    history = manager.get_history(sid)
    assert len(history) == 51
    # Each batch stays contiguous: batches never interleave.
    batches = [m["id"].split("-")[0] for m in history[1:]]
    assert all(batches[i] == batches[i - i % 5] for i in range(50))


def test_concurrent_lifecycles_on_fresh_connections_never_hit_a_locked_database():
    manager = SessionManager()

    def lifecycle(i: int) -> None:
        sid = manager.create(f"s{i}").id
        manager.append_all(sid, [msg(f"m{k}", text=f"thread {i} message {k}") for k in range(4)])
        forked = manager.fork(sid, "m2", f"fork {i}")
        split = manager.compact_and_split(forked.id, f"summary {i}")
        manager.add_usage(split.id, 1, 1, 0.5)
        manager.delete(sid)

    assert run_threads(10, lifecycle) == []
    sessions = manager.list()
    forks = [s for s in sessions if s.end_reason == "compaction"]
    assert len(sessions) == 20
    assert len(forks) == 10
    for fork in forks:
        assert len(manager.fork_mapping(fork.id)) == manager.get_message_count(fork.id) == 3
    for split in (s for s in sessions if s.end_reason is None):
        assert manager.get_message_count(split.id) == 1
        assert split.input_tokens == 1
