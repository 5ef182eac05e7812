"""Session.compact, overlays and iterative compaction, on the ORM and a custom storage."""

from __future__ import annotations

import asyncio

import pytest

from agent_sessions import (
    COMPACTION_PREFIX,
    CompactContext,
    CompactionNotConfigured,
    CompactResult,
    Session,
    StaticProvider,
    StoredCompaction,
    create_compact_function,
)
from tests.conftest import msg
from tests.support.memory_storage import MemoryStorage, chain

pytestmark = pytest.mark.django_db


def fixed(from_id, to_id, summary="SUMMARY", calls=None):
    """A compaction function that always proposes the same range (and records its input)."""

    def fn(messages, context):
        if calls is not None:
            calls.append((list(messages), context))
        return CompactResult(from_id, to_id, summary)

    return fn


def ids(history):
    return [m["id"] for m in history]


# ── configuration and trivial cases ─────────────────────────────────────────


def test_compact_without_function_raises(session):
    session.append_message(msg("a"))
    with pytest.raises(CompactionNotConfigured):
        session.compact()
    with pytest.raises(CompactionNotConfigured):
        asyncio.run(session.acompact())


def test_too_few_messages_returns_none_and_stores_nothing(session):
    session.on_compaction(create_compact_function(lambda p: "S", protect_head=3, min_tail_messages=2))
    chain(session, 5)
    assert session.compact() is None
    assert session.get_compactions() == []


def test_empty_session_returns_none_without_calling_the_function(session):
    calls = []
    session.on_compaction(fixed("a", "b", calls=calls))
    assert session.compact() is None
    assert calls == []


def test_blank_summary_stores_nothing(session):
    chain(session, 4)
    session.on_compaction(fixed("m1", "m2", summary="   "))
    assert session.compact() is None
    assert session.get_compactions() == []


# ── storing and applying ────────────────────────────────────────────────────


def test_overlay_is_stored_and_applied_and_originals_stay(session):
    summaries = []

    def summarize(prompt):
        summaries.append(prompt)
        return "SUMMARY ONE"

    session.on_compaction(create_compact_function(summarize, protect_head=1, tail_token_budget=10, min_tail_messages=1))
    chain(session, 6)
    result = session.compact()
    assert result == CompactResult("m1", "m4", "SUMMARY ONE")
    [stored] = session.get_compactions()
    assert (stored.from_message_id, stored.to_message_id, stored.summary) == ("m1", "m4", "SUMMARY ONE")
    history = session.get_history()
    assert ids(history) == ["m0", f"{COMPACTION_PREFIX}{stored.id}", "m5"]
    assert history[1] == {
        "id": f"{COMPACTION_PREFIX}{stored.id}",
        "role": "assistant",
        "parts": [{"type": "text", "text": "SUMMARY ONE"}],
    }
    assert session.get_message("m2")["id"] == "m2"  # originals stay in the table
    assert session.get_path_length() == 6
    assert "m1-word" in summaries[0]
    assert "m5-word" not in summaries[0]


def test_function_gets_history_and_the_session_counter(session):
    calls = []

    def counter(data):
        return 1

    session.on_compaction(fixed("m1", "m2", calls=calls)).compact_after(10**9, token_counter=counter)
    chain(session, 4)
    session.compact()
    messages, context = calls[-1]
    assert ids(messages) == ["m0", "m1", "m2", "m3"]
    assert context == CompactContext(token_counter=counter)


def test_compact_a_given_leaf_returns_that_paths_range(session):
    chain(session, 5)
    chain(session, 3, prefix="b", parent="m1")
    session.on_compaction(fixed("m2", "m3"))
    result = session.compact("m4")
    assert (result.from_message_id, result.to_message_id) == ("m2", "m3")


# ── iterative compaction ────────────────────────────────────────────────────


