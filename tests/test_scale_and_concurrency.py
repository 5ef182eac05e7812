"""Long paths in a bounded number of queries, and race-free auto-parent across processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import connection, transaction

from agent_sessions import Session
from agent_sessions.models import Message
from tests.conftest import msg
from tests.support.build import bulk_chain
from tests.support.pg import messages_partitioned, plan_nodes

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.django_db
def test_10000_deep_path_in_bounded_queries(session, django_assert_max_num_queries):
    ids = bulk_chain(session.session_id, 10_000)
    # The leaf lookup rides inside the walk: one query for the path, one for the overlays.
    with django_assert_max_num_queries(2):
        history = session.get_history()
    assert [m["id"] for m in history] == ids
    with django_assert_max_num_queries(1):
        assert session.get_path_length() == 10_000
    with django_assert_max_num_queries(2):
        recent = session.get_recent_history(max_content_bytes=1_000)
    assert recent.truncated
    assert recent.messages[-1]["id"] == "m9999"
    assert len(recent.messages) < 20
    with django_assert_max_num_queries(1):
        stats = session.get_history_row_stats()
    assert len(stats) == 10_000


@pytest.mark.django_db
def test_append_cost_is_constant_in_history_length(session_id, django_assert_max_num_queries):
    from django.test.utils import CaptureQueriesContext

    small = Session.create().for_session(session_id + "-small")
    bulk_chain(small.session_id, 10)
    large = Session.create().for_session(session_id)
    bulk_chain(large.session_id, 5_000)
    counts = []
    for s in (small, large):
        s.append_message(msg("warm"))  # a Session's first append also makes the registry row: measure the next
        with CaptureQueriesContext(connection) as ctx:
            s.append_message(msg("tail"))
        counts.append(len(ctx.captured_queries))
        # savepoint, one INSERT … SELECT (on Postgres: the function that locks and runs it), release:
        # never a history read.
        assert all("WITH RECURSIVE" not in q["sql"] for q in ctx.captured_queries)
        append = "agent_sessions_append(" if connection.vendor == "postgresql" else "INSERT INTO assistant_messages"
        assert sum(append in q["sql"] for q in ctx.captured_queries) == 1
    assert counts[0] == counts[1] <= 4
    assert large.get_path_length() == 5_002
    row = Message.objects.get(session_id=session_id, message_id="tail")
    assert row.parent_id == "warm"
    assert row.depth == 5_002


@pytest.mark.django_db
def test_foreign_rows_without_depth_fall_back_to_a_walk(session):
    with connection.cursor() as cursor:
        for i, parent in enumerate([None, "f0", "f1"]):
            cursor.execute(
                "INSERT INTO assistant_messages (id, session_id, parent_id, role, content, text_content) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                [
                    f"f{i}",
                    session.session_id,
                    parent,
                    "user",
                    f'{{"id":"f{i}","role":"user","parts":[{{"type":"text","text":"foreign {i}"}}]}}',
                    f"foreign {i}",
                ],
            )
    assert session.get_path_length() == 3
    session.append_message(msg("ours"))
    assert [m["id"] for m in session.get_history()] == ["f0", "f1", "f2", "ours"]
    assert session.get_path_length() == 4


@pytest.mark.django_db
def test_latest_leaf_lookup_stays_bounded_whatever_the_planner_thinks(session):
    """The whole-session fallback arm never runs when the newest rows hold the leaf.

    Postgres chose O(session) plans for simpler forms of this query when its statistics
    were stale (a freshly loaded table): appends then slowed 25× at 10,000 messages.
    """
    from agent_sessions.storage.walks import LATEST_LEAF, latest_leaf_params

    bulk_chain(session.session_id, 3_000)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("EXPLAIN (ANALYZE, COSTS OFF) " + LATEST_LEAF, latest_leaf_params(session.session_id))
            plan = "\n".join(r[0] for r in cursor.fetchall())
            anywhere = plan[plan.index("Subquery Scan on anywhere") :]
            assert "(never executed)" in anywhere.splitlines()[0], plan
        cursor.execute(LATEST_LEAF, latest_leaf_params(session.session_id))
        assert cursor.fetchone()[0] == "m2999"
    # A foreign writer put children before their parent: the newest 8 rows all have
    # children, so the fallback arm answers (still correctly).
    with connection.cursor() as cursor:
        for i in range(10):
            cursor.execute(
                "INSERT INTO assistant_messages (id, session_id, parent_id, role, content, text_content) "
                "VALUES (%s, %s, %s, 'user', '{}', '')",
                [f"early{i}", session.session_id, f"late{i}"],
            )
        for i in range(10):
            cursor.execute(
                "INSERT INTO assistant_messages (id, session_id, parent_id, role, content, text_content) "
                "VALUES (%s, %s, NULL, 'user', '{}', '')",
                [f"late{i}", session.session_id],
            )
        cursor.execute(LATEST_LEAF, latest_leaf_params(session.session_id))
        assert cursor.fetchone()[0] == "early9"


@pytest.mark.django_db
def test_path_walk_steps_through_the_key_index(session):
    """Each step of a path walk probes assistant_msg_path_key, the only index its predicate fits.

    With ``session_id = … AND id = …`` Postgres scanned the whole session at every step when its
    statistics were stale (2.9 s for a 3,000-deep path instead of 12 ms).
    """
    from agent_sessions.storage.walks import path_cte, path_key_prefix

    bulk_chain(session.session_id, 200)
    walk = path_cte(connection.vendor)
    params = [session.session_id, "m199", path_key_prefix(session.session_id), 10**6, session.session_id]
    with connection.cursor() as cursor:
        explain = "EXPLAIN " if connection.vendor == "postgresql" else "EXPLAIN QUERY PLAN "
        cursor.execute(explain + walk + "SELECT count(*) FROM path", params)
        plan = "\n".join(" ".join(str(col) for col in row) for row in cursor.fetchall())
        assert "assistant_msg_path_key" in plan, plan
        cursor.execute(walk + "SELECT count(*) FROM path", params)
        assert cursor.fetchone()[0] == 200


def test_path_key_prefix_is_injective():
    from agent_sessions.storage.walks import path_key_prefix

    # ("ab", "c…") and ("a", "bc…") must not meet: the length prefix tells them apart.
    assert path_key_prefix("ab") + "c" != path_key_prefix("a") + "bc"
    assert path_key_prefix("日本") == "2:日本"


@pytest.mark.postgres_only  # the plan choice is Postgres's
@pytest.mark.django_db
def test_per_session_reads_stay_on_the_primary_key_when_a_few_sessions_fill_the_table(session_id):
    """With a few large sessions, each a big share of the table, ``session_id = X ORDER BY seq``
    walked the plain ``seq`` index backwards through every newer row of the others."""
    from agent_sessions.storage import range_reads
    from agent_sessions.storage.walks import LATEST_LEAF, latest_leaf_params, newest_leaf_params

    old = Session.create().for_session(session_id)
    bulk_chain(session_id, 3_000)
    for other in range(3):  # newer rows of other sessions, after the old one's
        bulk_chain(f"{session_id}-newer{other}", 3_000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE assistant_messages")
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + LATEST_LEAF, latest_leaf_params(session_id))
        plan = "\n".join(r[0] for r in cursor.fetchall())
        assert "assistant_msg_seq" not in plan, plan
        sql = range_reads._POSTGRES.format(columns="m.content", leaf=range_reads._LEAF[True])
        leaf = newest_leaf_params(session_id)
        cursor.execute("EXPLAIN (ANALYZE, COSTS OFF) " + sql, [*leaf, session_id, session_id, session_id])
        plan = "\n".join(r[0] for r in cursor.fetchall())
        assert "assistant_msg_seq" not in plan, plan
        assert plan.count("Subquery Scan on w") == 1, plan  # the leaf is planned once, read twice
    assert len(old.get_history()) == 3_000
    assert [m["id"] for m in old.get_recent_history(max_content_bytes=0, min_recent_messages=2).messages] == [
        "m2998",
        "m2999",
    ]


def _scans_of(node: dict, alias: str) -> list[dict]:
    """The plan nodes (EXPLAIN's JSON) that scanned the table under ``alias`` (or one of its partitions)."""
    return [n for n in plan_nodes(node) if n.get("Alias", "").split("_")[0] == alias and n.get("Actual Loops", 0)]


@pytest.mark.django_db
def test_the_orphan_guard_of_an_append_probes_children_by_index_in_a_session_the_statistics_never_saw(session):
    """An append refuses an id that stored rows name as their parent, by probing
    ``(session_id, parent_id)``.  Given the session id as a constant, Postgres estimated a
    session absent from its statistics (new since the last ANALYZE, in a table one big
    session fills) at one row for every index alike and took the primary key, reading the
    whole session on every append; through the one-row subquery it costs the probe by the
    sessions' average share and takes the children index."""
    from agent_sessions.storage import appends

    bulk_chain(f"{session.session_id}-big", 3_000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE assistant_messages" if connection.vendor == "postgresql" else "ANALYZE")
    bulk_chain(session.session_id, 500)  # after the statistics were taken
    values = ["next", session.session_id, "user", '{"id":"next"}', "", "", "2026-12-02 00:00:00+00:00", 1]
    partitioned = connection.vendor == "postgresql" and messages_partitioned()  # as locked_insert sends it
    sql = appends.statement(None, auto=True, partitioned=partitioned)
    params = appends.params(values, session.session_id, None, auto=True, partitioned=partitioned)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with transaction.atomic():  # EXPLAIN ANALYZE inserts the row: undo it
                cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
                plan = cursor.fetchone()[0]
                transaction.set_rollback(True)
            plan = json.loads(plan) if isinstance(plan, str) else plan
            guards = _scans_of(plan[0]["Plan"], "o")  # the probe: ... FROM assistant_messages o
            assert guards, plan
            if partitioned:
                # The probe names its constants, so it is pruned to the session's one partition.
                # Which index it takes there is the planner's tie: a partition whose statistics
                # never saw the session costs every index at one row (about 1 run in 30 took the
                # primary key when the big session shared the partition).
                assert len(guards) == 1, guards
                assert guards[0].get("Index Name"), guards
            else:
                for guard in guards:
                    indexes = [guard.get("Index Name"), *(child.get("Index Name") for child in guard.get("Plans", []))]
                    assert any((name or "").startswith("assistant_msg_sess_parent") for name in indexes), guard
                    assert guard.get("Rows Removed by Filter", 0) == 0, guard
        else:
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
            plan = "\n".join(str(r[3]) for r in cursor.fetchall())
            assert "SEARCH o USING COVERING INDEX assistant_msg_sess_parent" in plan, plan
    assert session.append_message(msg("after")) is True
    assert session.get_message("after") is not None
    assert len(session.get_history()) == 501
