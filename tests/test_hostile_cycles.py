"""Parent cycles a foreign writer stored: every read answers in bounded time (and its query stops),
and no write of the library stores or copies a cycle.

The rows are written by raw SQL, as another program (the seed's TypeScript providers, a script,
a hand-run UPDATE) would.  Each read runs under a watchdog that cancels the database query after
``LIMIT`` seconds, so a read that would go round a cycle fails here instead of running on.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from agent_sessions import InvalidMessage, MessageCycle, SessionManager
from agent_sessions.models import Message, SessionRecord
from tests.conftest import msg

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(120)]

LIMIT = 5.0
"""Seconds any one read may take here (each answers in milliseconds)."""

LONG = 3_000
"""Rows of the long chain that closes into a cycle."""


def foreign(session_id: str, rows: list[tuple[str, str | None]], *, depth: bool = False) -> None:
    """Insert ``(id, parent)`` rows as a foreign writer: no totals (or made-up depths), any parent."""
    with connection.cursor() as cursor:
        for start in range(0, len(rows), 500):
            chunk = rows[start : start + 500]
            values = ", ".join(["(%s, %s, %s, 'user', %s, %s, %s)"] * len(chunk))
            params: list[Any] = []
            for i, (mid, parent) in enumerate(chunk):
                params += [
                    mid,
                    session_id,
                    parent,
                    json.dumps(msg(mid)),
                    f"{mid} text",
                    start + i + 1 if depth else None,
                ]
            cursor.execute(
                "INSERT INTO assistant_messages (id, session_id, parent_id, role, content, text_content, depth) "
                f"VALUES {values}",
                params,
            )


@contextmanager
def watchdog(seconds: float = LIMIT) -> Iterator[None]:
    """Fail if the block takes longer than ``seconds``; cancel the database query it is running then
    (SQLite: interrupt the connection; Postgres: ``pg_cancel_backend`` from another connection)."""
    connection.ensure_connection()
    raw = connection.connection
    pid = None
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pid = cursor.fetchone()[0]
    fired = threading.Event()

    def cancel() -> None:
        fired.set()
        if pid is None:
            raw.interrupt()
        else:
            import psycopg

            db = settings.DATABASES["default"]
            with psycopg.connect(
                dbname=connection.settings_dict["NAME"], host=db["HOST"], port=db["PORT"], user=db["USER"],
                autocommit=True,
            ) as other:  # fmt: skip
                other.execute("SELECT pg_cancel_backend(%s)", [pid])

    timer = threading.Timer(seconds, cancel)
    started = time.monotonic()
    timer.start()
    try:
        yield
    except Exception:
        if fired.is_set():
            pytest.fail(f"still running after {seconds} s: the query was cancelled")
        raise
    finally:
        timer.cancel()
    elapsed = time.monotonic() - started
    assert not fired.is_set(), f"took {elapsed:.1f} s"
    assert elapsed < seconds, f"took {elapsed:.1f} s"


def bounded(fn: Callable[[], Any]) -> Any:
    with watchdog():
        return fn()


def no_query_left_running() -> None:
    """Postgres: no other backend of this test database is still running a statement."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND state = 'active'"
        )
        assert cursor.fetchone()[0] == 0


def ids(messages) -> list[str]:
    return [m["id"] for m in messages]


# The stored shapes: rows (id, parent) in insertion order; the leaf above the cycle; the path a
# read returns from that leaf (root first: the row whose parent is already on the path, down to it).
CHAIN = [f"c{i}" for i in range(LONG)]
SHAPES = {
    "two": ([("a", "b"), ("b", "a"), ("leaf", "b")], "leaf", ["a", "b", "leaf"]),
    "self": ([("s", "s"), ("leaf", "s")], "leaf", ["s", "leaf"]),
    "above": ([("r", None), ("x", "z"), ("y", "x"), ("z", "y"), ("leaf", "z")], "leaf", ["x", "y", "z", "leaf"]),
    "long": (
        [("c0", CHAIN[-1]), *((CHAIN[i], CHAIN[i - 1]) for i in range(1, LONG)), ("leaf", CHAIN[-1])],
        "leaf",
        [*CHAIN, "leaf"],
    ),
}


