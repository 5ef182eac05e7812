"""Postgres: an append is one call of ``agent_sessions_append`` (storage/postgres_append.py).

The function plans each call while the table is small and keeps generic plans once the
planner can tell the indexes apart; both ways must store the same rows, and the kept plans
must stay on the indexes (one probe per append whatever the session's length).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC

import pytest
from django.db import connection, transaction

from agent_sessions import InvalidMessage, Session, SessionManager, triggers
from agent_sessions.manager import clock
from agent_sessions.models import Message, SessionRecord
from agent_sessions.storage import postgres_append, postgres_plans
from agent_sessions.storage.orm import DjangoSessionProvider
from agent_sessions.storage.postgres import lock_key
from tests.conftest import msg
from tests.support.pg import analyze_with_rows_elsewhere, messages_partitioned

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db]


def _analyze(rows_elsewhere: int, session_id: str) -> None:
    """Let ANALYZE see the table with ``rows_elsewhere`` rows of another session (and the rest)."""
    analyze_with_rows_elsewhere(session_id, rows_elsewhere)


def _mode() -> str:
    """How the function plans on this table now: kept or planned (per call), and on a partitioned table
    partitioned kept or partitioned (per call)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + postgres_plans.MODE)
        return cursor.fetchone()[0]


def _setting(name: str) -> str | None:
    """The connection's value of the custom setting ``name`` (None: never set on it)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting(%s, true)", [name])
        return cursor.fetchone()[0]


def test_the_installed_function_is_the_one_the_code_generates():
    # A change to storage/appends.py needs a migration that installs the function again.
    with connection.cursor() as cursor:
        cursor.execute("SELECT prosrc FROM pg_proc WHERE proname = %s", [postgres_append.NAME])
        assert [r[0] for r in cursor.fetchall()] == [postgres_append.body()]


@pytest.mark.parametrize("rows_elsewhere", [0, 1_500], ids=["planned per call", "kept plans"])
def test_both_ways_store_the_same_tree(session_id, rows_elsewhere):
    _analyze(rows_elsewhere, session_id)
    if messages_partitioned():
        expected = "partitioned kept" if rows_elsewhere else "partitioned"
    else:
        expected = "kept" if rows_elsewhere else "planned"
    assert _mode() == expected
    session = Session.create().for_session(session_id)
    for _ in range(2):  # the second time through, any kept plan is reused
        session.clear_messages()
        assert session.append_message(msg("a")) is True
        assert session.append_message(msg("b", "assistant")) is True  # auto: under a
        assert session.append_message(msg("c"), "a") is True  # explicit parent: a branch
        assert session.append_message(msg("r"), None) is True  # a second root
        assert session.append_message(msg("b", "assistant")) is False  # a duplicate writes nothing
        rows = Message.objects.filter(session_id=session_id).order_by("seq")
        tree = [(m.message_id, m.parent_id, m.depth, m.path_tokens - m.tokens) for m in rows]
        b_tokens = rows[0].tokens
        assert tree == [("a", None, 1, 0), ("b", "a", 2, b_tokens), ("c", "a", 2, b_tokens), ("r", None, 1, 0)]
        assert session.append_message(msg("d")) is True  # the latest leaf is the newest childless: r
        assert Message.objects.get(session_id=session_id, message_id="d").parent_id == "r"
    # A deleted message whose children stayed cannot come back (it would adopt them).
    Message.objects.filter(session_id=session_id, message_id="r").delete()
    with pytest.raises(InvalidMessage):
        session.append_message(msg("r"))


@pytest.mark.parametrize("rows_elsewhere", [0, 1_500], ids=["planned per call", "kept plans"])
def test_the_function_counts_its_own_row_and_the_trigger_every_other(session_id, rows_elsewhere):
    """The function counts the row it inserts, and the insert trigger stands aside for its call
    only (``triggers.COUNTED_BY_APPEND``): counted by both, or by neither, the count would drift."""
    _analyze(rows_elsewhere, session_id)
    SessionRecord.objects.create(id=session_id)
    session = Session.create().for_session(session_id)
    with transaction.atomic(), connection.cursor() as cursor:  # the setting ends with the call
        assert session.append_message(msg("a")) is True
        assert _setting(triggers.COUNTED_BY_APPEND) in (None, "")
        cursor.execute(
            "INSERT INTO assistant_messages (id, session_id, parent_id, role, content) "
            "VALUES ('raw', %s, 'a', 'user', '{}')",
            [session_id],
        )
    assert session.append_message(msg("b")) is True  # under raw
    assert session.append_message(msg("b")) is False  # a duplicate counts nothing
    assert SessionRecord.objects.get(pk=session_id).message_count == 3
    assert Message.objects.filter(session_id=session_id).count() == 3


def _buffers_of_an_append(session_id: str, mid: str) -> int:
    """Buffers an auto-parented append reads, the function's statements included."""
    values = [mid, session_id, "user", f'{{"id":"{mid}"}}', "", "", "2026-12-02 00:00:00+00:00", 1]
    params = postgres_append.call_params(lock_key(session_id), values, None, auto=True)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + postgres_append.CALL, params)
        plan = "\n".join(r[0] for r in cursor.fetchall())
    return int(plan.split("shared hit=")[1].split()[0].rstrip(","))


