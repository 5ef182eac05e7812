"""Run the tool calls of an assistant message and store their results on the session.

``run_tool_calls(session, message, tools=None)`` executes every tool part of ``message``
that awaits its result (state ``input-available``) with the caller's ``tools`` (a mapping
of name → callable or :class:`~agent_sessions.Tool`, or a list of ``Tool``) and the
session's own tools (``session.tools()``; the caller's win on a name clash), and stores
each result with ``Session.add_tool_result``. ``arun_tool_calls`` is the async twin (the
calls run concurrently, results are stored in part order).

Outcomes: a return value becomes ``output`` (state ``output-available``; values that are
not JSON become their ``str()``); an exception, an unknown tool name, an input that is
not a JSON object, or a session tool's ``Error: ...`` answer becomes ``errorText`` (state
``output-error``). The message is appended first when the session does not hold it yet;
when it does, the stored copy is the one completed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async

from ..asyncutils import acall, call
from ..exceptions import InvalidMessage
from ..tools import Tool
from ..ui_message import UIMessage
from . import _parts as P

if TYPE_CHECKING:
    from agent_sessions import Session

ToolSpec = Mapping[str, Callable[..., Any] | Tool] | Iterable[Tool] | None


def pending_tool_calls(message: Any) -> list[dict]:
    """The tool parts of a UIMessage still waiting for a result (state ``input-available``)."""
    return [
        p
        for p in P.parts_of(message)
        if P.is_tool_part(p) and p.get("state") == "input-available" and not p.get("providerExecuted")
    ]


def run_tool_calls(session: Session, message: UIMessage, tools: ToolSpec = None) -> UIMessage:
    """Execute ``message``'s pending tool calls and store the results; returns the updated message."""
    stored = session.get_message(_message_id(message))
    if stored is None:
        session.append_message(message)
    else:
        message = stored  # results stored since the caller's copy was taken count
    pending = pending_tool_calls(message)
    if not pending:
        return message
    registry = _registry(session, tools)
    updated = message
    for part in pending:
        output, error = _outcome(partial(_execute, registry, part))
        updated = session.add_tool_result(part["toolCallId"], output, error=error, message_id=message["id"])
    return updated


async def arun_tool_calls(session: Session, message: UIMessage, tools: ToolSpec = None) -> UIMessage:
    """Async twin of :func:`run_tool_calls` (the calls run concurrently)."""
    stored = await session.aget_message(_message_id(message))
    if stored is None:
        await session.aappend_message(message)
    else:
        message = stored
    pending = pending_tool_calls(message)
    if not pending:
        return message
    registry = await sync_to_async(_registry, thread_sensitive=True)(session, tools)
    outcomes = await asyncio.gather(*(_aoutcome(registry, part) for part in pending))
    updated = message
    for part, (output, error) in zip(pending, outcomes, strict=True):
        updated = await session.aadd_tool_result(part["toolCallId"], output, error=error, message_id=message["id"])
    return updated


def _message_id(message: Any) -> str:
    if not isinstance(message, dict) or not isinstance(message.get("id"), str) or not message["id"]:
        raise InvalidMessage("run_tool_calls needs a UIMessage dict with an id (from_openai_chat & co. give one)")
    return message["id"]


def _registry(session: Any, tools: ToolSpec) -> dict[str, Any]:
    registry: dict[str, Any] = dict(session.tools())
    if isinstance(tools, Mapping):
        registry.update(tools)
    elif tools is not None:
        registry.update({tool.name: tool for tool in tools})
    return registry


class _ToolError(Exception):
    """A failure reported to the model as the tool's ``errorText``."""


def _lookup(registry: dict[str, Any], part: dict) -> Any:
    name = P.tool_name(part)
    fn = registry.get(name)
    if fn is None:
        raise _ToolError(f"Unknown tool '{name}'")
    return fn


def _execute(registry: dict[str, Any], part: dict) -> Any:
    fn, arguments = _lookup(registry, part), _arguments(part)
    if isinstance(fn, Tool):
        return _tool_answer(fn.execute(**arguments))
    return call(fn, **arguments)


async def _aexecute(registry: dict[str, Any], part: dict) -> Any:
    fn, arguments = _lookup(registry, part), _arguments(part)
    if isinstance(fn, Tool):
        return _tool_answer(await fn.aexecute(**arguments))
    return await acall(fn, **arguments)


def _arguments(part: dict) -> dict:
    arguments = part.get("input")
    if arguments is None:
        return {}
    if not isinstance(arguments, dict):
        raise _ToolError(f"Error: the input of '{P.tool_name(part)}' must be a JSON object")
    return arguments


def _tool_answer(text: str) -> str:
    if text.startswith("Error:"):
        raise _ToolError(text)
    return text


def _outcome(run: Callable[[], Any]) -> tuple[Any, str | None]:
    try:
        return _jsonable(run()), None
    except Exception as exc:  # noqa: BLE001 - a failing tool is reported to the model, not raised
        return None, _error_text(exc)


async def _aoutcome(registry: dict[str, Any], part: dict) -> tuple[Any, str | None]:
    try:
        return _jsonable(await _aexecute(registry, part)), None
    except Exception as exc:  # noqa: BLE001 - as in _outcome
        return None, _error_text(exc)


def _error_text(exc: Exception) -> str:
    if isinstance(exc, _ToolError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return str(value)
    return value
