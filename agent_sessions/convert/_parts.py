"""Shared helpers of the converters: the AI SDK ``UIMessage`` part vocabulary, steps, data URLs.

Part shapes follow the AI SDK (``ai`` package, ``UIMessagePart``): ``text``, ``reasoning``,
``file`` (``mediaType`` + ``url``, a hosted URL or a data URL), ``step-start``, static tool
parts ``tool-<name>`` and ``dynamic-tool`` parts (``toolName``), both with ``toolCallId``,
``state``, ``input`` and ``output`` / ``errorText``.
"""

from __future__ import annotations

import base64
import json
import mimetypes
import uuid
from collections.abc import Iterator
from json.encoder import encode_basestring
from typing import Any
from urllib.parse import unquote_to_bytes

from ..exceptions import InvalidMessage, MissingToolResults
from ..types import RESULT_STATES, compact_json, is_tool_part  # noqa: F401  (re-exported: converters use P.is_tool_part)

#: Tool-part states a model API is sent: a call with its result, its error, or its denial (an error
#: result, as the AI SDK sends it). A call still waiting (``input-available``) is never sent: the APIs
#: reject a call without its result (see :func:`check_incomplete`).
SENT_TOOL_STATES = frozenset({"output-available", "output-error", "output-denied"})

#: What a ``to_*`` converter does with a tool call that has no result (state ``input-available``).
INCOMPLETE_POLICIES = ("drop", "raise")

#: The result text of a denied call when its approval gives no reason (the AI SDK's words).
DENIED_TEXT = "Tool call execution denied."


def check_incomplete(messages: Any, policy: str) -> Any:
    """``messages`` once ``policy`` allows them: with ``"raise"``, :class:`MissingToolResults` names every
    call still waiting for its result (the converters themselves always drop such calls)."""
    if policy == "drop":
        return messages
    if policy != "raise":
        raise ValueError(f"incomplete_tool_calls must be one of {INCOMPLETE_POLICIES}, not {policy!r}")
    if not isinstance(messages, list):
        messages = as_list(messages)
    missing = []
    for message in messages:
        message = as_dict(message)
        parts = message.get("parts") if isinstance(message, dict) else None
        if not isinstance(parts, list) or message.get("role") != "assistant":
            continue
        for part in parts:
            if type(part) is dict and part.get("state") == "input-available" and not part.get("providerExecuted"):
                kind, call_id = part.get("type"), part.get("toolCallId")
                if type(call_id) is str and type(kind) is str and kind.startswith(("tool-", "dynamic-tool")):
                    missing.append(call_id)
    if missing:
        raise MissingToolResults(missing)
    return messages


def as_dict(value: Any) -> Any:
    """A plain dict for an SDK (pydantic) object; dicts and everything else pass through."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    return value


def as_list(value: Any) -> list:
    """Items of an iterable (SDK objects dumped to dicts); a lone dict or object is one item."""
    if value is None:
        return []
    if isinstance(value, dict) or hasattr(value, "model_dump"):
        return [as_dict(value)]
    return [as_dict(item) for item in value]


def new_message_id() -> str:
    """A fresh UIMessage id for a converted message that came without one."""
    return f"msg-{uuid.uuid4().hex}"


def message_ids(first: str | None) -> Iterator[str]:
    """``first``, then ``first-1``, ``first-2``...; fresh ids when ``first`` is None."""
    if first is None:
        while True:
            yield new_message_id()
    yield first
    n = 1
    while True:
        yield f"{first}-{n}"
        n += 1


def typed_parts(parts: list) -> list[tuple[Any, dict]]:
    """``(type, part)`` for each dict part, in order: the head of every converter's part loop."""
    return [(part.get("type"), part) for part in parts if type(part) is dict]


def parts_of(message: Any) -> list[dict]:
    """The dict parts of a UIMessage (anything else in ``parts`` is skipped)."""
    message = as_dict(message)
    if not isinstance(message, dict):
        return []
    parts = message.get("parts")
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


#: AI SDK model-message part types (``tool-call``, ``tool-result``) and the v4 ``tool-invocation``:
#: their type names no tool, so the part's ``toolName`` does (when it has one).
GENERIC_TOOL_TYPES = frozenset({"tool-call", "tool-result", "tool-invocation"})


def tool_name(part: dict, default: str = "") -> str:
    """The tool's name: the ``tool-<name>`` suffix of a static part, else its ``toolName``, else ``default``.

    A generic type (:data:`GENERIC_TOOL_TYPES`) defers to the part's ``toolName`` when it has one.
    """
    kind = part.get("type")
    name = part.get("toolName")
    named = isinstance(name, str) and bool(name)
    static = isinstance(kind, str) and kind.startswith("tool-") and len(kind) > 5
    if static and not (named and kind in GENERIC_TOOL_TYPES):
        return str(kind)[5:]
    return name if isinstance(name, str) and name else default


