"""The reference compaction function and its helpers; no database needed."""

from __future__ import annotations

import asyncio
import copy
import math

import pytest

from agent_sessions.compaction import (
    COMPACTION_PREFIX,
    CompactContext,
    align_boundary_backward,
    align_boundary_forward,
    build_summary_prompt,
    compute_summary_budget,
    create_compact_function,
    find_tail_cut_by_tokens,
    is_compaction_message,
    sanitize_tool_pairs,
)
from agent_sessions.summarizers import extractive_summarizer
from agent_sessions.tokens import estimate_message_tokens
from agent_sessions.types import CompactResult, TokenCounterInput

pytestmark = pytest.mark.no_database  # runs once, in the SQLite run (tests/conftest.py)

SECTIONS = ["## Topic", "## Key Points", "## Current State", "## Open Items"]


def text(id: str, role: str = "user", body: str | None = None) -> dict:
    return {"id": id, "role": role, "parts": [{"type": "text", "text": f"{id} says hello" if body is None else body}]}


def call(id: str, *call_ids: str) -> dict:
    """An assistant message whose tool parts are still waiting for their results."""
    parts = [{"type": "tool-search", "toolCallId": c, "state": "input-available", "input": {"q": c}} for c in call_ids]
    return {"id": id, "role": "assistant", "parts": parts}


def result(id: str, call_id: str) -> dict:
    """A role "tool" message carrying one result (the model-message shape)."""
    part = {"type": "tool-result", "toolCallId": call_id, "toolName": "search", "output": f"found {call_id}"}
    return {"id": id, "role": "tool", "parts": [part]}


def complete(id: str, call_id: str) -> dict:
    """A UIMessage tool part holding both the call and its output."""
    part = {"type": "tool-search", "toolCallId": call_id, "state": "output-available", "input": {"q": 1}, "output": 2}
    return {"id": id, "role": "assistant", "parts": [part]}


def history(n: int) -> list[dict]:
    return [text(f"m{i}", "user" if i % 2 == 0 else "assistant") for i in range(n)]


def ids(messages: list[dict]) -> list[str]:
    return [m["id"] for m in messages]


class Recorder:
    """A sync summariser that records its prompts."""

    def __init__(self, answer: str | None = "SUMMARY") -> None:
        self.answer = answer
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str | None:
        self.prompts.append(prompt)
        return self.answer


def per_message(tokens: int):
    """A counter charging ``tokens`` per message and recording what it was called with."""
    calls: list[list[str]] = []

    def counter(messages: list[dict]) -> int:
        calls.append(ids(messages))
        return tokens * len(messages)

    counter.calls = calls
    return counter


# ── small helpers ────────────────────────────────────────────────────────────


def test_is_compaction_message():
    assert COMPACTION_PREFIX == "compaction_"
    assert is_compaction_message(text("compaction_42", "assistant"))
    assert not is_compaction_message(text("m1"))
    assert not is_compaction_message(text("my_compaction_1"))
    assert not is_compaction_message({"id": 7, "role": "user", "parts": []})


def test_summary_budget_is_a_fifth_of_the_tokens_with_a_floor_of_100():
    assert compute_summary_budget([]) == 100
    assert compute_summary_budget(history(5)) == 100
    big = [text("a", body="x" * 4000), text("b", body="y" * 4000)]  # 1004 tokens each
    assert estimate_message_tokens(big) == 2008
    assert compute_summary_budget(big) == 401
    assert compute_summary_budget([text("c", body="z" * 2016)]) == 101  # 508 tokens → floor(101.6)


# ── prompt ───────────────────────────────────────────────────────────────────


def test_fresh_prompt_has_the_four_sections_the_turns_and_the_budget():
    messages = [text("a", "user", "Plan a trip to Kyoto."), complete("b", "c1"), text("c", "assistant", "Done.")]
    prompt = build_summary_prompt(messages, None, 123)
    positions = [prompt.index(s) for s in SECTIONS]
    assert positions == sorted(positions)
    assert "Target ~123 tokens" in prompt
    assert "[user]\nPlan a trip to Kyoto." in prompt
    assert "[assistant]\nDone." in prompt
    assert '[Tool: search]\nInput: {"q": 1}\nOutput: 2' in prompt
    assert prompt.index("Plan a trip") < prompt.index("Done.")
    assert "<previous_summary>" not in prompt
    assert "Update" not in prompt


