"""The envelope the view owns around what ``respond`` yields, its SSE encoding, and request parsing."""

from __future__ import annotations

import json

import pytest

from agent_sessions.api.errors import ApiError
from agent_sessions.chat.assemble import ReplyBuilder, merge_metadata
from agent_sessions.chat.request import parse_body
from agent_sessions.chat.stream import Envelope, RespondFailed, sse

pytestmark = pytest.mark.no_database


def run(items: list) -> list[dict]:
    envelope = Envelope("m1")
    out = envelope.open()
    for item in items:
        out += envelope.feed(item)
    return out + envelope.close()


def test_strings_become_one_text_part_and_the_view_writes_the_envelope():
    assert run(["Hel", "lo", ""]) == [
        {"type": "start", "messageId": "m1"},
        {"type": "start-step"},
        {"type": "text-start", "id": "m1-text-1"},
        {"type": "text-delta", "id": "m1-text-1", "delta": "Hel"},
        {"type": "text-delta", "id": "m1-text-1", "delta": "lo"},
        {"type": "text-end", "id": "m1-text-1"},
        {"type": "finish-step"},
        {"type": "finish"},
    ]


def test_respond_step_boundaries_and_finish_fold_into_the_envelope():
    got = run(["a", {"type": "start", "messageId": "ignored"}, {"type": "finish-step"}, {"type": "start-step"}, "b",
               {"type": "finish", "finishReason": "stop"}])  # fmt: skip
    kinds = [c["type"] for c in got]
    assert kinds == [
        "start", "start-step", "text-start", "text-delta", "text-end", "finish-step",
        "start-step", "text-start", "text-delta", "text-end", "finish-step", "finish",
    ]  # fmt: skip
    assert got[0]["messageId"] == "m1"
    assert got[-1] == {"type": "finish", "finishReason": "stop"}
    parts = ReplyBuilder("m1")
    for chunk in got:
        parts.apply(chunk)
    assert [p["type"] for p in parts.message["parts"]] == ["step-start", "text", "step-start", "text"]


def test_an_error_chunk_from_respond_fails_the_reply():
    envelope = Envelope("m1")
    with pytest.raises(RespondFailed, match="quota"):
        envelope.feed({"type": "error", "errorText": "quota"})


def test_anything_but_a_string_or_a_chunk_is_refused():
    with pytest.raises(ValueError, match="int"):
        Envelope("m1").feed(3)


def test_sse_is_one_data_line_per_chunk():
    encoded = sse({"type": "text-delta", "id": "t", "delta": "é\n"})
    assert encoded == b'data: {"type":"text-delta","id":"t","delta":"\xc3\xa9\\n"}\n\n'


def test_transient_data_is_not_kept_and_metadata_merges_deeply():
    builder = ReplyBuilder("m1")
    builder.apply({"type": "data-status", "data": {"x": 1}, "transient": True})
    builder.apply({"type": "data-weather", "id": "w", "data": {"t": 1}})
    builder.apply({"type": "data-weather", "id": "w", "data": {"t": 2}})
    builder.apply({"type": "start", "messageMetadata": {"a": {"b": 1}}})
    builder.apply({"type": "finish", "messageMetadata": {"a": {"c": 2}}})
    assert builder.message["parts"] == [{"type": "data-weather", "id": "w", "data": {"t": 2}}]
    assert builder.message["metadata"] == {"a": {"b": 1, "c": 2}}
    assert merge_metadata({"a": 1}, None) == {"a": 1}


def test_parse_keeps_extra_body_keys_and_defaults_the_trigger():
    chat = parse_body(json.dumps({"id": "c", "messages": [{"id": "u", "role": "user", "parts": []}], "x": 1}).encode())
    assert chat.trigger == "submit-message"
    assert chat.extra == {"x": 1}
    with pytest.raises(ApiError) as caught:
        parse_body(b"[]")
    assert caught.value.status == 400
