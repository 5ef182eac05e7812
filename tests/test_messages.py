"""Message behaviour of Session on the ORM storage."""

from __future__ import annotations

import asyncio
import json

import pytest

from agent_sessions import HistoryRowStat, InvalidMessage, RecentHistory, Session
from agent_sessions.models import Message
from tests.conftest import msg

pytestmark = pytest.mark.django_db


def ids(items):
    return [m.id if hasattr(m, "id") else m["id"] for m in items]


def test_append_auto_parent_chains_to_latest_leaf(session, build):
    build(session, ["a", "b", "c"])
    assert ids(session.get_history()) == ["a", "b", "c"]
    rows = {r.message_id: r.parent_id for r in Message.objects.filter(session_id=session.session_id)}
    assert rows == {"a": None, "b": "a", "c": "b"}


def test_append_none_parent_makes_a_new_root(session, build):
    build(session, ["a", "b"])
    assert session.append_message(msg("r"), None) is True
    assert Message.objects.get(session_id=session.session_id, message_id="r").parent_id is None
    assert ids(session.get_history()) == ["r"]
    assert ids(session.get_history("b")) == ["a", "b"]


def test_explicit_parent_and_foreign_parent_falls_back_to_root(session, build):
    build(session, ["a", "b", ("c", "a")])
    assert ids(session.get_history()) == ["a", "c"]
    session.append_message(msg("x"), "not-in-this-session")
    row = Message.objects.get(session_id=session.session_id, message_id="x")
    assert row.parent_id is None
    assert row.depth == 1
    assert ids(session.get_history("x")) == ["x"]


def test_parent_from_another_session_is_not_followed(session, session_id, build):
    other = Session.create().for_session(session_id + "-other")
    other.append_message(msg("p"))
    session.append_message(msg("c"), "p")
    assert Message.objects.get(session_id=session_id, message_id="c").parent_id is None


def test_duplicate_id_is_a_noop_returning_false(session, build):
    assert session.append_message(msg("a", text="first")) is True
    assert session.append_message(msg("a", text="second")) is False
    assert session.get_message("a")["parts"][0]["text"] == "first"
    assert Message.objects.filter(session_id=session.session_id).count() == 1


def test_same_id_in_two_sessions_is_isolated(session_id):
    one = Session.create().for_session(session_id)
    two = Session.create().for_session(session_id + "-2")
    assert one.append_message(msg("a", text="one")) is True
    assert two.append_message(msg("a", text="two")) is True
    assert one.get_message("a")["parts"][0]["text"] == "one"
    assert two.get_message("a")["parts"][0]["text"] == "two"
    assert ids(one.search("two")) == []
    assert ids(two.search("two")) == ["a"]


def test_default_namespace_is_empty_string():
    session = Session.create()
    session.append_message(msg("only"))
    assert Message.objects.get(message_id="only").session_id == ""


def test_message_round_trips_unchanged(session):
    message = {
        "id": "m1",
        "role": "assistant",
        "createdAt": "2026-01-01T00:00:00.000Z",
        "metadata": {"nested": [1, 2.5, None, True], "ünï": "日本語"},
        "parts": [
            {"type": "reasoning", "text": "thinking"},
            {
                "type": "tool-weather",
                "toolCallId": "t1",
                "state": "output-available",
                "input": {"city": "Kyoto"},
                "output": {"temp": 21},
            },
            {"type": "text", "text": "It is 21°C"},
        ],
    }
    session.append_message(message)
    assert session.get_message("m1") == message
    assert session.get_history() == [message]


def test_text_content_is_text_parts_joined_by_newline(session):
    session.append_message(
        {
            "id": "m",
            "role": "user",
            "parts": [
                {"type": "text", "text": "one"},
                {"type": "reasoning", "text": "hidden"},
                {"type": "text", "text": "two"},
            ],
        }
    )
    assert Message.objects.get(session_id=session.session_id, message_id="m").text_content == "one\ntwo"