def test_update_prompt_quotes_the_previous_summary():
    prompt = build_summary_prompt([text("a", body="New fact.")], "## Topic\nOld topic", 100)
    assert prompt.startswith("Update an existing conversation summary")
    assert "<previous_summary>\n## Topic\nOld topic\n</previous_summary>" in prompt
    assert prompt.index("Old topic") < prompt.index("New fact.") < prompt.index("## Key Points")
    assert all(s in prompt for s in SECTIONS)
    assert build_summary_prompt([text("a")], "", 100) == build_summary_prompt([text("a")], None, 100)


def test_prompt_truncates_long_tool_payloads_and_names_tools():
    part = {
        "type": "dynamic-tool",
        "toolName": "fetch",
        "toolCallId": "t",
        "state": "output-available",
        "input": {"url": "u"},
        "output": "o" * 2000,
    }
    error = {"type": "tool-lookup", "toolCallId": "e", "state": "output-error", "input": {}, "errorText": "boom"}
    prompt = build_summary_prompt([{"id": "a", "role": "assistant", "parts": [part, error]}], None, 100)
    assert "[Tool: fetch]" in prompt
    assert "Output: " + "o" * 500 + "…" in prompt
    assert "o" * 501 not in prompt
    assert "[Tool: lookup]\nError: boom" in prompt


# ── sanitize_tool_pairs ──────────────────────────────────────────────────────


def test_sanitize_keeps_complete_pairs_and_does_not_mutate():
    messages = [text("u"), complete("a", "c1"), call("b", "c2"), result("c", "c2"), text("d", "assistant")]
    before = copy.deepcopy(messages)
    assert sanitize_tool_pairs(messages) == messages
    assert messages == before


def test_sanitize_drops_calls_without_results_and_orphan_results():
    pending = {
        "id": "a",
        "role": "assistant",
        "parts": [
            {"type": "text", "text": "let me look"},
            {"type": "tool-search", "toolCallId": "lost", "state": "input-available", "input": {}},
        ],
    }
    messages = [text("u"), pending, result("r", "gone"), call("b", "c9"), text("z")]
    before = copy.deepcopy(messages)
    cleaned = sanitize_tool_pairs(messages)
    assert ids(cleaned) == ["u", "a", "z"]  # "r" (orphan result) and "b" (only a pending call) are emptied
    assert cleaned[1]["parts"] == [{"type": "text", "text": "let me look"}]
    assert messages == before


def test_sanitize_handles_model_message_and_v4_shapes():
    messages = [
        {"id": "a", "role": "assistant", "parts": [{"type": "tool-call", "toolCallId": "x", "toolName": "t"}]},
        {"id": "b", "role": "tool", "parts": [{"type": "tool-result", "toolCallId": "x", "result": 1}]},
        {
            "id": "c",
            "role": "assistant",
            "parts": [
                {"type": "tool-invocation", "toolInvocation": {"toolCallId": "v1", "state": "result", "result": 3}},
                {"type": "tool-invocation", "toolInvocation": {"toolCallId": "v2", "state": "call", "args": {}}},
            ],
        },
    ]
    cleaned = sanitize_tool_pairs(messages)
    assert ids(cleaned) == ["a", "b", "c"]
    assert [p["toolInvocation"]["toolCallId"] for p in cleaned[2]["parts"]] == ["v1"]


def test_sanitize_pairs_calls_in_order_when_ids_are_reused():
    # Some providers number calls per step, so "call_0" comes back every turn.
    messages = [call("a", "call_0"), result("b", "call_0"), text("c"), call("d", "call_0")]
    assert ids(sanitize_tool_pairs(messages)) == ["a", "b", "c"]


def test_sanitize_keeps_a_call_whose_output_arrives_in_a_later_copy_of_the_part():
    later = {
        "id": "b",
        "role": "assistant",
        "parts": [{"type": "tool-search", "toolCallId": "s", "state": "output-available", "input": {}, "output": "ok"}],
    }
    messages = [call("a", "s"), later]
    assert sanitize_tool_pairs(messages) == messages


# ── boundary alignment ───────────────────────────────────────────────────────


def tool_heavy() -> list[dict]:
    # 0 user · 1 calls c1,c2 · 2 result c1 · 3 result c2 · 4 assistant text · 5 user
    return [
        text("u0"),
        call("a1", "c1", "c2"),
        result("t2", "c1"),
        result("t3", "c2"),
        text("a4", "assistant"),
        text("u5"),
    ]


