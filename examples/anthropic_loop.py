"""An Anthropic Messages agent loop (with extended thinking) whose history lives in django-agent-sessions.

Run it from the repository root: ``python -m examples.anthropic_loop`` (``pip install -e ".[examples]"``).
It needs no key and no network: the real ``anthropic`` client talks to a scripted fake model
through ``httpx2.MockTransport``. Pass ``anthropic.Anthropic()`` to :func:`main` to use the real API.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx2

from agent_sessions.convert import from_anthropic, pending_tool_calls, run_tool_calls, to_anthropic
from agent_sessions.tools import Tool

MODEL = "claude-sonnet-5-5"
REQUESTS: list[dict] = []  # what the fake model received, for the tests


def get_weather(city: str) -> str:
    return f"Sunny, 21 °C in {city}"


WEATHER = Tool(
    "get_weather",
    "The current weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    get_weather,
)


def agent_turn(session: Any, client: anthropic.Anthropic, text: str, *, max_steps: int = 8) -> dict:
    """Append the user's message, then call the model until it answers without tool calls."""
    session.append_message(
        {"id": f"u-{len(session.get_history())}", "role": "user", "parts": [{"type": "text", "text": text}]}
    )
    tools = [WEATHER.to_anthropic(), *(tool.to_anthropic() for tool in session.tools().values())]
    for _ in range(max_steps):
        request = to_anthropic(session.get_history(), system=session.freeze_system_prompt())
        response = client.messages.create(model=MODEL, max_tokens=1024, tools=tools, **request)
        reply = from_anthropic(response, id=response.id)  # thinking (with its signature), text, tool_use
        session.append_message(reply)
        if not pending_tool_calls(reply):
            return reply
        run_tool_calls(session, reply, [WEATHER])  # sent back as tool_result blocks next time
    raise RuntimeError(f"no final answer after {max_steps} model calls")


def fake_model(request: httpx2.Request) -> httpx2.Response:
    """A scripted model: think and call get_weather for a new question, then answer with its result."""
    body = json.loads(request.content)
    REQUESTS.append(body)
    last = body["messages"][-1]["content"][0]
    if last.get("type") == "tool_result":
        content = [{"type": "text", "text": f"Here you go: {last['content']}."}]
        stop = "end_turn"
    else:
        content = [
            {"type": "thinking", "thinking": "The user wants the weather.", "signature": f"sig-{len(REQUESTS)}"},
            {"type": "tool_use", "id": f"toolu_{len(REQUESTS)}", "name": "get_weather", "input": {"city": "Kyoto"}},
        ]
        stop = "tool_use"
    return httpx2.Response(
        200,
        json={
            "id": f"msg_{len(REQUESTS)}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 10},
        },
    )


def offline_client() -> anthropic.Anthropic:
    transport = httpx2.MockTransport(fake_model)
    return anthropic.Anthropic(
        api_key="offline", base_url="http://fake-model.test", http_client=httpx2.Client(transport=transport)
    )


def main(session_id: str = "example-anthropic", client: anthropic.Anthropic | None = None) -> list[dict]:
    """Two user turns; prints the answers and returns the stored history."""
    from agent_sessions import Session, StaticProvider

    session = (
        Session.create()
        .for_session(session_id)
        .with_context("soul", provider=StaticProvider("You are a concise weather assistant."))
        .with_cached_prompt()
    )
    client = client or offline_client()
    for question in ("What's the weather in Kyoto?", "And tomorrow?"):
        reply = agent_turn(session, client, question)
        print(f"user: {question}\nassistant: {' '.join(p['text'] for p in reply['parts'] if p['type'] == 'text')}")
    return session.get_history()


if __name__ == "__main__":
    from examples import _setup

    _setup.django()
    main()