def test_iterative_compaction_extends_from_the_earliest_overlay(session):
    prompts = []

    def summarize(prompt):
        prompts.append(prompt)
        return f"SUMMARY {len(prompts)}"

    session.on_compaction(create_compact_function(summarize, protect_head=1, tail_token_budget=10, min_tail_messages=1))
    chain(session, 6)
    first = session.compact()
    chain(session, 4, prefix="n")
    second = session.compact()
    assert first.from_message_id == second.from_message_id == "m1"
    assert second.to_message_id == "n2"
    assert "<previous_summary>\nSUMMARY 1\n</previous_summary>" in prompts[1]
    history = session.get_history()
    newest = session.get_compactions()[-1]
    assert ids(history) == ["m0", f"{COMPACTION_PREFIX}{newest.id}", "n3"]
    assert history[1]["parts"][0]["text"] == "SUMMARY 2"
    assert len(session.get_compactions()) == 2  # the first overlay is kept, just superseded


def test_range_after_an_overlay_is_extended_back_to_its_start(session):
    chain(session, 8)
    session.add_compaction("old summary", "m1", "m2")
    session.on_compaction(fixed("m4", "m6", "new summary"))
    result = session.compact()
    assert (result.from_message_id, result.to_message_id) == ("m1", "m6")
    newest = session.get_compactions()[-1]
    assert (newest.from_message_id, newest.to_message_id) == ("m1", "m6")
    assert ids(session.get_history()) == ["m0", f"{COMPACTION_PREFIX}{newest.id}", "m7"]


def test_compaction_message_boundaries_map_to_the_overlays_own_ids(session):
    chain(session, 8)
    old = session.add_compaction("old summary", "m2", "m4")
    marker = f"{COMPACTION_PREFIX}{old.id}"
    session.on_compaction(fixed(marker, marker, "again"))
    result = session.compact()
    assert (result.from_message_id, result.to_message_id) == ("m2", "m4")
    newest = f"{COMPACTION_PREFIX}{session.get_compactions()[-1].id}"
    session.on_compaction(fixed("m1", newest, "wider"))
    assert (session.compact().from_message_id, session.get_compactions()[-1].to_message_id) == ("m1", "m4")
    session.on_compaction(fixed("m1", marker, "superseded overlay"))  # no longer in the history
    assert session.compact() is None


def test_overlay_of_a_sibling_branch_is_left_alone(session):
    chain(session, 6)  # m0..m5
    chain(session, 5, prefix="b", parent="m2")  # m0 m1 m2 b0..b4
    session.on_compaction(fixed("m3", "m4", "main summary"))
    main = session.compact("m5")
    session.on_compaction(fixed("b0", "b3", "branch summary"))
    branch = session.compact("b4")
    assert (main.from_message_id, branch.from_message_id) == ("m3", "b0")  # no extension across branches
    main_overlay, branch_overlay = session.get_compactions()
    assert ids(session.get_history("m5")) == ["m0", "m1", "m2", f"{COMPACTION_PREFIX}{main_overlay.id}", "m5"]
    assert ids(session.get_history("b4")) == ["m0", "m1", "m2", f"{COMPACTION_PREFIX}{branch_overlay.id}", "b4"]


def test_branch_compaction_extends_only_from_overlays_visible_on_that_branch(session):
    chain(session, 8)  # m0..m7
    session.add_compaction("shared", "m1", "m2")
    chain(session, 4, prefix="b", parent="m3")
    session.on_compaction(fixed("b0", "b2", "branch"))
    result = session.compact("b3")
    assert result.from_message_id == "m1"  # the shared overlay is visible on the branch too
    assert ids(session.get_history("m7"))[:2] == ["m0", f"{COMPACTION_PREFIX}{session.get_compactions()[0].id}"]


# ── validation ──────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("from_id", "to_id"),
    [("m1", "nope"), ("nope", "m2"), ("m3", "m1"), ("m1", "b1")],
    ids=["unknown-to", "unknown-from", "reversed", "to-on-sibling"],
)
def test_invalid_range_stores_nothing_and_returns_none(session, from_id, to_id, caplog):
    chain(session, 5)
    chain(session, 2, prefix="b", parent="m1")
    session.on_compaction(fixed(from_id, to_id))
    assert session.compact("m4") is None
    assert session.get_compactions() == []
    assert "nothing stored" in caplog.text


