"""OpenAI Chat Completions / Anthropic Messages streams → UI chunks, fed as the SDKs' own event types,
and the assistant message those chunks rebuild (``ReplyBuilder``, as the ai client would)."""

from __future__ import annotations

import pytest
from anthropic.types import RawMessageStreamEvent
from asgiref.sync import async_to_sync
from openai.types.chat import ChatCompletionChunk
from pydantic import TypeAdapter

from agent_sessions.chat import anthropic_chunks, openai_chunks
from agent_sessions.chat.assemble import ReplyBuilder

pytestmark = pytest.mark.no_database


def oa(delta: dict, finish: str | None = None) -> ChatCompletionChunk:
    return ChatCompletionChunk.model_validate(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "gpt",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


OPENAI_TOOL_STREAM = [
    oa({"role": "assistant", "content": "Checking"}),
    oa({"content": " now."}),
    oa({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "weather"}}]}),
    oa({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
    oa({"tool_calls": [{"index": 0, "function": {"arguments": '"Oslo"}'}}]}),
    oa({}, "tool_calls"),
]


def rebuild(chunks: list[dict]) -> ReplyBuilder:
    builder = ReplyBuilder("m1")
    for chunk in chunks:
        builder.apply(chunk)
    return builder


def test_openai_text_and_a_tool_call():
    chunks = list(openai_chunks(iter(OPENAI_TOOL_STREAM)))
    assert chunks[-1] == {"type": "finish", "finishReason": "tool-calls"}
    builder = rebuild(chunks)
    assert builder.message["parts"] == [
        {"type": "text", "text": "Checking now.", "state": "done"},
        {"type": "tool-weather", "toolCallId": "call_1", "state": "input-available", "input": {"city": "Oslo"}},
    ]
    assert builder.finish_reason == "tool-calls"


def test_openai_async_stream_gives_the_same_chunks():
    async def stream():
        for event in OPENAI_TOOL_STREAM:
            yield event

    async def collect():
        return [chunk async for chunk in openai_chunks(stream())]

    sync = list(openai_chunks(iter(OPENAI_TOOL_STREAM)))
    got = async_to_sync(collect)()
    assert [c["type"] for c in got] == [c["type"] for c in sync]
    assert got[-2]["input"] == {"city": "Oslo"}


def test_openai_arguments_that_are_not_json_become_a_tool_input_error():
    events = [
        oa({"tool_calls": [{"index": 0, "id": "c9", "function": {"name": "f", "arguments": "{oops"}}]}),
        oa({}, "tool_calls"),
    ]
    chunks = list(openai_chunks(events))
    assert chunks[-2]["type"] == "tool-input-error"
    part = rebuild(chunks).message["parts"][0]
    assert part["state"] == "output-error"
    assert part["rawInput"] == "{oops"


def test_openai_plain_dicts_and_length_stop():
    chunks = list(openai_chunks([{"choices": [{"index": 0, "delta": {"content": "cut"}, "finish_reason": "length"}]}]))
    assert chunks == [
        {"type": "text-start", "id": chunks[0]["id"]},
        {"type": "text-delta", "id": chunks[0]["id"], "delta": "cut"},
        {"type": "text-end", "id": chunks[0]["id"]},
        {"type": "finish", "finishReason": "length"},
    ]


ANTHROPIC = TypeAdapter(RawMessageStreamEvent)
ANTHROPIC_STREAM = [
    ANTHROPIC.validate_python(e)
    for e in [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 3, "output_tokens": 0},
            },
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },  # noqa: E501
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Hmm."}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Let me look."}},
        {"type": "content_block_stop", "index": 1},
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}},
        },
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": '{"city"'}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ': "Oslo"}'}},
        {"type": "content_block_stop", "index": 2},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
]


def test_anthropic_thinking_text_and_a_tool_call():
    chunks = list(anthropic_chunks(iter(ANTHROPIC_STREAM)))
    assert chunks[-1] == {"type": "finish", "finishReason": "tool-calls"}
    assert rebuild(chunks).message["parts"] == [
        {"type": "reasoning", "text": "Hmm.", "state": "done"},
        {"type": "text", "text": "Let me look.", "state": "done"},
        {"type": "tool-weather", "toolCallId": "toolu_1", "state": "input-available", "input": {"city": "Oslo"}},
    ]


def test_anthropic_end_turn_is_stop_and_an_unfinished_block_is_closed():
    events = [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "Hi"}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
    ]
    chunks = list(anthropic_chunks(events))
    assert [c["type"] for c in chunks] == ["text-start", "text-delta", "text-end", "finish"]
    assert chunks[-1]["finishReason"] == "stop"
