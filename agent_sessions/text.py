"""The one check for text written to a text column, and the cleaning of text the library produces itself.

Postgres ``text`` cannot hold NUL, and no database driver can encode a lone UTF-16
surrogate; SQLite would store a NUL.  So every writer of a text column (except message
content, whose JSON escapes both) passes its values through :func:`check`, which refuses
them with :class:`~agent_sessions.exceptions.InvalidText` — before any SQL, so the outcome
is the same on every database — together with the column's length limit.  Lookups by such
a value use :func:`storable` to answer "not found" without asking the database.  Text
the library generates from stored data (a summary of a binary tool output) goes through
:func:`clean` instead: a compaction must not fail forever because of its input.
"""

from __future__ import annotations

import re
from typing import Any, overload

from . import conf
from .exceptions import InvalidText

REPLACEMENT = "\ufffd"
"""What :func:`clean` puts in place of a NUL or a lone surrogate."""

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def problem(value: str) -> str | None:
    """Why ``value`` cannot be stored alike on every database (a NUL, a lone surrogate), or None."""
    if "\x00" in value:
        return "must not contain NUL characters"
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "must not contain lone UTF-16 surrogates"
    return None


def storable(value: Any) -> bool:
    """True for a string a text column can hold (no NUL, no lone surrogate)."""
    return isinstance(value, str) and problem(value) is None


def clean(value: str) -> str:
    """``value`` with each NUL and lone surrogate replaced by U+FFFD (other text unchanged)."""
    if problem(value) is None:
        return value
    return _UNSTORABLE.sub(REPLACEMENT, value)


def clip(value: str, size: int) -> str:
    """``value`` cut to at most ``size`` UTF-8 bytes, on a character boundary."""
    if len(value) <= size // 4:
        return value
    return value.encode("utf-8", "surrogatepass")[:size].decode("utf-8", "ignore")


def clean_content(value: str) -> str:
    """A text the library produced (a summary) made storable: cleaned, then cut to ``MAX_TEXT_BYTES``."""
    return clip(clean(value), conf.max_text_bytes())


@overload
def check(value: Any, what: str, *, chars: int | None = None, size: int | None = None) -> str: ...


@overload
def check(
    value: Any, what: str, *, chars: int | None = None, size: int | None = None, optional: bool
) -> str | None: ...


def check(
    value: Any, what: str, *, chars: int | None = None, size: int | None = None, optional: bool = False
) -> str | None:
    """``value`` if a text column can hold it: a string without NUL or lone surrogates, within the limits.

    ``chars``: most characters; ``size``: most UTF-8 bytes.  ``optional``: None passes.
    Raises ``TypeError`` for a non-string and :class:`InvalidText` otherwise (nothing written).
    """
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, not {type(value).__name__}")
    reason = problem(value)
    if reason is not None:
        raise InvalidText(f"{what} {reason}")
    if chars is not None and len(value) > chars:
        raise InvalidText(f"{what} is {len(value)} characters; the limit is {chars}")
    if size is not None and len(value) > size // 4:  # only then can it pass the limit in bytes
        encoded = len(value.encode("utf-8"))
        if encoded > size:
            raise InvalidText(f"{what} is {encoded} bytes; the limit is {size}")
    return value


def check_id(value: Any, what: str) -> str:
    """An id (message, session, overlay boundary): non-empty, storable, at most ``MAX_ID_BYTES``."""
    check(value, what, size=conf.max_id_bytes())
    if not value:
        raise InvalidText(f"{what} must not be empty")
    return value


def check_content(value: Any, what: str) -> str:
    """A long text (block content, stored prompt, search entry, summary): storable, at most ``MAX_TEXT_BYTES``."""
    return check(value, what, size=conf.max_text_bytes())
