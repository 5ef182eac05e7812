"""Postgres: the range reads are one call each of ``agent_sessions_recent`` (the recent window),
``agent_sessions_path`` (the path) and, for a budgeted window's first read, ``agent_sessions_window``
(storage/postgres_reads.py).

Each function runs the statement a client would send, its plan kept once the table is large
enough for the planner; both ways must return the same rows, and a database without the
functions (before ``migrate``) must still be read by the statements.
"""

from __future__ import annotations

import itertools

import pytest
from django.db import connection

from agent_sessions import Session
from agent_sessions.storage import postgres, postgres_plans, postgres_reads, range_reads
from tests.conftest import msg
from tests.support.pg import analyze_with_rows_elsewhere, messages_partitioned
from tests.support.queries import sent as _sent
from tests.support.queries import walked as _walked

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db]

_WINDOWS = [
    {"max_content_bytes": 0, "min_recent_messages": 1},
    {"max_content_bytes": 0, "min_recent_messages": 5},
    {"max_content_bytes": 0, "min_recent_messages": 50},
    {"max_content_bytes": 2_000, "min_recent_messages": 1},
    {"max_content_bytes": 10**9, "min_recent_messages": 1},
]


def _by_statement(fn):
    """What ``fn`` returns when this connection's database is taken to have no function."""
    raw = connection.connection
    postgres._READ_CALLS[raw] = range_reads.NO_CALLS
    try:
        return fn()
    finally:
        postgres._READ_CALLS.pop(raw, None)


def _mode() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + postgres_plans.MODE)
        return cursor.fetchone()[0]


_FUNCTIONS = (postgres_reads.RECENT, postgres_reads.PATH, postgres_reads.WINDOW)


@pytest.mark.parametrize("read", _FUNCTIONS, ids=lambda read: read.name)
def test_the_installed_function_is_the_one_the_code_generates(read):
    # A change to a range read's statement (range_reads, walks) needs a migration that installs
    # its function again.
    with connection.cursor() as cursor:
        cursor.execute("SELECT prosrc FROM pg_proc WHERE proname = %s", [read.name])
        assert [r[0] for r in cursor.fetchall()] == [read.body()]


@pytest.mark.parametrize("rows_elsewhere", [0, 1_500], ids=["planned per call", "kept plans"])
def test_the_function_reads_the_window_the_statement_reads(session_id, rows_elsewhere):
    analyze_with_rows_elsewhere(session_id, rows_elsewhere)
    kept = "kept" if rows_elsewhere else "planned"
    assert _mode() == (f"partitioned {kept}" if messages_partitioned() else kept).replace(
        "partitioned planned", "partitioned"
    )
    session = Session.create().for_session(session_id)
    assert (
        _sent(lambda: session.get_recent_history(max_content_bytes=0))[0] == postgres_reads.RECENT.call
    )  # then the walk
    assert session.get_recent_history(max_content_bytes=0).messages == []
    for i in range(80):
        session.append_message(msg(f"m{i}"))
    for leaf in ("m40", "m79", None):  # one query: the function's rows settle it, no walk follows
        assert _sent(lambda leaf=leaf: session.get_recent_history(leaf, **_WINDOWS[1])) == [postgres_reads.RECENT.call]
    session.append_message(msg("retry"), "m77")  # the newest rows are no longer one chain: walked
    leaves = [None, "m79", "m40", "m0", "retry", "unknown"]

    def reads():
        range_reads.WINDOW_HINTS.clear()  # budgeted windows read first: by agent_sessions_window, or read on
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
    assert sent[0] == postgres_reads.RECENT.call, sent


@pytest.mark.parametrize("rows_elsewhere", [0, 1_500], ids=["planned per call", "kept plans"])
def test_a_budgeted_window_is_read_first_in_one_call(session_id, rows_elsewhere):
    """Without a hint of its size (a process's first read of it) the server finds where the window
    stops: one call, the walk's rows; the next read of it is the hinted range read."""
    analyze_with_rows_elsewhere(session_id, rows_elsewhere)
    session = Session.create().for_session(session_id)
    for i in range(200):
        session.append_message(msg(f"m{i}", text="x" * (10 + (i * 37) % 400)))  # sizes that vary
    windows = [(1, 1), (2_000, 1), (2_000, 30), (20_000, 5), (10**9, 1)]
    for (budget, minimum), leaf in itertools.product(windows, [None, "m150", "m3"]):
        window = {"max_content_bytes": budget, "min_recent_messages": minimum}
        range_reads.WINDOW_HINTS.clear()
        sent = _sent(lambda leaf=leaf, window=window: session.get_recent_history(leaf, **window))
        assert sent == [postgres_reads.WINDOW.call], (budget, minimum, leaf, sent)
        range_reads.WINDOW_HINTS.clear()
        first = session.get_recent_history(leaf, **window)
        assert first == _walked(session, "get_recent_history", leaf, **window), (budget, minimum, leaf)
        assert _sent(lambda leaf=leaf, window=window: session.get_recent_history(leaf, **window)) == [
            postgres_reads.RECENT.call
        ]
        assert session.get_recent_history(leaf, **window) == first
    assert len(session.get_recent_history(max_content_bytes=20_000).messages) > 50
    # A branch among the newest rows: the sized rows are not the chain, and the walk answers.
    session.append_message(msg("retry"), "m197")
    range_reads.WINDOW_HINTS.clear()
    sent = _sent(lambda: session.get_recent_history(max_content_bytes=2_000))
    assert sent[0] == postgres_reads.WINDOW.call
    assert "RECURSIVE" in sent[-1], sent
    range_reads.WINDOW_HINTS.clear()
    recent = session.get_recent_history(max_content_bytes=2_000)
    assert recent == _walked(session, "get_recent_history", max_content_bytes=2_000)
    assert [m["id"] for m in recent.messages][-2:] == ["m197", "retry"]


