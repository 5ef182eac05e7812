"""Pydantic AI message history ⇄ agent_sessions UIMessages.

``from_model_messages(result.new_messages())`` gives one UIMessage per
``ModelRequest`` / ``ModelResponse``: a rendering (text, reasoning, tool parts)
plus the message as ``ModelMessagesTypeAdapter`` dumps it, in a
``data-pydantic-ai-message`` part. ``to_model_messages`` reads that part back
exactly, and renders any other UIMessage (a compaction summary, a REST API
message) as plain requests and responses. :class:`ModelMessageHistory` stores a
run's messages in a session and reads them back as ``message_history``.
See ``docs/integrations.md``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..asyncutils import with_async_twins
from ._extras import require
from ._parts import (
    data_part,
    find_data,
    is_tool_part,
    new_id,
    reasoning_part,
    text_part,
    tool_call_part,
    tool_name,
    tool_result_part,
)
from ._store import StoredHistory

require("pydantic_ai", "pydantic-ai")

from pydantic_ai.messages import (  # noqa: E402
    FileUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

MESSAGE_KIND = "pydantic-ai-message"
"""Data part ``data-pydantic-ai-message`` holding the message as ``ModelMessagesTypeAdapter`` dumps it to JSON."""

SOURCE = "pydantic-ai"
_META = "pydanticAi"  # providerMetadata key marking text parts that are not the user's words


def from_model_messages(model_messages: Sequence[ModelMessage]) -> list[dict]:
    """UIMessages for Pydantic AI messages, one each, in order (each keeps its exact dump).

    Roles are the AI SDK's (system, user, assistant): a request carrying tool results is an
    assistant message whose tool parts hold each call with its result (the call's input taken from
    the batch's response when it is there), as the AI SDK keeps a result in its call's part. The
    response's own part stays the call waiting for it, which the converters do not send.
    """
    model_messages = list(model_messages)
    dumped = json.loads(ModelMessagesTypeAdapter.dump_json(model_messages))
    inputs = {
        part.tool_call_id: part.args_as_dict()
        for message in model_messages
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, ToolCallPart)
    }
    return [_render(message, raw, inputs) for message, raw in zip(model_messages, dumped, strict=True)]


def to_model_messages(messages: Sequence[dict]) -> list[ModelMessage]:
    """Pydantic AI messages for UIMessages: stored ones exactly, others rendered.

    A foreign UIMessage becomes a ``ModelRequest`` (user → UserPromptPart, system →
    SystemPromptPart) or a ``ModelResponse`` (text, reasoning as ThinkingPart, tool
    calls) followed by a ``ModelRequest`` with its tool results (errors as
    RetryPromptPart). Files of foreign messages are not rendered.
    """
    slots: list[Any] = []
    raws: list[dict] = []
    for message in messages:
        found, raw = find_data(message, MESSAGE_KIND)
        if found:
            slots.append(len(raws))
            raws.append(raw)
        else:
            slots.extend(_foreign(message))
    # The JSON-mode dump validates back as Pydantic AI documents for stored histories.
    exact = ModelMessagesTypeAdapter.validate_python(raws) if raws else []
    return [exact[slot] if isinstance(slot, int) else slot for slot in slots]


@with_async_twins("get_messages", "add_messages", "clear")
class ModelMessageHistory(StoredHistory):
    """A session as Pydantic AI message history (``aget_messages`` etc. are the async twins).

    ``agent.run(prompt, message_history=history.get_messages())`` then
    ``history.add_messages(result.new_messages())``; each message is one row.
    """

    SOURCE = SOURCE

    def get_messages(self) -> list[ModelMessage]:
        """The latest branch (compaction overlays applied) as Pydantic AI messages."""
        return to_model_messages(self._store.history())

    def add_messages(self, model_messages: Sequence[ModelMessage]) -> None:
        """Append a run's messages (``result.new_messages()``) in one transaction."""
        self._store.append(from_model_messages(model_messages))

    def clear(self) -> None:
        """Delete every message and overlay of the session."""
        self._store.clear()


# ── rendering ───────────────────────────────────────────────────────
def _render(message: ModelMessage, raw: dict, inputs: dict[str, Any]) -> dict:
    """One message's UIMessage; ``inputs`` maps the batch's call ids to their arguments."""
    parts: list[dict] = []
    if isinstance(message, ModelResponse):
        role = "assistant"
        for part in message.parts:
            if isinstance(part, TextPart):
                parts.append(text_part(part.content))
            elif isinstance(part, ThinkingPart):
                extra = {"providerMetadata": {_META: {"signature": part.signature}}} if part.signature else {}
                parts.append(reasoning_part(part.content, **extra))
            elif isinstance(part, ToolCallPart):
                parts.append(tool_call_part(part.tool_name, part.tool_call_id, part.args_as_dict()))
    else:
        kinds = {getattr(p, "part_kind", None) for p in message.parts}
        role = (
            "user"
            if kinds & {"user-prompt", "retry-feedback"}
            else "system"
            if kinds <= {"system-prompt"}
            else "assistant"
        )
        if role == "assistant" and any(
            isinstance(p, RetryFeedbackPart) or (isinstance(p, RetryPromptPart) and p.tool_name is None)
            for p in message.parts
        ):
            role = "user"  # a plain retry prompt is addressed to the model as the user
        for request_part, part_raw in zip(message.parts, raw.get("parts", []), strict=False):
            for rendered in _request_part(request_part, part_raw):
                if is_tool_part(rendered) and rendered["toolCallId"] in inputs:
                    rendered = {**rendered, "input": inputs[rendered["toolCallId"]]}
                parts.append(rendered)
    parts.append(data_part(MESSAGE_KIND, raw))
    return {"id": new_id("pai"), "role": role, "parts": parts}


def _request_part(part: Any, raw: dict) -> list[dict]:
    if isinstance(part, SystemPromptPart):
        return [_marked_text(part.content, "system-prompt")]
    if isinstance(part, UserPromptPart):
        return _user_content(part.content)
    if isinstance(part, ToolReturnPart):
        if part.outcome == "success":
            return [tool_result_part(part.tool_name, part.tool_call_id, raw.get("content"))]
        return [tool_result_part(part.tool_name, part.tool_call_id, error=part.model_response_str())]
    if isinstance(part, RetryFeedbackPart):
        return [_marked_text(part.model_response(), "retry-feedback")]
    if isinstance(part, RetryPromptPart):
        if part.tool_name is None:
            return [_marked_text(part.model_response(), "retry-prompt")]
        return [tool_result_part(part.tool_name, part.tool_call_id, error=part.model_response())]
    return []


def _marked_text(text: str, kind: str) -> dict:
    return {**text_part(text), "providerMetadata": {_META: {"partKind": kind}}}


def _user_content(content: Any) -> list[dict]:
    if isinstance(content, str):
        return [text_part(content)]
    parts: list[dict] = []
    for item in content:
        if isinstance(item, str):
            parts.append(text_part(item))
        elif isinstance(item, FileUrl) and item.url.startswith(("http://", "https://")):
            parts.append({"type": "file", "mediaType": item.media_type, "url": item.url})
    return parts  # binary content stays only in the stored dump


def _foreign(message: dict) -> list[ModelMessage]:
    role = message.get("role")
    parts = [p for p in message.get("parts") or [] if isinstance(p, dict)]
    text = "\n".join(p["text"] for p in parts if p.get("type") == "text" and isinstance(p.get("text"), str))
    out: list[ModelMessage] = []
    if role == "user" and text:
        out.append(ModelRequest(parts=[UserPromptPart(content=text)]))
    elif role == "system" and text:
        out.append(ModelRequest(parts=[SystemPromptPart(content=text)]))
    elif role not in ("user", "system", "tool"):
        # One response per step (split at step-start), its results in a request right after it, so
        # text written after a result comes after it.
        step: list[dict] = []
        for part in [*parts, {"type": "step-start"}]:
            if part.get("type") != "step-start":
                step.append(part)
            elif step:
                out.extend(_foreign_step(step))
                step = []
        return out
    return out + _results([p for p in parts if is_tool_part(p)])


def _foreign_step(parts: list[dict]) -> list[ModelMessage]:
    """A step of a foreign assistant message: a response (thinking, text, calls in part order), then its results.

    A call still waiting for its result is left out, as the converters leave it out.
    """
    response: list[Any] = []
    tools: list[dict] = []
    for p in parts:
        kind = p.get("type")
        if kind == "reasoning" and p.get("text"):
            response.append(ThinkingPart(content=p["text"]))
        elif kind == "text" and isinstance(p.get("text"), str) and p["text"]:
            response.append(TextPart(content=p["text"]))
        elif is_tool_part(p) and ("input" in p or "args" in p) and ("output" in p or "errorText" in p or "result" in p):
            args = p.get("input", p.get("args"))
            args = args if isinstance(args, dict | str) or args is None else {"input": args}
            response.append(ToolCallPart(tool_name=tool_name(p, "tool"), args=args, tool_call_id=p["toolCallId"]))
            tools.append(p)
    return ([ModelResponse(parts=response)] if response else []) + _results(tools)


def _results(tools: list[dict]) -> list[ModelMessage]:
    """A request with the results of ``tools`` (errors as failed returns), or nothing."""
    results: list[Any] = []
    for p in tools:
        if "errorText" in p:
            error = str(p["errorText"])
            results.append(
                ToolReturnPart(
                    tool_name=tool_name(p, "tool"), content=error, tool_call_id=p["toolCallId"], outcome="failed"
                )
            )
        elif "output" in p or "result" in p:
            output = p.get("output", p.get("result"))
            results.append(ToolReturnPart(tool_name=tool_name(p, "tool"), content=output, tool_call_id=p["toolCallId"]))
    return [ModelRequest(parts=results)] if results else []
