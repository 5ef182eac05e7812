"""Bulk writes (append_all, fork, import) leave the search indexes and the message count exactly as
row-by-row appends do.  On SQLite they index once after the rows (migration 0017: the insert
triggers skip a session named in ``agent_sessions_deferred_index`` for the length of the write);
on Postgres nothing changes.  Both databases run every test but the SQLite-only ones."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from agent_sessions import InvalidMessage, SessionManager
from agent_sessions.models import SessionRecord
from agent_sessions.storage import orm, sqlite
from tests.conftest import msg, tool_msg

N = sqlite.DEFER_AT * 3


def batch(prefix: str, n: int = N) -> list[dict]:
    """English, Japanese and tool messages, so both FTS indexes and both columns get rows."""
    out = []
    for i in range(n):
        if i % 3 == 0:
            out.append(msg(f"{prefix}{i}", text=f"kestrel report number {i}"))
        elif i % 3 == 1:
            out.append(msg(f"{prefix}{i}", role="assistant", text=f"京都の天気 {i}"))
        else:
            out.append(tool_msg(f"{prefix}{i}", "lookup", f"c{i}", {"q": "osprey"}, output={"err": "TimeoutError"}))
    return out


def hits(query: str, session_id: str) -> set[str]:
    return {h.id for h in orm.search(query, session_id=session_id, limit=1000)}


def expected_hits(prefix: str, n: int = N) -> dict[str, set[str]]:
    return {
        "kestrel": {f"{prefix}{i}" for i in range(n) if i % 3 == 0},
        "京都": {f"{prefix}{i}" for i in range(n) if i % 3 == 1},
        "osprey": {f"{prefix}{i}" for i in range(n) if i % 3 == 2},  # tool input, ranked below text
        "timeouterror": {f"{prefix}{i}" for i in range(n) if i % 3 == 2},
    }


def deferred_markers() -> int:
    if connection.vendor != "sqlite":
        return 0
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {sqlite.DEFERRED_INDEX}")
        return cursor.fetchone()[0]


def integrity_check() -> None:
    """FTS5's own check that each index matches its content (SQLite); Postgres' columns are generated."""
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            for fts in ("assistant_fts", "assistant_fts_trigram"):
                cursor.execute(f"INSERT INTO {fts}({fts}, rank) VALUES ('integrity-check', 1)")


@pytest.fixture
def manager():
    return SessionManager()


@pytest.mark.django_db(transaction=True)
def test_a_bulk_batch_is_searchable_and_counted_as_single_appends_are(manager):
    bulk = manager.create("bulk").id
    one_by_one = manager.create("single").id
    before = SessionRecord.objects.get(id=bulk).updated_at
    manager.append_all(bulk, batch("b"))
    for message in batch("s"):
        manager.append(one_by_one, message)
    for query, expected in expected_hits("b").items():
        assert hits(query, bulk) == expected, query
    for query, expected in expected_hits("s").items():
        assert hits(query, one_by_one) == expected, query
    bulk_row, single_row = SessionRecord.objects.get(id=bulk), SessionRecord.objects.get(id=one_by_one)
    assert bulk_row.message_count == single_row.message_count == N
    assert bulk_row.updated_at > before
    assert deferred_markers() == 0
    integrity_check()
    # the next append, single or bulk, is indexed and counted as usual
    manager.append(bulk, msg("later", text="kestrel again"))
    manager.append_all(bulk, batch("c"))
    assert "later" in hits("kestrel", bulk)
    assert hits("京都", bulk) == expected_hits("b")["京都"] | expected_hits("c")["京都"]
    assert SessionRecord.objects.get(id=bulk).message_count == 2 * N + 1
    integrity_check()


@pytest.mark.django_db(transaction=True)
def test_a_bad_message_late_in_a_bulk_batch_leaves_no_rows_no_index_and_no_marker(manager):
    sid = manager.create("bad").id
    manager.append(sid, msg("root", text="kestrel root"))
    rows = batch("b")
    rows[-1] = {"id": "bad", "role": "user", "parts": "not a list"}
    with pytest.raises(InvalidMessage):
        manager.append_all(sid, rows)
    assert deferred_markers() == 0
    assert hits("kestrel", sid) == {"root"}
    assert hits("京都", sid) == set()
    assert SessionRecord.objects.get(id=sid).message_count == 1
    manager.append_all(sid, batch("ok"))  # the session is not left skipped by its triggers
    assert hits("kestrel", sid) == {"root"} | expected_hits("ok")["kestrel"]
    integrity_check()


@pytest.mark.django_db(transaction=True)
def test_a_caller_that_catches_the_error_inside_its_own_transaction_keeps_indexing(manager):
    sid = manager.create("outer").id
    rows = batch("b")
    rows[-1] = {"id": "bad", "role": "user", "parts": "not a list"}
    with transaction.atomic():
        with pytest.raises(InvalidMessage):
            manager.append_all(sid, rows)
        assert deferred_markers() == 0  # rolled back with the savepoint
        manager.append(sid, msg("inside", text="kestrel inside"))
    assert hits("kestrel", sid) == {"inside"}
    assert SessionRecord.objects.get(id=sid).message_count == 1


@pytest.mark.django_db(transaction=True)
def test_a_fork_of_a_long_path_is_searchable_in_the_fork(manager):
    sid = manager.create("source").id
    manager.append_all(sid, batch("b"))
    fork = manager.fork(sid, f"b{N - 1}", "fork")
    mapping = manager.fork_mapping(fork.id)
    for query, expected in expected_hits("b").items():
        assert hits(query, fork.id) == {mapping[i] for i in expected}, query
        assert hits(query, sid) == expected, query
    assert SessionRecord.objects.get(id=fork.id).message_count == N
    assert deferred_markers() == 0
    integrity_check()


@pytest.mark.django_db(transaction=True)
def test_small_batches_index_row_by_row(manager):
    sid = manager.create("small").id
    manager.append_all(sid, batch("b", sqlite.DEFER_AT - 1))
    assert hits("kestrel", sid) == expected_hits("b", sqlite.DEFER_AT - 1)["kestrel"]
    assert SessionRecord.objects.get(id=sid).message_count == sqlite.DEFER_AT - 1


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_a_batch_below_the_threshold_sets_no_marker(manager):
    sid = manager.create("small").id
    with transaction.atomic(), connection.cursor() as cursor:
        with sqlite.deferred_indexing(cursor, sid, sqlite.DEFER_AT - 1):
            assert deferred_markers() == 0
        with sqlite.deferred_indexing(cursor, sid, sqlite.DEFER_AT):
            assert deferred_markers() == 1
    assert deferred_markers() == 0


# ── SQLite only: the marker, foreign writers, the migration ─────────────


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_a_foreign_writers_insert_is_indexed_by_the_triggers(manager):
    sid = manager.create("foreign").id
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO assistant_messages (id, session_id, role, content, text_content, tool_text, created_at) "
            "VALUES ('f1', %s, 'user', '{}', 'kestrel from outside', '', '2026-01-01 00:00:00')",
            [sid],
        )
    assert hits("kestrel", sid) == {"f1"}
    assert SessionRecord.objects.get(id=sid).message_count == 1


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_the_marker_skips_only_its_own_session_while_the_write_lasts(manager):
    mine, other = manager.create("mine").id, manager.create("other").id
    with transaction.atomic(), connection.cursor() as cursor, sqlite.deferred_indexing(cursor, mine, None):
        assert deferred_markers() == 1
        manager.append(other, msg("o1", text="kestrel other"))  # indexed by its trigger at once
        assert hits("kestrel", other) == {"o1"}
        manager.append(mine, msg("m1", text="kestrel mine"))  # waits for the fill
        assert hits("kestrel", mine) == set()
    assert hits("kestrel", mine) == {"m1"}
    assert SessionRecord.objects.get(id=mine).message_count == 1
    assert deferred_markers() == 0
    integrity_check()
