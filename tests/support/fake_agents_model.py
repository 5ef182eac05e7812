"""An offline Agents SDK ``Model`` that plays a script and records the input of every call."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from typing import Any

from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary


def say(text: str, id: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=id,
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def call(name: str, arguments: dict, call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call", name=name, arguments=json.dumps(arguments), call_id=call_id, id=f"fc_{call_id}"
    )


def think(text: str, id: str) -> ResponseReasoningItem:
    return ResponseReasoningItem(type="reasoning", id=id, summary=[Summary(type="summary_text", text=text)])


class ScriptedModel(Model):
    """Returns the next scripted output list on each call; ``inputs`` keeps what the SDK sent."""

    def __init__(self, script: list[list[Any]]) -> None:
        self.script = list(script)
        self.inputs: list[Any] = []

    async def get_response(
        self,
        system_instructions,
        input,
        model_settings,
        tools,
        output_schema,
        handoffs,
        tracing,
        *,
        previous_response_id=None,
        conversation_id=None,
        prompt=None,
        **kwargs,
    ):
        self.inputs.append(copy.deepcopy(input))
        output = self.script.pop(0)
        return ModelResponse(output=output, usage=Usage(requests=1), response_id=None)

    def stream_response(self, *args, **kwargs) -> AsyncIterator[Any]:
        raise NotImplementedError("the scripted model does not stream")


def weather_script() -> list[list[Any]]:
    """Three turns; the first two call a tool (with reasoning), the third answers directly."""
    return [
        [think("The user wants weather; call the tool.", "rs_1"), call("get_weather", {"city": "Kyoto"}, "call_1")],
        [say("Kyoto: rain, 18 °C. Take an umbrella.", "msg_1")],
        [call("get_weather", {"city": "Osaka"}, "call_2")],
        [say("Osaka: sunny, 21 °C.", "msg_2")],
        [say("You're welcome! Anything else about the forecast?", "msg_3")],
    ]


TURNS = ["What's the weather in Kyoto?", "And in Osaka?", "Thanks!"]
