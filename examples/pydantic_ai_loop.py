"""A Pydantic AI agent whose message history lives in agent_sessions (offline: FunctionModel).

    python -m examples.pydantic_ai_loop      # from the repository root; pip install -e ".[examples]"

Swap the FunctionModel for ``"openai:gpt-4.1"`` to talk to a real model.
"""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Stands in for an LLM: calls get_weather for the last word of the question, then reports it."""
    last = messages[-1].parts[-1]
    if isinstance(last, ToolReturnPart):
        return ModelResponse(parts=[TextPart(content=f"The forecast says: {last.content}.")])
    city = str(last.content).rstrip("?").split()[-1]
    return ModelResponse(parts=[ToolCallPart(tool_name="get_weather", args={"city": city})])


agent = Agent(FunctionModel(respond), system_prompt="Answer weather questions.")


@agent.tool_plain
def get_weather(city: str) -> str:
    """Today's forecast for a city."""
    return {"kyoto": "rain, 18 °C", "osaka": "sunny, 21 °C"}.get(city.lower(), "no data")


def main(session_id: str = "example-pydantic-ai") -> list[str]:
    """Two runs; each reads the stored history and stores its new messages."""
    from agent_sessions.integrations.pydantic_ai import ModelMessageHistory

    history, answers = ModelMessageHistory(session_id), []
    for question in ["What's the weather in Kyoto?", "And in Osaka?"]:
        result = agent.run_sync(question, message_history=history.get_messages())
        history.add_messages(result.new_messages())
        answers.append(result.output)
        print(f"> {question}\n{result.output}")
    print(f"({len(history.get_messages())} messages stored in session {session_id!r})")
    return answers


if __name__ == "__main__":
    from examples import _setup

    _setup.django()
    main()