@pytest.mark.parametrize(("index", "expected"), [(0, 0), (1, 1), (2, 4), (3, 4), (4, 4), (5, 5), (6, 6)])
def test_align_forward_moves_past_all_results(index, expected):
    assert align_boundary_forward(tool_heavy(), index) == expected


@pytest.mark.parametrize(("index", "expected"), [(0, 0), (1, 1), (2, 1), (3, 1), (4, 4), (6, 6)])
def test_align_backward_moves_before_the_call(index, expected):
    assert align_boundary_backward(tool_heavy(), index) == expected


def test_alignment_follows_chained_pairs_and_clamps():
    split = {
        "id": "b",
        "role": "assistant",
        "parts": [
            {"type": "tool-search", "toolCallId": "c1", "state": "output-available", "input": {}, "output": 1},
            {"type": "tool-search", "toolCallId": "c2", "state": "input-available", "input": {}},
        ],
    }
    messages = [text("u"), call("a", "c1"), split, result("c", "c2"), text("d")]
    assert align_boundary_forward(messages, 2) == 4
    assert align_boundary_backward(messages, 3) == 1
    assert align_boundary_forward(messages, -5) == 0
    assert align_boundary_backward(messages, 99) == len(messages)


def test_complete_ui_parts_never_move_a_boundary():
    messages = [text("u"), complete("a", "c1"), complete("b", "c2"), text("c")]
    for i in range(len(messages) + 1):
        assert align_boundary_forward(messages, i) == i
        assert align_boundary_backward(messages, i) == i


# ── find_tail_cut_by_tokens ──────────────────────────────────────────────────


def test_tail_walk_uses_the_counter_per_message_and_stops_over_budget():
    counter = per_message(10)
    assert find_tail_cut_by_tokens(history(10), 3, 35, 2, token_counter=counter) == 7
    assert counter.calls == [["m9"], ["m8"], ["m7"], ["m6"]]  # m6 would exceed 35


def test_tail_walk_with_the_default_estimate():
    messages = history(10)  # each "mN says hello" is 4 + 4 tokens
    assert find_tail_cut_by_tokens(messages, 1, 24, 1) == 7
    assert find_tail_cut_by_tokens(messages, 1) == 1  # default budget 20000: everything after the head fits


def test_min_tail_messages_wins_over_a_small_budget():
    messages = history(10)
    counter = per_message(10)
    assert find_tail_cut_by_tokens(messages, 3, 5, 0, token_counter=counter) == 9  # newest is always kept
    assert find_tail_cut_by_tokens(messages, 3, 5, 2, token_counter=counter) == 8
    assert find_tail_cut_by_tokens(messages, 3, 5, 4, token_counter=counter) == 6
    assert find_tail_cut_by_tokens(messages, 3, 5, 8, token_counter=counter) == 9  # not enough room: budget rules


def test_tail_cut_is_aligned_back_to_the_call():
    messages = [
        text("u0"),
        text("u1"),
        text("u2"),
        call("a3", "c1", "c2"),
        result("t4", "c1"),
        result("t5", "c2"),
        text("a6", "assistant"),
    ]
    assert find_tail_cut_by_tokens(messages, 1, 25, 1, token_counter=per_message(10)) == 3


def test_non_finite_or_negative_counts_are_zero():
    answers = iter([math.nan, -5, math.inf, "x", None, 0, 1, 1, 1])
    cut = find_tail_cut_by_tokens(history(9), 2, 2, 1, token_counter=lambda _: next(answers))
    assert cut == 2


def test_tail_walk_accepts_an_async_counter():
    async def counter(messages):
        return 10 * len(messages)

    assert find_tail_cut_by_tokens(history(10), 3, 35, 2, token_counter=counter) == 7


# ── create_compact_function ──────────────────────────────────────────────────


def test_too_few_messages_returns_none_without_summarising():
    summarize = Recorder()
    fn = create_compact_function(summarize)  # protect_head=3, min_tail_messages=2
    assert fn(history(5)) is None
    assert asyncio.run(fn.acall(history(5))) is None
    assert summarize.prompts == []


def test_head_is_protected_and_middle_is_summarised():
    summarize = Recorder()
    fn = create_compact_function(summarize, protect_head=3, tail_token_budget=30, token_counter=per_message(10))
    result_ = fn(history(12))
    assert result_ == CompactResult(from_message_id="m3", to_message_id="m8", summary="SUMMARY")
    prompt = summarize.prompts[0]
    assert all(s in prompt for s in SECTIONS)
    assert "m3 says hello" in prompt
    assert "m8 says hello" in prompt
    assert "m2 says hello" not in prompt
    assert "m9 says hello" not in prompt


