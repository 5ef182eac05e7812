"""UIMessage part shapes shared by the adapters (AI SDK ``UIMessage`` conventions).

Reading parts (tool names, tool-part tests, texts, JSON arguments) is the converters' job:
those helpers live in :mod:`agent_sessions.convert._parts` and are re-exported here.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from ..convert._parts import is_tool_part, parse_json, texts, tool_name

__all__ = [
    "as_json_text",
    "data_part",
    "find_data",
    "is_tool_part",
    "known_call_names",
    "new_id",
    "parse_json",
    "reasoning_part",
    "text_part",
    "texts",
    "tool_call_part",
    "tool_name",
    "tool_result_part",
]


def new_id(prefix: str) -> str:
    """A fresh message id; framework ids are kept in the raw payload, never reused as row ids."""
    return f"{prefix}_{uuid.uuid4().hex}"


def text_part(text: str) -> dict:
    return {"type": "text", "text": text}


def reasoning_part(text: str, **extra: Any) -> dict:
    return {"type": "reasoning", "text": text, **extra}


def data_part(kind: str, data: Any) -> dict:
    """An AI SDK data part (``data-<kind>``) carrying a framework's raw, JSON-able payload."""
    return {"type": f"data-{kind}", "data": data}


def tool_call_part(name: str, call_id: str, tool_input: Any) -> dict:
    """A tool call waiting for its result (state ``input-available``)."""
    return {
        "type": f"tool-{name}",
        "toolCallId": call_id,
        "toolName": name,
        "state": "input-available",
        "input": tool_input,
    }


def tool_result_part(name: str, call_id: str, output: Any = None, *, error: str | None = None) -> dict:
    """A tool's result (``output-available``) or failure (``output-error`` with ``errorText``)."""
    part: dict[str, Any] = {"type": f"tool-{name}", "toolCallId": call_id, "toolName": name}
    if error is not None:
        part.update(state="output-error", errorText=error)
    else:
        part.update(state="output-available", output=output)
    return part


def find_data(message: dict, kind: str) -> tuple[bool, Any]:
    """``(True, data)`` of the message's first ``data-<kind>`` part, else ``(False, None)``."""
    wanted = f"data-{kind}"
    for part in message.get("parts") or []:
        if isinstance(part, dict) and part.get("type") == wanted and "data" in part:
            return True, part["data"]
    return False, None


def as_json_text(value: Any) -> str:
    """A value as the string a model reads (strings unchanged, the rest as JSON)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def known_call_names(history: list[dict]) -> dict[str, str]:
    """Tool names of the calls on a path, by ``toolCallId`` (a reused id takes the latest name)."""
    names: dict[str, str] = {}
    for message in history:
        for part in message.get("parts") or []:
            if is_tool_part(part):
                names[part["toolCallId"]] = tool_name(part, "tool")
    return names
