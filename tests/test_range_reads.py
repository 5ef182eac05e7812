"""Paths read as one range of the session's rows (storage/range_reads.py) equal the SQL walk's.

A session that does not branch is read with one ordered range scan instead of the
recursive walk; these tests pin when that happens (the queries sent) and that the
result is the walk's on random trees and on rows a foreign writer left inconsistent.
"""

from __future__ import annotations

import itertools
import json

import pytest
from django.db import connection
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_sessions import InvalidMessage, Session, SessionManager
from agent_sessions.storage import range_reads, walks
from tests.conftest import msg
from tests.support.queries import sent as _sent

pytestmark = pytest.mark.django_db
_EXAMPLES = itertools.count()


def _walked(session, method: str, *args, **kwargs):
    """What ``method`` returns when the range reads are never tried (the SQL walks alone)."""
    originals = range_reads.read_path, range_reads.read_recent
    range_reads.read_path = range_reads.read_recent = lambda *a, **k: None
    try:
        return getattr(session, method)(*args, **kwargs)
    finally:
        range_reads.read_path, range_reads.read_recent = originals


def _foreign_row(session_id: str, mid: str, parent: str | None, depth: int | None) -> None:
    """A row as another writer might store it: any parent, any depth."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO assistant_messages (id, session_id, parent_id, role, content, text_content, depth) "
            "VALUES (%s, %s, %s, 'user', %s, '', %s)",
            [mid, session_id, parent, json.dumps(msg(mid)), depth],
        )


def test_a_linear_session_is_read_without_the_walk(session, is_postgres):
    for i in range(30):
        session.append_message(msg(f"m{i}"))
    sent = _sent(session.get_history)
    assert [m["id"] for m in session.get_history()] == [f"m{i}" for i in range(30)]
    assert not any("RECURSIVE" in sql for sql in sent), sent
    assert len(sent) == (1 if is_postgres else 2), sent  # SQLite looks the leaf up first (in-process)
    assert session.get_history("m9") == _walked(session, "get_history", "m9")
    assert [m["id"] for m in session.get_history("m9")] == [f"m{i}" for i in range(10)]


def test_a_linear_session_with_an_overlay_is_read_as_a_range_with_the_overlay_applied(session, is_postgres):
    for i in range(30):
        session.append_message(msg(f"m{i}"))
    plain = _sent(session.get_history)
    session.add_compaction("summary of m3..m10", "m3", "m10")
    sent = _sent(session.get_history)
    history = session.get_history()
    assert history == _walked(session, "get_history")
    assert [m["id"] for m in history][:3] == ["m0", "m1", "m2"]
    assert "summary of m3..m10" in json.dumps(history[3])
    assert [m["id"] for m in history][4:] == [f"m{i}" for i in range(11, 30)]
    assert not any("RECURSIVE" in sql for sql in sent), sent
    assert len(sent) == len(plain) + 1, sent  # the overlays themselves, read only when there are some
    if not is_postgres:
        # The overlay check rides on the leaf lookup, not on each of the range's rows.
        leaf, ranged = plain
        assert "assistant_compactions" in leaf, leaf
        assert "assistant_compactions" not in ranged, ranged


def test_the_newest_messages_of_a_linear_session_are_read_without_the_walk(session):
    for i in range(80):
        session.append_message(msg(f"m{i}"))
    sent = _sent(lambda: session.get_recent_history(max_content_bytes=0, min_recent_messages=50))
    assert len(sent) == 1, sent
    assert "RECURSIVE" not in sent[0], sent
    recent = session.get_recent_history(max_content_bytes=0, min_recent_messages=50)
    assert [m["id"] for m in recent.messages] == [f"m{i}" for i in range(30, 80)]
    assert recent.truncated
    assert recent == _walked(session, "get_recent_history", max_content_bytes=0, min_recent_messages=50)
    everything = session.get_recent_history(max_content_bytes=10**9, min_recent_messages=1)
    assert len(everything.messages) == 80  # past the range: walked
    assert not everything.truncated
    assert everything == _walked(session, "get_recent_history", max_content_bytes=10**9, min_recent_messages=1)


def test_a_regenerated_reply_sends_the_recent_window_to_the_walk(session):
    for i in range(10):
        session.append_message(msg(f"m{i}"))
    session.append_message(msg("retry"), "m7")  # newest rows: retry, m9, m8: not retry's chain
    window = {"max_content_bytes": 0, "min_recent_messages": 3}
    recent = session.get_recent_history(**window)
    assert [m["id"] for m in recent.messages] == ["m6", "m7", "retry"]
    assert recent == _walked(session, "get_recent_history", **window)
    assert [m["id"] for m in session.get_recent_history("m9", **window).messages] == ["m7", "m8", "m9"]


def test_a_branching_session_is_walked(session):
    session.append_message(msg("root"))
    for i in range(40):  # every message has a sibling: half the rows are off any path
        session.append_message(msg(f"a{i}"), "root" if i == 0 else f"a{i - 1}")
        session.append_message(msg(f"b{i}"), "root" if i == 0 else f"a{i - 1}")
    sent = _sent(lambda: session.get_history("a39"))
    assert any("RECURSIVE" in sql for sql in sent), sent
    assert [m["id"] for m in session.get_history("a39")] == ["root", *(f"a{i}" for i in range(40))]


def test_a_few_regenerated_replies_still_read_as_a_range(session):
    for i in range(100):
        session.append_message(msg(f"m{i}"))
    session.append_message(msg("retry"), "m98")  # a regenerated last reply, now the latest leaf
    sent = _sent(session.get_history)
    assert not any("RECURSIVE" in sql for sql in sent), sent
    assert [m["id"] for m in session.get_history()] == [*(f"m{i}" for i in range(99)), "retry"]
    assert session.get_history("m99") == _walked(session, "get_history", "m99")


def test_rows_a_range_cannot_settle_are_walked(session, session_id):
    for i in range(5):
        session.append_message(msg(f"m{i}"))
    # A child stored before its parent, with a depth that passes the gate.
    _foreign_row(session_id, "late-child", "late-parent", 7)
    _foreign_row(session_id, "late-parent", "m4", 6)
    assert session.get_history("late-child") == _walked(session, "get_history", "late-child")
    assert [m["id"] for m in session.get_history("late-child")][-2:] == ["late-parent", "late-child"]
    # A parent that is not stored, and a cycle.
    _foreign_row(session_id, "orphan", "nowhere", 1)
    assert [m["id"] for m in session.get_history("orphan")] == ["orphan"]
    _foreign_row(session_id, "cyc-a", "cyc-b", 2)
    _foreign_row(session_id, "cyc-b", "cyc-a", 3)
    with override_settings(AGENT_SESSIONS_MAX_PATH_DEPTH=20):  # the walk goes round until this limit
        assert session.get_history("cyc-b") == _walked(session, "get_history", "cyc-b")
        assert len(session.get_history("cyc-b")) == 21
    # No depth at all (the seed's own writer): the walk.
    _foreign_row(session_id, "no-depth", "m4", None)
    assert session.get_history("no-depth") == _walked(session, "get_history", "no-depth")
    assert session.get_history() == _walked(session, "get_history")


def test_a_latest_leaf_older_than_the_newest_rows_is_found_by_the_walk(session, session_id):
    """The range reads look for the latest leaf among the newest rows only; past them, the walk's
    full lookup finds it."""
    for i in range(3):
        session.append_message(msg(f"m{i}"))
    # A chain stored leaf first (as an import might): each of the ten newest rows has a child.
    for i in reversed(range(10)):
        _foreign_row(session_id, f"c{i}", f"c{i - 1}" if i else "m2", i + 4)
    window = {"max_content_bytes": 0, "min_recent_messages": 4}
    sent = _sent(session.get_history)
    assert any("RECURSIVE" in sql for sql in sent), sent
    history = session.get_history()
    assert [m["id"] for m in history] == ["m0", "m1", "m2", *(f"c{i}" for i in range(10))]
    assert history == _walked(session, "get_history")
    recent = session.get_recent_history(**window)
    assert [m["id"] for m in recent.messages] == ["c6", "c7", "c8", "c9"]
    assert recent == _walked(session, "get_recent_history", **window)
    # The client's own leaf lookups fall back to the whole session too.
    assert session.get_latest_leaf()["id"] == "c9"
    assert session.get_path_length() == 13
    with connection.cursor() as cursor:
        cursor.execute("UPDATE assistant_messages SET path_tokens = 1234 WHERE id = 'c9'")
    assert session.storage.visible_history_tokens() == 1234


def test_the_latest_leaf_is_looked_for_among_the_newest_rows_first(session):
    """One statement, without the whole-session arm, when the leaf is among the newest rows; the
    whole lookup follows only when that finds nothing (here: an empty session)."""
    assert _sent(session.get_latest_leaf) == [walks.NEWEST_LEAF_CONTENT, walks.LATEST_LEAF_CONTENT]
    assert session.get_latest_leaf() is None
    assert session.get_path_length() == 0
    assert session.storage.visible_history_tokens() == 0
    session.append_message(msg("m0"))
    for i in range(1, 12):
        session.append_message(msg(f"m{i}"), parent_id="m0")
    assert _sent(session.get_latest_leaf) == [walks.NEWEST_LEAF_CONTENT]
    assert session.get_latest_leaf()["id"] == "m11"
    assert _sent(session.get_path_length) == [walks.NEWEST_LEAF]
    assert session.get_path_length() == 2


def test_follow_gives_up_where_only_the_walk_can_tell():
    assert range_reads.follow([], None, 10) is None
    chain = [("a", None, 1), ("b", "a", 2), ("c", "b", 3)]
    assert range_reads.follow(chain, None, 10) == chain
    assert range_reads.follow(chain, "b", 10) is None  # the leaf must be the range's last row
    assert range_reads.follow(chain, None, 1) is None  # longer than the walk's depth limit
    assert range_reads.follow([("x", None), ("a", "b"), ("b", "a")], None, 10) is None  # a cycle
    assert range_reads.follow([("a", "later")], None, 10) is None  # parent not in the range
    branchy = [("a", None), ("b", "a"), ("b2", "a"), ("c", "b2")]
    assert range_reads.follow(branchy, None, 10) == [("a", None), ("b2", "a"), ("c", "b2")]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.tuples(st.sampled_from(["auto", "parent", "root", "delete"]), st.integers(0, 10**6)), max_size=40),
    st.lists(st.tuples(st.integers(1, 12), st.sampled_from([0, 50, 300, 10**6])), min_size=1, max_size=3),
)
def test_range_reads_equal_the_walk_on_random_trees(session_id, ops, windows):
    session = Session.create().for_session(f"{session_id}-{next(_EXAMPLES)}")  # not random: Hypothesis seeds it
    ids: list[str] = []
    for n, (op, pick) in enumerate(ops):
        if op == "delete" and ids:
            session.delete_messages([ids.pop(pick % len(ids))])
        elif op == "parent" and ids:
            session.append_message(msg(f"n{n}"), ids[pick % len(ids)])
            ids.append(f"n{n}")
        elif op == "root":
            session.append_message(msg(f"n{n}"), None)
            ids.append(f"n{n}")
        else:
            session.append_message(msg(f"n{n}"))
            ids.append(f"n{n}")
    for leaf in [None, *ids]:
        assert session.get_history(leaf) == _walked(session, "get_history", leaf), leaf
        for least, budget in windows:
            recent = {"max_content_bytes": budget, "min_recent_messages": least}
            assert session.get_recent_history(leaf, **recent) == _walked(
                session, "get_recent_history", leaf, **recent
            ), (leaf, least, budget)
        assert session.storage.get_raw_path(leaf) == _walked(session.storage, "get_raw_path", leaf), leaf


def test_a_deleted_id_whose_children_stayed_cannot_be_stored_again(session):
    # b and c stay, as roots, naming the deleted a as their parent.  Storing a again under c
    # would close the cycle a → c → b → a, which every walk would follow to the depth limit.
    session.append_message(msg("a"))
    session.append_message(msg("b"))
    session.append_message(msg("c"))
    session.delete_messages(["a"])
    with pytest.raises(InvalidMessage, match="'a' was deleted while messages below it stayed"):
        session.append_message(msg("a"))
    with pytest.raises(InvalidMessage, match="'a' was deleted"):
        session.append_message(msg("a"), "c")
    manager = SessionManager()
    with pytest.raises(InvalidMessage, match="'a' was deleted"):
        manager.append_all(session.session_id, [msg("d"), msg("a"), msg("e")])
    assert session.get_message("a") is None
    assert session.get_message("d") is None  # the batch wrote nothing
    assert [m["id"] for m in session.get_history("c")] == ["b", "c"]
    assert session.append_message(msg("c")) is False  # a duplicate is still just a duplicate
    assert session.append_message(msg("a2"), "c") is True


def _suffix_row_by_row(rows, min_recent: int, budget: int, max_depth: int):
    """The recent walk over ``rows`` one row at a time: what ``range_reads._recent_suffix`` computes."""
    walked, total = [], 0
    for n, row in enumerate(rows):
        if n and rows[n - 1][1] != row[0]:
            return None
        total += row[2]
        walked.append((n, total, *row[3:]))
        if row[1] is None or not (n < max_depth and (n < min_recent or total <= budget)):
            return walked
    return None


@given(
    chain=st.lists(
        st.tuples(st.integers(0, 6), st.sampled_from(["child"] * 8 + ["root", "broken"])), min_size=1, max_size=30
    ),
    min_recent=st.integers(1, 12),
    budget=st.integers(0, 60),  # small sizes and budgets: totals often equal the budget
    max_depth=st.integers(0, 40),
)
@settings(max_examples=400, deadline=None)
def test_the_recent_suffix_stops_where_the_walk_stops(chain, min_recent, budget, max_depth):
    """Column-wise, the suffix stops where the row-by-row walk stops (a root, the depth limit, one
    row past the window) and gives up where it gives up (the rows end, or break the chain first)."""
    rows = []
    for n, (size, kind) in enumerate(chain):  # newest first: row n's parent is row n + 1
        parent = {"child": f"r{n + 1}", "root": None, "broken": "elsewhere"}[kind]
        rows.append((f"r{n}", parent, size, f"content {n}", None))
    assert range_reads._recent_suffix(rows, min_recent, budget, max_depth) == _suffix_row_by_row(
        rows, min_recent, budget, max_depth
    )
