"""Public result types and message validation (UIMessage shape: docs/data-model.md)."""

from __future__ import annotations

import json
import json.encoder
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from json.encoder import encode_basestring
from typing import Any

from . import conf, text
from .exceptions import InvalidMessage, InvalidText, MessageTooLarge

COMPACTION_PREFIX = "compaction_"


@dataclass(frozen=True)
class SearchResult:
    """One search hit; ``content`` is the message's search text."""

    id: str
    role: str
    content: str
    created_at: datetime | str | None = None
    session_id: str | None = None
    snippet: str | None = None


@dataclass(frozen=True)
class RecentHistory:
    """The recent suffix of a path that fits a byte budget."""

    messages: list[dict]
    truncated: bool
    total_content_bytes: int


@dataclass(frozen=True)
class HistoryRowStat:
    """Size of one stored message on a path, without its content."""

    id: str
    role: str
    bytes: int


@dataclass(frozen=True)
class CompactResult:
    """What a compaction function returns: the range to replace and its summary."""

    from_message_id: str
    to_message_id: str
    summary: str


@dataclass(frozen=True)
class StoredCompaction:
    """A stored compaction overlay."""

    id: str
    summary: str
    from_message_id: str
    to_message_id: str
    created_at: datetime | str | None = None


@dataclass(frozen=True)
class TokenCounterInput:
    """What a custom ``token_counter`` receives for the auto-compaction check."""

    messages: list[dict]
    system_prompt: str | None
    context_blocks: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class SessionInfo:
    """A row of the session registry."""

    id: str
    name: str
    parent_session_id: str | None
    model: str | None
    source: str | None
    input_tokens: int
    output_tokens: int
    estimated_cost: float
    end_reason: str | None
    created_at: datetime | None
    updated_at: datetime | None


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
# One C encoder built once: ``json.dumps`` with any non-default argument builds a new encoder on
# every call (docs/performance.md, A11).  No
# circular-reference table (it would keep entries after an error): a cycle ends in RecursionError.
_MAKE_C_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)  # private: typeshed does not list it
try:
    _C_ENCODE: Any = _MAKE_C_ENCODER(None, _ENCODER.default, encode_basestring, None, ":", ",", False, False, False)
except TypeError:  # pragma: no cover - an interpreter whose accelerator takes other arguments, or none
    _C_ENCODE = None