def test_contract_example():
    fn = create_compact_function(Recorder(), protect_head=1, tail_token_budget=10, min_tail_messages=1)
    assert fn(history(6)) == CompactResult("m1", "m4", "SUMMARY")


def test_min_tail_messages_is_honoured():
    fn = create_compact_function(Recorder(), protect_head=1, tail_token_budget=0, min_tail_messages=4)
    assert fn(history(10)).to_message_id == "m5"


def test_both_boundaries_are_aligned_on_a_tool_heavy_history():
    messages = [
        text("u0"),
        call("a1", "c1"),
        result("t2", "c1"),
        text("u3"),
        text("a4", "assistant"),
        call("a5", "c5", "c6"),
        result("t6", "c5"),
        result("t7", "c6"),
        text("a8", "assistant"),
    ]
    summarize = Recorder()
    fn = create_compact_function(
        summarize, protect_head=2, tail_token_budget=25, min_tail_messages=1, token_counter=per_message(10)
    )
    result_ = fn(messages)
    # head cut 2 splits a1/t2 → moves to 3; tail cut 6 splits a5/t6/t7 → moves to 5
    assert (result_.from_message_id, result_.to_message_id) == ("u3", "a4")


def test_empty_middle_returns_none():
    summarize = Recorder()
    fn = create_compact_function(summarize, protect_head=2, min_tail_messages=1)  # 20000-token tail takes all
    assert fn(history(8)) is None
    messages = [text("u0"), call("a1", "c1", "c2"), result("t2", "c1"), result("t3", "c2"), text("u4")]
    fn = create_compact_function(summarize, protect_head=2, tail_token_budget=0, min_tail_messages=1)
    assert fn(messages) is None  # the head moves past the results to 4, which is the tail
    assert summarize.prompts == []


@pytest.mark.parametrize("answer", ["", "   \n", None])
def test_blank_summary_returns_none(answer):
    fn = create_compact_function(Recorder(answer), protect_head=1, tail_token_budget=0, min_tail_messages=1)
    assert fn(history(6)) is None
    assert asyncio.run(fn.acall(history(6))) is None


def test_non_string_summary_is_an_error():
    fn = create_compact_function(lambda prompt: 42, protect_head=1, tail_token_budget=0, min_tail_messages=1)
    with pytest.raises(TypeError, match="must return a str"):
        fn(history(6))


def test_summariser_errors_propagate_on_both_paths():
    def boom(prompt):
        raise RuntimeError("llm down")

    fn = create_compact_function(boom, protect_head=1, tail_token_budget=0, min_tail_messages=1)
    with pytest.raises(RuntimeError, match="llm down"):
        fn(history(6))
    with pytest.raises(RuntimeError, match="llm down"):
        asyncio.run(fn.acall(history(6)))


def test_previous_overlay_in_the_middle_gives_an_update_prompt_and_its_own_id():
    overlay = text("compaction_7", "assistant", "## Topic\nEarlier trip planning")
    messages = [text("m0"), overlay, text("m5"), text("m6", "assistant"), text("m7"), text("m8", "assistant")]
    summarize = Recorder()
    fn = create_compact_function(summarize, protect_head=1, tail_token_budget=0, min_tail_messages=2)
    assert fn(messages) == CompactResult("compaction_7", "m6", "SUMMARY")
    prompt = summarize.prompts[0]
    assert "<previous_summary>\n## Topic\nEarlier trip planning\n</previous_summary>" in prompt
    conversation = prompt[prompt.index("<conversation>") :]
    assert "Earlier trip planning" not in conversation
    assert "m5 says hello" in conversation
    assert f"Target ~{compute_summary_budget(messages[2:4])} tokens" in prompt


def test_previous_overlay_in_the_head_still_feeds_the_update_prompt():
    messages = [text("m0"), text("compaction_1", "assistant", "old summary")] + history(8)[2:]
    summarize = Recorder()
    fn = create_compact_function(summarize, protect_head=2, tail_token_budget=0, min_tail_messages=2)
    assert fn(messages).from_message_id == "m2"
    assert "<previous_summary>\nold summary\n</previous_summary>" in summarize.prompts[0]


