"""Paths read as one range of the session's rows (storage/range_reads.py) equal the SQL walk's.

A session that does not branch is read with one ordered range scan instead of the
recursive walk; these tests pin when that happens (the queries sent) and that the
result is the walk's on random trees and on rows a foreign writer left inconsistent.
"""

from __future__ import annotations

import itertools
import json
from bisect import bisect_right
from itertools import accumulate

import pytest
from django.db import connection
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_sessions import InvalidMessage, MessageCycle, Session, SessionManager
from agent_sessions.storage import postgres, range_reads, walks
from tests.conftest import msg
from tests.support.queries import sent as _sent
from tests.support.queries import walked

pytestmark = pytest.mark.django_db
_EXAMPLES = itertools.count()


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
    assert session.get_history("m9") == walked(session, "get_history", "m9")
    assert [m["id"] for m in session.get_history("m9")] == [f"m{i}" for i in range(10)]


def test_a_linear_session_with_an_overlay_is_read_as_a_range_with_the_overlay_applied(session, is_postgres):
    for i in range(30):
        session.append_message(msg(f"m{i}"))
    plain = _sent(session.get_history)
    session.add_compaction("summary of m3..m10", "m3", "m10")
    sent = _sent(session.get_history)
    history = session.get_history()
    assert history == walked(session, "get_history")
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
    assert recent == walked(session, "get_recent_history", max_content_bytes=0, min_recent_messages=50)
    everything = session.get_recent_history(max_content_bytes=10**9, min_recent_messages=1)
    assert len(everything.messages) == 80  # past the first range: read on from its oldest row's parent
    assert not everything.truncated
    assert everything == walked(session, "get_recent_history", max_content_bytes=10**9, min_recent_messages=1)


def first_budgeted_reads() -> int:
    """Statements of a budgeted window's first read: one on Postgres (agent_sessions_window finds its
    size), two on SQLite (``min_recent + SLACK`` rows, then on)."""
    return 1 if connection.vendor == "postgresql" else 2


def test_a_window_within_a_byte_budget_reads_on_as_ranges_instead_of_walking(session):
    """The first range holds ``min_recent + SLACK`` rows; a budget that wants more reads on from the
    oldest row's parent, as many rows as the ones read say the budget holds (one more read here,
    where sizes hardly vary), instead of walking the whole window.  (Postgres reads it in one call.)"""
    for i in range(300):
        session.append_message(msg(f"m{i}"))
    for budget in (0, 2_000, 5_000, 20_000, 10**9):
        window = {"max_content_bytes": budget, "min_recent_messages": 1}
        sent = _sent(lambda window=window: session.get_recent_history(**window))
        assert not any("RECURSIVE" in sql for sql in sent), (budget, sent)
        assert len(sent) == (1 if budget == 0 else first_budgeted_reads()), (budget, sent)
        recent = session.get_recent_history(**window)
        assert recent == walked(session, "get_recent_history", **window), budget
        assert recent.total_content_bytes <= budget or len(recent.messages) == 1
    assert len(session.get_recent_history(max_content_bytes=20_000).messages) > 100


def test_the_next_read_of_a_window_asks_for_as_many_rows_as_it_held(session):
    """The usual agent loop: a turn or two later, the same window is one statement again."""
    for i in range(300):
        session.append_message(msg(f"m{i}"))
    window = {"max_content_bytes": 5_000, "min_recent_messages": 1}
    assert len(_sent(lambda: session.get_recent_history(**window))) == first_budgeted_reads()
    held = len(session.get_recent_history(**window).messages)
    assert range_reads.WINDOW_HINTS.get((session.session_id, None, 1, 5_000)) == held + 1  # one row past it
    assert len(_sent(lambda: session.get_recent_history(**window))) == 1
    session.append_message(msg("m300"))
    session.append_message(msg("m301"))
    assert len(_sent(lambda: session.get_recent_history(**window))) == 1
    # Much bigger rows since: the hint reads too many, and the window is still the walk's.
    session.append_message(msg("big", text="x" * 3_000))
    sent = _sent(lambda: session.get_recent_history(**window))
    assert len(sent) == 1, sent
    assert "RECURSIVE" not in sent[0], sent
    recent = session.get_recent_history(**window)
    assert recent.messages[-1]["id"] == "big"
    assert len(recent.messages) < held
    assert recent == walked(session, "get_recent_history", **window)
    # Other windows of the same session keep their own hints; a window without a budget needs none.
    assert len(_sent(lambda: session.get_recent_history("m200", **window))) == first_budgeted_reads()
    assert len(_sent(lambda: session.get_recent_history(max_content_bytes=0, min_recent_messages=40))) == 1
    assert range_reads.WINDOW_HINTS.get((session.session_id, None, 40, 0)) == 0


