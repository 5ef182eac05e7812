"""Partition-safe keys (every key of the growing tables includes session_id), the in-place
upgrade from migration 0006, and ``partition_tables`` converting a filled database."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connection, transaction

from agent_sessions.models import Compaction
from tests.support.scratch import run_with, scratch_database

GROWING = ("assistant_messages", "assistant_compactions")


def _unique_keys_pg(table: str) -> list[tuple[str, list[str], bool]]:
    """``(index, columns, primary)`` of every unique index; expression columns show as ``expr``."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.indexrelid::regclass::text, i.indisprimary, ARRAY(SELECT COALESCE(a.attname, 'expr') "
            "FROM unnest(i.indkey) WITH ORDINALITY k(attnum, n) LEFT JOIN pg_attribute a "
            "ON a.attrelid = i.indrelid AND a.attnum = k.attnum ORDER BY k.n) "
            "FROM pg_index i WHERE i.indrelid = %s::regclass AND i.indisunique ORDER BY 1",
            [table],
        )
        return [(name, list(columns), primary) for name, primary, columns in cursor.fetchall()]


@pytest.mark.django_db
def test_every_key_of_the_growing_tables_includes_session_id():
    if connection.vendor == "postgresql":
        keys = {table: _unique_keys_pg(table) for table in GROWING}
        assert ("assistant_messages_pkey", ["session_id", "seq"], True) in keys["assistant_messages"]
        assert ("assistant_compactions_pkey", ["session_id", "seq"], True) in keys["assistant_compactions"]
        assert ("assistant_msg_path_key", ["expr", "session_id"], False) in keys["assistant_messages"]
        assert ("assistant_compactions_session_id_uniq", ["session_id", "id"], False) in keys["assistant_compactions"]
        for table, found in keys.items():
            assert found, table
            assert all("session_id" in columns for _, columns, _ in found), (table, found)
    else:
        with connection.cursor() as cursor:
            for table in GROWING:
                cursor.execute(f"PRAGMA index_list({table})")
                uniques = [row[1] for row in cursor.fetchall() if row[2]]
                assert uniques, table
                for index in uniques:
                    cursor.execute(f"PRAGMA index_xinfo({index})")
                    columns = [row[2] for row in cursor.fetchall() if row[5]]  # key columns; None = expression
                    assert "session_id" in columns, (table, index, columns)
                # seq stays SQLite's rowid (INTEGER PRIMARY KEY): the FTS5 tables key on it.
                cursor.execute(f"PRAGMA table_info({table})")
                assert [(r[1], r[2].upper(), r[5]) for r in cursor.fetchall() if r[5]] == [("seq", "INTEGER", 1)]


@pytest.mark.django_db
def test_a_compaction_id_is_unique_per_session_only():
    fields = dict(summary="s", from_message_id="a", to_message_id="b")
    Compaction.objects.create(compaction_id="c1", session_id="one", **fields)
    Compaction.objects.create(compaction_id="c1", session_id="two", **fields)
    with pytest.raises(IntegrityError), transaction.atomic():
        Compaction.objects.create(compaction_id="c1", session_id="one", **fields)
    assert sorted(Compaction.objects.filter(compaction_id="c1").values_list("session_id", flat=True)) == ["one", "two"]


@pytest.mark.django_db
def test_pk_lookups_use_seq_as_before(session, build):
    from agent_sessions.models import Message

    build(session, ["a", "b"])
    row = Message.objects.get(session_id=session.session_id, message_id="b")
    assert Message.objects.get(pk=row.pk).message_id == "b"
    assert row.pk == row.seq
    assert Message.objects.filter(pk__in=[row.pk]).count() == 1


def _state(url: str, mode: str) -> dict:
    return json.loads(run_with(url, "-m", "tests.support.keys_fill", mode).strip().splitlines()[-1])


def _expected_reads(state: dict) -> None:
    """What keys_fill wrote, read back through the library."""
    alpha = state["alpha"]["history"]  # m1..m3 replaced by the overlay's summary
    assert alpha[0] == "m0"
    assert alpha[1].startswith("compaction_")
    assert alpha[2:] == ["m4", "m5", "m6"]
    for sid in ("alpha", "beta", "gamma-日本"):
        if sid != "alpha":
            assert state[sid]["history"] == ["m0", "m1", "m2", "m3", "m4", "m5", "m6"]
        assert state[sid]["branch"] == ["m0", "m1", "m2", "b0"]
        assert state[sid]["length"] == 7
        assert state[sid]["search"] == ["m0", "m1", "m2", "m3", "m4", "m5"]
        assert state[sid]["children_of_m2"] == ["m3", "b0"]
    assert state["foreign"]["history"] == ["f0", "f1"]
    assert state["foreign"]["length"] == 2
    assert state["foreign"]["search"] == ["f0", "f1"]
    assert [o[0] for o in state["overlays"]] == ["alpha"]


def _partition_count(url: str, table: str) -> int:
    code = (
        "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'project.settings'); django.setup()\n"
        "from django.db import connection\nc = connection.cursor()\n"
        f"c.execute(\"SELECT count(*) FROM pg_inherits WHERE inhparent = '{table}'::regclass\")\n"
        "print(c.fetchone()[0])"
    )
    return int(run_with(url, "-c", code).strip())


