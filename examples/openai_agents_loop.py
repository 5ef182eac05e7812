"""An OpenAI Agents SDK agent whose history lives in agent_sessions (offline: a local fake model).

    python -m examples.openai_agents_loop      # from the repository root; pip install -e ".[examples]"

Swap ``WeatherModel()`` for a real model name (``model="gpt-4.1"``) to talk to OpenAI.
"""

from __future__ import annotations

import asyncio
import json
import uuid

from agents import Agent, RunConfig, Runner, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText


@function_tool
def get_weather(city: str) -> str:
    """Today's forecast for a city."""
    return {"kyoto": "rain, 18 °C", "osaka": "sunny, 21 °C"}.get(city.lower(), "no data")


class WeatherModel(Model):
    """Stands in for an LLM: calls get_weather for the last word of the question, then reports it."""

    async def get_response(self, system_instructions, input, *args, **kwargs) -> ModelResponse:
        last = input[-1]
        if last.get("type") == "function_call_output":
            text = f"The forecast says: {last['output']}."
            out = ResponseOutputMessage(
                id=f"msg_{uuid.uuid4().hex}",
                type="message",
                role="assistant",
                status="completed",
                content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
            )
        else:
            city = str(last["content"]).rstrip("?").split()[-1]
            out = ResponseFunctionToolCall(
                type="function_call",
                name="get_weather",
                arguments=json.dumps({"city": city}),
                call_id=f"call_{uuid.uuid4().hex[:8]}",
            )
        return ModelResponse(output=[out], usage=Usage(requests=1), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError


def main(session_id: str = "example-openai-agents") -> list[str]:
    """Two turns; the second run reads the first one's items back from the database."""
    from agent_sessions.integrations.openai_agents import AgentsSession

    session = AgentsSession(session_id)
    agent = Agent(name="weather", instructions="Answer weather questions.", model=WeatherModel(), tools=[get_weather])

    async def loop() -> list[str]:
        answers = []
        for question in ["What's the weather in Kyoto?", "And in Osaka?"]:
            result = await Runner.run(agent, question, session=session, run_config=RunConfig(tracing_disabled=True))
            answers.append(result.final_output)
            print(f"> {question}\n{result.final_output}")
        print(f"({len(await session.get_items())} items stored in session {session_id!r})")
        return answers

    return asyncio.run(loop())


if __name__ == "__main__":
    from examples import _setup

    _setup.django()
    main()
