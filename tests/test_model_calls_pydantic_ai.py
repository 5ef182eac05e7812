"""Model-call records from Pydantic AI through the RecordedModel wrapper (SPEC §8): what the model got equals
model_input, rendered back as Pydantic AI messages."""

from __future__ import annotations

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent_sessions.integrations.pydantic_ai import ModelMessageHistory, to_model_messages
from agent_sessions.integrations.pydantic_ai_calls import RecordedModel

pytestmark = pytest.mark.django_db(transaction=True)


def dumped(messages: list[ModelMessage]) -> bytes:
    return ModelMessagesTypeAdapter.dump_json(messages)


def test_each_request_records_exactly_what_the_model_got(session_id):
    seen: list[list[ModelMessage]] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        return ModelResponse(parts=[TextPart(f"answer {len(seen)}")])

    history = ModelMessageHistory(session_id)
    agent = Agent(RecordedModel(FunctionModel(answer), history), instructions="Be brief.")
    for prompt in ("Kyoto?", "Osaka?"):
        result = agent.run_sync(prompt, message_history=history.get_messages())
        history.add_messages(result.new_messages())

    session = history.store.session
    calls = list(reversed(session.model_calls()))
    assert [c["status"] for c in calls] == ["ok", "ok"]
    assert all(c["message_id"] for c in calls)
    for call, got in zip(calls, seen, strict=True):
        recorded = session.model_input(call["message_id"])
        assert dumped(to_model_messages(recorded["messages"])) == dumped(got)  # field by field, as JSON
    assert session.get_message(calls[1]["message_id"])["parts"][0]["text"] == "answer 2"


def test_a_failing_request_is_recorded_as_an_error(session_id):
    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise RuntimeError("provider down")

    history = ModelMessageHistory(session_id)
    agent = Agent(RecordedModel(FunctionModel(broken), history))
    with pytest.raises(RuntimeError, match="provider down"):
        agent.run_sync("hi")
    [call] = history.store.session.model_calls()
    assert (call["status"], call["error"], call["message_id"]) == ("error", "provider down", None)