@pytest.mark.parametrize(
    "bad",
    [
        None,
        "a string",
        ["a", "list"],
        {"role": "user", "parts": []},
        {"id": "", "role": "user", "parts": []},
        {"id": "   ", "role": "user", "parts": []},
        {"id": 5, "role": "user", "parts": []},
        {"id": "x", "parts": []},
        {"id": "x", "role": 3, "parts": []},
        {"id": "x", "role": "user"},
        {"id": "x", "role": "user", "parts": "text"},
        {"id": "x", "role": "user", "parts": [{"type": "text", "text": object()}]},
        {"id": "x", "role": "user", "parts": [{"type": "text", "text": float("nan")}]},
        {"id": "x", "role": "user", "parts": [{"type": "text", "text": "\ud800"}]},
    ],
)
def test_invalid_messages_raise_and_write_nothing(session, bad):
    with pytest.raises(InvalidMessage):
        session.append_message(bad)
    assert isinstance(InvalidMessage("x"), ValueError)
    assert Message.objects.filter(session_id=session.session_id).count() == 0
    with pytest.raises(InvalidMessage):
        session.update_message(bad)


def test_oversized_message_is_rejected(session, settings):
    settings.AGENT_SESSIONS_MAX_MESSAGE_BYTES = 100
    with pytest.raises(InvalidMessage, match="bytes"):
        session.append_message(msg("big", text="x" * 200))
    assert session.get_history() == []


def test_nul_in_text_round_trips_and_is_searchable_without_it(session):
    session.append_message(msg("n", text="sunrise\x00sunset"))
    assert session.get_message("n")["parts"][0]["text"] == "sunrise\x00sunset"
    assert ids(session.search("sunset")) == ["n"]


def test_update_message_reindexes_search(session):
    session.append_message(msg("a", text="alpha"))
    assert ids(session.search("alpha")) == ["a"]
    session.update_message(msg("a", text="omega"))
    assert session.search("alpha") == []
    assert ids(session.search("omega")) == ["a"]
    assert session.get_message("a")["parts"][0]["text"] == "omega"


def test_update_keeps_running_token_totals_below(session, build):
    build(session, ["a", "b", "c"])
    before = {r.message_id: r.path_tokens for r in Message.objects.filter(session_id=session.session_id)}
    session.update_message(msg("a", text="many more words in this message than before " * 10))
    rows = {r.message_id: r for r in Message.objects.filter(session_id=session.session_id)}
    delta = rows["a"].path_tokens - before["a"]
    assert delta > 0
    assert rows["b"].path_tokens == before["b"] + delta
    assert rows["c"].path_tokens == rows["a"].tokens + rows["b"].tokens + rows["c"].tokens


def test_update_of_unknown_message_writes_nothing(session):
    session.update_message(msg("ghost"))
    assert session.get_message("ghost") is None


def test_delete_messages_and_orphans_become_roots(session, build):
    build(session, ["a", "b", "c", "d"])
    session.delete_messages(["b"])
    assert session.get_message("b") is None
    assert ids(session.get_history()) == ["c", "d"]
    assert session.get_path_length() == 2
    rows = {r.message_id: r for r in Message.objects.filter(session_id=session.session_id)}
    assert rows["c"].depth == 1
    assert rows["d"].depth == 2
    assert rows["d"].path_tokens == rows["c"].tokens + rows["d"].tokens
    assert session.search("b") == []


def test_delete_leaf_moves_latest_leaf_back(session, build):
    build(session, ["a", "b"])
    session.delete_messages(["b"])
    assert session.get_latest_leaf()["id"] == "a"
    session.append_message(msg("c"))
    assert ids(session.get_history()) == ["a", "c"]


def test_clear_messages_removes_messages_and_compactions_of_this_session_only(session, session_id, build):
    build(session, ["a", "b", "c"])
    session.add_compaction("sum", "a", "b")
    other = Session.create().for_session(session_id + "-keep")
    other.append_message(msg("k"))
    session.clear_messages()
    assert session.get_history() == []
    assert session.get_compactions() == []
    assert session.get_latest_leaf() is None
    assert ids(other.get_history()) == ["k"]


