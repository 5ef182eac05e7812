"""OpenAI Chat Completions and Anthropic Messages streams → UI message stream chunks.

``respond`` can hand a provider stream straight to the view::

    def respond(session, history):
        stream = client.chat.completions.create(model=..., messages=to_openai_chat(history), stream=True)
        yield from openai_chunks(stream)

Each helper takes the SDK's stream (sync or async; events as SDK objects or plain dicts) and
returns an iterator of the same kind.  Text and reasoning become ``text-*`` / ``reasoning-*``
chunks, tool calls ``tool-input-start`` / ``-delta`` / ``-available`` (``tool-input-error`` when the
arguments are not JSON), and the stop reason a ``finish`` chunk.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

_OPENAI_FINISH = {"stop": "stop", "length": "length", "tool_calls": "tool-calls", "content_filter": "content-filter"}
_ANTHROPIC_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool-calls",
    "refusal": "content-filter",
}


def _plain(event: Any) -> dict:
    """An SDK event (a pydantic model) or a dict, as a dict."""
    if isinstance(event, dict):
        return event
    dump = getattr(event, "model_dump", None)
    return dump() if callable(dump) else dict(vars(event))


def _tool_input(call_id: str, name: str, arguments: str) -> dict:
    """``tool-input-available`` for complete arguments, ``tool-input-error`` when they are not a JSON object."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        value = None
    if not isinstance(value, dict):
        return {
            "type": "tool-input-error",
            "toolCallId": call_id,
            "toolName": name,
            "input": arguments,
            "errorText": "The tool arguments are not a JSON object.",
        }
    return {"type": "tool-input-available", "toolCallId": call_id, "toolName": name, "input": value}


class OpenAIChatTranslator:
    """Chat Completions chunks (``choices[0].delta``) → UI chunks, one event at a time."""

    def __init__(self) -> None:
        self._text_id: str | None = None
        self._reasoning_id: str | None = None
        self._calls: dict[int, dict] = {}
        self._finish: str | None = None

    def feed(self, event: Any) -> list[dict]:
        data = _plain(event)
        out: list[dict] = []
        for choice in data.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                if self._reasoning_id is None:
                    self._reasoning_id = f"reasoning-{uuid.uuid4().hex[:12]}"
                    out.append({"type": "reasoning-start", "id": self._reasoning_id})
                out.append({"type": "reasoning-delta", "id": self._reasoning_id, "delta": reasoning})
            content = delta.get("content")
            if isinstance(content, str) and content:
                out += self._end_reasoning()
                if self._text_id is None:
                    self._text_id = f"text-{uuid.uuid4().hex[:12]}"
                    out.append({"type": "text-start", "id": self._text_id})
                out.append({"type": "text-delta", "id": self._text_id, "delta": content})
            for call in delta.get("tool_calls") or []:
                out += self._tool_delta(call)
            if choice.get("finish_reason"):
                self._finish = _OPENAI_FINISH.get(choice["finish_reason"], "other")
        return out

    def _tool_delta(self, call: dict) -> list[dict]:
        index = call.get("index", 0)
        function = call.get("function") or {}
        state = self._calls.get(index)
        out: list[dict] = []
        if state is None:
            state = {
                "id": call.get("id") or f"call-{uuid.uuid4().hex[:12]}",
                "name": function.get("name") or "",
                "args": "",
            }
            self._calls[index] = state
            out.append({"type": "tool-input-start", "toolCallId": state["id"], "toolName": state["name"]})
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            state["args"] += arguments
            out.append({"type": "tool-input-delta", "toolCallId": state["id"], "inputTextDelta": arguments})
        return out

    def _end_reasoning(self) -> list[dict]:
        if self._reasoning_id is None:
            return []
        chunk, self._reasoning_id = {"type": "reasoning-end", "id": self._reasoning_id}, None
        return [chunk]

    def end(self) -> list[dict]:
        """Close open parts, complete the tool calls, then ``finish`` with the stop reason."""
        out = self._end_reasoning()
        if self._text_id is not None:
            out.append({"type": "text-end", "id": self._text_id})
            self._text_id = None
        for index in sorted(self._calls):
            call = self._calls[index]
            out.append(_tool_input(call["id"], call["name"], call["args"]))
        self._calls.clear()
        out.append({"type": "finish", "finishReason": self._finish or "other"})
        return out