def compact_json(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)``, the same text.

    Raises ``TypeError`` / ``ValueError`` for what JSON cannot hold (NaN, sets, cycles, deep nesting).
    """
    if _C_ENCODE is None:  # pragma: no cover
        return _ENCODER.encode(value)
    try:
        return "".join(_C_ENCODE(value, 0))
    except RecursionError:
        raise ValueError("value nests too deeply for JSON") from None


def dump_message(message: dict) -> str:
    """Serialise a message to its stored JSON (compact, UTF-8, NaN refused)."""
    return compact_json(message)


def validate_message(message: Any, limits: conf.MessageLimits | None = None) -> str:
    """Check a UIMessage dict and return its stored JSON; raise InvalidMessage otherwise.

    ``limits``: :func:`conf.message_limits`, read once by a caller checking many messages.
    """
    limits = limits or conf.message_limits()
    message_id(message, limits)
    if not isinstance(message.get("role"), str) or not message["role"]:
        raise InvalidMessage("message 'role' must be a non-empty string")
    text.check(message["role"], "message 'role'", chars=limits.role_chars)  # InvalidText
    parts = message.get("parts")
    if not isinstance(parts, list):
        raise InvalidMessage("message 'parts' must be a list")
    if len(parts) > limits.parts:
        raise MessageTooLarge(f"message has {len(parts)} parts; the limit is {limits.parts}")
    limit = limits.json_depth
    try:
        stored = dump_message(message)
    except (TypeError, ValueError, RecursionError) as exc:
        _check_depth(message, limit)  # a cycle or a hostile depth says so
        raise InvalidMessage(f"message is not JSON-serialisable: {exc}") from None
    # Every level of nesting opens with a bracket, so the JSON's bracket count bounds the
    # depth from above (brackets in strings only raise the bound): walk only when it may exceed.
    if stored.count("{") + stored.count("[") > limit:
        _check_depth(message, limit)
    try:
        encoded = stored.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidMessage("message contains invalid unicode (lone surrogates)") from None
    if len(encoded) > limits.message_bytes:
        raise MessageTooLarge(f"message is {len(encoded)} bytes; the limit is {limits.message_bytes}")
    return stored


def stored_fields(message: Any, limits: conf.MessageLimits | None = None) -> tuple[str, str, str]:
    """``message`` checked and turned into its stored columns: ``(content JSON, text_content, tool_text)``."""
    limits = limits or conf.message_limits()
    return validate_message(message, limits), text_content(message, limits), tool_text(message, limits)


def message_id(message: Any, limits: conf.MessageLimits | None = None) -> str:
    """The id of a message-shaped ``message``, checked as :func:`validate_message` checks it."""
    if not isinstance(message, dict):
        raise InvalidMessage(f"message must be a dict, not {type(message).__name__}")
    msg_id = message.get("id")
    if not isinstance(msg_id, str) or not msg_id.strip():
        raise InvalidMessage("message 'id' must be a non-empty string")
    reason = text.problem(msg_id)
    if reason is not None:
        raise InvalidText(f"message 'id' {reason}")
    check_id_length(msg_id, "message 'id'", None if limits is None else limits.id_bytes)
    return msg_id


def _check_depth(message: dict, limit: int) -> None:
    if json_depth(message, limit) > limit:
        raise InvalidMessage(f"message nests deeper than {limit} levels")


def json_depth(value: Any, limit: int) -> int:
    """Nesting depth of dicts/lists in ``value`` (a scalar is 0), counted without recursion
    and only up to ``limit + 1`` (so a hostile, very deep value costs little)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    children: Iterable[Any]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest
        stack.extend((child, level + 1) for child in children if isinstance(child, (dict, list, tuple)))
    return deepest


def check_id_length(value: str, what: str, limit: int | None = None) -> None:
    """Refuse an id over ``limit`` UTF-8 bytes (``AGENT_SESSIONS_MAX_ID_BYTES``) before it reaches an index."""
    size = len(value.encode("utf-8", "surrogatepass"))
    limit = conf.max_id_bytes() if limit is None else limit
    if size > limit:
        raise MessageTooLarge(f"{what} is {size} bytes; the limit is {limit}")


def text_content(message: dict, limits: conf.MessageLimits | None = None) -> str:
    """The search text: ``text`` of the ``type == "text"`` parts, joined by newlines (see :func:`fit_index`)."""
    texts = [
        part["text"]
        for part in message.get("parts") or []
        if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
    ]
    # Postgres TEXT cannot hold NUL; the JSON keeps it (escaped), the index drops it.
    return fit_index("\n".join(texts).replace("\x00", " "), None if limits is None else limits.indexed_text_bytes)


_CHUNK = re.compile(r"\S+")


def check_indexed(value: str, what: str) -> str:
    """``value`` when a full-text index can hold all of it (a search entry is found by every word or is
    refused): its distinct words within ``MAX_INDEXED_TEXT_BYTES``, estimated as :func:`fit_index` does.

    Postgres refuses a tsvector over 1 MB; the same limit applies on SQLite so the outcome is the same.
    """
    if fit_index(value) != value:
        raise InvalidText(
            f"{what} has more distinct words than a full-text index holds "
            f"(about {conf.max_indexed_text_bytes()} bytes of them); split it into several entries"
        )
    return value