def test_branches_oldest_first(session, build):
    build(session, ["root", ("x", "root"), ("y", "root"), ("z", "root")])
    assert ids(session.get_branches("root")) == ["x", "y", "z"]
    assert session.get_branches("x") == []
    assert session.get_branches("unknown") == []


def test_latest_leaf_is_most_recent_childless_message(session, build):
    assert session.get_latest_leaf() is None
    build(session, ["a", "b", ("c", "a")])
    assert session.get_latest_leaf()["id"] == "c"
    session.append_message(msg("d"), "b")
    assert session.get_latest_leaf()["id"] == "d"


def test_path_length_and_history_by_leaf(session, build):
    build(session, ["a", "b", "c", ("x", "a")])
    assert session.get_path_length("c") == 3
    assert session.get_path_length("x") == 2
    assert session.get_path_length() == 2
    assert session.get_path_length("unknown") == 0
    assert ids(session.get_history("c")) == ["a", "b", "c"]
    assert session.get_history("unknown") == []


def test_insertion_order_breaks_ties_in_time(session):
    # Many messages share a timestamp on coarse clocks; order must follow insertion.
    for i in range(30):
        session.append_message(msg(f"m{i}"), "root" if i else None)
    assert ids(session.get_branches("m0")) == []
    session.append_message(msg("root"), None)
    for i in range(5):
        session.append_message(msg(f"c{i}"), "root")
    assert ids(session.get_branches("root")) == [f"c{i}" for i in range(5)]


def test_overlays_applied_on_read(session, build):
    build(session, ["m0", "m1", "m2", "m3", "m4"])
    stored = session.add_compaction("S1", "m1", "m3")
    history = session.get_history()
    assert ids(history) == ["m0", f"compaction_{stored.id}", "m4"]
    assert history[1] == {
        "id": f"compaction_{stored.id}",
        "role": "assistant",
        "parts": [{"type": "text", "text": "S1"}],
    }
    assert session.get_path_length() == 5  # raw path, no overlays
    assert Message.objects.filter(session_id=session.session_id).count() == 5  # originals stay


def test_newest_overlay_with_same_from_wins(session, build):
    build(session, ["m0", "m1", "m2", "m3", "m4", "m5"])
    session.add_compaction("old", "m1", "m2")
    newest = session.add_compaction("new", "m1", "m4")
    assert ids(session.get_history()) == ["m0", f"compaction_{newest.id}", "m5"]


def test_sibling_branch_overlays_never_leak(session, build):
    build(session, ["a", "b", "c", ("x", "a"), "y", "z"])
    sibling = session.add_compaction("sibling summary", "x", "y")
    assert ids(session.get_history("c")) == ["a", "b", "c"]
    assert ids(session.get_history("z")) == ["a", f"compaction_{sibling.id}", "z"]


def test_overlay_whose_end_is_off_the_path_is_ignored(session, build):
    build(session, ["a", "b", "c", ("x", "b")])
    session.add_compaction("sum", "b", "c")
    assert ids(session.get_history("x")) == ["a", "b", "x"]


def test_get_compactions_oldest_first(session, build):
    build(session, ["a", "b", "c"])
    first = session.add_compaction("one", "a", "b")
    second = session.add_compaction("two", "a", "c")
    got = session.get_compactions()
    assert [c.id for c in got] == [first.id, second.id]
    assert got[0].created_at is not None


def test_recent_history_fits_budget(session):
    for i in range(10):
        session.append_message(msg(f"m{i}", text="x" * 50))
    stats = session.get_history_row_stats()
    size = stats[0].bytes
    assert all(s.bytes == size for s in stats)
    recent = session.get_recent_history(max_content_bytes=size * 3)
    assert isinstance(recent, RecentHistory)
    assert ids(recent.messages) == ["m7", "m8", "m9"]
    assert recent.truncated is True
    assert recent.total_content_bytes == size * 3
    everything = session.get_recent_history(max_content_bytes=10**9)
    assert len(everything.messages) == 10
    assert everything.truncated is False
    assert everything.total_content_bytes == size * 10