@contextmanager
def _nested_plans() -> Iterator[list[str]]:
    """The plans of the statements the function runs, as auto_explain reports them (as notices)."""
    plans: list[str] = []
    raw = connection.connection

    def handler(notice) -> None:
        plans.append(notice.message_primary or "")

    raw.add_notice_handler(handler)
    with connection.cursor() as cursor:
        cursor.execute("LOAD 'auto_explain'")
        for setting in ("log_min_duration = 0", "log_nested_statements = on", "log_analyze = on", "log_level = notice"):
            cursor.execute(f"SET LOCAL auto_explain.{setting}")
    try:
        yield plans
    finally:
        raw.remove_notice_handler(handler)
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL auto_explain.log_min_duration = -1")


def test_kept_plans_stay_on_the_indexes_as_the_session_grows(session_id):
    """Plans kept from a table the planner knows (1,500 rows of another session) probe by index:
    the append reads as many buffers at 2,000 messages as at 20, also when most of the heap is
    dead rows (a generic plan then took a bitmap scan of the whole session and a sort).  On a
    partitioned table too, where the kept plan prunes to the session's partition."""
    with connection.cursor() as cursor:  # 40 MB of heap, all of it dead
        cursor.execute(
            "INSERT INTO assistant_messages (id, session_id, role, content, text_content) "
            "SELECT 'g' || i, %s, 'user', repeat('x', 300), '' FROM generate_series(1, 100000) i",
            [f"{session_id}-gone"],
        )
        cursor.execute("DELETE FROM assistant_messages WHERE session_id = %s", [f"{session_id}-gone"])
    _analyze(1_500, session_id)
    assert _mode() == ("partitioned kept" if messages_partitioned() else "kept")
    session = Session.create().for_session(session_id)
    for i in range(20):
        session.append_message(msg(f"m{i}"))
    for i in range(5):  # plans built and kept
        _buffers_of_an_append(session_id, f"warm{i}")
    # The least of three: a call that plans again (after an autovacuum ANALYZE, say) also
    # counts the catalog pages its planning reads.
    short = min(_buffers_of_an_append(session_id, f"at-20-{i}") for i in range(3))
    provider = DjangoSessionProvider(session_id)  # the session grows past what was planned for
    provider.append_messages_bulk([msg(f"later{i}") for i in range(2_000)])
    with _nested_plans() as plans:
        long = min(_buffers_of_an_append(session_id, f"at-2000-{i}") for i in range(3))
    # Reading the session would add hundreds.  On a partitioned table, planned per call from the
    # client with the planner's defaults, the newest rows were found by a bitmap scan and a sort
    # of the whole session (50 -> 154 buffers).
    assert long <= short * 1.1 + 10, (short, long)
    inserts = [plan for plan in plans if "Insert on assistant_messages" in plan]
    assert len(inserts) == 3
    # Pricing scans out inflates plan costs: without jit = off each append was compiled (170 ms).
    assert not any("JIT:" in plan for plan in inserts), inserts[0]
    if messages_partitioned():  # the kept plan probes children in the session's partition alone
        assert all("Subplans Removed: 15" in plan for plan in inserts), inserts[0]
    assert not any("Bitmap" in plan for plan in inserts), inserts[0]
    # The latest leaf: the newest rows are probed for children in index order, one at a time,
    # up to the first childless one (here the newest); sorted first, all eight were probed.
    probes = [re.findall(r" on \S+ c(?:_\d+)?\s+\(cost[^)]*\) \(actual [^)]*loops=(\d+)\)", plan) for plan in inserts]
    assert probes == [["1"]] * 3, inserts[0]
    assert Message.objects.get(session_id=session_id, message_id="at-2000-0").parent_id == "later1999"