def test_a_middle_of_only_overlays_returns_none():
    messages = [text("m0"), text("compaction_1", "assistant", "s"), text("m8"), text("m9", "assistant")]
    fn = create_compact_function(Recorder(), protect_head=1, tail_token_budget=0, min_tail_messages=2)
    assert fn(messages) is None


def test_context_counter_is_used_when_no_explicit_counter():
    seen: list[TokenCounterInput] = []

    def session_counter(data: TokenCounterInput) -> int:
        seen.append(data)
        return 10 * len(data.messages)

    fn = create_compact_function(Recorder(), protect_head=3, tail_token_budget=30)
    assert fn(history(12), CompactContext(session_counter)).to_message_id == "m8"
    assert all(len(d.messages) == 1 and d.system_prompt == "" and d.context_blocks == [] for d in seen)
    assert [d.messages[0]["id"] for d in seen] == ["m11", "m10", "m9", "m8"]


def test_explicit_counter_wins_over_the_context_counter():
    def session_counter(data):
        raise AssertionError("the explicit counter must be used")

    fn = create_compact_function(Recorder(), protect_head=3, tail_token_budget=30, token_counter=per_message(10))
    assert fn(history(12), CompactContext(session_counter)).to_message_id == "m8"
    assert fn(history(12), CompactContext(None)).to_message_id == "m8"


def test_async_summarizer_and_counter_on_the_sync_path():
    async def summarize(prompt):
        await asyncio.sleep(0)
        return "ASYNC SUMMARY"

    async def counter(messages):
        return 10 * len(messages)

    fn = create_compact_function(summarize, protect_head=3, tail_token_budget=30, token_counter=counter)
    assert fn(history(12)) == CompactResult("m3", "m8", "ASYNC SUMMARY")


def test_async_path_with_async_callbacks():
    async def summarize(prompt):
        return "ASYNC SUMMARY"

    async def session_counter(data):
        return 10 * len(data.messages)

    fn = create_compact_function(summarize, protect_head=3, tail_token_budget=30)
    result_ = asyncio.run(fn.acall(history(12), CompactContext(session_counter)))
    assert result_ == CompactResult("m3", "m8", "ASYNC SUMMARY")


def test_async_path_with_sync_callbacks():
    summarize = Recorder("SYNC")
    fn = create_compact_function(summarize, protect_head=3, tail_token_budget=30, token_counter=per_message(10))
    assert asyncio.run(fn.acall(history(12))) == CompactResult("m3", "m8", "SYNC")
    assert len(summarize.prompts) == 1


def test_async_callable_objects_and_lambdas_returning_coroutines():
    class AsyncSummarizer:
        async def __call__(self, prompt):
            return "OBJ"

    async def later(value):
        return value

    fn = create_compact_function(AsyncSummarizer(), protect_head=1, tail_token_budget=0, min_tail_messages=1)
    assert fn(history(6)).summary == "OBJ"
    fn = create_compact_function(
        lambda p: later("LAMBDA"),
        protect_head=1,
        tail_token_budget=0,
        min_tail_messages=1,
        token_counter=lambda ms: later(1),
    )
    assert fn(history(6)).summary == "LAMBDA"
    assert asyncio.run(fn.acall(history(6))).summary == "LAMBDA"


def test_a_summarizer_acall_is_preferred_on_the_async_path():
    class Both:
        def __call__(self, prompt):
            return "SYNC"

        async def acall(self, prompt):
            return "ASYNC"

    fn = create_compact_function(Both(), protect_head=1, tail_token_budget=0, min_tail_messages=1)
    assert fn(history(6)).summary == "SYNC"
    assert asyncio.run(fn.acall(history(6))).summary == "ASYNC"


def test_end_to_end_with_the_extractive_summarizer():
    messages = [
        text("m0", body="Plan a trip to Kyoto in spring."),
        text("m1", "assistant", "Sure."),
        text("m2", body="Which hotels are near Gion?"),
        complete("m3", "c1"),
        text("m4", "assistant", "Hotel A is near Gion."),
        text("m5", body="Thanks!"),
    ]
    fn = create_compact_function(extractive_summarizer, protect_head=1, tail_token_budget=0, min_tail_messages=1)
    result_ = fn(messages)
    assert (result_.from_message_id, result_.to_message_id) == ("m1", "m4")
    assert all(s in result_.summary for s in SECTIONS)
    assert "Which hotels are near Gion?" in result_.summary
    assert "Plan a trip" not in result_.summary  # the head is not summarised
