"""Typed readers of untrusted file values: each returns the value checked, or raises :class:`BadField`.

The import commands read files another program (or a person) wrote.  Every value that
reaches a column passes one of these first, so a wrong type, an oversize string, text
Postgres cannot store or a number its column cannot hold is refused by name, never
converted silently and never left for the database to reject halfway through.
"""

from __future__ import annotations

import math
from datetime import UTC
from typing import Any

from django.utils.dateparse import parse_datetime

from agent_sessions import conf
from agent_sessions import text as text_rules

BIGINT_MAX = 2**63 - 1
"""Largest value of a BigInteger column (both databases)."""


class BadField(ValueError):
    """A value of the file that cannot be imported; ``str()`` is ``"<field>: <problem>"``."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def kind(value: Any) -> str:
    """The JSON name of a parsed value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def obj(value: Any, field: str) -> dict:
    """``value`` when it is a JSON object."""
    if not isinstance(value, dict):
        raise BadField(field, f"expected an object, not {kind(value)}")
    return value


def array(value: Any, field: str) -> list:
    """``value`` when it is a JSON array."""
    if not isinstance(value, list):
        raise BadField(field, f"expected an array, not {kind(value)}")
    return value


def storable(value: str, field: str) -> str:
    """``value`` when both databases can hold it in a text column (the rule of :mod:`agent_sessions.text`)."""
    problem = text_rules.problem(value)
    if problem is not None:
        raise BadField(field, problem)
    return value


def text(
    value: Any, field: str, *, max_chars: int | None = None, max_bytes: int | None = None, nullable: bool = False
) -> Any:
    """A string for a text column: its type, no NUL or lone surrogate, within ``max_chars`` / ``max_bytes``."""
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        raise BadField(field, f"expected a string, not {kind(value)}")
    storable(value, field)
    if max_chars is not None and len(value) > max_chars:
        raise BadField(field, f"is {len(value)} characters; the limit is {max_chars}")
    if max_bytes is not None and len(value.encode("utf-8")) > max_bytes:
        raise BadField(field, f"is {len(value.encode('utf-8'))} bytes; the limit is {max_bytes}")
    return value


def ident(value: Any, field: str, *, nullable: bool = False, empty: bool = False, id_bytes: int | None = None) -> Any:
    """An id: a storable string, non-blank unless ``empty``, within ``AGENT_SESSIONS_MAX_ID_BYTES``."""
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        raise BadField(field, f"expected a string, not {kind(value)}")
    size = len(storable(value, field).encode("utf-8"))
    if not empty and not value.strip():
        raise BadField(field, "must be a non-empty id")
    limit = conf.max_id_bytes() if id_bytes is None else id_bytes
    if size > limit:
        raise BadField(field, f"is {size} bytes; the limit for ids is {limit}")
    return value


def count(value: Any, field: str, *, nullable: bool = True) -> Any:
    """A token count: an integer from 0 to the BigInteger maximum (an integral float is taken as one)."""
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadField(field, f"expected an integer, not {kind(value)}")
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise BadField(field, f"expected an integer, not {value!r}")
        if not -BIGINT_MAX <= value <= BIGINT_MAX:  # compared as a float: int() of 1e300 is fine, but slow to print
            raise BadField(field, f"{value!r} is over the column's limit {BIGINT_MAX}")
        value = int(value)
    if value < 0:
        raise BadField(field, f"must not be negative, not {value}")
    if value > BIGINT_MAX:
        raise BadField(field, f"{value} is over the column's limit {BIGINT_MAX}")
    return value


def amount(value: Any, field: str, *, nullable: bool = True) -> Any:
    """A cost: a finite, non-negative number."""
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadField(field, f"expected a number, not {kind(value)}")
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        raise BadField(field, "is not a finite number") from None
    if not math.isfinite(number):
        raise BadField(field, f"is not a finite number ({value!r})")
    if number < 0:
        raise BadField(field, f"must not be negative, not {value!r}")
    return value


def stamp(value: Any, field: str, *, nullable: bool = True) -> Any:
    """An ISO 8601 timestamp, returned as the ISO text of the same instant in UTC (naive ones are UTC)."""
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        raise BadField(field, f"not an ISO 8601 timestamp: expected a string, not {kind(value)}")
    try:
        parsed = parse_datetime(value) if len(value) <= 64 else None
        if parsed is not None:
            parsed = parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    except (ValueError, OverflowError):
        parsed = None
    if parsed is None:
        raise BadField(field, f"not an ISO 8601 timestamp: {value[:64]!r}")
    return parsed.isoformat()
