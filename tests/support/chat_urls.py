"""A URLconf with a chat endpoint on a scripted fake model, for the chat tests and the live server.

The model reads the last message of the history it gets and answers by keyword:

* ``weather`` — calls the client-side tool ``getLocation`` (no server execution); the follow-up that
  carries the client's output is answered with ``"Sunny in <output>."``;
* ``think`` — a reasoning part, then text;
* ``fail`` — some text, then raises;
* ``slow`` — forty deltas 50 ms apart (a client can go away mid-stream);
* anything else — ``"Reply <n> to: <text>"`` in three deltas, ``n`` counting the replies already
  stored under that message (so a regenerated reply differs from the one it replaces).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from django.contrib import admin
from django.urls import include, path

from agent_sessions.chat import chat_urls


class ScriptedFailure(RuntimeError):
    """What the fake model raises for ``fail``."""


def _text(message: dict) -> str:
    return " ".join(p.get("text", "") for p in message.get("parts", []) if p.get("type") == "text")


def script(session: Any, history: list[dict]) -> list[Any]:
    """The items the fake model yields for ``history`` (a ``ScriptedFailure`` instance means: raise here)."""
    last = history[-1]
    if last["role"] == "assistant":  # a client-side tool's follow-up
        outputs = [p.get("output") for p in last["parts"] if p.get("type") == "tool-getLocation"]
        return ["Sunny in ", f"{outputs[-1]}."]
    words = _text(last)
    if "weather" in words:
        return [
            "Let me check where you are.",
            {"type": "tool-input-start", "toolCallId": f"call-{last['id']}", "toolName": "getLocation"},
            {"type": "tool-input-delta", "toolCallId": f"call-{last['id']}", "inputTextDelta": '{"precise": '},
            {"type": "tool-input-delta", "toolCallId": f"call-{last['id']}", "inputTextDelta": "true}"},
            {
                "type": "tool-input-available",
                "toolCallId": f"call-{last['id']}",
                "toolName": "getLocation",
                "input": {"precise": True},
            },
            {"type": "finish", "finishReason": "tool-calls"},
        ]
    if "think" in words:
        return [
            {"type": "reasoning-start", "id": "r1"},
            {"type": "reasoning-delta", "id": "r1", "delta": "The user wants a thought."},
            {"type": "reasoning-end", "id": "r1"},
            {"type": "message-metadata", "messageMetadata": {"model": "scripted"}},
            "Here is my answer.",
        ]
    if "fail" in words:
        return ["Partial ", "answer", ScriptedFailure("the model broke")]
    if "slow" in words:
        return [f"w{i} " for i in range(40)]
    count = len(session.get_branches(last["id"]))
    return [f"Reply {count + 1}", " to: ", words]


def respond(session: Any, history: list[dict]) -> Iterator[Any]:
    """The sync fake model."""
    slow = "slow" in _text(history[-1])
    for item in script(session, history):
        if isinstance(item, Exception):
            raise item
        if slow:
            time.sleep(0.05)
        yield item


async def arespond(session: Any, history: list[dict]) -> AsyncIterator[Any]:
    """The async fake model (the script is read in a thread: it queries the session)."""
    from asgiref.sync import sync_to_async

    slow = "slow" in _text(history[-1])
    for item in await sync_to_async(script)(session, history):
        if isinstance(item, Exception):
            raise item
        if slow:
            await asyncio.sleep(0.05)
        yield item


urlpatterns = [
    path("api/chat", include(chat_urls(respond=respond, model="scripted"))),
    path("api/achat", include(chat_urls(respond=arespond))),
    path("api/", include("agent_sessions.urls")),
    path("admin/", admin.site.urls),
]
