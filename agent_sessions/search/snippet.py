"""Highlighted excerpts made in Python, for hits the engine cannot highlight itself.

The engines highlight their own matches (FTS5 ``snippet()``, ``ts_headline``);
substring (CJK) terms found without an index are marked here, with the same
markers, so every snippet looks alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

START = "**"
"""Opens a highlighted match (Markdown bold: readable by people and models)."""
STOP = "**"
"""Closes a highlighted match."""
ELLIPSIS = "…"
WIDTH = 80
"""Characters of context in a Python-made excerpt."""


def _pattern(needles: Iterable[str]) -> re.Pattern[str] | None:
    alternatives = sorted({n for n in needles if n}, key=len, reverse=True)
    if not alternatives:
        return None
    return re.compile("|".join(re.escape(n) for n in alternatives), re.IGNORECASE)


def _mark(text: str, pattern: re.Pattern[str]) -> str:
    return pattern.sub(lambda m: START + m.group(0) + STOP, text)


def contains_any(text: str, needles: Iterable[str]) -> bool:
    """True when ``text`` contains one of ``needles`` (case-insensitive)."""
    pattern = _pattern(needles)
    return bool(text) and pattern is not None and pattern.search(text) is not None


def excerpt(text: str, needles: Iterable[str], width: int = WIDTH) -> str:
    """A window of ``text`` around the first needle, with every needle in it marked."""
    text = text or ""
    pattern = _pattern(needles)
    first = pattern.search(text) if pattern else None
    start = 0 if first is None else max(0, first.start() - width // 3)
    end = min(len(text), start + width)
    window = text[start:end]
    if pattern:
        window = _mark(window, pattern)
    return (ELLIPSIS if start else "") + window + (ELLIPSIS if end < len(text) else "")


def mark_outside(snippet: str, needles: Iterable[str]) -> str:
    """Also mark ``needles`` in an engine-made snippet, leaving its own marks intact."""
    pattern = _pattern(needles)
    if pattern is None or not snippet:
        return snippet
    marked = re.compile(re.escape(START) + ".*?" + re.escape(STOP), re.DOTALL)
    out, last = [], 0
    for m in marked.finditer(snippet):
        out.append(_mark(snippet[last : m.start()], pattern))
        out.append(m.group(0))
        last = m.end()
    out.append(_mark(snippet[last:], pattern))
    return "".join(out)
