"""The sequence of model calls a history records, as each converter sends it (issue 53): a call
without its result is never sent (dropped, or ``MissingToolResults``), text after a result stays
after it, system messages stay where they were."""

from __future__ import annotations

import pytest

from agent_sessions import AgentSessionsError, MissingToolResults
from agent_sessions.convert import to_anthropic, to_openai_chat, to_openai_responses

pytestmark = pytest.mark.no_database  # runs once, in the SQLite run (tests/conftest.py)

TO = {"chat": to_openai_chat, "responses": to_openai_responses, "anthropic": to_anthropic}
STEP = {"type": "step-start"}


def user(text: str, id: str = "u") -> dict:
    return {"id": id, "role": "user", "parts": [{"type": "text", "text": text}]}


def bot(*parts, id: str = "a") -> dict:
    return {
        "id": id,
        "role": "assistant",
        "parts": [{"type": "text", "text": p} if isinstance(p, str) else p for p in parts],
    }


def call(call_id: str, state: str = "output-available", **extra) -> dict:
    part = {"type": "tool-weather", "toolCallId": call_id, "state": state, "input": {"city": "Kyoto"}, **extra}
    if state == "output-available":
        part.setdefault("output", "18 °C")
    return part


DANGLING = [user("Weather?"), bot(STEP, "Let me check.", call("c1", "input-available")), user("Never mind.", id="u2")]


def call_ids(target: str, out) -> list[str]:
    if target == "chat":
        return [c["id"] for m in out if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    if target == "responses":
        return [i["call_id"] for i in out if i.get("type") == "function_call"]
    return [
        b["id"] for m in out["messages"] if m["role"] == "assistant" for b in m["content"] if b["type"] == "tool_use"
    ]


@pytest.mark.parametrize("target", sorted(TO))
def test_a_call_without_its_result_is_dropped_by_default(target):
    out = TO[target](DANGLING)
    assert call_ids(target, out) == []
    assert out == TO[target](DANGLING, incomplete_tool_calls="drop")
    flat = repr(out)
    assert "Let me check." in flat
    assert "Never mind." in flat


@pytest.mark.parametrize("target", sorted(TO))
def test_raise_names_every_call_without_its_result(target):
    history = [
        user("Kyoto and Osaka?"),
        bot(STEP, call("c1"), call("c2", "input-available"), call("c3", "input-available")),
    ]
    with pytest.raises(MissingToolResults) as caught:
        TO[target](history, incomplete_tool_calls="raise")
    assert caught.value.tool_call_ids == ["c2", "c3"]
    assert isinstance(caught.value, AgentSessionsError)
    assert "c2, c3" in str(caught.value)
    # Answered calls alone pass, and a generator of messages is read once.
    assert call_ids(target, TO[target](iter(history[:1] + [bot(call("c1"))]), incomplete_tool_calls="raise")) == ["c1"]


@pytest.mark.parametrize("target", sorted(TO))
def test_an_unknown_policy_is_refused(target):
    with pytest.raises(ValueError, match="incomplete_tool_calls"):
        TO[target](DANGLING, incomplete_tool_calls="keep")


def test_text_after_a_result_is_sent_after_it_in_every_target():
    history = [user("Weather?"), bot(STEP, "Let me check.", call("c1"), STEP, "It is 18 °C.")]
    chat = to_openai_chat(history)
    assert [m["role"] for m in chat] == ["user", "assistant", "tool", "assistant"]
    assert chat[1]["content"] == "Let me check."
    assert chat[3]["content"] == "It is 18 °C."
    responses = to_openai_responses(history)
    assert [i.get("type", i.get("role")) for i in responses] == [
        "user",
        "assistant",
        "function_call",
        "function_call_output",
        "assistant",
    ]
    anthropic = to_anthropic(history)["messages"]
    assert [m["role"] for m in anthropic] == ["user", "assistant", "user", "assistant"]
    assert [b["type"] for b in anthropic[1]["content"]] == ["text", "tool_use"]
    assert anthropic[2]["content"][0]["type"] == "tool_result"
    assert anthropic[3]["content"] == [{"type": "text", "text": "It is 18 °C."}]


def test_anthropic_ends_a_turn_at_its_tool_call():
    history = [user("Weather?"), bot(STEP, "Checking.", call("c1"), "One moment.", STEP, "Rain.")]
    turn = to_anthropic(history)["messages"][1]["content"]
    assert [b.get("text", b["type"]) for b in turn] == ["Checking.", "One moment.", "tool_use"]


def test_anthropic_keeps_a_system_message_between_turns_in_place():
    history = [
        {"id": "s1", "role": "system", "parts": [{"type": "text", "text": "Be brief."}]},
        user("Hi", id="u1"),
        bot("Hello.", id="a1"),
        {"id": "s2", "role": "system", "parts": [{"type": "text", "text": "Answer in French."}]},
        user("How are you?", id="u2"),
    ]
    out = to_anthropic(history, system="Frozen prompt.")
    assert out["system"] == "Frozen prompt.\n\nBe brief."
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "system", "user"]
    assert out["messages"][2]["content"] == [{"type": "text", "text": "Answer in French."}]
    assert out["extra_headers"] == {"anthropic-beta": "mid-conversation-system-2026-04-07"}
    assert "extra_headers" not in to_anthropic(history[:3])


@pytest.mark.parametrize("target", ["chat", "responses"])
def test_openai_targets_keep_system_messages_in_place(target):
    history = [user("Hi", id="u1"), {"id": "s", "role": "system", "parts": [{"type": "text", "text": "Be brief."}]}]
    out = TO[target](history)
    assert out[-1] == {"role": "system", "content": "Be brief."}


@pytest.mark.parametrize("target", sorted(TO))
def test_a_denied_call_is_sent_with_an_error_result(target):
    denied = call("c1", "output-denied", approval={"id": "ap", "approved": False})
    out = TO[target]([user("Delete it."), bot(STEP, denied, STEP, "Not allowed.")])
    assert call_ids(target, out) == ["c1"]
    assert "Tool call execution denied." in repr(out)
