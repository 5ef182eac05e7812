"""SessionManager lifecycle and convenience methods."""

from __future__ import annotations

import asyncio
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agent_sessions import InvalidMessage, SessionManager
from agent_sessions.manager import SessionNotFound
from agent_sessions.models import (
    Compaction,
    CompactionJob,
    ContextBlockRecord,
    Message,
    SearchEntry,
    SessionRecord,
)
from agent_sessions.session import Session
from tests.conftest import msg

pytestmark = pytest.mark.django_db


def ids(messages):
    return [m["id"] for m in messages]


def parents(session_id):
    return dict(Message.objects.filter(session_id=session_id).values_list("message_id", "parent_id"))


@pytest.fixture
def manager():
    return SessionManager()


@pytest.fixture
def sid(manager):
    return manager.create("Chat").id


# ── lifecycle ────────────────────────────────────────────────────────
def test_create_returns_a_fresh_registry_row(manager):
    info = manager.create("Chat", model="m-1", source="web")
    assert re.fullmatch(r"[0-9a-f]{32}", info.id)
    assert (info.name, info.model, info.source, info.parent_session_id) == ("Chat", "m-1", "web", None)
    assert (info.input_tokens, info.output_tokens, info.estimated_cost, info.end_reason) == (0, 0, 0.0, None)
    assert info.created_at is not None
    assert info.updated_at == info.created_at
    assert manager.get(info.id) == info
    assert manager.create("Chat").id != info.id


def test_create_with_parent_and_bad_names(manager):
    parent = manager.create("P")
    child = manager.create("C", parent_session_id=parent.id)
    assert child.parent_session_id == parent.id
    with pytest.raises(TypeError):
        manager.create(None)
    with pytest.raises(ValueError, match="name must not contain NUL characters"):
        manager.create("bad\x00name")
    assert SessionRecord.objects.count() == 2


def test_get_unknown_is_none(manager):
    assert manager.get("nope") is None


def test_list_is_newest_update_first_with_creation_order_for_ties(manager):
    created = [manager.create(f"s{i}").id for i in range(6)]
    assert [s.id for s in manager.list()] == created[::-1]
    manager.append(created[2], msg("a"))
    assert [s.id for s in manager.list()][0] == created[2]


def test_rename_changes_name_and_bumps_updated_at(manager, sid):
    before = manager.get(sid)
    manager.rename(sid, "Renamed")
    after = manager.get(sid)
    assert after.name == "Renamed"
    assert after.updated_at > before.updated_at
    manager.rename("unknown", "x")  # no row, no error
    assert manager.get("unknown") is None


def test_delete_leaves_nothing_behind_in_any_table(manager):
    doomed, kept = manager.create("doomed").id, manager.create("kept").id
    for s in (doomed, kept):
        manager.append_all(s, [msg("a"), msg("b"), msg("c")])
        manager.add_compaction(s, "summary", "a", "b")
        ContextBlockRecord.objects.create(label=f"memory_{s}", content="facts")
        ContextBlockRecord.objects.create(label=f"_system_prompt_{s}", content="prompt")
        SearchEntry.objects.create(label=f"notes_{s}", key="k", content="note")
        CompactionJob.objects.create(session_id=s, last_error="boom")
    ContextBlockRecord.objects.create(label="memory", content="shared")
    ContextBlockRecord.objects.create(label=f"memory_{doomed.upper()}", content="another session's")

    manager.delete(doomed)

    assert not Message.objects.filter(session_id=doomed).exists()
    assert not Compaction.objects.filter(session_id=doomed).exists()
    assert not SessionRecord.objects.filter(id=doomed).exists()
    assert not SearchEntry.objects.filter(label__contains=doomed).exists()
    assert list(CompactionJob.objects.values_list("session_id", flat=True)) == [kept]
    assert set(ContextBlockRecord.objects.values_list("label", flat=True)) == {
        f"memory_{kept}",
        f"_system_prompt_{kept}",
        "memory",
        f"memory_{doomed.upper()}",
    }
    assert manager.get_message_count(kept) == 3
    assert len(manager.get_compactions(kept)) == 1
    assert SearchEntry.objects.filter(label=f"notes_{kept}").count() == 1


def test_delete_forgets_the_cached_session_and_refuses_the_default_namespace(manager, sid):
    first = manager.get_session(sid)
    manager.delete(sid)
    assert manager.get_session(sid) is not first
    with pytest.raises(ValueError, match=r"refusing to purge the default \(empty\) session namespace"):
        manager.delete("")