def test_range_ending_inside_an_overlay_is_rejected(session):
    chain(session, 8)
    session.add_compaction("old", "m2", "m5")
    session.on_compaction(fixed("m1", "m3"))  # m3 is hidden behind the overlay
    assert session.compact() is None
    assert len(session.get_compactions()) == 1


def test_summariser_error_propagates_to_a_manual_caller(session):
    def boom(prompt):
        raise RuntimeError("model down")

    session.on_compaction(create_compact_function(boom, protect_head=1, tail_token_budget=10, min_tail_messages=1))
    chain(session, 6)
    with pytest.raises(RuntimeError, match="model down"):
        session.compact()
    assert session.get_compactions() == []


def test_dict_results_are_accepted_and_non_string_summaries_refused(session):
    chain(session, 5)
    session.on_compaction(lambda messages, context: {"from_message_id": "m1", "to_message_id": "m2", "summary": "S"})
    assert session.compact() == CompactResult("m1", "m2", "S")
    session.on_compaction(lambda messages, context: CompactResult("m1", "m3", 42))
    with pytest.raises(TypeError):
        session.compact()


# ── async ───────────────────────────────────────────────────────────────────


@pytest.mark.django_db(transaction=True)
def test_coroutine_function_works_sync_and_async(session_id):
    async def fn(messages, context):
        await asyncio.sleep(0)
        return CompactResult(messages[1]["id"], messages[2]["id"], "ASYNC")

    session = Session.create().for_session(session_id).on_compaction(fn)
    chain(session, 6)
    assert session.compact().summary == "ASYNC"
    result = asyncio.run(session.acompact())
    assert result.from_message_id == "m1"  # the second range starts at the overlay: mapped back
    assert [c.summary for c in asyncio.run(session.aget_compactions())] == ["ASYNC", "ASYNC"]


@pytest.mark.django_db(transaction=True)
def test_acompact_awaits_the_reference_functions_async_path(session_id):
    seen = []

    async def summarize(prompt):
        seen.append(prompt)
        return "ASYNC SUMMARY"

    session = (
        Session.create()
        .for_session(session_id)
        .on_compaction(create_compact_function(summarize, protect_head=1, tail_token_budget=10, min_tail_messages=1))
    )
    chain(session, 6)
    result = asyncio.run(session.acompact())
    assert (result.from_message_id, result.summary) == ("m1", "ASYNC SUMMARY")
    stored = asyncio.run(session.aadd_compaction("manual", "m0", "m0"))
    assert isinstance(stored, StoredCompaction)
    assert len(seen) == 1


# ── the system prompt ───────────────────────────────────────────────────────


def test_cached_prompt_is_refreshed_after_a_compaction(session_id):
    session = (
        Session.create()
        .for_session(session_id)
        .with_context("soul", provider=StaticProvider("You are helpful."))
        .with_context("memory", max_tokens=500)
        .with_cached_prompt()
        .on_compaction(fixed("m1", "m2"))
    )
    chain(session, 4)
    before = session.freeze_system_prompt()
    session.replace_context_block("memory", "learned: likes tea")
    assert session.freeze_system_prompt() == before  # writes do not change a frozen prompt
    session.compact()
    after = session.freeze_system_prompt()
    assert "learned: likes tea" in after
    assert after != before


# ── a custom storage ────────────────────────────────────────────────────────


def test_custom_storage_compacts_iteratively_and_validates():
    session = Session.create(MemoryStorage())
    session.on_compaction(
        create_compact_function(lambda p: "S", protect_head=1, tail_token_budget=10, min_tail_messages=1)
    )
    chain(session, 6)
    assert session.compact().from_message_id == "m1"
    chain(session, 3, prefix="n")
    second = session.compact()
    assert (second.from_message_id, second.to_message_id) == ("m1", "n1")
    session.on_compaction(fixed("m0", "unknown"))
    assert session.compact() is None
    assert len(session.get_compactions()) == 2
