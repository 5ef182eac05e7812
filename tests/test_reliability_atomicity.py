"""Nothing half-written: a failure in the middle of a write leaves no trace.

A temporary trigger created inside each test raises part-way through the operation
(after the message row and its search-index entry are written, or on the Nth row of a
batch).  Afterwards the database must look exactly as before: no row, no search hit, an
FTS5 index that passes its own integrity check (SQLite), and the next write works.
On Postgres a second variant kills the connection itself mid-transaction.
"""

from __future__ import annotations

import contextlib
import json

import pytest
from django.db import DatabaseError, connection

from agent_sessions import Session, create_compact_function
from agent_sessions.manager import SessionManager
from agent_sessions.models import Compaction, ContextBlockRecord, Message, SessionRecord
from tests.conftest import msg

pytestmark = pytest.mark.django_db(transaction=True)


@contextlib.contextmanager
def failing_trigger(table: str, event: str, condition: str, *, when: str = "AFTER", action: str = "raise"):
    """A trigger on ``table`` that fails ``event`` rows matching ``condition`` (SQL over NEW./OLD.).

    ``action="raise"`` raises an error; ``action="index-then-raise"`` (SQLite) first writes
    an entry into the message FTS index, so the failure comes after the index write;
    ``action="kill"`` (Postgres) terminates the connection from inside the transaction.
    """
    name = f"test_boom_{table}_{event}".lower()
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cond = condition.replace("NEW.", "new.").replace("OLD.", "old.")
            body = "SELECT RAISE(ABORT, 'boom: injected failure');"
            if action == "index-then-raise":
                body = "INSERT INTO assistant_fts(rowid, text_content) VALUES (new.seq, new.text_content); " + body
            cursor.execute(f"CREATE TRIGGER {name} {when} {event} ON {table} WHEN {cond} BEGIN {body} END")
        else:
            body = (
                "PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(5);"
                if action == "kill"
                else "RAISE EXCEPTION 'boom: injected failure';"
            )
            ret = "OLD" if event == "DELETE" else "NEW"
            cursor.execute(
                f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                f"IF {condition} THEN {body} END IF; RETURN {ret}; END $$"
            )
            cursor.execute(f"CREATE TRIGGER {name} {when} {event} ON {table} FOR EACH ROW EXECUTE FUNCTION {name}()")
    try:
        yield
    finally:
        connection.close()  # a killed connection is replaced; a live one simply reconnects
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TRIGGER IF EXISTS {name}" + ("" if connection.vendor == "sqlite" else f" ON {table}"))
            if connection.vendor != "sqlite":
                cursor.execute(f"DROP FUNCTION IF EXISTS {name}()")


def snapshot(*session_ids: str) -> tuple:
    """Everything stored for these sessions (rows, overlays, blocks, registry, index hits)."""
    messages = sorted(
        Message.objects.filter(session_id__in=session_ids).values_list(
            "session_id", "message_id", "parent_id", "content", "text_content", "depth", "path_tokens"
        )
    )
    overlays = sorted(Compaction.objects.filter(session_id__in=session_ids).values_list("session_id", "summary"))
    records = sorted(SessionRecord.objects.values_list("id", "name", "end_reason", "parent_session_id"))
    blocks = sorted(ContextBlockRecord.objects.values_list("label", "content"))
    return messages, overlays, records, blocks


def assert_index_consistent() -> None:
    """The FTS5 external-content index matches its table exactly (SQLite); Postgres keeps
    ``content_tsv`` as a generated column of the same row, so it cannot drift."""
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO assistant_fts(assistant_fts) VALUES ('integrity-check')")
            cursor.execute("INSERT INTO assistant_fts(assistant_fts, rank) VALUES ('integrity-check', 1)")


def search_ids(query: str) -> list[tuple[str, str]]:
    return sorted((r.session_id, r.id) for r in SessionManager().search(query, limit=100))


@pytest.fixture
def manager():
    return SessionManager()


@pytest.fixture
def chat(manager):
    info = manager.create("chat")
    for i in range(5):
        manager.append(info.id, msg(f"m{i}", "user" if i % 2 == 0 else "assistant", f"alpha message {i}"))
    return info.id


def test_append_failing_after_the_index_write_leaves_neither(manager, chat):
    before = snapshot(chat)
    action = "index-then-raise" if connection.vendor == "sqlite" else "raise"
    with failing_trigger("assistant_messages", "INSERT", "NEW.text_content LIKE '%kaboom%'", action=action):
        with pytest.raises(DatabaseError):
            manager.append(chat, msg("bad", text="kaboom zebra"))
        assert snapshot(chat) == before
        assert search_ids("zebra") == []
        assert search_ids("kaboom") == []
        assert_index_consistent()
        assert manager.append(chat, msg("next", text="zebra ok")) == "next"  # the next write works
    assert [m["id"] for m in manager.get_history(chat)] == ["m0", "m1", "m2", "m3", "m4", "next"]
    assert search_ids("zebra") == [(chat, "next")]
    assert_index_consistent()


