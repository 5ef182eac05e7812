"""Cheap, deterministic token estimates, used for budgets and thresholds."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

_TEXT_PART_TYPES = {"text", "reasoning"}


def estimate_string_tokens(text: str | None) -> int:
    """``ceil(max(chars / 4, words * 1.3))``; 0 for an empty string."""
    if not text:
        return 0
    words = len(text.split())
    return math.ceil(max(len(text) / 4, words * 1.3))


def _value_tokens(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        return estimate_string_tokens(value)
    try:
        return estimate_string_tokens(json.dumps(value, ensure_ascii=False, default=str))
    except (TypeError, ValueError):
        return estimate_string_tokens(str(value))


def _part_tokens(part: Any) -> int:
    if not isinstance(part, dict):
        return _value_tokens(part)
    kind = part.get("type")
    if kind in _TEXT_PART_TYPES:
        return _value_tokens(part.get("text", part.get("reasoning")))
    if isinstance(kind, str) and (kind.startswith("tool-") or kind == "dynamic-tool" or "toolCallId" in part):
        output = part.get("output", part.get("result"))
        return _value_tokens(part.get("input")) + _value_tokens(output)
    if "text" in part:
        return _value_tokens(part.get("text"))
    return _value_tokens(part.get("result"))


def estimate_one_message_tokens(message: dict) -> int:
    """Tokens of one message: 4 of overhead plus its parts."""
    parts = message.get("parts") if isinstance(message, dict) else None
    return 4 + sum(_part_tokens(p) for p in (parts or []))


def estimate_message_tokens(messages: Iterable[dict]) -> int:
    """Σ over messages of 4 + the tokens of their parts."""
    return sum(estimate_one_message_tokens(m) for m in messages)