def test_window_hints_keep_the_newest_entries_up_to_their_size():
    hints = range_reads._WindowHints(3)
    for n in range(5):
        hints.put(("s", None, 1, n), n + 10)
    assert [hints.get(("s", None, 1, n)) for n in range(5)] == [0, 0, 12, 13, 14]
    hints.put(("s", None, 1, 2), 20)  # written again: now the newest
    hints.put(("s", None, 1, 5), 15)
    assert [hints.get(("s", None, 1, n)) for n in range(6)] == [0, 0, 20, 0, 14, 15]
    hints.clear()
    assert hints.get(("s", None, 1, 4)) == 0


def test_older_rows_that_keep_growing_cost_a_few_more_reads_not_one_per_row(session, monkeypatch):
    # Each message 3 % smaller than the next: the newer rows read make older ones look bigger than
    # they are, and each estimate of how many rows the budget holds falls short.  Reading on is what
    # is tested, so Postgres is kept from sizing the first read itself (agent_sessions_window).
    read_calls = postgres.read_calls
    monkeypatch.setattr(postgres, "read_calls", lambda connection: read_calls(connection)._replace(window=None))
    for i in range(300):
        session.append_message(msg(f"m{i}", text="x" * int(4_000 * 0.97 ** (299 - i))))
    window = {"max_content_bytes": 145_000, "min_recent_messages": 1}
    sent = _sent(lambda: session.get_recent_history(**window))
    assert not any("RECURSIVE" in sql for sql in sent), sent
    assert 2 < len(sent) <= 5, sent  # each read takes at least as many rows as all before it (else 12)
    recent = session.get_recent_history(**window)
    assert recent == walked(session, "get_recent_history", **window)
    assert 150 < len(recent.messages) < 300, len(recent.messages)
    assert recent.truncated


def test_reading_on_stops_at_the_depth_limit_and_hands_a_branch_to_the_walk(session):
    for i in range(50):
        session.append_message(msg(f"m{i}"))
    session.append_message(msg("off"), "m10")  # off the path, between the path's rows
    session.append_message(msg("m50"), "m49")
    for i in range(51, 100):
        session.append_message(msg(f"m{i}"))
    everything = {"max_content_bytes": 10**9, "min_recent_messages": 1}
    with override_settings(AGENT_SESSIONS_MAX_PATH_DEPTH=30):  # reached before the branch
        sent = _sent(lambda: session.get_recent_history(**everything))
        assert not any("RECURSIVE" in sql for sql in sent), sent
        recent = session.get_recent_history(**everything)
        assert [m["id"] for m in recent.messages] == [f"m{i}" for i in range(69, 100)]
        assert recent == walked(session, "get_recent_history", **everything)
    sent = _sent(lambda: session.get_recent_history(**everything))
    assert "RECURSIVE" in sent[-1], sent  # read on into the branch: the walk
    recent = session.get_recent_history(**everything)
    assert [m["id"] for m in recent.messages] == [f"m{i}" for i in range(100)]
    assert recent == walked(session, "get_recent_history", **everything)


def test_a_window_larger_than_a_range_read_can_ask_for_is_still_read(session):
    """The Postgres function takes its row limit as an ``integer``: a minimum or a depth limit
    past 2**31 - 1 asks for that many rows at most."""
    for i in range(30):
        session.append_message(msg(f"m{i}"))
    with override_settings(AGENT_SESSIONS_MAX_PATH_DEPTH=10**10):
        assert len(session.get_recent_history(max_content_bytes=10**12).messages) == 30
        recent = session.get_recent_history(max_content_bytes=0, min_recent_messages=3 * 10**9)
        assert len(recent.messages) == 30
        assert not recent.truncated


def test_a_row_that_is_its_own_parent_is_left_to_the_walk(session, session_id):
    _foreign_row(session_id, "self", "self", 1)
    everything = {"max_content_bytes": 10**9, "min_recent_messages": 1}
    with override_settings(AGENT_SESSIONS_MAX_PATH_DEPTH=20):  # the walk goes round until this limit
        sent = _sent(lambda: session.get_recent_history("self", **everything))
        assert "RECURSIVE" in sent[-1], sent
        assert session.get_recent_history("self", **everything) == walked(
            session, "get_recent_history", "self", **everything
        )


def test_a_regenerated_reply_sends_the_recent_window_to_the_walk(session):
    for i in range(10):
        session.append_message(msg(f"m{i}"))
    session.append_message(msg("retry"), "m7")  # newest rows: retry, m9, m8: not retry's chain
    window = {"max_content_bytes": 0, "min_recent_messages": 3}
    recent = session.get_recent_history(**window)
    assert [m["id"] for m in recent.messages] == ["m6", "m7", "retry"]
    assert recent == walked(session, "get_recent_history", **window)
    assert [m["id"] for m in session.get_recent_history("m9", **window).messages] == ["m7", "m8", "m9"]


def test_a_branching_session_iswalked(session):
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
    assert session.get_history("m99") == walked(session, "get_history", "m99")


