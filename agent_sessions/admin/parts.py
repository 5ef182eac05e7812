"""Turn a stored UIMessage's parts into small, template-friendly views.

Parts keep whatever keys they carry (AI SDK UIMessage parts); the admin shows text and
reasoning as text, tool calls by name with their input and output as
pretty-printed JSON, and anything else as its JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MAX_JSON_CHARS = 20_000
"""Longer JSON is cut in the page (the export has it whole)."""
PREVIEW_CHARS = 1_200
"""Characters of a long text, tool input or output shown before its "show all" (the rest loads on demand)."""


@dataclass(frozen=True)
class Clip:
    """The shown head of a text and how many characters follow it (0: the text is whole)."""

    head: str
    rest: int = 0


def clip(text: str, limit: int = PREVIEW_CHARS) -> Clip:
    """``text`` cut near ``limit`` (at a space when one is close); :func:`remainder` is the rest."""
    if len(text) <= limit:
        return Clip(text)
    space = text.rfind(" ", limit - 120, limit)
    cut = space if space > 0 else limit
    return Clip(text[:cut], len(text) - cut)


def remainder(text: str, limit: int = PREVIEW_CHARS) -> str:
    """What :func:`clip` left out of ``text``."""
    return text[len(clip(text, limit).head) :]


FIELDS = ("text", "input", "output", "error")


@dataclass(frozen=True)
class PartView:
    """One part as the tree template renders it."""

    kind: str  # "text", "reasoning", "tool" or "other"
    type: str
    text: str = ""
    tool_name: str = ""
    call_id: str = ""
    state: str = ""
    input: str = ""
    output: str = ""
    error: str = ""

    index: int = 0

    @property
    def has_output(self) -> bool:
        return bool(self.output or self.error)

    def field(self, name: str) -> str:
        """One of the shown strings by name (``text``, ``input``, ``output``, ``error``)."""
        if name not in FIELDS:
            raise KeyError(name)
        return getattr(self, name)

    @property
    def clips(self) -> dict[str, Clip]:
        """Each non-empty shown string, cut to its preview."""
        return {name: clip(value) for name in FIELDS if (value := getattr(self, name))}


def pretty(value: Any) -> str:
    """Indented JSON (strings as they are), cut at :data:`MAX_JSON_CHARS`."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False, default=str)
    if len(text) > MAX_JSON_CHARS:
        return text[:MAX_JSON_CHARS] + f"\n… ({len(text) - MAX_JSON_CHARS} more characters)"
    return text


def _tool_view(part: dict, kind: str, index: int) -> PartView:
    """A tool call in any of the AI SDK shapes: ``tool-<name>``, ``dynamic-tool`` or v4 ``tool-invocation``."""
    body: dict = part["toolInvocation"] if isinstance(part.get("toolInvocation"), dict) else part
    name = body.get("toolName") or (kind[5:] if kind.startswith("tool-") and kind != "tool-invocation" else "")
    output = body.get("output", body.get("result"))
    return PartView(
        kind="tool",
        type=kind,
        tool_name=str(name or "tool"),
        call_id=str(body.get("toolCallId") or ""),
        state=str(body.get("state") or ""),
        input=pretty(body.get("input", body.get("args"))),
        output=pretty(output),
        error=str(body.get("errorText") or ""),
        index=index,
    )


def part_view(part: Any, index: int = 0) -> PartView:
    """The view of one part (``index``: its position in the message, for loading the rest of a long one)."""
    if not isinstance(part, dict):
        return PartView(kind="other", type=type(part).__name__, text=pretty(part), index=index)
    kind = str(part.get("type") or "")
    if kind == "text":
        return PartView(kind="text", type=kind, text=str(part.get("text") or ""), index=index)
    if kind == "reasoning":
        text = str(part.get("text") or part.get("reasoning") or "")
        return PartView(kind="reasoning", type=kind, text=text, index=index)
    if kind.startswith("tool-") or kind == "dynamic-tool" or "toolCallId" in part:
        return _tool_view(part, kind, index)
    return PartView(kind="other", type=kind or "part", text=pretty(part), index=index)


def part_views(message: dict) -> list[PartView]:
    """Views of every part of a message (``parts`` that is not a list shows as one JSON part)."""
    parts = message.get("parts")
    if not isinstance(parts, list):
        return [part_view(parts)] if parts is not None else []
    return [part_view(p, i) for i, p in enumerate(parts)]