class AnthropicTranslator:
    """Anthropic Messages stream events (``content_block_*``, ``message_delta``) → UI chunks."""

    def __init__(self) -> None:
        self._blocks: dict[int, dict] = {}
        self._finish: str | None = None
        self._prefix = uuid.uuid4().hex[:8]

    def feed(self, event: Any) -> list[dict]:
        data = _plain(event)
        kind = data.get("type")
        if kind == "content_block_start":
            return self._start(data.get("index", 0), data.get("content_block") or {})
        if kind == "content_block_delta":
            return self._delta(data.get("index", 0), data.get("delta") or {})
        if kind == "content_block_stop":
            return self._stop(data.get("index", 0))
        if kind == "message_delta":
            reason = (data.get("delta") or {}).get("stop_reason")
            if reason:
                self._finish = _ANTHROPIC_FINISH.get(reason, "other")
        return []

    def _start(self, index: int, block: dict) -> list[dict]:
        kind = block.get("type")
        part_id = f"{self._prefix}-{index}"
        if kind == "text":
            self._blocks[index] = {"kind": "text", "id": part_id}
            first = block.get("text") or ""
            out = [{"type": "text-start", "id": part_id}]
            return out + ([{"type": "text-delta", "id": part_id, "delta": first}] if first else [])
        if kind == "thinking":
            self._blocks[index] = {"kind": "reasoning", "id": part_id}
            return [{"type": "reasoning-start", "id": part_id}]
        if kind in ("tool_use", "server_tool_use"):
            initial = block.get("input")
            self._blocks[index] = {
                "kind": "tool",
                "id": block.get("id") or part_id,
                "name": block.get("name") or "",
                "args": "",
                "input": initial if isinstance(initial, dict) and initial else None,
                "provider": kind == "server_tool_use",
            }
            start = {
                "type": "tool-input-start",
                "toolCallId": self._blocks[index]["id"],
                "toolName": block.get("name") or "",
            }
            return [start]
        return []

    def _delta(self, index: int, delta: dict) -> list[dict]:
        block = self._blocks.get(index)
        if block is None:
            return []
        kind = delta.get("type")
        if kind == "text_delta" and delta.get("text"):
            return [{"type": "text-delta", "id": block["id"], "delta": delta["text"]}]
        if kind == "thinking_delta" and delta.get("thinking"):
            return [{"type": "reasoning-delta", "id": block["id"], "delta": delta["thinking"]}]
        if kind == "input_json_delta" and delta.get("partial_json"):
            block["args"] += delta["partial_json"]
            return [{"type": "tool-input-delta", "toolCallId": block["id"], "inputTextDelta": delta["partial_json"]}]
        return []

    def _stop(self, index: int) -> list[dict]:
        block = self._blocks.pop(index, None)
        if block is None:
            return []
        if block["kind"] == "text":
            return [{"type": "text-end", "id": block["id"]}]
        if block["kind"] == "reasoning":
            return [{"type": "reasoning-end", "id": block["id"]}]
        if block["input"] is not None and not block["args"]:
            chunk = {
                "type": "tool-input-available",
                "toolCallId": block["id"],
                "toolName": block["name"],
                "input": block["input"],
            }
        else:
            chunk = _tool_input(block["id"], block["name"], block["args"])
        if block["provider"]:
            chunk["providerExecuted"] = True
        return [chunk]

    def end(self) -> list[dict]:
        out: list[dict] = []
        for index in sorted(self._blocks):
            out += self._stop(index)
        out.append({"type": "finish", "finishReason": self._finish or "other"})
        return out


def _translate(stream: Iterable[Any], translator: Any) -> Iterator[dict]:
    for event in stream:
        yield from translator.feed(event)
    yield from translator.end()


async def _atranslate(stream: Any, translator: Any) -> AsyncIterator[dict]:
    async for event in stream:
        for chunk in translator.feed(event):
            yield chunk
    for chunk in translator.end():
        yield chunk


def openai_chunks(stream: Any) -> Any:
    """UI chunks of an OpenAI Chat Completions stream (``stream=True``); async for an async stream."""
    if hasattr(stream, "__aiter__"):
        return _atranslate(stream, OpenAIChatTranslator())
    return _translate(stream, OpenAIChatTranslator())


def anthropic_chunks(stream: Any) -> Any:
    """UI chunks of an Anthropic Messages stream (``stream=True`` events); async for an async stream."""
    if hasattr(stream, "__aiter__"):
        return _atranslate(stream, AnthropicTranslator())
    return _translate(stream, AnthropicTranslator())
