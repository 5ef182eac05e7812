"""Model-call records (SPEC §8) for Pydantic AI: a model wrapper, since Pydantic AI has no request hook.

    history = ModelMessageHistory("chat-1")
    agent = Agent(RecordedModel("openai:gpt-4.1", history))
    result = agent.run_sync("hi", message_history=history.get_messages())
    history.add_messages(result.new_messages())

Each request the agent makes goes through the wrapper, which records the messages the model gets
(the stored history by reference, the rest by value), the settings, the function tools offered,
usage and latency, or the error. The record is linked to the response's stored message once the
history stores it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from asgiref.sync import sync_to_async

from ._extras import require

require("pydantic_ai", "pydantic-ai")

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse  # noqa: E402
from pydantic_ai.models import Model, ModelRequestParameters  # noqa: E402
from pydantic_ai.models.wrapper import WrapperModel  # noqa: E402
from pydantic_ai.settings import ModelSettings  # noqa: E402

from ..session.model_calls import ModelCall  # noqa: E402
from ._calls import ReplyLinks  # noqa: E402
from ._parts import find_data  # noqa: E402
from .pydantic_ai import MESSAGE_KIND, ModelMessageHistory, from_model_messages, to_model_messages  # noqa: E402

__all__ = ["RecordedModel"]


def _render(message: dict) -> list[ModelMessage]:
    return to_model_messages([message])


def _key(raw: dict) -> tuple[Any, str]:
    """What identifies a response once stored: its time and parts (the agent fills in run ids after the request)."""
    return raw.get("timestamp"), json.dumps(raw.get("parts"), sort_keys=True)


def _dump(message: ModelMessage) -> dict:
    return json.loads(ModelMessagesTypeAdapter.dump_json([message]))[0]


class RecordedModel(WrapperModel):
    """``wrapped`` (a model or its name), recording every request against ``history``'s session."""

    def __init__(self, wrapped: Model | str, history: ModelMessageHistory) -> None:
        super().__init__(wrapped)
        self.history = history
        self._links = ReplyLinks(history.store, _stored_key)

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        """The wrapped model's response, with the call recorded (an error too)."""
        call = await sync_to_async(self._start, thread_sensitive=True)(
            messages, model_settings, model_request_parameters
        )
        try:
            response = await super().request(messages, model_settings, model_request_parameters)
        except BaseException as exc:
            await sync_to_async(call.close, thread_sensitive=True)(exc)
            raise
        await self._end(call, response)
        return response

    @asynccontextmanager
    async def request_stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        """Streamed requests are passed through unrecorded (their response is known only when drained)."""
        async with super().request_stream(*args, **kwargs) as stream:
            yield stream

    def _start(
        self, messages: list[ModelMessage], settings: ModelSettings | None, parameters: ModelRequestParameters
    ) -> ModelCall:
        tools = [
            {"name": t.name, "description": t.description, "parameters": t.parameters_json_schema}
            for t in parameters.function_tools
        ]
        return self.history.store.session.observe_model_call(
            list(messages),
            model=self.model_name,
            render=_render,
            to_messages=from_model_messages,
            params=dict(settings or {}),
            tools=tools,
        )

    async def _end(self, call: ModelCall, response: ModelResponse) -> None:
        usage = response.usage
        record = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens} if usage else None
        await sync_to_async(call.observed, thread_sensitive=True)(usage=record)
        self._links.expect([_key(_dump(response))], call.id)


def _stored_key(message: dict) -> tuple[Any, str] | None:
    """The :func:`_key` of the response a stored row holds (None for a request or a foreign row)."""
    found, raw = find_data(message, MESSAGE_KIND)
    if not found or not isinstance(raw, dict) or raw.get("kind") != "response":
        return None
    return _key(raw)
