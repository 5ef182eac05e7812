"""Postgres: the recent window is read by one call of ``agent_sessions_recent`` (storage/postgres_reads.py).

The function runs the statement a client would send, its plan kept once the table is large
enough for the planner; both ways must return the same window, and a database without the
function (before ``migrate``) must still be read by the statement.
"""

from __future__ import annotations

import pytest
from django.db import connection

from agent_sessions import Session
from agent_sessions.storage import postgres, postgres_plans, postgres_reads, range_reads
from tests.conftest import msg
from tests.support.build import bulk_chain
from tests.support.pg import messages_partitioned

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db]

_WINDOWS = [
    {"max_content_bytes": 0, "min_recent_messages": 1},
    {"max_content_bytes": 0, "min_recent_messages": 5},
    {"max_content_bytes": 0, "min_recent_messages": 50},
    {"max_content_bytes": 2_000, "min_recent_messages": 1},
    {"max_content_bytes": 10**9, "min_recent_messages": 1},
]


def _sent(fn) -> list[str]:
    sent: list[str] = []

    def wrapper(execute, sql, params, many, context):
        sent.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        fn()
    return sent


def _by_statement(fn):
    """What ``fn`` returns when this connection's database is taken to have no function."""
    raw = connection.connection
    postgres._RECENT_CALL[raw] = None
    try:
        return fn()
    finally:
        postgres._RECENT_CALL.pop(raw, None)


def _mode() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + postgres_plans.MODE)
        return cursor.fetchone()[0]


def test_the_installed_function_is_the_one_the_code_generates():
    # A change to the recent window's statement (range_reads, walks) needs a migration that
    # installs the function again.
    with connection.cursor() as cursor:
        cursor.execute("SELECT prosrc FROM pg_proc WHERE proname = %s", [postgres_reads.NAME])
        assert [r[0] for r in cursor.fetchall()] == [postgres_reads.body()]


@pytest.mark.parametrize("rows_elsewhere", [0, 1_500], ids=["planned per call", "kept plans"])
def test_the_function_reads_the_window_the_statement_reads(session_id, rows_elsewhere):
    if rows_elsewhere:
        bulk_chain(f"{session_id}-elsewhere", rows_elsewhere)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE assistant_messages")
    kept = "kept" if rows_elsewhere else "planned"
    assert _mode() == (f"partitioned {kept}" if messages_partitioned() else kept).replace(
        "partitioned planned", "partitioned"
    )
    session = Session.create().for_session(session_id)
    assert _sent(lambda: session.get_recent_history(max_content_bytes=0))[0] == postgres_reads.CALL  # then the walk
    assert session.get_recent_history(max_content_bytes=0).messages == []
    for i in range(80):
        session.append_message(msg(f"m{i}"))
    for leaf in ("m40", "m79", None):  # one query: the function's rows settle it, no walk follows
        assert _sent(lambda leaf=leaf: session.get_recent_history(leaf, **_WINDOWS[1])) == [postgres_reads.CALL]
    session.append_message(msg("retry"), "m77")  # the newest rows are no longer one chain: walked
    leaves = [None, "m79", "m40", "m0", "retry", "unknown"]

    def reads():
        return [session.get_recent_history(leaf, **window) for leaf in leaves for window in _WINDOWS]

    for _ in range(2):  # the second time through, any kept plan is reused
        by_function = reads()
        assert by_function == _by_statement(reads)
    assert [m["id"] for m in session.get_recent_history("m79", **_WINDOWS[1]).messages] == [
        f"m{i}" for i in range(75, 80)
    ]
    assert [m["id"] for m in session.get_recent_history(**_WINDOWS[1]).messages] == [
        "m74", "m75", "m76", "m77", "retry"
    ]  # fmt: skip
    assert session.get_recent_history("unknown", **_WINDOWS[1]).messages == []
    # The overlay flag rides on the function's rows: a summary replaces what it covers.
    session.add_compaction("summary of m76-m78", "m76", "m78")
    window = session.get_recent_history("m79", **_WINDOWS[1])
    assert window == _by_statement(lambda: session.get_recent_history("m79", **_WINDOWS[1]))
    assert len(window.messages) == 3
    assert window.messages[-1]["id"] == "m79"
    sent = _sent(lambda: session.get_recent_history("m79", **_WINDOWS[1]))
    assert sent[0] == postgres_reads.CALL, sent