@pytest.mark.parametrize("rows_elsewhere", [0, 1_500], ids=["planned per call", "kept plans"])
def test_a_long_first_window_reads_the_rest_in_bulk_and_on_when_that_falls_short(session_id, rows_elsewhere):
    """Past ``ONE_BY_ONE`` rows the function reads the rest as the sizes so far say the budget holds;
    older rows that keep growing make that fall short, and the caller reads on (no walk)."""
    analyze_with_rows_elsewhere(session_id, rows_elsewhere)
    session = Session.create().for_session(session_id)
    for i in range(300):
        session.append_message(msg(f"m{i}", text="x" * int(4_000 * 0.97 ** (299 - i))))
    window = {"max_content_bytes": 145_000, "min_recent_messages": 1}  # 64 rows hold 114 kB of it
    sent = _sent(lambda: session.get_recent_history(**window))
    assert sent[0] == postgres_reads.WINDOW.call
    assert set(sent[1:]) == {postgres_reads.RECENT.call}, sent  # read on, never walked
    range_reads.WINDOW_HINTS.clear()
    recent = session.get_recent_history(**window)
    assert recent == _walked(session, "get_recent_history", **window)
    assert postgres_reads.ONE_BY_ONE < len(recent.messages) < 300
    assert recent.truncated
    # Sizes that hardly vary: the bulk read holds the whole window, one call in all.
    for i in range(300, 600):
        session.append_message(msg(f"m{i}", text="y" * 500))
    range_reads.WINDOW_HINTS.clear()
    assert _sent(lambda: session.get_recent_history(**window)) == [postgres_reads.WINDOW.call]
    range_reads.WINDOW_HINTS.clear()
    assert session.get_recent_history(**window) == _walked(session, "get_recent_history", **window)


@pytest.mark.parametrize("rows_elsewhere", [0, 1_500], ids=["planned per call", "kept plans"])
def test_the_function_reads_the_path_the_statement_reads(session_id, rows_elsewhere):
    analyze_with_rows_elsewhere(session_id, rows_elsewhere)
    session = Session.create().for_session(session_id)
    assert session.get_history() == []
    for i in range(30):
        session.append_message(msg(f"m{i}"))
    for leaf in ("m29", None):  # one query: the function's rows settle it, no walk follows
        assert _sent(lambda leaf=leaf: session.get_history(leaf)) == [postgres_reads.PATH.call]
        assert _sent(lambda leaf=leaf: session.storage.get_raw_path(leaf)) == [postgres_reads.PATH.call]
    # The session has its registry row (made with its first append), whose count of 30 rules the range
    # out for a leaf 11 deep (more rows than depth + depth / 8 + 8): the function answers no rows, the
    # walk follows.
    assert _sent(lambda: session.get_history("m10"))[0] == postgres_reads.PATH.call
    assert len(_sent(lambda: session.get_history("m10"))) == 2
    assert [m["id"] for m in session.get_history("m10")] == [f"m{i}" for i in range(11)]
    session.append_message(msg("retry"), "m27")  # a branch near the end: still read as a range
    for i in range(6):
        session.append_message(msg(f"b{i}"), "m3" if i == 0 else f"b{i - 1}")  # one far back: walked
    leaves = [None, "m29", "m10", "m0", "retry", "b5", "unknown"]

    def reads():
        return [(session.get_history(leaf), session.storage.get_raw_path(leaf)) for leaf in leaves]

    for _ in range(2):  # the second time through, any kept plan is reused
        assert reads() == _by_statement(reads)
    assert [m["id"] for m in session.get_history("retry")] == [*(f"m{i}" for i in range(28)), "retry"]
    assert [m["id"] for m in session.get_history()] == ["m0", "m1", "m2", "m3", *(f"b{i}" for i in range(6))]
    assert session.get_history("unknown") == []
    # The overlay flag rides on the function's rows: a summary replaces what it covers.
    session.add_compaction("summary of m1-m8", "m1", "m8")
    history = session.get_history("m29")
    assert history == _by_statement(lambda: session.get_history("m29"))
    assert [m["id"] for m in history][:1] + [m["id"] for m in history][2:] == ["m0", *(f"m{i}" for i in range(9, 30))]
    assert history[1]["id"].startswith("compaction_")
    assert _sent(lambda: session.get_history("m29"))[0] == postgres_reads.PATH.call