def sent_call(part: dict) -> tuple[str, str, str] | None:
    """``(toolCallId, tool name, state)`` of a tool part a model API can carry, else None (the hot path)."""
    state = part.get("state")
    if type(state) is not str or state not in SENT_TOOL_STATES:
        return None
    call_id = part.get("toolCallId")
    kind = part.get("type")
    if type(call_id) is not str or type(kind) is not str or part.get("providerExecuted"):
        return None
    if kind == "dynamic-tool":
        name = part.get("toolName")
        return call_id, name if type(name) is str else "", state
    if kind.startswith("tool-") and len(kind) > 5:
        return call_id, kind[5:], state
    return None


def only_text(parts: list) -> str | None:
    """The text of a message made of exactly one text part (the common case, taken fast), else None."""
    if len(parts) == 1:
        part = parts[0]
        if type(part) is dict and part.get("type") == "text":
            text = part.get("text")
            if type(text) is str:
                return text
    return None


def tool_part(name: str, call_id: str, tool_input: Any) -> dict:
    """A static tool part awaiting its result, as a model's call arrives."""
    return {"type": f"tool-{name}", "toolCallId": call_id, "state": "input-available", "input": tool_input}


def join_steps(step_list: list[list[dict]]) -> list[dict]:
    """Parts of the steps with a ``step-start`` between consecutive steps."""
    parts: list[dict] = []
    for index, step in enumerate(step for step in step_list if step):
        if index:
            parts.append({"type": "step-start"})
        parts.extend(step)
    return parts


# orjson (the ``fast`` extra), when installed, encodes five times faster. Its text equals
# ``json.dumps``'s except for NaN / infinities (written as ``null``, where json refuses them) and
# floats below 1e-4 (``1e-7`` / ``0.00001`` for json's ``1e-07`` / ``1e-05``), so output holding
# ``null``, ``e-`` or ``0.0000`` is encoded again the standard way. The test runs on the decoded
# text: a regular expression, or ``in`` on bytes, costs more than orjson saves. Subclasses, dates
# and dataclasses are left to the standard encoder; a plain ``Enum`` (json refuses it) is
# written as its value.
_FAST_ENCODE: Any = None
_FAST_OPTIONS = 0
try:
    import orjson
except ImportError:  # pragma: no cover - the extra is not installed
    pass
else:
    _FAST_ENCODE = orjson.dumps
    _FAST_OPTIONS = orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS

#: Whether the fast converters can run: they encode with orjson (without it, only the checked ones do).
HAS_ORJSON = _FAST_ENCODE is not None


def dumps(value: Any) -> str:
    """Compact JSON text (UTF-8 kept) for tool arguments and non-string outputs, as ``json.dumps`` writes it.

    Raises ``TypeError`` / ``ValueError`` for what JSON cannot hold (NaN, sets, cycles, deep nesting).
    """
    if type(value) is str:
        return encode_basestring(value)
    if _FAST_ENCODE is not None:
        text = _orjson_text(value)
        if text is not None:
            return text
    return compact_json(value)


def _orjson_text(value: Any) -> str | None:
    """orjson's JSON for ``value`` when it is the text ``json.dumps`` would write, else None: orjson declines
    the type, key or depth (``TypeError``), or the text holds a null or a small float, which the two may spell
    differently. Only called when orjson is installed."""
    try:
        text = _FAST_ENCODE(value, None, _FAST_OPTIONS).decode()
    except TypeError:  # orjson.JSONEncodeError
        return None
    return text if "null" not in text and "e-" not in text and "0.0000" not in text else None


def fast_input_json(part: dict) -> str:
    """:func:`input_json`, the same text: orjson's answer taken inline when :func:`dumps` would take it,
    :func:`input_json` itself otherwise (a string, a type orjson declines, null or small floats)."""
    value = part.get("input")
    if value is None:
        return "{}"
    if type(value) is not str:
        text = _orjson_text(value)
        if text is not None:
            return text
    return input_json(part)


def output_text(part: dict, state: str) -> str:
    """A result for APIs without an error flag (OpenAI): the output's text, or an error (a failure or a
    denial) as ``{"error": text}`` JSON, so the model can tell the two apart, as the AI SDK sends it."""
    text = result_text(part)
    return text if state == "output-available" else dumps({"error": text})


