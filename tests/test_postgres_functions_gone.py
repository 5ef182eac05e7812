"""Postgres: a process that remembered the library's functions (the append's mode and the read
functions, asked once per connection) keeps working when they are taken back under it, as an
operator's rollback to an older release does: the failed call ran nothing, so it is made again with what the
database has now.  Inside the caller's transaction the error stands, and the next call works."""

from __future__ import annotations

import pytest
from django.db import ProgrammingError, connection, transaction

from agent_sessions.storage import postgres
from tests.support.scratch import run_with, scratch_database

pytestmark = pytest.mark.postgres_only

# Run in a process of its own on a scratch database at the latest migration.  It appends and reads
# (so the connection remembers the functions), takes functions back from another process (argv[1]
# names what is left, as older releases installed it: _TAKE_BACK), then appends and reads in each
# way with the remembered state put back before each.
_ROLLBACK = """
import django, os, subprocess, sys
os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'project.settings'); django.setup()
from django.db import ProgrammingError, connection, transaction
from agent_sessions import Session, SessionManager
from agent_sessions.storage import postgres, range_reads

def msg(i):
    return {'id': f'm{i}', 'role': 'user', 'parts': [{'type': 'text', 'text': f'text {i}'}]}

manager = SessionManager()
sid = manager.create('rollback').id
session = Session.create().for_session(sid)
manager.append(sid, msg(0))
session.append_message(msg(1))
session.get_history()
session.get_recent_history(max_content_bytes=10**9)
session.get_recent_history(max_content_bytes=0, min_recent_messages=2)
raw = connection.connection
remembered = postgres._APPEND_MODE[raw], postgres._READ_CALLS[raw]
print('before', remembered[0].name, all(remembered[1]))
subprocess.run([sys.executable, '-c', sys.argv[2], sys.argv[1]], check=True)

def stale():
    assert connection.connection is raw
    postgres._APPEND_MODE[raw], postgres._READ_CALLS[raw] = remembered

def ids(messages):
    return ','.join(m['id'] for m in messages)

stale()
session.append_message(msg(2))
stale()
manager.append(sid, msg(3))
stale()
manager.append_all(sid, [msg(4), msg(5)])
print('appended', postgres._APPEND_MODE[raw].name)
stale()
history = session.get_history()
stale()
range_reads.WINDOW_HINTS.clear()  # a first read of the window: the window function's call
window = session.get_recent_history(max_content_bytes=10**9)
stale()
last = session.get_recent_history(max_content_bytes=0, min_recent_messages=2)
print('read', ids(history), ids(window.messages), ids(last.messages))
stale()
try:
    with transaction.atomic():
        session.append_message(msg(6))
    print('in transaction: stored')
except ProgrammingError:
    print('in transaction: refused', raw in postgres._APPEND_MODE, raw in postgres._READ_CALLS)
session.append_message(msg(6))
print('then', ids(session.get_history()), manager.get_message_count(sid))
"""


# What an older release's schema has, made from today's: the statements run in another process.
_TAKE_BACK = """
import django, os, sys
os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'project.settings'); django.setup()
from django.db import connection
from agent_sessions.storage import postgres_append, postgres_reads
reads = [f'DROP FUNCTION {read.signature}' for read in (postgres_reads.RECENT, postgres_reads.PATH)]
window = [f'DROP FUNCTION {postgres_reads.WINDOW.signature}']
statements = {
    'none': [f'DROP FUNCTION {postgres_append.SIGNATURE}', *reads, *window],
    'unstamped': [*postgres_append.install_sql(stamps=False), *reads, *window],
    'no window': window,
}[sys.argv[1]]
with connection.cursor() as cursor:
    for statement in statements:
        cursor.execute(statement)
"""


@pytest.mark.parametrize(
    ("target", "mode"),
    [
        ("none", "STATEMENT"),  # no function at all
        ("unstamped", "UNSTAMPED_FUNCTION"),  # the append without the stamp argument, no read functions
        ("no window", "FUNCTION"),  # only the window function gone
    ],
)
def test_functions_taken_back_under_a_running_process_are_asked_for_again(target, mode):
    with scratch_database() as url:
        run_with(url, "manage.py", "migrate", "--noinput", "-v0")
        lines = run_with(url, "-c", _ROLLBACK, target, _TAKE_BACK).strip().splitlines()
    history = "m0,m1,m2,m3,m4,m5"
    assert lines == [
        "before FUNCTION True",
        f"appended {mode}",
        f"read {history} {history} m4,m5",
        "in transaction: stored" if target == "no window" else "in transaction: refused False False",
        f"then {history},m6 7",
    ]


@pytest.mark.django_db
def test_only_the_librarys_own_missing_functions_are_excused():
    connection.ensure_connection()
    raw = connection.connection
    for name, ours in (("agent_sessions_taken_back", True), ("some_other_function", False)):
        postgres._APPEND_MODE[raw] = postgres._AppendMode.FUNCTION
        runs = []

        def run(name: str = name, runs: list = runs) -> None:
            runs.append(name)
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT {name}()")

        with pytest.raises(ProgrammingError), transaction.atomic():
            postgres.retry_if_functions_gone(connection, run)
        assert runs == [name]  # inside a transaction: not run again
        assert (raw in postgres._APPEND_MODE) is not ours  # ours: forgotten, asked again next time
    postgres._APPEND_MODE.pop(raw, None)