def _buffers_of_a_read(session_id: str, read=postgres_reads.RECENT, args=(58,)) -> int:
    """Buffers the function's call reads (its statements' included): the 50 newest messages, unless
    told otherwise."""
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + read.call, [session_id, None, *args])
        plan = "\n".join(r[0] for r in cursor.fetchall())
    return int(plan.split("shared hit=")[1].split()[0].rstrip(","))


def test_kept_plans_read_the_window_by_index_at_any_length(session_id):
    """A plan kept while the session held 100 messages reads as many buffers at 5,100: the range
    scan stops at the window, whatever the session's length."""
    analyze_with_rows_elsewhere(session_id, 1_500)
    session = Session.create().for_session(session_id)
    for i in range(100):
        session.append_message(msg(f"m{i}"))
    # The first read of a 2 kB window, its size found by the server: its loop stops there too.
    sized = {"read": postgres_reads.WINDOW, "args": (10_001, 1, 2_000)}
    for _ in range(5):  # plans built and kept
        _buffers_of_a_read(session_id)
        _buffers_of_a_read(session_id, **sized)
    short = min(_buffers_of_a_read(session_id) for _ in range(3))
    short_sized = min(_buffers_of_a_read(session_id, **sized) for _ in range(3))
    session.storage.append_messages_bulk([msg(f"later{i}") for i in range(5_000)])
    long = min(_buffers_of_a_read(session_id) for _ in range(3))
    assert long <= short * 1.1 + 10, (short, long)
    long_sized = min(_buffers_of_a_read(session_id, **sized) for _ in range(3))
    assert long_sized <= short_sized * 1.1 + 10, (short_sized, long_sized)
    recent = session.get_recent_history(max_content_bytes=0, min_recent_messages=50)
    assert [m["id"] for m in recent.messages] == [f"later{i}" for i in range(4_950, 5_000)]


def test_a_database_without_the_functions_reads_by_the_statements(session_id):
    """New code may run before ``migrate`` has installed the functions (a deploy)."""
    raw = connection.connection
    try:
        with connection.cursor() as cursor:  # rolled back with the test
            for read in _FUNCTIONS:
                cursor.execute(f"DROP FUNCTION {read.signature}")
        postgres._READ_CALLS.pop(raw, None)
        session = Session.create().for_session(session_id)
        for i in range(10):
            session.append_message(msg(f"m{i}"))
        window = {"max_content_bytes": 0, "min_recent_messages": 3}
        sent = _sent(lambda: session.get_recent_history(**window))
        assert sent == [range_reads.recent_statement("postgresql", postgres_reads.RECENT_COLUMNS, latest=True)]
        assert postgres._READ_CALLS[raw] == range_reads.NO_CALLS
        assert [m["id"] for m in session.get_recent_history(**window).messages] == ["m7", "m8", "m9"]
        assert [m["id"] for m in session.get_recent_history("m5", **window).messages] == ["m3", "m4", "m5"]
        budgeted = _sent(lambda: session.get_recent_history(max_content_bytes=10**9))  # a first read reads on
        assert len(budgeted) == 2, budgeted
        sent = _sent(lambda: session.get_history("m5"))
        assert sent == [range_reads.path_statement(postgres_reads.PATH_COLUMNS, latest=False)]
        assert [m["id"] for m in session.get_history("m5")] == [f"m{i}" for i in range(6)]
        assert [m["id"] for m in session.get_history()] == [f"m{i}" for i in range(10)]
    finally:
        postgres._READ_CALLS.pop(raw, None)  # asked again on the next read


_READS = (
    "import django, os, sys\n"
    "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'project.settings'); django.setup()\n"
    "from django.db import connection\n"
    "from agent_sessions import Session\nfrom agent_sessions.storage import postgres_reads\n"
    "session = Session.create().for_session('s')\n"
    "session.append_message({'id': sys.argv[1], 'role': 'user', 'parts': []})\n"
    "sent = []\n"
    "def wrapper(execute, sql, params, many, context):\n"
    "    calls = (postgres_reads.RECENT.call, postgres_reads.PATH.call)\n"
    "    sent.append('call' if sql in calls else 'statement')\n"
    "    return execute(sql, params, many, context)\n"
    "with connection.execute_wrapper(wrapper):\n"
    "    window = session.get_recent_history(max_content_bytes=0, min_recent_messages=2)\n"
    "    history = session.get_history()\n"
    "print(sent[0], sent[1], ','.join(m['id'] for m in window.messages), ','.join(m['id'] for m in history))\n"
)