# ── sessions ─────────────────────────────────────────────────────────
def test_get_session_is_lazy_cached_and_namespaced(manager, sid):
    session = manager.get_session(sid)
    assert isinstance(session, Session)
    assert session is manager.get_session(sid)
    assert session.session_id == sid
    assert session.storage.session_id == sid
    assert manager.get_session("other") is not session


def test_builder_calls_are_replayed_in_order_on_each_session():
    calls = []

    class Spy:
        def __getattr__(self, name):
            def method(*args, **kwargs):
                calls.append((name, args, kwargs))
                return self

            return method

    fn, handler, counter, provider = object(), object(), object(), object()
    manager = (
        SessionManager()
        .with_context("soul", provider=provider)
        .with_context("memory", description="Facts", max_tokens=1100)
        .with_cached_prompt()
        .on_compaction(fn)
        .compact_after(100_000, token_counter=counter)
        .on_compaction_error(handler)
    )
    manager.replay(Spy())
    assert calls == [
        ("with_context", ("soul",), {"provider": provider}),
        ("with_context", ("memory",), {"description": "Facts", "max_tokens": 1100}),
        ("with_cached_prompt", (None,), {}),
        ("on_compaction", (fn,), {}),
        ("compact_after", (100_000,), {"token_counter": counter}),
        ("on_compaction_error", (handler,), {}),
    ]


def test_compaction_config_propagates_and_append_all_checks_once(sid):
    from agent_sessions import create_compact_function

    prompts = []

    def summarize(prompt):
        prompts.append(prompt)
        return "SUMMARY"

    manager = (
        SessionManager()
        .on_compaction(create_compact_function(summarize, protect_head=1, tail_token_budget=10, min_tail_messages=1))
        .compact_after(60)
    )
    manager.append_all(sid, [msg(f"m{i}", text=f"message number {i} " * 3) for i in range(8)])
    assert len(prompts) == 1  # one check per batch, not per message
    [overlay] = manager.get_compactions(sid)
    assert overlay.from_message_id == "m1"
    assert manager.get_history(sid)[1]["parts"][0]["text"] == "SUMMARY"


def test_builder_call_after_get_session_rebuilds_sessions(manager, sid):
    first = manager.get_session(sid)
    assert manager.with_context("memory") is manager
    assert manager.get_session(sid) is not first


def test_context_blocks_are_namespaced_by_session_id(sid):
    manager = SessionManager().with_context("memory", max_tokens=1000)
    manager.get_session(sid).replace_context_block("memory", "likes tea")
    assert ContextBlockRecord.objects.get(label=f"memory_{sid}").content == "likes tea"
    manager.delete(sid)
    assert not ContextBlockRecord.objects.filter(label=f"memory_{sid}").exists()


def test_named_manager_is_registered():
    from agent_sessions import registry
    from agent_sessions.manager import get_registered

    manager = SessionManager(name="test-support")
    try:
        assert get_registered("test-support") is manager
        assert manager.name == "test-support"
        assert manager.get_session("s1").config_name == "test-support"  # read by auto-compaction
        assert SessionManager().get_session("s1").config_name is None
        assert get_registered("never-registered") is None
    finally:
        registry.unregister("test-support")


# ── messages ─────────────────────────────────────────────────────────
def test_append_returns_the_id_and_follows_parent_rules(manager, sid):
    assert manager.append(sid, msg("a")) == "a"
    assert manager.append(sid, msg("b")) == "b"
    assert manager.append(sid, msg("r"), None) == "r"
    assert manager.append(sid, msg("c"), "a") == "c"
    assert parents(sid) == {"a": None, "b": "a", "r": None, "c": "a"}
    assert manager.append(sid, msg("a", text="again")) == "a"  # duplicate: no-op
    assert manager.get_session(sid).get_message("a")["parts"][0]["text"] == "a text"


def test_writes_bump_updated_at(manager, sid):
    def stamp():
        return manager.get(sid).updated_at

    previous = stamp()
    for write in (
        lambda: manager.append(sid, msg("a")),
        lambda: manager.upsert(sid, msg("a", text="new")),
        lambda: manager.append_all(sid, [msg("b"), msg("c")]),
        lambda: manager.add_compaction(sid, "s", "a", "b"),
        lambda: manager.delete_messages(sid, ["c"]),
        lambda: manager.add_usage(sid, 1, 1, 0.0),
        lambda: manager.clear_messages(sid),
    ):
        write()
        assert stamp() > previous
        previous = stamp()


