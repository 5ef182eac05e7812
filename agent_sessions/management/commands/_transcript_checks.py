"""Validation of an OpenAI Chat Completions transcript before ``import_openai_transcript`` converts it.

The converter reads fields by their documented types; a file that breaks them (a number
where a tool name belongs, a string where ``image_url`` is an object) must be refused
by name, not end in a traceback or be stored converted to a string.  Problems are
:class:`~._fields.BadField` s naming the field (``messages[3].tool_calls[0].function.name``).
"""

from __future__ import annotations

from typing import Any

from agent_sessions import conf

from . import _fields as f
from ._fields import BadField
from ._openai import SYSTEM_ROLES

# The string fields of each content part kind, by the part's key holding them (None: on the part itself).
_PART_STRINGS: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "text": (None, ("text",)),
    "refusal": (None, ("refusal",)),
    "image_url": ("image_url", ("url", "detail")),
    "input_audio": ("input_audio", ("data", "format")),
    "file": ("file", ("file_data", "file_id", "filename")),
}


def check_options(*, session_id: str, name: str, model: Any, source: str, system_label: str) -> None:
    """The values the command stores besides the messages: ids, names and labels."""
    f.ident(session_id, "--session-id")
    f.text(name, "--name", max_chars=conf.max_session_name_chars())
    f.text(model, "model", max_chars=conf.max_session_field_chars(), nullable=True)
    f.text(source, "--source", max_chars=conf.max_session_field_chars())
    f.text(system_label, "--system-label", max_chars=conf.max_block_label_chars())
    if not system_label:
        raise BadField("--system-label", "must not be empty")


def check_messages(messages: list[dict], *, system_as_message: bool) -> None:
    """Every field the converter reads has its documented type; stored text is storable."""
    leading = True
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        role = message.get("role")
        if role is None or role == "":
            raise BadField(f"{where}.role", "missing: the message has no role")
        f.text(role, f"{where}.role", max_chars=conf.max_role_chars())
        content = message.get("content")
        _content(content, f"{where}.content")
        if role in SYSTEM_ROLES and leading and not system_as_message:
            if isinstance(content, str):  # the text of a context block: a text column
                f.storable(content, f"{where}.content")
            elif isinstance(content, list):
                for number, part in enumerate(content):
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        f.storable(part["text"], f"{where}.content[{number}].text")
            continue
        leading = False
        f.text(message.get("name"), f"{where}.name", nullable=True)
        f.text(message.get("refusal"), f"{where}.refusal", nullable=True)
        f.text(message.get("tool_call_id"), f"{where}.tool_call_id", nullable=True)
        calls = message.get("tool_calls")
        if calls is not None:
            for number, call in enumerate(f.array(calls, f"{where}.tool_calls")):
                _call(call, f"{where}.tool_calls[{number}]")
        if message.get("function_call"):
            _function(message["function_call"], f"{where}.function_call")


def _content(content: Any, where: str) -> None:
    """String or part-list content: each known part kind's fields are strings (or absent)."""
    if not isinstance(content, list):
        return  # a string, null, or a value kept whole as a ``data-openai`` part
    for number, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in _PART_STRINGS:
            continue  # kept whole as a ``data-openai`` part
        holder_key, names = _PART_STRINGS[kind]
        holder, at = part, f"{where}[{number}]"
        if holder_key is not None:
            holder, at = part.get(holder_key), f"{at}.{holder_key}"
            if holder is None:
                continue
            f.obj(holder, at)
        for name in names:
            f.text(holder.get(name), f"{at}.{name}", nullable=True)


def _call(call: Any, where: str) -> None:
    f.obj(call, where)
    f.text(call.get("id"), f"{where}.id", nullable=True)
    function = call.get("function")
    if function is not None:
        _function(function, f"{where}.function")


def _function(function: Any, where: str) -> None:
    f.obj(function, where)
    f.text(function.get("name"), f"{where}.name", nullable=True)