def fit_index(text: str, budget: int | None = None) -> str:
    """``text`` cut where its distinct words would exceed ``AGENT_SESSIONS_MAX_INDEXED_TEXT_BYTES``.

    A Postgres tsvector holds at most 1 MB of distinct lexemes.  A whitespace-separated
    chunk yields lexemes of at most twice its own bytes (a hyphenated or URL-like chunk
    also yields its parts), so counting each distinct chunk twice bounds the total from
    above.  The same cut applies on every database; the stored JSON is never cut.
    """
    budget = conf.max_indexed_text_bytes() if budget is None else budget
    if 2 * len(text.encode("utf-8", "surrogatepass")) <= budget:
        return text
    seen: set[str] = set()
    used = 0
    for match in _CHUNK.finditer(text):
        chunk = match.group().lower()
        if chunk in seen:
            continue
        cost = 2 * len(chunk.encode("utf-8", "surrogatepass"))
        if used + cost > budget:  # keep what still fits of this chunk, then stop
            room = (budget - used) // 2
            head = match.group().encode("utf-8", "surrogatepass")[:room].decode("utf-8", "ignore")
            return (text[: match.start()] + head).rstrip()
        used += cost
        seen.add(chunk)
    return text


def tool_text(message: dict, limits: conf.MessageLimits | None = None) -> str:
    """Secondary search text: file parts' names, then tool inputs, outputs and errors and reasoning,
    joined by newlines.

    Kept apart from :func:`text_content` (which foreign writers fill with the text parts
    only) and ranked below it.  Structured values contribute their string and number
    leaves, not JSON syntax, so ``{"error": "TimeoutError upstream"}`` indexes as words.
    File names come first, so a long tool output never cuts them (migration 0004 adds them
    to older rows in that place). Bounded by ``AGENT_SESSIONS_SEARCH_TOOL_TEXT_CHARS``.
    """
    budget = conf.search_tool_text_chars() if limits is None else limits.tool_text_chars
    chunks: list[str] = []
    size = 0
    parts = message.get("parts") or []
    for value in [file_names(parts), *_tool_values(parts)]:
        for leaf in _leaves(value):
            if size >= budget:
                break
            chunks.append(leaf)
            size += len(leaf) + 1
    return "\n".join(chunks)[:budget].replace("\x00", " ")


def file_names(parts: list) -> list[str]:
    """The ``filename`` of each file part (``{"type": "file", "filename": …}``) that has one."""
    return [
        part["filename"]
        for part in parts
        if isinstance(part, dict) and part.get("type") == "file" and isinstance(part.get("filename"), str)
    ]


def _tool_values(parts: list) -> list[Any]:
    """The searchable values of reasoning and tool parts (current and legacy shapes)."""
    values: list[Any] = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "reasoning":
            values.append(part.get("text", part.get("reasoning")))
        elif kind == "tool-invocation" and isinstance(part.get("toolInvocation"), dict):
            holder = part["toolInvocation"]
            values += [holder.get("args", holder.get("input")), holder.get("result", holder.get("output"))]  # legacy
        elif isinstance(kind, str) and (kind.startswith("tool-") or kind == "dynamic-tool" or "toolCallId" in part):
            # The error and the input first: a long output is what the length bound cuts.
            values += [part.get("errorText"), part.get("input"), part.get("output", part.get("result"))]
    return values


def _leaves(value: Any) -> list[str]:
    """String and number leaves of a JSON value, in document order, without recursion."""
    out: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if item.strip():
                out.append(item)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, (int, float)):
            out.append(str(item))
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed(item))
    return out


def is_finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# ── UIMessage tool parts ─────────────────────────────────────────────────────

RESULT_STATES = frozenset({"output-available", "output-error"})
"""States of a tool part that holds the tool's result (its output or its error)."""


def is_tool_part(part: Any) -> bool:
    """A dict part of type ``tool-<name>`` or ``dynamic-tool`` with a string ``toolCallId``."""
    if not isinstance(part, dict):
        return False
    kind = part.get("type")
    if not isinstance(kind, str) or not isinstance(part.get("toolCallId"), str):
        return False
    return kind == "dynamic-tool" or (kind.startswith("tool-") and len(kind) > 5)