def test_upsert_inserts_then_updates_in_place(manager, sid):
    manager.append(sid, msg("a"))
    assert manager.upsert(sid, msg("b", text="first")) == "b"
    assert manager.upsert(sid, msg("b", role="assistant", text="second"), None) == "b"
    assert manager.get_message_count(sid) == 2
    assert parents(sid) == {"a": None, "b": "a"}  # the parent stays
    stored = manager.get_session(sid).get_message("b")
    assert (stored["role"], stored["parts"][0]["text"]) == ("assistant", "second")
    assert [r.id for r in manager.search("second")] == ["b"]
    assert manager.search("first") == []


def test_append_all_chains_and_attaches_like_append(manager, sid):
    assert manager.append_all(sid, []) is None
    manager.append(sid, msg("a"))
    assert manager.append_all(sid, [msg("b"), msg("c"), msg("d")]) == "d"
    assert manager.append_all(sid, [msg("x"), msg("y")], "b") == "y"
    assert manager.append_all(sid, [msg("r1"), msg("r2")], None) == "r2"
    assert parents(sid) == {"a": None, "b": "a", "c": "b", "d": "c", "x": "b", "y": "x", "r1": None, "r2": "r1"}
    assert ids(manager.get_history(sid, "y")) == ["a", "b", "x", "y"]
    assert ids(manager.get_history(sid)) == ["r1", "r2"]


def test_append_all_stores_the_same_totals_as_single_appends(manager):
    one, many = manager.create("one").id, manager.create("many").id
    batch = [msg(f"m{i}", "user" if i % 2 else "assistant", "word " * (i * 3)) for i in range(12)]
    manager.append(one, msg("root"))
    manager.append(many, msg("root"))
    for m in batch:
        manager.append(one, m)
    manager.append_all(many, batch)

    def totals(s):
        return list(
            Message.objects.filter(session_id=s)
            .order_by("seq")
            .values_list("message_id", "depth", "tokens", "path_tokens")
        )

    assert totals(many) == totals(one)
    assert manager.get_session(many).get_path_length() == 13


def test_append_all_skips_stored_ids_but_keeps_chaining(manager, sid):
    manager.append_all(sid, [msg("a"), msg("b")])
    assert manager.append_all(sid, [msg("b"), msg("c"), msg("a"), msg("d")]) == "d"
    assert parents(sid) == {"a": None, "b": "a", "c": "b", "d": "a"}
    assert Message.objects.get(session_id=sid, message_id="d").depth == 2


def test_append_all_with_a_bad_message_writes_nothing(manager, sid):
    with pytest.raises(InvalidMessage):
        manager.append_all(sid, [msg("a"), {"id": "b", "role": "user"}])
    assert manager.get_message_count(sid) == 0


def test_append_all_with_a_bad_message_late_in_a_long_batch_writes_nothing(manager, sid):
    # Rows stream into the table as they are validated (COPY on Postgres, 500-row
    # INSERTs on SQLite): a bad one past the first statements rolls all of them back.
    manager.append(sid, msg("root"))
    batch = [msg(f"m{i}") for i in range(1500)]
    batch[1200] = {"id": "bad", "role": "user", "parts": "not a list"}
    with pytest.raises(InvalidMessage, match="'parts' must be a list"):
        manager.append_all(sid, batch)
    assert manager.get_message_count(sid) == 1
    with pytest.raises(InvalidMessage, match="'id' must be a non-empty string"):
        manager.append_all(sid, [msg("x"), {"role": "user", "parts": []}])  # refused before any SQL
    assert manager.append_all(sid, [msg("after")]) == "after"  # the connection is fine
    assert ids(manager.get_history(sid)) == ["root", "after"]


def test_append_all_costs_a_few_queries_per_batch_not_per_message(manager, sid):
    manager.append(sid, msg("root"))
    batch = [msg(f"m{i}") for i in range(400)]
    with CaptureQueriesContext(connection) as ctx:
        manager.append_all(sid, batch)
    # SQLite adds five for indexing the batch after it (storage.sqlite.deferred_indexing).
    assert len(ctx.captured_queries) <= 12 + (5 if connection.vendor == "sqlite" else 0)
    assert manager.get_session(sid).get_path_length() == 401


