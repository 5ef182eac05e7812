"""OpenAI Chat Completions ``messages`` → UIMessages (AI SDK shape).

* leading ``system`` / ``developer`` messages → the system text (a context block by default);
* ``user`` / ``assistant`` text (string or content parts) → ``text`` parts, images and files → ``file`` parts;
* an assistant's ``tool_calls`` → ``tool-<name>`` parts (``toolCallId``, parsed ``input``,
  ``state="input-available"``); each later ``tool`` message fills its call's ``output``
  and moves it to ``state="output-available"`` — the seed's UIMessage tool parts.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from ...exceptions import TranscriptError

SYSTEM_ROLES = {"system", "developer"}


@dataclass
class Converted:
    """What a transcript becomes: the system text and the chain of UIMessages."""

    system: list[str] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def message_list(data: Any) -> list[dict]:
    """The messages of a file: a bare list, or a request/log object with ``messages``."""
    messages = data.get("messages") if isinstance(data, dict) else data
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise TranscriptError("expected a JSON list of messages, or an object with a 'messages' list")
    return messages


def _text(content: Any) -> str:
    """Plain text of string or part-list content (text parts only)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _media_type(url: str, fallback: str) -> str:
    if url.startswith("data:") and ";" in url:
        return url[5 : url.index(";")] or fallback
    return fallback


def _part(part: Any) -> dict:
    """One Chat Completions content part as a UIMessage part (unknown kinds kept as ``data-openai``)."""
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in ("text", "refusal"):
        return {"type": "text", "text": part.get(kind if kind == "refusal" else "text", "")}
    if kind == "image_url":
        url = (part.get("image_url") or {}).get("url", "")
        return {"type": "file", "mediaType": _media_type(url, "image/*"), "url": url}
    if kind == "input_audio":
        audio = part.get("input_audio") or {}
        media = f"audio/{audio.get('format', 'wav')}"
        return {"type": "file", "mediaType": media, "url": f"data:{media};base64,{audio.get('data', '')}"}
    if kind == "file":
        info = part.get("file") or {}
        file_part = {"type": "file", "mediaType": _media_type(info.get("file_data", ""), "application/octet-stream")}
        file_part["url"] = info.get("file_data") or info.get("file_id", "")
        if info.get("filename"):
            file_part["filename"] = info["filename"]
        return file_part
    return {"type": "data-openai", "data": part}


def _content_parts(content: Any) -> list[dict]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [_part(p) for p in content]
    return [{"type": "data-openai", "data": content}]


def _arguments(raw: Any) -> Any:
    """Tool-call arguments: the parsed JSON object, or the raw string when it is not JSON."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw) if raw.strip() else {}
    except (ValueError, RecursionError):
        return raw


def _output(content: Any) -> Any:
    """A tool result: parsed when it is a JSON object or array, otherwise its text."""
    text = _text(content)
    if text.lstrip().startswith(("{", "[")):
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            pass
    return text


def _tool_part(name: str, call_id: str, arguments: Any) -> dict:
    return {"type": f"tool-{name}", "toolCallId": call_id, "state": "input-available", "input": _arguments(arguments)}


def convert(messages: list[dict], *, system_as_message: bool = False) -> Converted:
    """Convert a transcript; ids are fresh (OpenAI messages carry none)."""
    result = Converted()
    calls: dict[str, dict] = {}  # toolCallId → its part (outputs are filled in place)
    leading = True
    for index, source in enumerate(messages):
        role = source.get("role")
        if not isinstance(role, str) or not role:
            raise TranscriptError(f"message {index} has no role")
        if role in SYSTEM_ROLES and leading and not system_as_message:
            result.system.append(_text(source.get("content")))
            continue
        leading = False
        if role == "tool" or role == "function":
            _attach_result(source, calls, result, index)
            continue
        parts = _content_parts(source.get("refusal") if source.get("content") is None else source.get("content"))
        for call in source.get("tool_calls") or []:
            function = call.get("function") or {}
            part = _tool_part(
                function.get("name", "unknown"), call.get("id") or uuid.uuid4().hex, function.get("arguments")
            )
            calls[part["toolCallId"]] = part
            parts.append(part)
        if source.get("function_call"):  # the legacy single-call form
            legacy = source["function_call"]
            part = _tool_part(legacy.get("name", "unknown"), f"call_{uuid.uuid4().hex}", legacy.get("arguments"))
            calls[part["toolCallId"]] = part
            parts.append(part)
        message: dict[str, Any] = {
            "id": uuid.uuid4().hex,
            "role": "system" if role in SYSTEM_ROLES else role,
            "parts": parts,
        }
        if source.get("name"):
            message["metadata"] = {"name": source["name"]}
        result.messages.append(message)
    return result


def _attach_result(source: dict, calls: dict[str, dict], result: Converted, index: int) -> None:
    """Put a ``tool`` (or legacy ``function``) message's content into its call's part."""
    call_id = source.get("tool_call_id")
    if call_id is None and source.get("role") == "function":  # legacy: the latest open call of that name
        wanted = f"tool-{source.get('name')}"
        open_calls = [k for k, p in calls.items() if p["type"] == wanted and p["state"] == "input-available"]
        call_id = open_calls[-1] if open_calls else None
    part = calls.get(call_id) if call_id is not None else None
    if part is None:
        result.warnings.append(f"message {index}: tool result for unknown call {call_id!r} was skipped")
        return
    part["state"] = "output-available"
    part["output"] = _output(source.get("content"))