def test_rows_a_range_cannot_settle_arewalked(session, session_id):
    for i in range(5):
        session.append_message(msg(f"m{i}"))
    # A child stored before its parent, with a depth that passes the gate.
    _foreign_row(session_id, "late-child", "late-parent", 7)
    _foreign_row(session_id, "late-parent", "m4", 6)
    assert session.get_history("late-child") == walked(session, "get_history", "late-child")
    assert [m["id"] for m in session.get_history("late-child")][-2:] == ["late-parent", "late-child"]
    # A parent that is not stored, and a cycle.
    _foreign_row(session_id, "orphan", "nowhere", 1)
    assert [m["id"] for m in session.get_history("orphan")] == ["orphan"]
    _foreign_row(session_id, "cyc-a", "cyc-b", 2)
    _foreign_row(session_id, "cyc-b", "cyc-a", 3)
    # The walk goes round until the session's row count stops it; the read keeps the rows up to the repeat.
    assert session.get_history("cyc-b") == walked(session, "get_history", "cyc-b")
    assert [m["id"] for m in session.get_history("cyc-b")] == ["cyc-a", "cyc-b"]
    # No depth at all (the seed's own writer): the walk.
    _foreign_row(session_id, "no-depth", "m4", None)
    assert session.get_history("no-depth") == walked(session, "get_history", "no-depth")
    assert session.get_history() == walked(session, "get_history")


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
    assert history == walked(session, "get_history")
    recent = session.get_recent_history(**window)
    assert [m["id"] for m in recent.messages] == ["c6", "c7", "c8", "c9"]
    assert recent == walked(session, "get_recent_history", **window)
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
        assert session.get_history(leaf) == walked(session, "get_history", leaf), leaf
        for least, budget in windows:
            recent = {"max_content_bytes": budget, "min_recent_messages": least}
            assert session.get_recent_history(leaf, **recent) == walked(
                session, "get_recent_history", leaf, **recent
            ), (leaf, least, budget)
        assert session.storage.get_raw_path(leaf) == walked(session.storage, "get_raw_path", leaf), leaf


def test_a_deleted_id_whose_children_stayed_cannot_be_stored_again(session):
    # b and c stay, as roots, naming the deleted a as their parent.  Storing a again under c
    # would close the cycle a → c → b → a, which every walk would follow to the depth limit.
    session.append_message(msg("a"))
    session.append_message(msg("b"))
    session.append_message(msg("c"))
    session.delete_messages(["a"])
    with pytest.raises(MessageCycle, match="'a' is named as their parent"):
        session.append_message(msg("a"))
    with pytest.raises(MessageCycle, match="'a' is named as their parent"):
        session.append_message(msg("a"), "c")
    with pytest.raises(InvalidMessage, match="'a' was deleted while messages below it stayed"):
        session.append_message(msg("a"), None)  # no cycle as a root, but it would adopt them
    manager = SessionManager()
    with pytest.raises(MessageCycle, match="'a' is named"):
        manager.append_all(session.session_id, [msg("d"), msg("a"), msg("e")])
    assert session.get_message("a") is None
    assert session.get_message("d") is None  # the batch wrote nothing
    assert [m["id"] for m in session.get_history("c")] == ["b", "c"]
    assert session.append_message(msg("c")) is False  # a duplicate is still just a duplicate
    assert session.append_message(msg("a2"), "c") is True


def _suffix_column_wise(rows, min_recent: int, budget: int, max_depth: int):
    """The recent walk over ``rows`` computed another way (running totals, the stop found by
    bisection): what ``range_reads._recent_suffix`` computes row by row."""
    ids, parents, sizes, *rest = zip(*rows, strict=True)
    totals = list(accumulate(sizes))
    stop = min(max(bisect_right(totals, budget), min_recent), max_depth, len(rows))
    if None in parents[:stop]:
        stop = parents.index(None)
    linked = min(stop, len(rows) - 1)
    if parents[:linked] != ids[1 : linked + 1]:
        return None
    if stop == len(rows):
        return None if parents[-1] in ids else range_reads.ReadOn(parents[-1], totals[-1])
    return list(zip(range(stop + 1), totals[: stop + 1], *(column[: stop + 1] for column in rest), strict=True))


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
    """The suffix stops where the walk stops (a root, the depth limit, one row past the window),
    gives up where it gives up (the rows break the chain first) and reads on where the rows end
    first, as the same walk computed from running totals says."""
    rows = []
    for n, (size, kind) in enumerate(chain):  # newest first: row n's parent is row n + 1
        parent = {"child": f"r{n + 1}", "root": None, "broken": "elsewhere"}[kind]
        rows.append((f"r{n}", parent, size, f"content {n}", None))
    assert range_reads._recent_suffix(rows, min_recent, budget, max_depth) == _suffix_column_wise(
        rows, min_recent, budget, max_depth
    )
