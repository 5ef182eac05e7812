"""The examples' agent loops run offline: the real SDK clients against a scripted fake model."""

from __future__ import annotations

import uuid

import pytest
from anthropic.types import MessageParam
from openai.types.chat import ChatCompletionMessageParam
from pydantic import TypeAdapter

from examples import anthropic_loop, openai_chat_loop


def materialize(value):
    if isinstance(value, dict):
        return {k: materialize(v) for k, v in value.items()}
    if isinstance(value, list | tuple) or hasattr(value, "__next__"):
        return [materialize(v) for v in value]
    return value


@pytest.mark.django_db
def test_openai_chat_loop_keeps_tool_history_across_turns():
    openai_chat_loop.REQUESTS.clear()
    history = openai_chat_loop.main(session_id=f"ex-{uuid.uuid4().hex[:8]}")
    assert [m["role"] for m in history] == ["user", "assistant", "assistant", "user", "assistant", "assistant"]
    tool = history[1]["parts"][1]
    assert tool["type"] == "tool-get_weather"
    assert tool["state"] == "output-available"
    assert tool["output"] == "Sunny, 21 °C in Kyoto"
    assert len(openai_chat_loop.REQUESTS) == 4
    adapter = TypeAdapter(list[ChatCompletionMessageParam])
    for request in openai_chat_loop.REQUESTS:
        assert materialize(adapter.validate_python(request["messages"])) == request["messages"]
    last = openai_chat_loop.REQUESTS[-1]["messages"]
    assert last[0]["role"] == "system"
    assert "concise weather assistant" in last[0]["content"]
    # The second turn still sees the first turn's tool call and its result.
    assert [m["role"] for m in last] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
    ]
    assert last[3] == {
        "role": "tool",
        "tool_call_id": last[2]["tool_calls"][0]["id"],
        "content": "Sunny, 21 °C in Kyoto",
    }


@pytest.mark.django_db
def test_anthropic_loop_sends_thinking_signatures_and_tool_results_back():
    anthropic_loop.REQUESTS.clear()
    history = anthropic_loop.main(session_id=f"ex-{uuid.uuid4().hex[:8]}")
    assert [m["role"] for m in history] == ["user", "assistant", "assistant", "user", "assistant", "assistant"]
    assert history[1]["parts"][0] == {
        "type": "reasoning",
        "text": "The user wants the weather.",
        "providerMetadata": {"anthropic": {"signature": "sig-1"}},
    }
    adapter = TypeAdapter(list[MessageParam])
    for request in anthropic_loop.REQUESTS:
        assert materialize(adapter.validate_python(request["messages"])) == request["messages"]
        assert "concise weather assistant" in request["system"]
    last = anthropic_loop.REQUESTS[-1]["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]
    assert last[1]["content"][0] == {
        "type": "thinking",
        "thinking": "The user wants the weather.",
        "signature": "sig-1",
    }
    assert last[2]["content"] == [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny, 21 °C in Kyoto"}]