def test_recent_history_honours_min_recent_messages(session):
    for i in range(5):
        session.append_message(msg(f"m{i}", text="y" * 100))
    recent = session.get_recent_history(max_content_bytes=1, min_recent_messages=2)
    assert ids(recent.messages) == ["m3", "m4"]
    assert recent.truncated is True
    at_least_one = session.get_recent_history(max_content_bytes=0, min_recent_messages=0)
    assert ids(at_least_one.messages) == ["m4"]


def test_recent_history_applies_overlays_inside_window(session, build):
    build(session, ["m0", "m1", "m2", "m3", "m4", "m5"])
    inside = session.add_compaction("inside", "m3", "m4")
    recent = session.get_recent_history(max_content_bytes=10**6)
    assert ids(recent.messages) == ["m0", "m1", "m2", f"compaction_{inside.id}", "m5"]
    size = session.get_history_row_stats()[0].bytes
    window = session.get_recent_history(max_content_bytes=size * 3)
    assert ids(window.messages) == [f"compaction_{inside.id}", "m5"]


def test_recent_history_of_empty_or_unknown(session):
    assert session.get_recent_history(max_content_bytes=100) == RecentHistory([], False, 0)
    assert session.get_recent_history("nope", max_content_bytes=100) == RecentHistory([], False, 0)


def test_history_row_stats_without_content(session, build):
    build(session, ["a", "b"])
    stats = session.get_history_row_stats()
    expected = len(json.dumps(msg("a"), ensure_ascii=False, separators=(",", ":")).encode())
    assert stats[0] == HistoryRowStat(id="a", role="user", bytes=expected)
    assert [s.id for s in stats] == ["a", "b"]
    assert session.get_history_row_stats("unknown") == []


def test_bytes_count_utf8(session):
    session.append_message(msg("j", text="日本語"))
    stored = json.dumps(msg("j", text="日本語"), ensure_ascii=False, separators=(",", ":"))
    assert session.get_history_row_stats()[0].bytes == len(stored.encode("utf-8"))


@pytest.mark.django_db(transaction=True)
def test_async_twins(session):
    async def run():
        assert await session.aappend_message(msg("a")) is True
        assert await session.aappend_message(msg("a")) is False
        await session.aappend_message(msg("b"))
        history = await session.aget_history()
        leaf = await session.aget_latest_leaf()
        length = await session.aget_path_length()
        hits = await session.asearch("b text")
        return history, leaf, length, hits

    history, leaf, length, hits = asyncio.run(run())
    assert ids(history) == ["a", "b"]
    assert leaf["id"] == "b"
    assert length == 2
    assert ids(hits) == ["b"]


def test_for_session_after_other_builders_still_namespaces(session_id):
    s = Session.create().with_cached_prompt().for_session(session_id)
    s.append_message(msg("a"))
    assert Message.objects.get(message_id="a", session_id=session_id)


@pytest.mark.postgres_only
def test_reads_on_postgres_through_psycopgs_own_cursor_match_djangos():
    """Hot reads bind server-side on the bare connection, and return what Django's cursor returns."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from agent_sessions.storage.orm import DjangoSessionProvider

    provider = DjangoSessionProvider("bare-reads")
    provider.append_message({"id": "p0", "role": "user", "parts": [{"type": "text", "text": "t0"}]})
    provider.append_message({"id": "p1", "role": "user", "parts": [{"type": "text", "text": "t1 % ' \\ ünï"}]})
    provider.add_compaction("summary", "p0", "p0")

    def reads():
        return provider.get_history(), provider.get_recent_history(max_content_bytes=10**6), provider.get_compactions()

    bare = reads()
    with CaptureQueriesContext(connection) as ctx:  # logged: Django's cursor
        logged = reads()
    assert len(ctx.captured_queries) >= 3
    assert bare == logged
    assert [m["id"] for m in bare[0]][1:] == ["p1"]
