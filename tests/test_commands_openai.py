"""import_openai_transcript: Chat Completions messages → a session with UIMessage tool parts."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from agent_sessions import Session
from agent_sessions.models import ContextBlockRecord, Message, SessionRecord

pytestmark = pytest.mark.django_db

TRANSCRIPT = {
    "model": "gpt-4o-mini",
    "messages": [
        {"role": "system", "content": "You are a travel assistant."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What's the weather in Kyoto and Osaka?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Kyoto"}'}},
                {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Osaka"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"high_c": 19}'},
        {"role": "tool", "tool_call_id": "call_2", "content": "sunny, 21 C"},
        {"role": "assistant", "content": "Kyoto: 19 °C. Osaka: sunny, 21 °C."},
    ],
}


def run(*args) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("import_openai_transcript", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def transcript(tmp_path):
    def write(data, name="chat.json") -> str:
        path = tmp_path / name
        path.write_text(json.dumps(data), encoding="utf-8")
        return str(path)

    return write


def test_transcript_becomes_a_session(transcript):
    out, err = run(transcript(TRANSCRIPT, "kyoto-chat.json"), "--session-id", "oai-1")
    assert "Imported 3 message(s) into session oai-1." in out
    assert "100%" in err

    record = SessionRecord.objects.get(id="oai-1")
    assert (record.name, record.model, record.source) == ("kyoto-chat", "gpt-4o-mini", "openai-transcript")
    assert ContextBlockRecord.objects.get(label="soul_oai-1").content == "You are a travel assistant."

    history = Session.create().for_session("oai-1").get_history()
    assert [m["role"] for m in history] == ["user", "assistant", "assistant"]
    user, calls, answer = history
    assert user["parts"] == [
        {"type": "text", "text": "What's the weather in Kyoto and Osaka?"},
        {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,iVBORw0KGgo="},
    ]
    assert calls["parts"] == [
        {
            "type": "tool-weather",
            "toolCallId": "call_1",
            "state": "output-available",
            "input": {"city": "Kyoto"},
            "output": {"high_c": 19},
        },
        {
            "type": "tool-weather",
            "toolCallId": "call_2",
            "state": "output-available",
            "input": {"city": "Osaka"},
            "output": "sunny, 21 C",
        },
    ]
    assert answer["parts"] == [{"type": "text", "text": "Kyoto: 19 °C. Osaka: sunny, 21 °C."}]
    # A chain: each message is the child of the one before.
    parents = list(Message.objects.filter(session_id="oai-1").order_by("seq").values_list("parent_id", flat=True))
    assert parents[0] is None
    assert parents[1:] == [m["id"] for m in history[:-1]]


def test_system_text_reaches_the_prompt_of_a_session_with_that_block(transcript):
    run(transcript(TRANSCRIPT), "--session-id", "oai-2")
    prompt = Session.create().for_session("oai-2").with_context("soul").freeze_system_prompt()
    assert "SOUL" in prompt
    assert "You are a travel assistant." in prompt


def test_system_as_message_and_bare_list(transcript):
    out, _ = run(
        transcript(TRANSCRIPT["messages"]),
        "--session-id",
        "oai-3",
        "--system-as",
        "message",
        "--model",
        "m-1",
        "--name",
        "Named",
    )
    history = Session.create().for_session("oai-3").get_history()
    assert history[0]["role"] == "system"
    assert history[0]["parts"][0]["text"] == "You are a travel assistant."
    assert len(history) == 4
    assert not ContextBlockRecord.objects.filter(label__endswith="_oai-3").exists()
    assert SessionRecord.objects.filter(id="oai-3", model="m-1", name="Named").exists()


def test_legacy_function_call_and_orphan_tool_result(transcript):
    data = [
        {"role": "user", "content": "time?", "name": "ada"},
        {"role": "assistant", "content": None, "function_call": {"name": "clock", "arguments": "not json"}},
        {"role": "function", "name": "clock", "content": "12:00"},
        {"role": "tool", "tool_call_id": "missing", "content": "lost"},
    ]
    _, err = run(transcript(data), "--session-id", "oai-4")
    user, call = Session.create().for_session("oai-4").get_history()
    assert user["metadata"] == {"name": "ada"}
    part = call["parts"][0]
    assert (part["type"], part["input"], part["output"], part["state"]) == (
        "tool-clock",
        "not json",
        "12:00",
        "output-available",
    )
    assert "unknown call 'missing' was skipped" in err


def test_refuses_existing_sessions_and_bad_files(transcript, tmp_path):
    run(transcript(TRANSCRIPT), "--session-id", "oai-5")
    with pytest.raises(CommandError, match="already exists"):
        run(transcript(TRANSCRIPT), "--session-id", "oai-5")
    with pytest.raises(CommandError, match="expected a JSON list of messages"):
        run(transcript({"nope": 1}))
    with pytest.raises(CommandError, match="has no role"):
        run(transcript([{"content": "x"}]))
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(CommandError, match="cannot read"):
        run(str(bad))
    assert SessionRecord.objects.count() == 1


def test_generated_session_id(transcript):
    out, _ = run(transcript(TRANSCRIPT), "--no-progress")
    new_id = out.strip().rsplit(" ", 1)[-1].rstrip(".")
    assert len(new_id) == 32
    assert Message.objects.filter(session_id=new_id).count() == 3
