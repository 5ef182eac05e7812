"""A LangChain tool-calling loop whose chat history lives in agent_sessions (offline: a fake chat model).

    python -m examples.langchain_loop      # from the repository root; pip install -e ".[examples]"

Swap the fake model for ``ChatOpenAI(...).bind_tools([get_weather])`` to talk to a real one.
"""

from __future__ import annotations

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool


@tool
def get_weather(city: str) -> str:
    """Today's forecast for a city."""
    return {"kyoto": "rain, 18 °C", "osaka": "sunny, 21 °C"}.get(city.lower(), "no data")


def fake_model() -> GenericFakeChatModel:
    """Scripted replies: a tool call, then an answer, for each of two questions."""
    replies = []
    for n, city in enumerate(["Kyoto", "Osaka"]):
        call = {"name": "get_weather", "args": {"city": city}, "id": f"call_{n}", "type": "tool_call"}
        replies += [AIMessage(content="", tool_calls=[call]), AIMessage(content=f"{city}: see the forecast above.")]
    return GenericFakeChatModel(messages=iter(replies))


def main(session_id: str = "example-langchain") -> list[str]:
    """The usual loop: read history, call the model, run its tool calls, store everything."""
    from agent_sessions.integrations.langchain import DjangoChatMessageHistory

    history = DjangoChatMessageHistory(session_id)
    model, tools, answers = fake_model(), {"get_weather": get_weather}, []
    for question in ["What's the weather in Kyoto?", "And in Osaka?"]:
        history.add_message(HumanMessage(content=question))
        while True:
            reply = model.invoke(history.messages)
            history.add_message(reply)
            if not reply.tool_calls:
                break
            history.add_messages(
                [
                    ToolMessage(content=tools[c["name"]].invoke(c["args"]), tool_call_id=c["id"])
                    for c in reply.tool_calls
                ]
            )
        answers.append(reply.content)
        print(f"> {question}\n{reply.content}")
    print(f"({len(history.messages)} messages stored in session {session_id!r})")
    return answers


if __name__ == "__main__":
    from examples import _setup

    _setup.django()
    main()