def test_append_all_failing_on_the_third_row_stores_none(manager, chat):
    before = snapshot(chat)
    chain = [msg(f"c{i}", text=f"batch omega {i}" + (" kaboom" if i == 2 else "")) for i in range(5)]
    with (
        failing_trigger("assistant_messages", "INSERT", "NEW.text_content LIKE '%kaboom%'"),
        pytest.raises(DatabaseError),
    ):
        manager.append_all(chat, chain)
    assert snapshot(chat) == before
    assert search_ids("omega") == []
    assert_index_consistent()
    assert manager.append_all(chat, [msg(f"c{i}", text=f"batch omega {i}") for i in range(5)]) == "c4"
    assert len(search_ids("omega")) == 5


def test_fork_failing_mid_copy_creates_nothing(manager, chat):
    manager.add_compaction(chat, "early summary", "m1", "m2")
    before = snapshot(chat)
    sessions_before = SessionRecord.objects.count()
    with failing_trigger("assistant_messages", "INSERT", "NEW.origin_id = 'm3'"), pytest.raises(DatabaseError):
        manager.fork(chat, "m4", "the fork")
    assert SessionRecord.objects.count() == sessions_before
    assert snapshot(chat) == before
    assert Message.objects.exclude(session_id=chat).filter(origin_id__isnull=False).count() == 0
    assert Compaction.objects.exclude(session_id=chat).count() == 0
    assert search_ids("alpha") == sorted((chat, f"m{i}") for i in range(5))
    assert_index_consistent()
    fork = manager.fork(chat, "m4", "the fork")  # and it works afterwards
    assert manager.get_message_count(fork.id) == 5


def test_compact_and_split_failing_on_the_seed_message_changes_nothing(manager, chat):
    before = snapshot(chat)
    with (
        failing_trigger("assistant_messages", "INSERT", "NEW.text_content LIKE '[Context from previous session]%'"),
        pytest.raises(DatabaseError),
    ):
        manager.compact_and_split(chat, "the summary")
    assert snapshot(chat) == before
    assert manager.get(chat).end_reason is None
    split = manager.compact_and_split(chat, "the summary")
    assert manager.get(chat).end_reason == "compaction"
    assert split.parent_session_id == chat


def test_delete_session_failing_at_the_last_row_keeps_everything(manager, chat):
    manager.add_compaction(chat, "a summary", "m1", "m3")
    ContextBlockRecord.objects.create(label=f"memory_{chat}", content="a fact")
    ContextBlockRecord.objects.create(label=f"_system_prompt_{chat}", content="frozen")
    before = snapshot(chat)
    with (
        failing_trigger("assistant_sessions", "DELETE", f"OLD.id = '{chat}'", when="BEFORE"),
        pytest.raises(DatabaseError),
    ):
        manager.delete(chat)
    assert snapshot(chat) == before
    assert search_ids("alpha") == sorted((chat, f"m{i}") for i in range(5))
    assert_index_consistent()
    manager.delete(chat)
    assert snapshot(chat)[:2] == ([], [])
    assert manager.get(chat) is None
    assert search_ids("alpha") == []
    assert_index_consistent()


def test_update_failing_in_the_subtree_repair_keeps_the_old_text(manager, chat):
    before = snapshot(chat)
    session = manager.get_session(chat)
    with (
        failing_trigger("assistant_messages", "UPDATE", "NEW.id = 'm4' AND NEW.depth IS NOT NULL"),
        pytest.raises(DatabaseError),
    ):
        session.update_message(msg("m1", "assistant", "rewritten gamma " * 30))
    assert snapshot(chat) == before
    assert search_ids("gamma") == []
    assert_index_consistent()


def test_delete_messages_failing_in_the_repair_keeps_them(manager, chat):
    before = snapshot(chat)
    with failing_trigger("assistant_messages", "UPDATE", "NEW.id = 'm3'"), pytest.raises(DatabaseError):
        manager.delete_messages(chat, ["m2"])
    assert snapshot(chat) == before
    assert_index_consistent()


def test_compact_failing_to_store_the_overlay_stores_nothing(chat):
    fn = create_compact_function(lambda prompt: "a summary", protect_head=1, tail_token_budget=5, min_tail_messages=1)
    session = Session.create().for_session(chat).on_compaction(fn).with_cached_prompt()
    session.freeze_system_prompt()
    before = snapshot(chat)
    with failing_trigger("assistant_compactions", "INSERT", "1 = 1"), pytest.raises(DatabaseError):
        session.compact()
    assert snapshot(chat) == before
    assert session.compact() is not None
    assert len(session.get_compactions()) == 1


@pytest.mark.postgres_only
def test_connection_killed_mid_append_all_leaves_nothing_and_next_call_reconnects(manager, chat):
    before = snapshot(chat)
    chain = [msg(f"k{i}", text=f"killed batch {i}" + (" kaboom" if i == 3 else "")) for i in range(6)]
    with (
        failing_trigger("assistant_messages", "INSERT", "NEW.text_content LIKE '%kaboom%'", action="kill"),
        pytest.raises(DatabaseError),
    ):
        manager.append_all(chat, chain)
    # failing_trigger closed the dead connection; the next call opens a new one.
    assert snapshot(chat) == before
    assert manager.append(chat, msg("after", text="after the kill")) == "after"
    assert manager.get_history(chat)[-1]["id"] == "after"
    assert json.loads(Message.objects.get(session_id=chat, message_id="after").content)["id"] == "after"