def test_history_count_branches_clear_and_delete(manager, sid):
    manager.append_all(sid, [msg("a"), msg("b"), msg("c")])
    manager.append(sid, msg("d"), "a")
    assert ids(manager.get_history(sid)) == ["a", "d"]
    assert ids(manager.get_history(sid, "c")) == ["a", "b", "c"]
    assert manager.get_message_count(sid) == 4  # every branch
    assert ids(manager.get_branches(sid, "a")) == ["b", "d"]
    manager.delete_messages(sid, ["d"])
    assert manager.get_message_count(sid) == 3
    assert ids(manager.get_branches(sid, "a")) == ["b"]
    manager.add_compaction(sid, "s", "a", "b")
    manager.clear_messages(sid)
    assert manager.get_message_count(sid) == 0
    assert manager.get_compactions(sid) == []
    assert manager.get_history(sid) == []
    assert manager.get(sid) is not None  # the session itself stays


def test_compactions_overlay_the_history(manager, sid):
    manager.append_all(sid, [msg("a"), msg("b"), msg("c"), msg("d")])
    stored = manager.add_compaction(sid, "SUMMARY", "b", "c")
    assert [c.id for c in manager.get_compactions(sid)] == [stored.id]
    history = manager.get_history(sid)
    assert ids(history) == ["a", f"compaction_{stored.id}", "d"]
    assert history[1]["parts"][0]["text"] == "SUMMARY"


# ── split, usage ─────────────────────────────────────────────────────
def test_compact_and_split_ends_the_old_session_and_seeds_the_new(manager):
    old = manager.create("Chat", model="m-1", source="web")
    manager.append_all(old.id, [msg("a"), msg("b")])
    new = manager.compact_and_split(old.id, "They talked about tea.")
    assert manager.get(old.id).end_reason == "compaction"
    assert (new.name, new.model, new.source, new.parent_session_id, new.end_reason) == (
        "Chat",
        "m-1",
        "web",
        old.id,
        None,
    )
    [first] = manager.get_history(new.id)
    assert first["role"] == "assistant"
    assert first["parts"] == [{"type": "text", "text": "[Context from previous session]\n\nThey talked about tea."}]
    assert manager.get_message_count(old.id) == 2  # the old conversation is kept
    assert [s.id for s in manager.list()][:2] == [new.id, old.id]
    assert manager.get(new.id) == new  # what it returned is the row as stored (updated_at included)
    assert SessionRecord.objects.get(pk=new.id).message_count == 1
    assert manager.compact_and_split(new.id, "again", name="Part 3").name == "Part 3"


def test_compact_and_split_unknown_session(manager):
    with pytest.raises(SessionNotFound):
        manager.compact_and_split("nope", "summary")
    assert isinstance(SessionNotFound("x"), LookupError)
    assert SessionRecord.objects.count() == 0


def test_add_usage_accumulates(manager, sid):
    manager.add_usage(sid, 10, 5, 0.25)
    manager.add_usage(sid, 1, 2, 0.5)
    info = manager.get(sid)
    assert (info.input_tokens, info.output_tokens, info.estimated_cost) == (11, 7, 0.75)
    for bad in ((1.5, 1, 0.1), (1, True, 0.1), (1, 1, float("nan")), (1, 1, "0.1")):
        with pytest.raises((TypeError, ValueError)):
            manager.add_usage(sid, *bad)
    assert manager.get(sid).input_tokens == 11
    manager.add_usage("unknown", 1, 1, 1.0)  # no row, no error


# ── search and tools ─────────────────────────────────────────────────
def test_search_spans_sessions_and_reports_the_session(manager):
    s1, s2 = manager.create("one").id, manager.create("two").id
    manager.append(s1, msg("a", text="deploy on Friday afternoon"))
    manager.append(s2, msg("b", "assistant", "the deploy moved to Friday"))
    manager.append(s2, msg("c", text="deploy tomorrow"))
    hits = manager.search("deploy friday")
    assert {(h.id, h.session_id, h.role) for h in hits} == {("a", s1, "user"), ("b", s2, "assistant")}
    assert {h.content for h in hits} == {"deploy on Friday afternoon", "the deploy moved to Friday"}
    assert len(manager.search("deploy", limit=2)) == 2
    assert manager.search("   ") == []
    assert manager.search("") == []


