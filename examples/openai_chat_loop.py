"""An OpenAI Chat Completions agent loop whose history lives in django-agent-sessions.

Run it from the repository root: ``python -m examples.openai_chat_loop`` (``pip install -e ".[examples]"``).
It needs no key and no network: the real ``openai`` client talks to a scripted fake model through
``httpx.MockTransport``. Pass ``openai.OpenAI()`` to :func:`main` to use the real API.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai

from agent_sessions.convert import from_openai_chat, pending_tool_calls, run_tool_calls, to_openai_chat
from agent_sessions.tools import Tool

MODEL = "gpt-4o-mini"
REQUESTS: list[dict] = []  # what the fake model received, for the tests


def get_weather(city: str) -> str:
    return f"Sunny, 21 °C in {city}"


WEATHER = Tool(
    "get_weather",
    "The current weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    get_weather,
)


def agent_turn(session: Any, client: openai.OpenAI, text: str, *, max_steps: int = 8) -> dict:
    """Append the user's message, then call the model until it answers without tool calls."""
    session.append_message(
        {"id": f"u-{len(session.get_history())}", "role": "user", "parts": [{"type": "text", "text": text}]}
    )
    tools = [WEATHER.to_openai(), *(tool.to_openai() for tool in session.tools().values())]
    for _ in range(max_steps):
        messages = to_openai_chat(session.get_history(), system=session.freeze_system_prompt())
        completion = client.chat.completions.create(model=MODEL, messages=messages, tools=tools)
        reply = from_openai_chat(completion)  # text and tool_calls → UIMessage parts
        session.append_message(reply)
        if not pending_tool_calls(reply):
            return reply
        run_tool_calls(session, reply, [WEATHER])  # results go into the reply's tool parts
    raise RuntimeError(f"no final answer after {max_steps} model calls")


def fake_model(request: httpx.Request) -> httpx.Response:
    """A scripted model: call get_weather for a new question, then answer with the tool's result."""
    body = json.loads(request.content)
    REQUESTS.append(body)
    last = body["messages"][-1]
    if last["role"] == "tool":
        message: dict = {"role": "assistant", "content": f"Here you go: {last['content']}."}
    else:
        call = {
            "id": f"call_{len(REQUESTS)}",
            "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": "Kyoto"})},
        }
        message = {"role": "assistant", "content": "Let me check.", "tool_calls": [call]}
    return httpx.Response(
        200,
        json={
            "id": f"chatcmpl-{len(REQUESTS)}",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {"index": 0, "finish_reason": "tool_calls" if "tool_calls" in message else "stop", "message": message}
            ],
        },
    )


def offline_client() -> openai.OpenAI:
    transport = httpx.MockTransport(fake_model)
    return openai.OpenAI(
        api_key="offline", base_url="http://fake-model.test/v1", http_client=httpx.Client(transport=transport)
    )


def main(session_id: str = "example-openai-chat", client: openai.OpenAI | None = None) -> list[dict]:
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
