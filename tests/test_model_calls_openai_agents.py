"""Model-call records from the OpenAI Agents SDK's run hooks (SPEC §8): what the model got equals model_input."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest
from agents import Agent, ModelSettings, RunConfig, Runner, function_tool

from agent_sessions.integrations.openai_agents import AgentsSession, message_to_items
from agent_sessions.integrations.openai_agents_calls import ModelCallHooks
from agent_sessions.models import ModelCallContent
from tests.support.fake_agents_model import TURNS, ScriptedModel, weather_script

pytestmark = pytest.mark.django_db(transaction=True)  # the adapter works in Django's sync thread

RUN_CONFIG = RunConfig(tracing_disabled=True)


@function_tool
def get_weather(city: str) -> str:
    """The forecast for a city."""
    return {"Kyoto": "rain, 18 °C", "Osaka": "sunny, 21 °C"}[city]


class SeeingModel(ScriptedModel):
    """The scripted model, also remembering the instructions and tools of each call."""

    def __init__(self, script: list[list[Any]]) -> None:
        super().__init__(script)
        self.systems: list[str | None] = []
        self.tools: list[list[str]] = []

    async def get_response(self, system_instructions, input, model_settings, tools, *args, **kwargs):
        self.systems.append(system_instructions)
        self.tools.append([t.name for t in tools])
        return await super().get_response(system_instructions, input, model_settings, tools, *args, **kwargs)


def as_items(model_input: dict) -> list[dict]:
    """The recorded messages rendered back as the SDK's input items, as the session renders stored rows."""
    return [item for message in model_input["messages"] for item in message_to_items(message)]


def normal(items: Any) -> str:
    return json.dumps(items, sort_keys=True, ensure_ascii=False, default=str)


def test_every_call_of_a_run_records_what_the_model_got(session_id):
    session = AgentsSession(session_id)
    hooks = ModelCallHooks(session)
    model = SeeingModel(weather_script())
    agent = Agent(
        name="weather",
        instructions="Answer about the weather.",
        model=model,
        tools=[get_weather],
        model_settings=ModelSettings(temperature=0.1),
    )

    async def go():
        for turn in TURNS:
            await Runner.run(agent, turn, session=session, run_config=RUN_CONFIG, hooks=hooks)

    asyncio.run(go())
    stored = session.store.session
    calls = list(reversed(stored.model_calls()))
    assert len(calls) == len(model.inputs) == 5
    assert all(c["message_id"] for c in calls)  # each linked to its stored reply
    for call, sent, system, tools in zip(calls, model.inputs, model.systems, model.tools, strict=True):
        seen = stored.model_input(call["message_id"])
        assert normal(as_items(seen)) == normal(copy.deepcopy(sent))  # field by field
        assert seen["system"] == system == "Answer about the weather."
        assert [t["name"] for t in seen["tools"]] == tools == ["get_weather"]
        assert seen["params"]["temperature"] == 0.1
        assert seen["usage"]["requests"] == 1
    # The prompt and tools once; the history referenced; only what was not stored yet kept by value.
    kinds = list(ModelCallContent.objects.filter(session_id=session_id).values_list("kind", flat=True))
    assert kinds.count("system") == 1
    assert kinds.count("tools") == 1