@pytest.mark.postgres_only  # hash partitioning is PostgreSQL's
def test_partition_tables_converts_a_filled_database_in_place():
    with scratch_database() as url:
        run_with(url, "manage.py", "migrate", "--noinput", "-v0")
        before = _state(url, "fill")
        _expected_reads(before)
        out = run_with(url, "manage.py", "partition_tables", "--partitions", "4", "--no-progress")
        assert "assistant_messages: partitioned by hash of session_id into 4 partitions" in out
        assert _partition_count(url, "assistant_messages") == 4
        assert _partition_count(url, "assistant_compactions") == 4
        assert _state(url, "read") == before
        again = run_with(url, "manage.py", "partition_tables", "--partitions", "4", "--no-progress")
        assert "assistant_messages: already partitioned" in again
        run_with(url, "manage.py", "partition_tables", "--partitions", "16", "--no-progress")
        assert _partition_count(url, "assistant_messages") == 16
        after = _state(url, "read")
        assert after == before
        appended = run_with(
            url,
            "-c",
            "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'project.settings'); django.setup()\n"
            "from agent_sessions import Session\nfrom agent_sessions.models import Message\n"
            "s = Session.create().for_session('beta')\n"
            "s.append_message({'id': 'new', 'role': 'user', 'parts': [{'type': 'text', 'text': 'zeppelin kites'}]})\n"
            "print(Message.objects.get(session_id='beta', message_id='new').seq, "
            "[h.id for h in s.search('zeppelin')], [m['id'] for m in s.get_history()][-2:])",
        )
        seq, rest = appended.strip().split(" ", 1)
        assert int(seq) > max(r[0] for r in after["rows"])
        assert rest == "['new'] ['m6', 'new']"


@pytest.mark.postgres_only  # hash partitioning is PostgreSQL's
def test_partition_tables_keeps_triggers_and_their_comments():
    with scratch_database() as url:
        run_with(url, "manage.py", "migrate", "--noinput", "-v0")
        setup = (
            "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'project.settings'); django.setup()\n"
            "from django.db import connection\nc = connection.cursor()\n"
            'c.execute("CREATE FUNCTION keys_test_upper() RETURNS trigger LANGUAGE plpgsql AS '
            '$$ BEGIN NEW.role := upper(NEW.role); RETURN NEW; END $$")\n'
            "c.execute('CREATE TRIGGER keys_test_upper BEFORE INSERT ON assistant_messages "
            "FOR EACH ROW EXECUTE FUNCTION keys_test_upper()')\n"
            "c.execute(\"COMMENT ON TRIGGER keys_test_upper ON assistant_messages IS 'hash:abc'\")\n"
        )
        run_with(url, "-c", setup)
        run_with(url, "manage.py", "partition_tables", "--partitions", "4", "--no-progress")
        check = (
            "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'project.settings'); django.setup()\n"
            "from django.db import connection\nfrom agent_sessions import Session\nc = connection.cursor()\n"
            "Session.create().for_session('t').append_message("
            "{'id': 'x', 'role': 'user', 'parts': [{'type': 'text', 'text': 'hi'}]})\n"
            "c.execute(\"SELECT role FROM assistant_messages WHERE session_id = 't'\")\nprint(c.fetchone()[0])\n"
            "c.execute(\"SELECT obj_description(oid, 'pg_trigger') FROM pg_trigger WHERE tgname = 'keys_test_upper' "
            "AND tgrelid = 'assistant_messages'::regclass\")\nprint(c.fetchone()[0])"
        )
        assert run_with(url, "-c", check).split() == ["USER", "hash:abc"]


@pytest.mark.django_db
def test_partition_tables_refuses_clearly_and_changes_nothing():
    if connection.vendor == "sqlite":
        with pytest.raises(CommandError, match="needs PostgreSQL; database 'default' is sqlite"):
            call_command("partition_tables", partitions=16, no_progress=True)
    else:
        with pytest.raises(CommandError, match="--partitions must be at least 2"):
            call_command("partition_tables", partitions=1, no_progress=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM assistant_messages")
        assert cursor.fetchone()[0] == 0


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_session_table_has_no_like_index():
    """No ``text_pattern_ops`` index on ``assistant_sessions.id``, which Django adds beside a text key:
    nothing looks sessions up by an id prefix, and every append's update of its session row would
    pay an entry in it."""

    def pattern_indexes() -> list[str]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "JOIN pg_opclass o ON o.oid = i.indclass[0] "
                "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] "
                "WHERE i.indrelid = 'assistant_sessions'::regclass AND i.indnatts = 1 "
                "AND a.attname = 'id' AND o.opcname = 'text_pattern_ops'"
            )
            return [row[0] for row in cursor.fetchall()]

    def index_names() -> set[str]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'assistant_sessions'")
            return {row[0] for row in cursor.fetchall()}

    kept = index_names()
    assert pattern_indexes() == []
    assert "assistant_sessions_pkey" in kept
    assert len(kept) == 3  # the key, the owner, updated_at
