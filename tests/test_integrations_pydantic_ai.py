"""Pydantic AI adapter: exact round trips, Agent runs with history from the store, search/admin/fork/compact."""

from __future__ import annotations

import asyncio
import importlib
import sys

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    RetryInfo,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from agent_sessions import Session, SessionManager
from agent_sessions.integrations.pydantic_ai import (
    MESSAGE_KIND,
    ModelMessageHistory,
    from_model_messages,
    to_model_messages,
)
from agent_sessions.models import SessionRecord

BASE = "/admin/agent_sessions"


def weather_model() -> tuple[FunctionModel, list[list[ModelMessage]]]:
    """Calls get_weather for the city in the latest prompt, then reports the tool's answer."""
    seen: list[list[ModelMessage]] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        last = messages[-1].parts[-1]
        if isinstance(last, ToolReturnPart):
            return ModelResponse(parts=[TextPart(content=f"Forecast: {last.content}. Take an umbrella.")])
        city = str(last.content).split()[-1].strip("?")
        call = ToolCallPart(tool_name="get_weather", args={"city": city}, tool_call_id=f"call_{city}")
        return ModelResponse(parts=[ThinkingPart(content=f"Look up {city}.", signature="sig-1"), call])

    return FunctionModel(respond), seen


def weather_agent(model) -> Agent:
    agent = Agent(model, system_prompt="You are a weather bot.")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The forecast for a city."""
        return {"Kyoto": "rain", "Osaka": "sun"}.get(city, "unknown")

    return agent


def two_runs(session_id: str):
    model, seen = weather_model()
    agent = weather_agent(model)
    history = ModelMessageHistory(session_id)
    first = agent.run_sync("Weather in Kyoto?", message_history=history.get_messages())
    history.add_messages(first.new_messages())
    second = agent.run_sync("Weather in Osaka?", message_history=history.get_messages())
    history.add_messages(second.new_messages())
    return history, first, second, seen


@pytest.mark.django_db
def test_agent_runs_with_history_read_back_from_the_store():
    history, first, second, seen = two_runs("pai-1")
    # The second run's first model call saw the whole first run, as stored and read back.
    assert seen[2][: len(first.all_messages())] == first.all_messages()
    assert "Forecast: sun" in second.output
    assert history.get_messages() == second.all_messages()
    assert ModelMessageHistory("pai-1").get_messages() == second.all_messages()
    assert SessionRecord.objects.get(id="pai-1").source == "pydantic-ai"


@pytest.mark.django_db
def test_test_model_run_and_rendering():
    agent = weather_agent(TestModel())
    history = ModelMessageHistory("pai-2")
    result = agent.run_sync("Weather?")
    history.add_messages(result.new_messages())
    rows = Session.create().for_session("pai-2").get_history()
    assert [r["role"] for r in rows] == ["user", "assistant", "assistant", "assistant"]  # AI SDK roles only
    assert rows[0]["parts"][0] == {
        "type": "text",
        "text": "You are a weather bot.",
        "providerMetadata": {"pydanticAi": {"partKind": "system-prompt"}},
    }
    assert rows[0]["parts"][1] == {"type": "text", "text": "Weather?"}
    call = rows[1]["parts"][0]
    assert call["type"] == "tool-get_weather"
    assert call["state"] == "input-available"
    assert rows[2]["parts"][0]["state"] == "output-available"
    assert rows[2]["parts"][0]["toolCallId"] == call["toolCallId"]
    assert rows[2]["parts"][0]["input"] == call["input"]  # the result row holds the call it answers
    assert all(r["parts"][-1]["type"] == f"data-{MESSAGE_KIND}" for r in rows)
    assert history.get_messages() == result.all_messages()


def every_part() -> list[ModelMessage]:
    return [
        ModelRequest(
            parts=[
                SystemPromptPart(content="Be brief."),
                UserPromptPart(content=["Look:", ImageUrl(url="https://example.com/a.png")]),
            ]
        ),
        ModelResponse(
            parts=[
                ThinkingPart(content="hmm", signature="abc"),
                TextPart(content="Checking."),
                ToolCallPart(tool_name="lookup", args='{"q": 1}', tool_call_id="c1"),
            ],
            model_name="m-1",
        ),
        ModelRequest(
            parts=[ToolReturnPart(tool_name="lookup", content="bad args", tool_call_id="c1", outcome="retried")]
        ),
        ModelResponse(parts=[ToolCallPart(tool_name="lookup", args={"q": 2}, tool_call_id="c2")]),
        ModelRequest(parts=[ToolReturnPart(tool_name="lookup", content={"a": [1, 2]}, tool_call_id="c2")]),
        ModelRequest(parts=[RetryFeedbackPart(content="Answer in one word.", retry=RetryInfo(cause="no_output"))]),
        ModelResponse(parts=[TextPart(content="Done.")]),
    ]


def test_round_trip_of_every_part_kind_is_exact():
    messages = every_part()
    ui = from_model_messages(messages)
    assert to_model_messages(ui) == messages
    assert [m["role"] for m in ui] == ["user", "assistant", "assistant", "assistant", "assistant", "user", "assistant"]
    assert ui[0]["parts"][2] == {"type": "file", "mediaType": "image/png", "url": "https://example.com/a.png"}
    assert ui[1]["parts"][0] == {
        "type": "reasoning",
        "text": "hmm",
        "providerMetadata": {"pydanticAi": {"signature": "abc"}},
    }
    assert ui[1]["parts"][2]["input"] == {"q": 1}
    assert ui[2]["parts"][0]["state"] == "output-error"
    assert "bad args" in ui[2]["parts"][0]["errorText"]
    assert ui[4]["parts"][0]["output"] == {"a": [1, 2]}


@pytest.mark.filterwarnings("ignore:.RetryPromptPart. is deprecated")
def test_legacy_retry_prompt_parts_round_trip():
    messages = [
        ModelRequest(parts=[RetryPromptPart(content="bad args", tool_name="lookup", tool_call_id="c1")]),
        ModelRequest(parts=[RetryPromptPart(content="Answer in one word.")]),
    ]
    ui = from_model_messages(messages)
    # Exactly what Pydantic AI's own adapter reads back (it upgrades the deprecated part).
    upgraded = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(messages))
    assert to_model_messages(ui) == upgraded
    assert isinstance(upgraded[0].parts[0], ToolReturnPart)
    assert [m["role"] for m in ui] == ["assistant", "user"]
    assert ui[0]["parts"][0]["state"] == "output-error"
    assert ui[1]["parts"][0]["type"] == "text"


def test_foreign_ui_messages_render_as_requests_and_responses():
    ui = [
        {"id": "s", "role": "system", "parts": [{"type": "text", "text": "sys"}]},
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]},
        {
            "id": "a",
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "text": "think"},
                {"type": "text", "text": "ok"},
                {"type": "tool-t", "toolCallId": "c1", "state": "output-available", "input": {"x": 1}, "output": "r"},
                {"type": "tool-t", "toolCallId": "c2", "state": "output-error", "input": [1], "errorText": "boom"},
            ],
        },
    ]
    out = to_model_messages(ui)
    assert [type(m) for m in out] == [ModelRequest, ModelRequest, ModelResponse, ModelRequest]
    assert out[0].parts[0].content == "sys"
    assert out[1].parts[0].content == "hi"
    assert [type(p) for p in out[2].parts] == [ThinkingPart, TextPart, ToolCallPart, ToolCallPart]
    assert out[2].parts[3].args == {"input": [1]}
    ret, retry = out[3].parts
    assert isinstance(ret, ToolReturnPart)
    assert ret.content == "r"
    assert ret.tool_call_id == "c1"
    assert isinstance(retry, ToolReturnPart)
    assert retry.content == "boom"
    assert retry.outcome == "failed"


@pytest.mark.django_db(transaction=True)
def test_async_twins():
    history = ModelMessageHistory("pai-async")
    messages = every_part()

    async def go():
        await history.aadd_messages(messages)
        read = await history.aget_messages()
        await history.aclear()
        return read, await history.aget_messages()

    read, after = asyncio.run(go())
    assert read == messages
    assert after == []


@pytest.mark.django_db
def test_search_admin_fork_and_compaction(admin_client):
    history, first, second, _ = two_runs("pai-3")
    session = Session.create().for_session("pai-3")
    assert {r.role for r in session.search("umbrella")} == {"assistant"}
    assert len(session.search("umbrella")) == 2

    html = admin_client.get(f"{BASE}/sessionrecord/pai-3/change/").content.decode()
    assert "get_weather" in html
    assert "Forecast: rain" in html
    assert "call_Kyoto" in html

    rows = session.get_history()
    first_len = len(first.all_messages())
    manager = SessionManager()
    fork = manager.fork("pai-3", rows[first_len - 1]["id"], "fork")
    assert ModelMessageHistory(fork.id).get_messages() == first.all_messages()

    manager.add_compaction("pai-3", "Kyoto: rain.", rows[0]["id"], rows[first_len - 1]["id"])
    compacted = history.get_messages()
    assert isinstance(compacted[0], ModelResponse)
    assert compacted[0].parts == [TextPart(content="Kyoto: rain.")]
    assert compacted[1:] == second.new_messages()
    # A run continues from the compacted history.
    model, seen = weather_model()
    weather_agent(model).run_sync("Weather in Kyoto?", message_history=compacted)
    assert seen[0][0] == compacted[0]


def test_import_without_pydantic_ai_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pydantic_ai", None)
    monkeypatch.delitem(sys.modules, "agent_sessions.integrations.pydantic_ai")
    with pytest.raises(ImportError, match=r"pip install django-agent-sessions\[pydantic-ai\]"):
        importlib.import_module("agent_sessions.integrations.pydantic_ai")


def test_binary_content_reads_back_as_pydantic_ai_itself_reads_it():
    messages = [
        ModelRequest(
            parts=[UserPromptPart(content=["Look:", BinaryContent(data=b"\x00\x89PNG", media_type="image/png")])]
        )
    ]
    ui = from_model_messages(messages)
    assert [p["type"] for p in ui[0]["parts"]] == ["text", f"data-{MESSAGE_KIND}"]  # bytes are not duplicated
    expected = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(messages))
    assert to_model_messages(ui) == expected
    assert to_model_messages(ui)[0].parts[0].content[1].data == b"\x00\x89PNG"


@pytest.mark.django_db
def test_compact_keeps_tool_calls_and_returns_together():
    from agent_sessions import create_compact_function

    history, first, second, _ = two_runs("pai-compact")
    compact = create_compact_function(
        lambda prompt: "SUMMARY", protect_head=1, tail_token_budget=10, min_tail_messages=2
    )
    assert Session.create().for_session("pai-compact").on_compaction(compact).compact() is not None
    messages = history.get_messages()
    assert messages[0] == first.all_messages()[0]
    assert messages[1] == ModelResponse(parts=[TextPart(content="SUMMARY")], timestamp=messages[1].timestamp)
    calls = {p.tool_call_id for m in messages for p in m.parts if isinstance(p, ToolCallPart)}
    returns = {p.tool_call_id for m in messages for p in m.parts if isinstance(p, ToolReturnPart)}
    assert calls == returns
    # The compacted history is usable as message_history for the next run.
    model, seen = weather_model()
    weather_agent(model).run_sync("Weather in Kyoto?", message_history=messages)
    assert seen[0][: len(messages)] == messages


def test_foreign_steps_become_responses_in_order_and_waiting_calls_are_left_out():
    weather = {"type": "tool-weather", "toolCallId": "c1", "state": "output-available", "input": {"city": "Kyoto"}}
    ui = [
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "Weather?"}]},
        {
            "id": "a",
            "role": "assistant",
            "parts": [
                {"type": "step-start"},
                {"type": "text", "text": "Let me check."},
                {**weather, "output": "18 °C"},
                {"type": "tool-weather", "toolCallId": "c2", "state": "input-available", "input": {}},
                {"type": "step-start"},
                {"type": "text", "text": "It is 18 °C."},
            ],
        },
    ]
    messages = to_model_messages(ui)
    assert [type(m).__name__ for m in messages] == ["ModelRequest", "ModelResponse", "ModelRequest", "ModelResponse"]
    assert [type(p).__name__ for p in messages[1].parts] == ["TextPart", "ToolCallPart"]
    assert messages[1].parts[1].tool_call_id == "c1"  # c2 never got a result: not sent
    assert messages[2].parts[0].content == "18 °C"
    assert messages[3].parts == [TextPart(content="It is 18 °C.")]


def test_rendered_roles_are_ai_sdk_roles_and_convert_without_waiting_calls():
    from agent_sessions.convert import to_openai_chat

    ui = from_model_messages(every_part())
    assert {m["role"] for m in ui} <= {"system", "user", "assistant"}
    chat = to_openai_chat(ui)
    called = [c["id"] for m in chat if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    answered = [m["tool_call_id"] for m in chat if m["role"] == "tool"]
    assert called == answered == ["c1", "c2"]
    for index, message in enumerate(chat):  # each result right after the call it answers
        if message["role"] == "tool":
            assert message["tool_call_id"] in {c["id"] for c in chat[index - 1].get("tool_calls", [])}