def test_session_search_tool(manager, sid):
    from agent_sessions.tools import Tool

    manager.append(sid, msg("a", text="the deploy is on Friday"))
    manager.append(sid, msg("b", "assistant", "ok, Friday deploy noted"))
    tools = manager.tools()
    assert list(tools) == ["session_search"]
    tool = tools["session_search"]
    assert isinstance(tool, Tool)
    assert tool.parameters["required"] == ["query"]
    out = tool.execute(query="friday deploy")
    assert set(out.split("\n---\n")) == {"[user] the deploy is on Friday", "[assistant] ok, Friday deploy noted"}
    assert tool.execute(query="zebra") == "No results found."
    assert tool.execute().startswith("Error:")
    assert tool.to_openai()["function"]["name"] == "session_search"


def test_searchable_history_block_shows_a_count_and_searches_every_session(manager, sid):
    from agent_sessions.manager.history import SearchableHistoryProvider

    configured = SessionManager().with_searchable_history("history")
    (method, args, kwargs) = configured._calls[-1]
    assert (method, args, kwargs["description"]) == ("with_context", ("history",), "Cross-session conversation history")
    provider = kwargs["provider"]
    assert isinstance(provider, SearchableHistoryProvider)
    assert not hasattr(provider, "set")
    assert provider.get() == "1 session available for search."
    manager.create("second")
    assert provider.get() == "2 sessions available for search."
    assert provider.search("tea") is None
    manager.append(sid, msg("a", text="green tea please"))
    assert provider.search("tea") == "[user] green tea please"


def test_searchable_history_renders_in_the_prompt(sid):
    manager = SessionManager().with_searchable_history("history")
    other = manager.create("other").id
    manager.append(other, msg("t", text="green tea please"))
    session = manager.get_session(sid)
    [block] = session.get_context_blocks()
    assert block.label == "history"
    assert block.is_searchable
    assert not block.writable
    assert block.content == "2 sessions available for search."
    tools = session.tools()
    assert "set_context" not in tools
    assert tools["search_context"].execute(label="history", query="tea") == "[user] green tea please"


# ── async ────────────────────────────────────────────────────────────
@pytest.mark.django_db(transaction=True)
def test_async_twins():
    manager = SessionManager()

    async def run():
        info = await manager.acreate("Async")
        assert await manager.aappend(info.id, msg("a")) == "a"
        assert await manager.aappend_all(info.id, [msg("b"), msg("c")]) == "c"
        forked = await manager.afork(info.id, "b", "Fork")
        await manager.aadd_usage(info.id, 1, 2, 0.5)
        return info, forked, await manager.alist(), await manager.aget_history(forked.id)

    info, forked, listed, history = asyncio.run(run())
    assert [s.id for s in listed] == [info.id, forked.id]  # usage bumped the original last
    assert [m["parts"][0]["text"] for m in history] == ["a text", "b text"]
    for name in (
        "aget",
        "arename",
        "adelete",
        "aupsert",
        "aget_message_count",
        "aclear_messages",
        "adelete_messages",
        "aget_branches",
        "afork_mapping",
        "aadd_compaction",
        "aget_compactions",
        "acompact_and_split",
        "asearch",
        "atools",
        "aget_session",
    ):
        assert asyncio.iscoroutinefunction(getattr(SessionManager, name)), name


def test_contract_shape(manager):
    info = manager.create("Chat", model="some-model", source="web")
    assert manager.append(info.id, {"id": "a", "role": "user", "parts": [{"type": "text", "text": "hello"}]}) == "a"
    assert manager.get_message_count(info.id) == 1
    manager.add_usage(info.id, 10, 5, 0.25)
    again = manager.get(info.id)
    assert (again.input_tokens, again.output_tokens, again.estimated_cost) == (10, 5, 0.25)
    forked = manager.fork(info.id, "a", "Fork")
    assert forked.parent_session_id == info.id
    assert [s.id for s in manager.list()][0] == forked.id


@pytest.mark.django_db
def test_session_cache_is_bounded_lru(settings):
    from agent_sessions import SessionManager

    settings.AGENT_SESSIONS_SESSION_CACHE_SIZE = 2
    manager = SessionManager()
    a = manager.get_session("lru-a")
    manager.get_session("lru-b")
    assert manager.get_session("lru-a") is a  # a is now the most recent
    manager.get_session("lru-c")  # evicts b
    assert list(manager._sessions) == ["lru-a", "lru-c"]
    assert manager.get_session("lru-a") is a