def _buffers_of_a_read(session_id: str) -> int:
    """Buffers the function's call reads (its statement's included) for the 50 newest messages."""
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + postgres_reads.CALL, [session_id, None, 58])
        plan = "\n".join(r[0] for r in cursor.fetchall())
    return int(plan.split("shared hit=")[1].split()[0].rstrip(","))


def test_kept_plans_read_the_window_by_index_at_any_length(session_id):
    """A plan kept while the session held 100 messages reads as many buffers at 5,100: the range
    scan stops at the window, whatever the session's length."""
    bulk_chain(f"{session_id}-elsewhere", 1_500)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE assistant_messages")
    session = Session.create().for_session(session_id)
    for i in range(100):
        session.append_message(msg(f"m{i}"))
    for _ in range(5):  # plans built and kept
        _buffers_of_a_read(session_id)
    short = min(_buffers_of_a_read(session_id) for _ in range(3))
    session.storage.append_messages_bulk([msg(f"later{i}") for i in range(5_000)])
    long = min(_buffers_of_a_read(session_id) for _ in range(3))
    assert long <= short * 1.1 + 10, (short, long)
    recent = session.get_recent_history(max_content_bytes=0, min_recent_messages=50)
    assert [m["id"] for m in recent.messages] == [f"later{i}" for i in range(4_950, 5_000)]


def test_a_database_without_the_function_reads_by_the_statement(session_id):
    """New code may run before ``migrate`` has installed the function (a deploy)."""
    raw = connection.connection
    try:
        with connection.cursor() as cursor:
            cursor.execute(postgres_reads.UNINSTALL[0])  # rolled back with the test
        postgres._RECENT_CALL.pop(raw, None)
        session = Session.create().for_session(session_id)
        for i in range(10):
            session.append_message(msg(f"m{i}"))
        window = {"max_content_bytes": 0, "min_recent_messages": 3}
        sent = _sent(lambda: session.get_recent_history(**window))
        assert sent == [range_reads.recent_statement("postgresql", postgres_reads.COLUMNS, latest=True)]
        assert postgres._RECENT_CALL[raw] is None
        assert [m["id"] for m in session.get_recent_history(**window).messages] == ["m7", "m8", "m9"]
        assert [m["id"] for m in session.get_recent_history("m5", **window).messages] == ["m3", "m4", "m5"]
    finally:
        postgres._RECENT_CALL.pop(raw, None)  # asked again on the next read


_RECENT_READ = (
    "import django, os, sys\n"
    "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'project.settings'); django.setup()\n"
    "from django.db import connection\n"
    "from agent_sessions import Session\nfrom agent_sessions.storage import postgres_reads\n"
    "session = Session.create().for_session('s')\n"
    "session.append_message({'id': sys.argv[1], 'role': 'user', 'parts': []})\n"
    "sent = []\n"
    "def wrapper(execute, sql, params, many, context):\n"
    "    sent.append('call' if sql == postgres_reads.CALL else 'statement')\n"
    "    return execute(sql, params, many, context)\n"
    "with connection.execute_wrapper(wrapper):\n"
    "    window = session.get_recent_history(max_content_bytes=0, min_recent_messages=2)\n"
    "print(sent[0], ','.join(m['id'] for m in window.messages))\n"
)


def test_migration_0025_installs_the_function_and_takes_it_back():
    from tests.test_keys import _run, _scratch_database

    with _scratch_database() as url:
        steps = []
        for i, target in enumerate(("0024", "0025", "0024")):
            _run(url, "manage.py", "migrate", "agent_sessions", target, "--noinput", "-v0")
            steps.append(_run(url, "-c", _RECENT_READ, f"m{i}").strip())
        assert steps == ["statement m0", "call m0,m1", "statement m1,m2"]