@pytest.fixture(params=sorted(SHAPES))
def shape(request, session, session_id):
    rows, leaf, path = SHAPES[request.param]
    foreign(session_id, rows, depth=request.param == "two")  # made-up depths: the range reads try first
    return leaf, path


def test_every_read_answers_with_the_path_up_to_the_cycle(session, session_id, shape, caplog):
    leaf, path = shape
    storage = session.storage
    assert ids(bounded(session.get_history)) == path
    assert ids(bounded(lambda: session.get_history(leaf))) == path
    assert "own ancestor" in caplog.text  # the read logs the cycle it met
    assert ids(bounded(lambda: storage.get_raw_path(leaf))) == path
    assert bounded(session.get_latest_leaf)["id"] == leaf
    assert bounded(lambda: session.get_path_length(leaf)) == len(path)
    assert bounded(session.get_path_length) == len(path)
    assert [r.id for r in bounded(session.get_history_row_stats)] == path
    recent = bounded(lambda: session.get_recent_history(max_content_bytes=10**9, min_recent_messages=2))
    assert ids(recent.messages) == path
    assert not recent.truncated
    recent = bounded(lambda: session.get_recent_history(leaf, max_content_bytes=0, min_recent_messages=2))
    assert ids(recent.messages) == path[-2:]
    assert recent.truncated == (len(path) > 2)
    queried = bounded(
        lambda: list(Message.objects.for_session(session_id).path(leaf).values_list("message_id", flat=True))
    )
    assert queried == path
    bounded(storage.visible_history_tokens)  # no totals on these rows: None, "read the history"
    # A row on the cycle as the leaf: the path from it, round once.
    on_cycle = path[-2]
    below = bounded(lambda: session.get_history(on_cycle))
    assert len(below) == len(path) - 1
    assert below[-1]["id"] == on_cycle
    assert len(set(ids(below))) == len(below)
    no_query_left_running()


def test_a_cycle_with_no_leaf_reads_as_empty(session, session_id):
    foreign(session_id, [("a", "b"), ("b", "a")])
    assert bounded(session.get_history) == []
    assert bounded(session.get_latest_leaf) is None
    assert bounded(session.get_path_length) == 0
    assert ids(bounded(lambda: session.get_history("b"))) == ["a", "b"]
    assert ids(bounded(lambda: session.get_recent_history("b", max_content_bytes=10**6).messages)) == ["a", "b"]
    no_query_left_running()


def test_a_path_through_a_cycle_with_overlays_answers(session, session_id):
    foreign(session_id, [("a", "b"), ("b", "a"), ("leaf", "b")], depth=True)
    with connection.cursor() as cursor:  # totals as the library would have stored them
        cursor.execute(
            "UPDATE assistant_messages SET tokens = 5, path_tokens = 5 * depth WHERE session_id = %s", [session_id]
        )
    session.add_compaction("a and b", "a", "b")
    history = bounded(session.get_history)
    assert ids(history)[-1] == "leaf"
    assert bounded(session.storage.visible_history_tokens) is not None
    no_query_left_running()


def test_fork_of_a_path_through_a_cycle_is_refused_and_writes_nothing(db):
    manager = SessionManager()
    session_id = manager.create("cyclic").id
    foreign(session_id, [("a", "b"), ("b", "a"), ("leaf", "b")])
    before = Message.objects.count(), SessionRecord.objects.count()
    with watchdog(), pytest.raises(MessageCycle, match="'a'|'b'"):
        manager.fork(session_id, "leaf", "copy")
    assert (Message.objects.count(), SessionRecord.objects.count()) == before
    # A path below the cycle's reach still forks.
    foreign(session_id, [("r", None), ("r2", "r")])
    fork = manager.fork(session_id, "r2", "fine")
    assert ids(manager.get_history(fork.id)) == list(manager.fork_mapping(fork.id).values())
    no_query_left_running()


def test_update_and_delete_of_a_row_on_a_cycle_terminate(session, session_id):
    foreign(session_id, [("a", "b"), ("b", "a"), ("leaf", "b")], depth=True)
    assert bounded(lambda: session.update_message(msg("a", text="edited"))) is True
    assert bounded(lambda: session.get_message("a"))["parts"][0]["text"] == "edited"
    assert bounded(lambda: session.delete_messages(["b"])) == 1
    assert ids(bounded(lambda: session.get_history("leaf"))) == ["leaf"]  # its parent is gone: a root now
    assert ids(bounded(lambda: session.get_history("a"))) == ["a"]


