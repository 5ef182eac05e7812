"""Storing a tool's result the AI SDK way: in the assistant message's tool part, not a new message."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Protocol, cast

from ..exceptions import InvalidMessage
from ..types import RESULT_STATES, is_tool_part
from ..ui_message import UIMessage


class MessageAccess(Protocol):
    """The message API the tool result is stored through."""

    def get_message(self, message_id: str) -> UIMessage | None: ...

    def get_latest_leaf(self) -> UIMessage | None: ...

    def get_history(self, leaf_id: str | None = None) -> list[UIMessage]: ...

    def update_message(self, message: UIMessage) -> Any: ...


def resolve_tool_part(message: dict, tool_call_id: str, output: Any, error: str | None) -> dict | None:
    """A copy of ``message`` whose tool part ``tool_call_id`` holds the result; None if already so.

    Raises InvalidMessage when the message has no such part or it already holds a different result.
    """
    updated = copy.deepcopy(message)
    parts = updated.get("parts") or []
    index = next(
        (i for i, p in enumerate(parts) if isinstance(p, dict) and is_tool_part(p) and p["toolCallId"] == tool_call_id),
        None,
    )
    if index is None:
        raise InvalidMessage(f"message {message.get('id')!r} has no tool call {tool_call_id!r}")
    part = parts[index]
    result = {k: v for k, v in part.items() if k not in ("output", "errorText", "rawInput")}
    if error is not None:
        result.update(state="output-error", errorText=error)
    else:
        result.update(state="output-available", output=output)
    if part.get("state") in RESULT_STATES:
        if result == part:
            return None  # the same result again: nothing to write
        raise InvalidMessage(f"tool call {tool_call_id!r} already has a result")
    if "input" not in result and "rawInput" in part:
        result["input"] = part["rawInput"]
    updated["parts"][index] = result
    return updated


def add_tool_result(
    session: MessageAccess,
    tool_call_id: str,
    output: Any = None,
    *,
    error: str | None = None,
    message_id: str | None = None,
) -> UIMessage:
    """Store a tool call's result (state ``output-available``) or error (``output-error``) on its message.

    The call is looked up in ``message_id``, or in the latest message of the current path
    that has it. Returns the updated message; an unknown call raises InvalidMessage and
    writes nothing.
    """
    if not isinstance(tool_call_id, str) or not tool_call_id:
        raise InvalidMessage("tool_call_id must be a non-empty string")
    if error is not None and not isinstance(error, str):
        raise InvalidMessage("error must be a string (the text the model reads)")
    if error is not None and output is not None:
        raise InvalidMessage("give either output or error, not both")
    message = _message_with_call(session, tool_call_id, message_id)
    resolved = resolve_tool_part(cast(dict, message), tool_call_id, output, error)
    if resolved is None:
        return message
    updated = cast(UIMessage, resolved)
    session.update_message(updated)
    return updated


def _message_with_call(session: MessageAccess, tool_call_id: str, message_id: str | None) -> UIMessage:
    if message_id is not None:
        message = session.get_message(message_id)
        if message is None:
            raise InvalidMessage(f"no message {message_id!r} in this session")
        return message
    leaf = session.get_latest_leaf()
    candidates = [leaf] if leaf else []
    if not (leaf and _holds_call(leaf, tool_call_id)):
        candidates = list(reversed(session.get_history()))
    for message in candidates:
        if _holds_call(message, tool_call_id):
            return message
    raise InvalidMessage(f"no tool call {tool_call_id!r} on the current path")


def _holds_call(message: Mapping[str, Any], tool_call_id: str) -> bool:
    return any(
        isinstance(p, dict) and is_tool_part(p) and p["toolCallId"] == tool_call_id for p in message.get("parts") or []
    )