def fast_output_text(part: dict, state: str) -> str:
    """:func:`output_text` through :func:`fast_result_text` (the same text)."""
    text = fast_result_text(part, state)
    return text if state == "output-available" else dumps({"error": text})


def denied_text(part: dict) -> str:
    """What a denied call's result says: its approval's reason, else :data:`DENIED_TEXT`."""
    approval = part.get("approval")
    reason = approval.get("reason") if type(approval) is dict else None
    return reason if type(reason) is str else DENIED_TEXT


def fast_result_text(part: dict, state: str) -> str:
    """:func:`result_text` of a part in ``state``, the same text: a string error or output as is, orjson's
    answer inline when :func:`dumps` would take it, :func:`result_text` itself otherwise."""
    if state == "output-denied":
        return denied_text(part)
    if state == "output-error":
        error = part.get("errorText")
        return error if type(error) is str else result_text(part)
    output = part.get("output")
    if type(output) is str:
        return output
    text = _orjson_text(output)
    return text if text is not None else result_text(part)


def input_json(part: dict) -> str:
    """A tool part's ``input`` as the JSON arguments string (``{}`` when missing or not JSON-able)."""
    value = part.get("input")
    if value is None:
        return "{}"
    try:
        return dumps(value)
    except (TypeError, ValueError):
        return "{}"


def parse_json(text: Any) -> Any:
    """``text`` parsed as JSON when it is a string that parses; anything else unchanged."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_arguments(arguments: Any) -> Any:
    """Tool arguments from a model: parsed JSON, the raw text when not JSON, ``{}`` when absent or blank."""
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}
    return parse_json(arguments)


def result_text(part: dict) -> str:
    """What a model reads back: ``errorText`` on error, a denial's reason, else the output (JSON unless a string)."""
    state = part.get("state")
    if state == "output-denied":
        return denied_text(part)
    if state == "output-error":
        error = part.get("errorText")
        return error if isinstance(error, str) else ("" if error is None else str(error))
    output = part.get("output")
    if type(output) is str:
        return output
    try:
        return dumps(output)
    except (TypeError, ValueError):
        return str(output)


def with_result(part: dict, text: str, *, error: bool = False) -> dict:
    """A copy of a tool part holding ``text`` as its output (or its error)."""
    updated = {k: v for k, v in part.items() if k not in ("output", "errorText")}
    if error:
        updated.update(state="output-error", errorText=text)
    else:
        updated.update(state="output-available", output=text)
    return updated


def texts(message: dict) -> list[str]:
    """The ``text`` of a message's text parts, in order."""
    parts = message.get("parts")
    return [
        p["text"]
        for p in (parts if isinstance(parts, list) else ())
        if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
    ]


def file_media_type(part: dict) -> str:
    value = part.get("mediaType")
    return value.lower() if isinstance(value, str) else ""


def split_data_url(url: str) -> tuple[str, str] | None:
    """``(media type, base64 payload)`` of a ``data:`` URL, or None for any other URL."""
    if not isinstance(url, str) or not url.startswith("data:") or "," not in url:
        return None
    header, payload = url[5:].split(",", 1)
    fields = header.split(";")
    media_type = fields[0] or "text/plain"
    if "base64" in fields[1:]:
        return media_type, payload
    return media_type, base64.b64encode(unquote_to_bytes(payload)).decode("ascii")


def data_url(media_type: str, payload: str) -> str:
    return f"data:{media_type};base64,{payload}"


def guess_media_type(url: str, fallback: str) -> str:
    """The media type a URL's extension names (``image/png`` for ``….png``), else ``fallback``."""
    found = split_data_url(url)
    if found:
        return found[0]
    guessed, _ = mimetypes.guess_type(url.split("?", 1)[0].split("#", 1)[0])
    return guessed or fallback


def file_part(media_type: str, url: str, filename: str | None = None) -> dict:
    part = {"type": "file", "mediaType": media_type, "url": url}
    if filename:
        part["filename"] = filename
    return part


def reasoning_meta(part: dict, provider: str) -> dict:
    """``providerMetadata[provider]`` of a part (``{}`` if absent or malformed)."""
    meta = part.get("providerMetadata")
    inner = meta.get(provider) if isinstance(meta, dict) else None
    return inner if isinstance(inner, dict) else {}


def require_dict(value: Any, what: str) -> dict:
    """``value`` as a dict (SDK objects dumped), or InvalidMessage naming ``what``."""
    value = as_dict(value)
    if not isinstance(value, dict):
        raise InvalidMessage(f"{what} must be a dict or an SDK object, not {type(value).__name__}")
    return value


def ui_message(message_id: str, role: str, parts: list[dict]) -> dict:
    return {"id": message_id, "role": role, "parts": parts}