# ── writes refuse to close a cycle ──────────────────────────────────────────


def test_a_self_parent_on_append_is_a_parent_not_in_the_session(session):
    """A new message naming itself as parent names a message the session does not hold yet: it becomes a
    root (as any parent not in the session does), never a stored self-parent."""
    session.append_message(msg("a"))
    assert session.append_message(msg("x"), "x") is True
    assert Message.objects.get(session_id=session.session_id, message_id="x").parent_id is None
    session.storage.append_messages_bulk([msg("y"), msg("z")], "y")
    rows = dict(Message.objects.filter(session_id=session.session_id).values_list("message_id", "parent_id"))
    assert (rows["y"], rows["z"]) == (None, "y")
    assert ids(bounded(lambda: session.get_history("z"))) == ["y", "z"]


def test_an_append_that_would_close_a_cycle_is_refused_and_writes_nothing(session, session_id):
    # Rows of a foreign writer under a parent it never stored: storing that parent below them
    # would close the cycle ghost → x2 → x1 → ghost.
    foreign(session_id, [("x1", "ghost"), ("x2", "x1")])
    before = Message.objects.filter(session_id=session_id).count()
    with pytest.raises(MessageCycle, match="'ghost'"):
        session.append_message(msg("ghost"), "x2")
    with pytest.raises(MessageCycle, match="'ghost'"):
        session.append_message(msg("ghost"))  # the latest leaf is x2
    with pytest.raises(MessageCycle, match="'ghost'"):
        session.storage.append_messages_bulk([msg("d"), msg("ghost"), msg("e")], "x2")
    assert Message.objects.filter(session_id=session_id).count() == before
    # Stored as a root it would only adopt them: refused too, but not as a cycle.
    with pytest.raises(InvalidMessage) as refused:
        session.append_message(msg("ghost"), None)
    assert not isinstance(refused.value, MessageCycle)
    assert Message.objects.filter(session_id=session_id).count() == before
    assert ids(session.get_history("x2")) == ["x1", "x2"]


def test_the_common_append_sends_no_extra_statement(session):
    from tests.support.queries import sent

    session.append_message(msg("a"))
    sql = sent(lambda: session.storage.append_message(msg("b")))
    assert len(sql) == 1, sql


# ── the API and the admin ───────────────────────────────────────────────────


def test_api_history_of_a_cycle_answers_without_a_server_error(api):
    sid = api.new_session("cyclic")
    foreign(sid, [("a", "b"), ("b", "a"), ("leaf", "b")])
    with watchdog():
        response = api.get(f"/sessions/{sid}/history")
    assert response.status_code == 200, response.content
    assert [m["id"] for m in response.json()["messages"]] == ["a", "b", "leaf"]
    with watchdog():
        response = api.get(f"/sessions/{sid}/history", leaf_id="a")
    assert response.status_code < 500, response.content
    with watchdog():
        response = api.post(f"/sessions/{sid}/fork", {"at_message_id": "leaf", "name": "copy"})
    assert 400 <= response.status_code < 500, response.content
    no_query_left_running()


@pytest.mark.parametrize("name", ["two", "self", "above", "only"])
def test_admin_tree_page_shows_the_session_with_the_cycle_marked(admin_client, session_id, name):
    rows = SHAPES[name][0] if name in SHAPES else [("a", "b"), ("b", "a")]  # only: no root, no leaf
    foreign(session_id, rows)
    on_cycle = {"two": ["a", "b"], "self": ["s"], "above": ["x", "y", "z"], "only": ["a", "b"]}[name]
    with watchdog():
        response = admin_client.get(f"/admin/agent_sessions/sessionrecord/{session_id}/tree/")
    assert response.status_code == 200
    html = response.content.decode()
    assert f'data-cycle="{" ".join(on_cycle)}"' in html
    assert all(f"<code>{mid}</code>" in html for mid in on_cycle)
    no_query_left_running()