def test_a_database_without_the_function_still_appends(session_id):
    """New code may run before ``migrate`` has installed the function (a deploy): the lock and
    the statement then go as one query from the client."""
    from agent_sessions.storage import postgres

    raw = connection.connection
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP FUNCTION {postgres_append.SIGNATURE}")  # rolled back with the test
        postgres._APPEND_MODE.pop(raw, None)
        session = Session.create().for_session(session_id)
        assert session.append_message(msg("a")) is True
        assert session.append_message(msg("b")) is True
        assert session.append_message(msg("a")) is False
        assert postgres._APPEND_MODE[raw] is not postgres._AppendMode.FUNCTION
        rows = Message.objects.filter(session_id=session_id).order_by("seq")
        assert [(m.message_id, m.parent_id, m.depth) for m in rows] == [("a", None, 1), ("b", "a", 2)]
        # The manager's stamp goes in the same query, after the insert whose row is returned.
        manager = SessionManager()
        registered = manager.create("fallback").id
        before = clock.now()
        manager.append(registered, msg("c"))
        record = SessionRecord.objects.get(pk=registered)
        assert (record.message_count, record.updated_at > before) == (1, True)
        assert manager.get_session(registered).get_latest_leaf()["id"] == "c"
    finally:
        postgres._APPEND_MODE.pop(raw, None)  # asked again on the next append


def _remembered() -> str | None:
    return _setting(postgres_plans.MODE_SETTING) or None


def _stamp() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + postgres_plans.STAMP)
        return cursor.fetchone()[0]


def _remember(value: str) -> None:
    with connection.cursor() as cursor:  # a session-level setting, taken back with the test's transaction
        cursor.execute("SELECT set_config(%s, %s, false)", [postgres_plans.MODE_SETTING, value])


def test_a_connection_remembers_kept_plans_for_the_table_it_found_them_on(session_id):
    """The mode is a catalog query; once plans are kept the connection keeps the answer, stamped
    with the table's oid and file, and asks again only for another table or file."""
    kept = "partitioned kept" if messages_partitioned() else "kept"
    _analyze(1_500, session_id)
    _remember("")
    session = Session.create().for_session(session_id)
    assert session.append_message(msg("a")) is True
    assert _remembered() == f"{_stamp()} {kept}"

    _analyze(0, session_id)  # stats of a small table: planned per call, never remembered ...
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM assistant_messages WHERE session_id <> %s", [session_id])
        cursor.execute("ANALYZE assistant_messages")
    assert _mode() == kept.replace("kept", "planned").replace("partitioned planned", "partitioned")
    _remember("")
    assert session.append_message(msg("b")) is True
    assert _remembered() is None

    def statements_run(mid: str) -> list[str]:
        with _nested_plans() as plans:
            assert session.append_message(msg(mid)) is True
        return [plan for plan in plans if "Insert on assistant_messages" in plan]

    # ... unless the connection remembers kept plans for this very table: then it trusts that.
    _remember(f"{_stamp()} {kept}")
    (static,) = statements_run("c")
    assert "$1" not in static
    assert "p_session_id" in static
    # Remembered for another table (or another file of it), the mode is asked again.
    oid, filenode = _stamp().split("/")
    _remember(f"{oid}/{int(filenode) + 1} {kept}")
    (dynamic,) = statements_run("d")
    assert "$1" in dynamic
    assert "p_session_id" not in dynamic
    assert _remembered() == f"{oid}/{int(filenode) + 1} {kept}"
    rows = Message.objects.filter(session_id=session_id).order_by("seq")
    assert [(m.message_id, m.parent_id) for m in rows] == [("a", None), ("b", "a"), ("c", "b"), ("d", "c")]


def test_the_stamp_changes_with_the_tables_file():
    """A truncated table is a new file: a connection asks again whether plans are kept there."""
    before = _stamp()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE assistant_messages CASCADE")  # rolled back with the test
    if messages_partitioned():  # the parent has no file; its partitions' are not seen (documented)
        assert _stamp() == before
        assert before.endswith("/0")
    else:
        assert _stamp() != before
        assert _stamp().split("/")[0] == before.split("/")[0]


def test_code_newer_than_the_database_sends_the_stamp_after_the_call(session_id, monkeypatch):
    """A database at migration 0023 (the function without ``p_stamp``): the call and the stamp go
    as one query, and the manager's append stamps and counts as it does after 0024."""
    from datetime import datetime

    from agent_sessions.storage import postgres

    far = datetime(2100, 1, 1, tzinfo=UTC)  # the manager's stamps, told from the database's

    raw = connection.connection
    try:
        with connection.cursor() as cursor:  # rolled back with the test
            for statement in postgres_append.install_sql(stamps=False):
                cursor.execute(statement)
        postgres._APPEND_MODE.pop(raw, None)
        manager = SessionManager()
        registered = manager.create("older").id
        monkeypatch.setattr(clock, "_last", far)
        manager.append(registered, msg("a"))
        manager.append(registered, msg("b"))
        assert postgres._APPEND_MODE[raw] is postgres._AppendMode.UNSTAMPED_FUNCTION
        record = SessionRecord.objects.get(pk=registered)
        assert (record.message_count, far < record.updated_at <= clock._last) == (2, True)
        assert manager.get_session(registered).get_latest_leaf()["id"] == "b"
    finally:
        postgres._APPEND_MODE.pop(raw, None)
